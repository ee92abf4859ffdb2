package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

// A batcher merges concurrent calls of one loaded model into one runtime
// call (dynamic batching, off unless the runtime config's dynamic_batching
// turns it on for the model's path). The registry creates one per model it
// publishes (the entry's batcher), and closes it before the model when the model is replaced,
// deleted or the sidecar stops.
//
// A call joins the open batch when its inputs bind to the signature, every
// input is present with the same leading dimension (its rows), and its
// dtypes and inner dimensions match those of the batch. The batch runs
// max_delay after its first call joined (timed by a wakeTimer: Go's timers
// would make any delay under 1 ms about 1.1 ms), or at once when it holds
// max_batch_size rows; a call that would overflow it (in rows, or in
// elements past the element cap) sends it off as it is and opens the next
// one. The merged call
// concatenates the inputs along dimension 0 and runs on the portable layer
// (runtimes.Model.Predict) like any other call; each caller gets its rows
// of every output.
//
// Whatever cannot be merged runs unbatched, exactly as without a batcher,
// so its answer and error are the unbatched ones: calls whose inputs do not
// bind (they get Predict's own INPUT_PARSING error), calls with a missing
// optional input or inputs of different row counts, calls of max_batch_size
// rows or more, calls whose layout differs from the open batch's, a batch
// that found no company before its timer fired, and every member of a
// merged call that failed (other than on a closed model): the failure may
// belong to one member's rows (an index out of range in an embedding), so
// each member runs alone and gets its own answer. A merged call whose
// outputs do not all have the batch's rows as their leading dimension
// cannot be split: its members run alone and the batcher stops merging
// for the model (logged once).
type batcher struct {
	m        *runtimes.Model
	settings BatchSettings
	maxElems int64
	log      *slog.Logger

	timer *wakeTimer // fires for the open batch's deadline

	mu      sync.Mutex
	pending *pendingBatch // the batch open for joining, if any
	armed   bool          // timer is set (for the open batch's deadline or an earlier one)
	closed  bool
	runs    sync.WaitGroup // merged calls in flight

	off atomic.Bool // outputs could not be split: every call runs unbatched

	batches, merged, rows, alone, fallbacks, left atomic.Int64
}

// pendingBatch is one batch, from its first call until its calls have
// their answers. Fields are guarded by batcher.mu until launched; after
// that, calls, rows and key are fixed.
type pendingBatch struct {
	key      []tensor.Tensor // the first call's bound inputs: the layout every call must match
	calls    []*batchCall
	rows     int
	deadline time.Time // when the batch runs at the latest
	launched bool

	// The merged call's context: it ends when every member has left.
	ctx    context.Context
	cancel context.CancelFunc
	active int // members still waiting for the merged call
}

type batchCall struct {
	ctx  context.Context
	in   []tensor.Tensor // bound: in signature order
	rows int
	left bool
	done chan batchAnswer // buffered: the sender never blocks
}

// batchAnswer is a call's share of a merged call, or (self) the word that
// the call must run unbatched.
type batchAnswer struct {
	out  []tensor.Tensor
	err  error
	self bool
	ran  time.Time // when the merged call started
}

// newBatcher returns a batcher for m, or nil and the reason m cannot be
// batched: a stateful model, or a signature that does not give every input
// (and every output it declares) a variable leading dimension.
func newBatcher(m *runtimes.Model, s BatchSettings, maxElems int64, log *slog.Logger) (*batcher, string) {
	if m.Stateful() {
		return nil, "the model is stateful"
	}
	sig := m.Signature()
	if len(sig.Inputs) == 0 {
		return nil, "the model's signature does not list its inputs"
	}
	for i, in := range sig.Inputs {
		if len(in.Shape) == 0 || in.Shape[0] != -1 {
			return nil, fmt.Sprintf("input %d (%q) has shape %s, not a variable leading (batch) dimension", i, in.Name, shapeOrUnknown(in.Shape))
		}
	}
	for i, out := range sig.Outputs {
		if out.Shape != nil && (len(out.Shape) == 0 || out.Shape[0] >= 0) {
			return nil, fmt.Sprintf("output %d (%q) has shape %s, not a variable leading (batch) dimension", i, out.Name, tensor.FormatShape(out.Shape))
		}
	}
	b := &batcher{m: m, settings: s, maxElems: maxElems, log: log}
	b.timer = newWakeTimer(b.expire)
	return b, ""
}

func shapeOrUnknown(s []int64) string {
	if s == nil {
		return "unknown"
	}
	return tensor.FormatShape(s)
}

// predictQueued runs one call, merged with others when it can be, and
// reports how long the call waited in its
// batch before the runtime call that answered it started (0 unbatched).
func (b *batcher) predictQueued(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, time.Duration, error) {
	if b.off.Load() || ctx.Err() != nil {
		out, err := b.m.Predict(ctx, inputs)
		return out, 0, err
	}
	bound, err := b.m.Bind(inputs)
	if err != nil {
		// Predict gives the same INPUT_PARSING error, or ErrClosed first
		// when the model has been replaced (the registry then retries).
		out, err := b.m.Predict(ctx, inputs)
		return out, 0, err
	}
	rows, ok := batchRows(bound)
	if !ok || rows >= b.settings.MaxBatchSize {
		out, err := b.m.Predict(ctx, inputs)
		return out, 0, err
	}
	joined := time.Now()
	c := &batchCall{ctx: ctx, in: bound, rows: rows, done: make(chan batchAnswer, 1)}
	p := b.join(c)
	if p == nil {
		out, err := b.m.Predict(ctx, inputs)
		return out, 0, err
	}
	select {
	case a := <-c.done:
		if a.self {
			waited := time.Since(joined)
			out, err := b.m.Predict(ctx, inputs)
			return out, waited, err
		}
		return a.out, max(a.ran.Sub(joined), 0), a.err
	case <-ctx.Done():
		b.leave(p, c)
		// The error an unbatched call gets: Predict types ctx's error and
		// names the model.
		waited := time.Since(joined)
		out, err := b.m.Predict(ctx, inputs)
		return out, waited, err
	}
}

// batchRows is the leading dimension shared by every input, if there is
// one: every input present, of rank 1 or more, with the same leading
// dimension.
func batchRows(in []tensor.Tensor) (int, bool) {
	rows := int64(-1)
	for _, t := range in {
		if t.Data == nil || len(t.Shape) == 0 || (rows >= 0 && t.Shape[0] != rows) {
			return 0, false
		}
		rows = t.Shape[0]
	}
	return int(rows), rows > 0
}

// sameLayout reports whether a and b hold inputs of the same dtypes and
// inner (non-leading) dimensions.
func sameLayout(a, b []tensor.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DType() != b[i].DType() || !slices.Equal(a[i].Shape[1:], b[i].Shape[1:]) {
			return false
		}
	}
	return true
}

// fits reports whether rows rows of the layout key stay within the element
// cap in every input.
func (b *batcher) fits(key []tensor.Tensor, rows int) bool {
	for _, t := range key {
		inner := int64(t.Len()) / t.Shape[0]
		if inner > 0 && int64(rows) > b.maxElems/inner {
			return false
		}
	}
	return true
}

// join adds c to the open batch (or opens one) and returns the batch, or
// nil when c must run unbatched: the batcher is closed, or c's layout
// differs from the open batch's.
func (b *batcher) join(c *batchCall) *pendingBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	p := b.pending
	if p != nil {
		if !sameLayout(p.key, c.in) {
			return nil
		}
		if p.rows+c.rows > b.settings.MaxBatchSize || !b.fits(p.key, p.rows+c.rows) {
			b.launchLocked(p) // as full as it gets: it runs now
			p = nil
		}
	}
	if p == nil {
		p = &pendingBatch{key: c.in, deadline: time.Now().Add(b.settings.MaxDelay())}
		b.pending = p
		if !b.armed {
			b.timer.set(b.settings.MaxDelay())
			b.armed = true
		}
	}
	p.calls = append(p.calls, c)
	p.rows += c.rows
	if p.rows >= b.settings.MaxBatchSize {
		b.launchLocked(p)
	}
	return p
}

// expire runs when the timer fires: it runs the open batch if its
// deadline has come, or sets the timer again for it. (The timer may have
// been set for a batch that has run since, filled up.)
func (b *batcher) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	p := b.pending
	if p == nil || b.closed {
		return
	}
	if left := time.Until(p.deadline); left > 0 {
		b.timer.set(left)
		b.armed = true
		return
	}
	b.launchLocked(p)
}

// launchLocked closes p to new calls and runs it: a batch of one call
// tells the call to run unbatched; a larger one runs merged in its own
// goroutine, so that each member can still leave when its context ends.
func (b *batcher) launchLocked(p *pendingBatch) {
	p.launched = true
	if b.pending == p {
		b.pending = nil
	}
	switch len(p.calls) {
	case 0:
	case 1:
		b.alone.Add(1)
		p.calls[0].done <- batchAnswer{self: true}
	default:
		p.active = len(p.calls)
		p.ctx, p.cancel = context.WithCancel(context.Background())
		b.runs.Add(1)
		go b.run(p)
	}
}

// leave takes c, whose context has ended, out of p: out of the batch when
// p has not run yet; otherwise out of the merged call's members, whose
// context ends with the last of them.
func (b *batcher) leave(p *pendingBatch, c *batchCall) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left.Add(1)
	if !p.launched {
		if i := slices.Index(p.calls, c); i >= 0 {
			p.calls = slices.Delete(p.calls, i, i+1)
			p.rows -= c.rows
		}
		if len(p.calls) == 0 {
			b.launchLocked(p) // runs nothing: it only closes p
		}
		return
	}
	if c.left || p.cancel == nil {
		return
	}
	c.left = true
	if p.active--; p.active == 0 {
		p.cancel()
	}
}

// run makes p's merged call and hands each member its rows.
func (b *batcher) run(p *pendingBatch) {
	defer b.runs.Done()
	defer p.cancel()
	ran := time.Now()
	out, err := b.m.Predict(p.ctx, concatRows(p.key, p.calls, p.rows))
	if err != nil {
		if errors.Is(err, runtimes.ErrClosed) || p.ctx.Err() != nil {
			// Replaced or deleted: each member retries on the registry's
			// current model. Or every member has left: nobody reads this.
			for _, c := range p.calls {
				c.done <- batchAnswer{err: err, ran: ran}
			}
			return
		}
		b.runAlone(p)
		return
	}
	for i, t := range out {
		if len(t.Shape) == 0 || t.Shape[0] != int64(p.rows) {
			if b.off.CompareAndSwap(false, true) {
				b.log.Warn("dynamic batching stopped for this model: its outputs are not per row; calls run unbatched",
					"model_path", b.m.Path(), "output", i, "tensor_name", t.Name,
					"shape", tensor.FormatShape(t.Shape), "batch_rows", p.rows)
			}
			b.runAlone(p)
			return
		}
	}
	b.batches.Add(1)
	b.merged.Add(int64(len(p.calls)))
	b.rows.Add(int64(p.rows))
	row := 0
	for _, c := range p.calls {
		c.done <- batchAnswer{out: splitRows(out, row, c.rows), ran: ran}
		row += c.rows
	}
}

// runAlone tells every member of p to run unbatched.
func (b *batcher) runAlone(p *pendingBatch) {
	b.fallbacks.Add(int64(len(p.calls)))
	for _, c := range p.calls {
		c.done <- batchAnswer{self: true}
	}
}

// close runs the open batch, if any, at once, waits for merged calls in
// flight and sends later calls straight to the model. It returns the
// batcher's counters.
func (b *batcher) close() BatchingStats {
	b.mu.Lock()
	b.closed = true
	if p := b.pending; p != nil {
		b.launchLocked(p)
	}
	b.mu.Unlock()
	b.timer.close()
	b.runs.Wait()
	return b.stats()
}

// BatchingStats are the dynamic batching counters of one loaded model
// (they start again at zero when the model is replaced).
type BatchingStats struct {
	MaxBatchSize int
	MaxDelay     time.Duration
	// Batches is the number of merged runtime calls, Merged the calls they
	// answered and Rows the rows they ran: Merged/Batches is the mean
	// batch size in calls, Rows/Batches in rows.
	Batches, Merged, Rows int64
	// Alone counts calls that waited and found no company: they ran
	// unbatched.
	Alone int64
	// Fallbacks counts calls that ran unbatched after their merged call
	// failed or its outputs could not be split.
	Fallbacks int64
	// Left counts calls whose context ended while they waited.
	Left int64
	// Off is set once outputs were found not to be per row: the model's
	// calls run unbatched from then on.
	Off bool
}

func (b *batcher) stats() BatchingStats {
	return BatchingStats{
		MaxBatchSize: b.settings.MaxBatchSize, MaxDelay: b.settings.MaxDelay(),
		Batches: b.batches.Load(), Merged: b.merged.Load(), Rows: b.rows.Load(),
		Alone: b.alone.Load(), Fallbacks: b.fallbacks.Load(), Left: b.left.Load(), Off: b.off.Load(),
	}
}

func (s BatchingStats) logAttrs() []any {
	return []any{"max_batch_size", s.MaxBatchSize, "max_delay", s.MaxDelay, "batches", s.Batches, "merged_calls", s.Merged,
		"rows", s.Rows, "alone", s.Alone, "fallbacks", s.Fallbacks, "left", s.Left, "off", s.Off}
}

// concatRows merges the calls' bound inputs along dimension 0 into one
// request of rows rows, named and shaped after key.
func concatRows(key []tensor.Tensor, calls []*batchCall, rows int) []tensor.Tensor {
	merged := make([]tensor.Tensor, len(key))
	for i, k := range key {
		shape := slices.Clone(k.Shape)
		shape[0] = int64(rows)
		var data any
		switch k.Data.(type) {
		case []float64:
			data = concatData[float64](calls, i)
		case []float32:
			data = concatData[float32](calls, i)
		case []int8:
			data = concatData[int8](calls, i)
		case []int16:
			data = concatData[int16](calls, i)
		case []int32:
			data = concatData[int32](calls, i)
		case []int64:
			data = concatData[int64](calls, i)
		case []bool:
			data = concatData[bool](calls, i)
		case []uint8:
			data = concatData[uint8](calls, i)
		case []uint16:
			data = concatData[uint16](calls, i)
		case []uint32:
			data = concatData[uint32](calls, i)
		case []uint64:
			data = concatData[uint64](calls, i)
		case []tensor.Float16:
			data = concatData[tensor.Float16](calls, i)
		case [][]byte:
			data = concatData[[]byte](calls, i)
		}
		merged[i] = tensor.Tensor{Name: k.Name, Shape: shape, Data: data}
	}
	return merged
}

func concatData[T tensor.AnyElement](calls []*batchCall, input int) []T {
	n := 0
	for _, c := range calls {
		n += c.in[input].Len()
	}
	out := make([]T, 0, n)
	for _, c := range calls {
		out = append(out, c.in[input].Data.([]T)...)
	}
	return out
}

// splitRows returns rows rows of every output, from row on. The slices
// share the merged output's arrays, capped so that no append can reach a
// neighbour's rows.
func splitRows(out []tensor.Tensor, row, rows int) []tensor.Tensor {
	mine := make([]tensor.Tensor, len(out))
	for i, t := range out {
		inner := t.Len() / int(t.Shape[0])
		lo, hi := row*inner, (row+rows)*inner
		shape := slices.Clone(t.Shape)
		shape[0] = int64(rows)
		var data any
		switch d := t.Data.(type) {
		case []float64:
			data = d[lo:hi:hi]
		case []float32:
			data = d[lo:hi:hi]
		case []int8:
			data = d[lo:hi:hi]
		case []int16:
			data = d[lo:hi:hi]
		case []int32:
			data = d[lo:hi:hi]
		case []int64:
			data = d[lo:hi:hi]
		case []bool:
			data = d[lo:hi:hi]
		case []uint8:
			data = d[lo:hi:hi]
		case []uint16:
			data = d[lo:hi:hi]
		case []uint32:
			data = d[lo:hi:hi]
		case []uint64:
			data = d[lo:hi:hi]
		case []tensor.Float16:
			data = d[lo:hi:hi]
		case [][]byte:
			data = d[lo:hi:hi]
		}
		mine[i] = tensor.Tensor{Name: t.Name, Shape: shape, Data: data}
	}
	return mine
}

// startBatcher gives e's model, about to be published at path, a batcher
// when Settings turn batching on for path and the model can be batched.
func (r *Registry) startBatcher(path string, e *entry) {
	s := r.settings.DynamicBatching.For(path)
	if !s.On() {
		return
	}
	b, why := newBatcher(e.model, s, r.rt.Config().MaxTensorElements, r.log)
	if b == nil {
		r.log.Warn("dynamic batching is configured for this model but cannot apply; its calls run unbatched", "model_path", path, "reason", why)
		return
	}
	e.batcher = b
	r.log.Info("dynamic batching on", "model_path", path, "max_batch_size", s.MaxBatchSize, "max_delay", s.MaxDelay())
}

// stopBatcher closes e's batcher, if any, and logs its counters: the open
// batch runs at once, and later calls go straight to the model.
func (r *Registry) stopBatcher(e *entry) {
	if e.batcher != nil {
		st := e.batcher.close()
		r.log.Info("dynamic batching stats", append([]any{"model_path", e.model.Path()}, st.logAttrs()...)...)
	}
}

// call runs one entry on e: through its sequences when it has them, else
// through its batcher when it has one. queued is how long it waited past
// the call (in a dynamic batch, behind its sequence's previous request)
// before the runtime call that answered it started.
func (r *Registry) call(ctx context.Context, e *entry, inputs []tensor.Tensor) (out []tensor.Tensor, queued time.Duration, err error) {
	if e.sequences != nil {
		return r.callSequence(ctx, e.model, e.sequences, inputs)
	}
	if e.batcher != nil {
		return e.batcher.predictQueued(ctx, inputs)
	}
	out, err = e.model.Predict(ctx, inputs)
	return out, 0, err
}

// BatchingStats returns the dynamic batching counters of every published
// model that batches, by model path.
func (r *Registry) BatchingStats() map[string]BatchingStats {
	stats := map[string]BatchingStats{}
	for path, e := range *r.entries.Load() {
		if e.batcher != nil {
			stats[path] = e.batcher.stats()
		}
	}
	return stats
}
