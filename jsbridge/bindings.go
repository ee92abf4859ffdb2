package jsbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
)

// bindings are the host functions of one runtime.
type bindings struct {
	pool *Pool
	vm   *vm
}

// getModelPaths returns the registered model paths as a JSON array string,
// sorted. When the sidecar cannot be asked it returns "[]" (and logs): a
// bidding script then bids without models rather than throwing.
func (b *bindings) getModelPaths(goja.FunctionCall) goja.Value {
	paths, err := b.pool.paths.get(b.vm.ctx, b.pool.opts.Hooks.OnModelPaths)
	b.vm.interruptIfDone()
	if err != nil {
		b.pool.opts.Logger.Warn("jsbridge: getModelPaths failed", "err", err)
		return b.vm.rt.ToValue("[]")
	}
	return b.vm.rt.ToValue(paths)
}

// runInference is the batch JSON contract: a string (or, as an extension, a
// plain object) in, a JSON string out, never an exception.
func (b *bindings) runInference(call goja.FunctionCall) goja.Value {
	if !b.pool.inferenceUsed.Load() {
		b.pool.inferenceUsed.Store(true)
	}
	start := time.Now()
	ev := InferenceEvent{}
	out := b.infer(call.Argument(0), &ev)
	ev.Duration = time.Since(start)
	ev.ResponseBytes = len(out)
	b.vm.interruptIfDone()
	if h := b.pool.opts.Hooks.OnInference; h != nil {
		h(&ev)
	}
	// out is this call's own buffer and nothing writes to it again: the JS
	// string is made from it without a copy.
	return b.vm.rt.ToValue(unsafe.String(unsafe.SliceData(out), len(out)))
}

func (b *bindings) infer(arg goja.Value, ev *InferenceEvent) []byte {
	fail := func(err error) []byte {
		ev.Err = err
		return batch.AppendBatchError(nil, err)
	}
	entries, err := b.parseArgument(arg, ev)
	if err != nil {
		return fail(err)
	}
	results, err := b.predict(entries)
	if err != nil {
		return fail(err)
	}
	if b.pool.opts.Hooks.OnInference != nil { // only the hook reads them
		ev.Entries = make([]EntryEvent, len(results))
		for i, r := range results[:min(len(results), len(entries))] {
			ev.Entries[i] = EntryEvent{ModelPath: r.ModelPath, BatchSize: batchSize(entries[i]), Err: r.Err}
		}
	}
	out, err := batch.AppendResponse(nil, results)
	if err != nil {
		ev.Entries = nil
		return fail(err)
	}
	return out
}

// parseArgument turns runInference's argument into entries.
func (b *bindings) parseArgument(arg goja.Value, ev *InferenceEvent) ([]batch.Entry, error) {
	maxBytes := b.pool.opts.MaxArgumentBytes
	switch a := arg.(type) {
	case goja.String:
		// Length is in UTF-16 units; each is at most 3 UTF-8 bytes, so check
		// before converting and again on the exact size.
		if a.Length() > maxBytes {
			return nil, inferr.Errorf(inferr.InputParsing, "runInference: batch JSON is %d characters, the limit is %d bytes", a.Length(), maxBytes)
		}
		s := a.String()
		ev.RequestBytes = len(s)
		if len(s) > maxBytes {
			return nil, inferr.Errorf(inferr.InputParsing, "runInference: batch JSON is %d bytes, the limit is %d bytes", len(s), maxBytes)
		}
		return batch.ParseString(s, b.pool.opts.Limits)
	case *goja.Object:
		if _, isFunc := goja.AssertFunction(a); !isFunc {
			ev.ObjectArg = true
			if entries, ok := walkBatch(b.vm.rt, a, b.pool.opts.Limits, int64(maxBytes/2)); ok {
				return entries, nil
			}
			// Not provably valid: let batch.Parse judge the JSON, so the
			// errors are exactly those of a string argument.
			js, err := b.vm.stringifyArg(a)
			if err != nil {
				return nil, err
			}
			ev.RequestBytes = len(js)
			if len(js) > maxBytes {
				return nil, inferr.Errorf(inferr.InputParsing, "runInference: batch JSON is %d bytes, the limit is %d bytes", len(js), maxBytes)
			}
			return batch.Parse(js, b.pool.opts.Limits)
		}
	}
	return nil, inferr.Errorf(inferr.InputParsing, "runInference: argument must be a batch JSON string or a batch object, got %s", jsTypeOf(arg))
}

// predict sends the batch to the sidecar. Entries that already carry an
// error (from parsing) and the result count are the client's business: it
// answers one result per entry, in order, or fails the whole call.
func (b *bindings) predict(entries []batch.Entry) ([]batch.Result, error) {
	results, err := b.pool.opts.Inference.Predict(b.vm.ctx, entries)
	if err != nil {
		return nil, inferr.Wrap(inferr.GRPC, err, "runInference")
	}
	return results, nil
}

// stringifyArg is JSON.stringify for runInference's object argument; a
// throw (a cycle, a BigInt, a throwing getter) is an INPUT_PARSING error.
func (v *vm) stringifyArg(obj *goja.Object) ([]byte, error) {
	s, err := v.strfy(goja.Undefined(), obj)
	if err != nil {
		if ex, ok := err.(*goja.Exception); ok {
			return nil, inferr.Errorf(inferr.InputParsing, "runInference: the batch object cannot be converted to JSON: %s", ex.Value().String())
		}
		// Interrupted or a stack overflow: not the batch's fault; let the
		// call end with it.
		panic(err)
	}
	if goja.IsUndefined(s) {
		return nil, inferr.Errorf(inferr.InputParsing, "runInference: the batch object converts to no JSON (undefined)")
	}
	return []byte(s.String()), nil
}

func batchSize(e batch.Entry) int64 {
	if len(e.Tensors) == 0 {
		return 0
	}
	if len(e.Tensors[0].Shape) == 0 {
		return 1
	}
	return e.Tensors[0].Shape[0]
}

func jsTypeOf(v goja.Value) string {
	switch v.(type) {
	case nil:
		return "undefined"
	case *goja.Object:
		if _, ok := goja.AssertFunction(v); ok {
			return "function"
		}
		return "object"
	case *goja.Symbol:
		return "symbol"
	}
	switch {
	case goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	case goja.IsBigInt(v):
		return "bigint"
	}
	if t := v.ExportType(); t != nil {
		switch t.Kind().String() {
		case "bool":
			return "boolean"
		case "int64", "float64":
			return "number"
		}
		return t.String()
	}
	return "unknown"
}

// pathsCache shares one sidecar answer for getModelPaths among concurrent
// callers for a short TTL.
type pathsCache struct {
	inf Inference
	ttl time.Duration

	mu      sync.Mutex
	json    string
	fetched time.Time
}

func (c *pathsCache) get(ctx context.Context, hook func(error)) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ttl > 0 && !c.fetched.IsZero() && time.Since(c.fetched) < c.ttl {
		return c.json, nil
	}
	paths, err := c.inf.ModelPaths(ctx)
	if hook != nil {
		hook(err)
	}
	if err != nil {
		return "", err
	}
	if paths == nil {
		paths = []string{}
	}
	js, err := json.Marshal(paths)
	if err != nil {
		return "", fmt.Errorf("jsbridge: encode model paths: %w", err)
	}
	c.json, c.fetched = string(js), time.Now()
	return c.json, nil
}
