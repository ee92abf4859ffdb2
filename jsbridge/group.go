package jsbridge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// GroupOptions configure one CallJSONGroup; the zero value means defaults.
type GroupOptions struct {
	// Slice, when > 0, stops the group from starting further calls once
	// this much time has passed since the group started (since it got its
	// pool slot); the calls not started get ErrNotRun, for the caller to
	// requeue (fairness between requests). The first call always starts,
	// so a requeued group always makes progress.
	Slice time.Duration
	// IsolateCalls gives each call its own fresh runtime (the stricter
	// option); by default the calls of one group share one fresh runtime,
	// never another group's. It is honoured in a ShareRuntimes pool too,
	// with runtimes built on the group's time.
	IsolateCalls bool
	// Trace, when set, is called before each call that starts, with the
	// group's ctx and the call's index: the call runs under the ctx it
	// returns (runInference included), and end is called with the call's
	// error when it returns (a JS worker's generateBid spans).
	Trace func(ctx context.Context, i int) (callCtx context.Context, end func(error))
}

// CallResult is one call's outcome in a group.
type CallResult struct {
	// Out is what the function returned, as JSON, when Err is nil.
	Out []byte
	Err error
	// Duration is the call's own run time; 0 for a call not run.
	Duration time.Duration
}

// Errors of calls a group did not run.
var (
	// ErrNotRun: the group's Slice ran out before the call started; the
	// caller may run it again in a later group.
	ErrNotRun = errors.New("jsbridge: not run: the group's time slice ran out")
	// ErrCutOff: an earlier call of the group was abandoned (ErrAbandoned)
	// or stopped by the heap watchdog (ErrHeapBudget), so the script is
	// taken as hostile and none of the group's remaining calls ran. The
	// error says which.
	ErrCutOff = errors.New("jsbridge: not run: the group was cut off")
)

// CallJSONGroup calls the global function fn once per element of calls
// (each element is the argument list as JSON texts, as CallJSON takes), in
// order, and returns one CallResult per element.
//
// A group is the calls of one privacy unit (one generateBids request, one
// user): it takes one pool slot for its whole run, and in an isolated pool
// one fresh runtime that its calls run in one after another, so that what a
// call leaves (globals, prototypes, module-scope variables) is seen by the
// group's later calls and by no other group. A call that leaves the runtime
// broken (a panic, an interrupt at its deadline, a heap stop) makes the next
// call take a fresh one; GroupOptions.IsolateCalls gives every call a fresh
// one. In a ShareRuntimes pool the group runs on a shared runtime, as calls
// do there.
//
// Every call has its own deadline (Options.CallTimeout from the call's
// start, or ctx's deadline if earlier), enforced as in CallJSON, and its
// result is awaited as in CallJSON. Once a call was abandoned or stopped
// for the heap, the remaining calls are not run and get ErrCutOff; calls
// not started because GroupOptions.Slice ran out get ErrNotRun; once ctx is
// done or the pool closed, the remaining calls get that error. When the
// group gets no slot at all, every call has the error (ErrOverloaded,
// ErrClosed, ctx's). Hooks.OnCall follows every call that ran.
func (p *Pool) CallJSONGroup(ctx context.Context, fn string, calls [][][]byte, opts GroupOptions) []CallResult {
	res := make([]CallResult, len(calls))
	if len(calls) == 0 {
		return res
	}
	if err := p.acquire(ctx); err != nil {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	defer func() { <-p.slots }()
	g := &group{p: p, fn: fn, opts: opts}
	defer g.drop(true)
	start := time.Now()
	var stop error // the error of every call not run from here on
	for i, args := range calls {
		if stop == nil && i > 0 {
			stop = g.stopBefore(ctx, start)
		}
		if stop != nil {
			res[i].Err = stop
			continue
		}
		if opts.Trace != nil {
			callCtx, end := opts.Trace(ctx, i)
			res[i] = g.call(callCtx, args)
			end(res[i].Err)
		} else {
			res[i] = g.call(ctx, args)
		}
		stop = g.cutOff(res[i].Err)
	}
	return res
}

// group is one CallJSONGroup's run.
type group struct {
	p    *Pool
	fn   string
	opts GroupOptions
	// v is the runtime the next call runs in; nil: take one.
	v *vm
	// shared: v came from a shared pool's idle set and goes back there.
	shared bool
}

// call runs one call of the group.
func (g *group) call(ctx context.Context, args [][]byte) CallResult {
	v, err := g.runtime()
	if err != nil {
		return CallResult{Err: err}
	}
	start := time.Now()
	var out []byte
	st, err := g.p.runOn(ctx, v, start, g.fn, jsonBody(g.fn, args, &out))
	r := CallResult{Err: err, Duration: time.Since(start)}
	g.after(st)
	if err == nil {
		// Only now: an abandoned call may still write out.
		r.Out = out
	}
	return r
}

// runtime is the runtime for the group's next call: the one the previous
// call ran in, unless it was let go.
func (g *group) runtime() (*vm, error) {
	if g.v != nil {
		return g.v, nil
	}
	if g.p.opts.ShareRuntimes && g.opts.IsolateCalls {
		// The pool keeps no fresh runtimes; the group asked for them.
		v, err := g.p.newVM()
		if err != nil {
			return nil, err
		}
		g.v, g.shared = v, false
		return v, nil
	}
	v, err := g.p.take()
	if err != nil {
		return nil, err
	}
	g.v, g.shared = v, g.p.opts.ShareRuntimes
	return v, nil
}

// after keeps the runtime for the next call, or lets it go, by what the
// call left of it.
func (g *group) after(st vmState) {
	switch {
	case st == vmGone:
		g.v = nil // its executor drops it
	case st == vmBroken:
		g.drop(false)
	case g.opts.IsolateCalls:
		g.drop(true)
	}
}

// drop lets the group's runtime go: back to a shared pool's idle set when
// reusable, else dropped.
func (g *group) drop(reusable bool) {
	if g.v != nil && g.shared {
		g.p.release(g.v, reusable)
	}
	g.v = nil
}

// stopBefore is the error of the calls from here on when the group must
// start no more of them, else nil.
func (g *group) stopBefore(ctx context.Context, start time.Time) error {
	select {
	case <-g.p.closed:
		return ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jsbridge: not started: %w", err)
	}
	if g.opts.Slice > 0 {
		if ran := time.Since(start); ran >= g.opts.Slice {
			return fmt.Errorf("%w (the group has run %v, its slice is %v)", ErrNotRun, ran.Round(time.Microsecond), g.opts.Slice)
		}
	}
	return nil
}

// cutOff is the error of the group's remaining calls after a call that
// failed with err, when the script is taken as hostile for it; else nil.
func (g *group) cutOff(err error) error {
	// A heap stop first: it comes with ErrAbandoned when the runtime did
	// not stop within the grace, and is the better reason.
	switch {
	case errors.Is(err, ErrHeapBudget):
		return fmt.Errorf("%w: an earlier %s call of the group exceeded the JS heap budget", ErrCutOff, g.fn)
	case errors.Is(err, ErrAbandoned):
		return fmt.Errorf("%w: an earlier %s call of the group could not be stopped at its deadline", ErrCutOff, g.fn)
	}
	return nil
}
