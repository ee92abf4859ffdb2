// How a call runs: CallJSON and Do hand it (run, runOn) to an executor
// goroutine, which runs its JS (exec, callJS) under the call's context while
// the caller waits for the result, the deadline or, past InterruptGrace, gives
// up on the runtime; goja's errors become the package's (translate). The
// deadlines and interrupts themselves are in watchdog.go.

package jsbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/internal/timerless"
)

// CallJSON calls the global function fn with arguments given as JSON texts
// (each becomes a JS value through JSON.parse; nil means undefined) and
// returns what it returned, as JSON (undefined gives null). A promise or
// thenable it returns is awaited: its value is the result, a rejection is
// a *ScriptError, and one still pending once the call's jobs have run is
// an error wrapping ErrUnsettled. The call runs under the pool's deadline
// and ctx.
func (p *Pool) CallJSON(ctx context.Context, fn string, args ...[]byte) ([]byte, error) {
	var out []byte
	if err := p.run(ctx, fn, jsonBody(fn, args, &out)); err != nil {
		// An abandoned call may still write out.
		return nil, err
	}
	return out, nil
}

// jsonBody is the body of a CallJSON call: the arguments parsed, fn
// called, its result stringified into *out.
func jsonBody(fn string, args [][]byte, out *[]byte) func(v *vm, f goja.Callable) error {
	return func(v *vm, f goja.Callable) error {
		jsArgs := make([]goja.Value, len(args))
		for i, a := range args {
			if a == nil {
				jsArgs[i] = goja.Undefined()
				continue
			}
			val, err := v.parseJSON(a)
			if err != nil {
				return fmt.Errorf("jsbridge: %s: argument %d is not JSON: %w", fn, i, err)
			}
			jsArgs[i] = val
		}
		if e := v.wasmEng; e != nil && e.helper != nil && fn == e.helperArg.Func {
			var err error
			if jsArgs, err = v.injectWasmHelper(jsArgs); err != nil {
				return err
			}
		}
		res, err := f(goja.Undefined(), jsArgs...)
		if err != nil {
			return err
		}
		if res, err = v.await(fn, res); err != nil {
			return err
		}
		*out, err = v.stringify(res)
		return err
	}
}

// Do runs body on a runtime with the global function fn resolved, under the
// pool's deadline and ctx. body must not keep rt or f. It is the building
// block of CallJSON, exported for callers (benchmarks, servers) that build
// their arguments with the goja API directly. body runs on a goroutine of
// its own; when Do returns an error wrapping ErrAbandoned, body may still be
// running, so it must not write to anything the caller reads after such an
// error. Do does not await a promise: body gets what f returns, and goja
// runs the job queue each time a call from Go returns.
func (p *Pool) Do(ctx context.Context, fn string, body func(rt *goja.Runtime, f goja.Callable) error) error {
	return p.run(ctx, fn, func(v *vm, f goja.Callable) error { return body(v.rt, f) })
}

// job is a call handed to an executor.
type job struct {
	c    *call
	fn   string
	body func(v *vm, f goja.Callable) error
}

// executor runs calls' JS until the pool closes, or until a call it ran was
// abandoned (a replacement started then). Its timer ends each call it runs
// at the call's deadline: one timer per executor, reset per call, instead
// of a context.WithTimeout (a timer, contexts and a goroutine wake-up of
// their own) per call.
func (p *Pool) executor() {
	e := &executor{}
	e.timer = time.AfterFunc(time.Hour, e.deadline)
	e.timer.Stop()
	defer e.timer.Stop()
	for {
		select {
		case j := <-p.jobs:
			if !p.exec(e, j.c, j.fn, j.body) {
				return
			}
		case <-p.closed:
			return
		}
	}
}

// executor is the deadline timer of an executor goroutine and the call it
// runs.
type executor struct {
	timer *time.Timer
	cur   atomic.Pointer[call]
}

// call is one call into JS, shared by the caller and the executor that runs
// the JS.
type call struct {
	v     atomic.Pointer[vm] // its runtime, until the JS returned
	start time.Time
	// ctx is the call's context: done when the caller's ctx is, at the
	// deadline and when the heap watchdog stops the call.
	ctx        timerless.Context // ended by end; the executor's timer ends it at the deadline
	cancel     context.CancelCauseFunc
	stopParent func() bool     // unhooks it from the caller's ctx
	done       chan callResult // the result, when the caller still waits
	ended      chan struct{}   // closed when the JS goroutine is done
	state      atomic.Int32    // callRunning, callFinished or callAbandoned
	// stopped is set (under Pool.callsMu) once the heap watchdog stopped it.
	stopped bool
	// console is where the call's console lines go: the sink of the
	// caller's ctx, nil without one.
	console *callConsole
}

// newCall makes the call of runtime v, started at start, under the caller's
// ctx and the pool's deadline.
func (p *Pool) newCall(ctx context.Context, v *vm, start time.Time) *call {
	c := &call{start: start, done: make(chan callResult, 1), ended: make(chan struct{}), console: newCallConsole(ctx)}
	c.v.Store(v)
	c.ctx.At = start.Add(p.opts.CallTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(c.ctx.At) {
		c.ctx.At = d
	}
	base := ctx
	cancelable := ctx.Done() != nil
	if cancelable {
		// The call's context is cancelled by end only, which interrupts
		// the runtime too.
		base = context.WithoutCancel(ctx)
	}
	c.ctx.Context, c.cancel = context.WithCancelCause(base)
	if cancelable {
		c.stopParent = context.AfterFunc(ctx, func() { c.end(context.Cause(ctx)) })
	}
	return c
}

// end ends the call with cause: its context is cancelled (host functions'
// RPCs stop, the caller wakes) and its runtime interrupted.
func (c *call) end(cause error) {
	c.cancel(cause)
	if v := c.v.Load(); v != nil {
		v.interrupt(&c.ctx, cause)
	}
}

// release frees what the call holds of the caller's ctx and cancels its
// context, once the caller has its result.
func (c *call) release() {
	if c.stopParent != nil {
		c.stopParent()
	}
	c.cancel(nil)
	if c.console != nil {
		c.console.close()
	}
}

const (
	callRunning int32 = iota
	callFinished
	callAbandoned
)

// run runs body on an executor goroutine, so that the caller gets its error
// at the deadline whatever the script does: the runtime is interrupted at
// the deadline, and abandoned when it does not stop within InterruptGrace.
func (p *Pool) run(ctx context.Context, fn string, body func(v *vm, f goja.Callable) error) (err error) {
	if err := p.acquire(ctx); err != nil {
		return err
	}
	defer func() { <-p.slots }()
	v, err := p.take()
	if err != nil {
		return err
	}
	st, err := p.runOn(ctx, v, time.Now(), fn, body)
	if st != vmGone {
		p.release(v, st == vmReusable)
	}
	return err
}

// vmState is what became of a runtime after a call.
type vmState int8

const (
	// vmReusable: the call returned by itself; the runtime can run more.
	vmReusable vmState = iota
	// vmBroken: a panic, a heap stop, or an interrupt (at the deadline,
	// for a cancelled ctx): the runtime must not serve again. An interrupt
	// may stop the script halfway through changing its state, and one
	// inside an async function leaves goja's runtime unable to run its
	// job queue ever again (every later promise stays pending).
	vmBroken
	// vmGone: the call was abandoned; its executor drops the runtime.
	vmGone
)

// callResult is what an executor hands back to the caller of a call.
type callResult struct {
	err error
	st  vmState
}

// runOn runs one call of body on runtime v, which the caller took, and
// reports what became of v: the caller releases it unless it is vmGone.
func (p *Pool) runOn(ctx context.Context, v *vm, start time.Time, fn string, body func(v *vm, f goja.Callable) error) (st vmState, err error) {
	if h := p.opts.Hooks.OnCall; h != nil {
		// Here, once for every call: CallJSON, Do and each call of a group.
		defer func() { h(CallEvent{Func: fn, Duration: time.Since(start), Err: err}) }()
	}
	if p.waker != nil && p.inferenceUsed.Load() {
		// The module calls runInference: let the sidecar wake up while
		// the script prepares its request.
		p.waker.Wake()
	}
	c := p.newCall(ctx, v, start)
	defer c.release()
	ctx = &c.ctx
	select {
	case p.jobs <- job{c, fn, body}:
	case <-p.closed:
		return vmBroken, ErrClosed
	}

	select {
	case r := <-c.done:
		return r.st, r.err
	case <-ctx.Done():
	}
	grace := time.NewTimer(p.opts.InterruptGrace)
	defer grace.Stop()
	select {
	case r := <-c.done:
		return r.st, r.err
	case <-grace.C:
	}
	p.abandonedRunning.Add(1)
	if !c.state.CompareAndSwap(callRunning, callAbandoned) {
		// It finished just now.
		p.abandonedRunning.Add(-1)
		r := <-c.done
		return r.st, r.err
	}
	p.abandonedTotal.Add(1)
	go p.executor() // in place of the one abandoned with the call
	p.opts.Logger.Warn("jsbridge: a runtime did not stop after its interrupt; abandoned",
		"func", fn, "cause", context.Cause(ctx), "grace", p.opts.InterruptGrace, "abandoned_running", p.abandonedRunning.Load())
	return vmGone, fmt.Errorf("%w (%w: it did not stop within %v of the interrupt)", p.causeError(fn, ctx, nil), ErrAbandoned, p.opts.InterruptGrace)
}

// exec runs a call's JS on executor e; false when the call was abandoned.
func (p *Pool) exec(e *executor, c *call, fn string, body func(v *vm, f goja.Callable) error) bool {
	defer close(c.ended)
	e.cur.Store(c)
	e.timer.Reset(time.Until(c.ctx.At))
	err := p.callJS(c, fn, body)
	e.timer.Stop()
	e.cur.Store(nil)
	v := c.v.Swap(nil) // the heap watchdog collects a stopped call's runtime after ended
	st := vmReusable
	if v.broken || errors.Is(err, ErrHeapBudget) || c.ctx.Err() != nil {
		st = vmBroken
	}
	if c.state.CompareAndSwap(callRunning, callFinished) {
		c.done <- callResult{err, st}
		return true
	}
	// Abandoned: the caller has its error; the runtime is dropped.
	p.abandonedRunning.Add(-1)
	p.release(v, false)
	p.opts.Logger.Warn("jsbridge: an abandoned runtime stopped", "func", fn, "ran", time.Since(c.start), "err", err)
	return false
}

func (p *Pool) callJS(c *call, fn string, body func(v *vm, f goja.Callable) error) (err error) {
	v := c.v.Load()
	ctx := &c.ctx
	v.begin(ctx)
	v.console = c.console // until end
	// Ended before it began (end's interrupt found the runtime not
	// running this call).
	if err := ctx.Err(); err != nil {
		v.interrupt(ctx, context.Cause(ctx))
	}
	p.track(c, true)
	defer p.track(c, false)
	defer v.end()
	defer func() {
		if r := recover(); r != nil {
			v.broken = true
			err = fmt.Errorf("jsbridge: %s: internal error: %v", fn, r)
			p.opts.Logger.Error("jsbridge: panic in a call", "func", fn, "panic", r)
		}
	}()
	f, ok := goja.AssertFunction(v.rt.Get(fn))
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFunction, fn)
	}
	return p.translate(fn, ctx, body(v, f))
}

// translate maps goja's errors to the package's.
func (p *Pool) translate(fn string, ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ie, ok := errors.AsType[*goja.InterruptedError](err); ok {
		return p.causeError(fn, ctx, ie)
	}
	if ex, ok := errors.AsType[*goja.Exception](err); ok {
		return &ScriptError{Func: fn, Message: ex.String()}
	}
	if so, ok := errors.AsType[*goja.StackOverflowError](err); ok {
		return &ScriptError{Func: fn, Message: p.stackOverflowMessage(so)}
	}
	return err
}

// causeError is the error of a call that ctx ended (or that ie interrupted).
func (p *Pool) causeError(fn string, ctx context.Context, ie *goja.InterruptedError) error {
	var cause error
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
	} else if ie != nil {
		cause, _ = ie.Value().(error)
	}
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("%w (%s: %v)", ErrDeadline, fn, p.opts.CallTimeout)
	case errors.Is(cause, ErrHeapBudget):
		return fmt.Errorf("%w (%s: the heap passed its limit, a JS budget of %d MiB, while it ran longest)", ErrHeapBudget, fn, p.opts.HeapBudget>>20)
	case cause != nil:
		return fmt.Errorf("jsbridge: %s: %w", fn, cause)
	case ie != nil:
		return fmt.Errorf("jsbridge: %s: interrupted: %v", fn, ie.Value())
	}
	return fmt.Errorf("jsbridge: %s: interrupted", fn)
}

// stackOverflowMessage names the error (goja's has no message of its own)
// and keeps the top of the stack only: it is as deep as the limit.
func (p *Pool) stackOverflowMessage(so *goja.StackOverflowError) string {
	const keep = 8
	lines := strings.Split(strings.TrimRight(so.String(), "\n"), "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "RangeError: Maximum call stack size exceeded (more than %d nested calls)", p.opts.MaxCallStackSize)
	for i, l := range lines {
		if i == keep {
			fmt.Fprintf(&b, "\n\t... %d more frames", len(lines)-keep)
			break
		}
		b.WriteString("\n" + l)
	}
	return b.String()
}
