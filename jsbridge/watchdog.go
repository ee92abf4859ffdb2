// The watchdogs that stop JS: the deadline of calls (an executor's timer)
// and of module runs (a moduleRunner), the interrupts they deliver to a
// runtime (ordered against the end of its use, so that a late one never hits
// the next call), and the heap watchdog (watchHeap), which stops the call
// that has run longest while the heap is over its limit. How calls run is in
// executor.go, the pool of runtimes in pool.go.

package jsbridge

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/inferbid/inferbid/internal/timerless"
)

// deadline ends the running call when its deadline has passed (the timer
// may fire late, for a call that ended already: the next call's deadline
// is later).
func (e *executor) deadline() {
	if c := e.cur.Load(); c != nil && !time.Now().Before(c.ctx.At) {
		c.end(context.DeadlineExceeded)
	}
}

// track adds c to the running calls the heap watchdog chooses from
// (running) or removes it.
func (p *Pool) track(c *call, running bool) {
	p.callsMu.Lock()
	if running {
		p.calls[c] = struct{}{}
	} else {
		delete(p.calls, c)
	}
	p.callsMu.Unlock()
}

// moduleRunner ends module runs at their deadline. Its timer is reused from
// build to build (Pool.runners): a context.WithTimeout per build (a timer,
// a context and an AfterFunc) cost a tenth of a fresh runtime's build, paid
// on every isolated call.
type moduleRunner struct {
	timer *time.Timer
	cur   atomic.Pointer[moduleRun]
}

// moduleRun is one run of the module on a fresh runtime.
type moduleRun struct {
	v      *vm
	ctx    timerless.Context
	cancel context.CancelCauseFunc
}

// moduleRunner returns an idle runner.
func (p *Pool) moduleRunner() *moduleRunner {
	if r, ok := p.runners.Get().(*moduleRunner); ok {
		return r
	}
	r := &moduleRunner{}
	r.timer = time.AfterFunc(time.Hour, r.deadline)
	r.timer.Stop()
	return r
}

// deadline ends the running module run when its deadline has passed (the
// timer may fire late, for a run that ended already).
func (r *moduleRunner) deadline() {
	if run := r.cur.Load(); run != nil && !time.Now().Before(run.ctx.At) {
		run.cancel(context.DeadlineExceeded)
		run.v.interrupt(&run.ctx, context.DeadlineExceeded)
	}
}

// begin starts a use of the runtime under ctx.
func (v *vm) begin(ctx context.Context) {
	v.mu.Lock()
	v.ctx = ctx
	v.running = true
	v.mu.Unlock()
}

// interrupt interrupts the runtime with cause while it runs under ctx: a
// late timer or stop never interrupts the runtime's next use.
func (v *vm) interrupt(ctx context.Context, cause error) {
	v.mu.Lock()
	if v.running && v.ctx == ctx {
		v.rt.Interrupt(cause)
	}
	v.mu.Unlock()
}

// interruptWhenDone interrupts the runtime when ctx ends (for checkRequired;
// module runs are ended by a moduleRunner, calls by their executor's timer
// and call.end).
func (v *vm) interruptWhenDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { v.interrupt(ctx, context.Cause(ctx)) })
}

// interruptIfDone interrupts the runtime now when the call's deadline passed
// while a host function ran, so the call ends with ErrDeadline whether or not
// the timer goroutine got there first.
func (v *vm) interruptIfDone() {
	var err error
	if v.ctx.Err() != nil {
		err = context.Cause(v.ctx)
	} else if dl, ok := v.ctx.Deadline(); ok && !time.Now().Before(dl) {
		// gRPC's own deadline timer can fire before the context's.
		err = context.DeadlineExceeded
	}
	if err != nil {
		v.rt.Interrupt(err)
	}
}

func (v *vm) end() {
	if v.wasmState != nil {
		// Before the ctx goes: no Wasm instance outlives its run.
		v.wasmState.endRun()
	}
	v.runs++
	v.mu.Lock()
	v.running = false
	v.ctx = context.Background()
	v.mu.Unlock()
	v.console = nil
	// An interrupt that fired after JS returned (while Go code ran) must not
	// hit the next call.
	v.rt.ClearInterrupt()
}

// heapPollInterval is how often the heap watchdog reads the heap size.
const heapPollInterval = 10 * time.Millisecond

// maxVictimAge bounds minVictimAge: a call the watchdog stops has run at
// least min(maxVictimAge, CallTimeout/4). Bids take milliseconds; a
// memory bomb runs as long as it takes to fill the budget. A heap over the
// budget for another reason (a model download) then stops no short call.
const maxVictimAge = 100 * time.Millisecond

// heapSamples are the runtime metrics the watchdog reads.
type heapSamples struct {
	s []metrics.Sample
}

func newHeapSamples() heapSamples {
	return heapSamples{s: []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"}, // live and not yet swept
		{Name: "/gc/heap/live:bytes"},                // live at the last GC
	}}
}

func (h heapSamples) read() (objects, live uint64) {
	metrics.Read(h.s)
	return h.s[0].Value.Uint64(), h.s[1].Value.Uint64()
}

// heapLimit is the heap the watchdog keeps calls under: HeapBudget plus
// HeapBaseline.
func (p *Pool) heapLimit() uint64 {
	limit := p.opts.HeapBudget
	if p.opts.HeapBaseline != nil {
		limit += max(0, p.opts.HeapBaseline())
	}
	return uint64(limit)
}

// watchHeap stops calls while the heap is over its limit (heapLimit). The
// heap counts every Go object of the process; JS values are Go objects,
// and nothing tells which runtime holds which, so the call that has run
// longest (and at least minVictimAge) is taken as the culprit. A call is
// stopped only when the live heap (as marked by a collection) is over the
// limit: when the objects, garbage included, near the limit but the last
// mark was under it, and a call old enough to blame runs, the watchdog
// forces a collection to know. When debug.SetMemoryLimit is at or under the limit
// the collector keeps garbage under it already, and objects over the limit
// are taken as live. After a stop, the stopped call's runtime is collected
// before the heap is looked at again.
func (p *Pool) watchHeap() {
	h := newHeapSamples()
	t := time.NewTicker(heapPollInterval)
	defer t.Stop()
	minAge := min(maxVictimAge, p.opts.CallTimeout/4)
	for {
		select {
		case <-p.closed:
			return
		case <-t.C:
		}
		limit := p.heapLimit()
		objects, live := h.read()
		// Look closer from 7/8 of the limit: a forced collection takes a
		// while, and a memory bomb keeps allocating meanwhile.
		if objects <= limit-limit/8 && live <= limit {
			continue
		}
		if p.oldestCall(minAge, false) == nil {
			// Over the limit with no call to stop: abandoned runtimes, the
			// host's own memory, or only young calls. New calls still run.
			continue
		}
		if live <= limit {
			if gcLimit := debug.SetMemoryLimit(-1); gcLimit < 0 || uint64(gcLimit) > limit {
				runtime.GC()
				if _, live = h.read(); live <= limit {
					continue
				}
			}
		}
		c := p.oldestCall(minAge, true)
		if c == nil {
			continue
		}
		p.heapStops.Add(1)
		p.opts.Logger.Warn("jsbridge: the heap is over its limit; stopping the longest-running call",
			"heap_objects_mib", objects>>20, "heap_live_mib", live>>20, "limit_mib", limit>>20, "call_ran", time.Since(c.start))
		c.end(ErrHeapBudget)
		// Once its runtime is dropped its memory is garbage: collect it, so
		// that the next look at the heap does not blame another call.
		select {
		case <-c.ended:
		case <-time.After(p.opts.InterruptGrace):
		case <-p.closed:
			return
		}
		runtime.GC()
	}
}

// oldestCall is the running call that started first, at least minAge ago,
// and was not stopped yet; with stop, it is marked stopped.
func (p *Pool) oldestCall(minAge time.Duration, stop bool) *call {
	p.callsMu.Lock()
	defer p.callsMu.Unlock()
	var oldest *call
	for c := range p.calls {
		if !c.stopped && (oldest == nil || c.start.Before(oldest.start)) {
			oldest = c
		}
	}
	if oldest == nil || time.Since(oldest.start) < minAge {
		return nil
	}
	oldest.stopped = stop
	return oldest
}
