package sidecar

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/inferbid/inferbid/inferr"
)

// replayGate closes the window between a sidecar's death and the end of
// its models' replay: while it is active, calls for a model of the replay
// set wait for that model (bounded by their ctx) instead of failing with
// GRPC or MODEL_NOT_FOUND, getModelPaths answers the whole replay set, and
// readiness says what is left. The Supervisor drives it; its Client
// consults it. A Client made by NewClient has none.
type replayGate struct {
	// on mirrors active for the call path: a Predict outside an outage
	// reads one atomic, not the mutex every caller would contend on.
	on        atomic.Bool
	mu        sync.Mutex
	active    bool
	replaying bool                     // the new sidecar is up and the models are being sent
	pending   map[string]chan struct{} // closed once the model is back (or given up)
	listed    map[string]bool          // the replay set, minus failed replays
	total     int
	done      int
	idle      chan struct{} // closed while inactive
	gen       uint64        // counts begins: a replay's results apply to its own only

	// unavailable, when set, is why calls fail at once instead of waiting
	// (a sidecar that does not answer its liveness probe, or a crash
	// loop): waiting for it would only spend the call's deadline. failCh
	// is closed when it is set, so that calls already waiting go too.
	unavailable string
	failCh      chan struct{}

	// confirmOutage reports whether the sidecar is down or restarting,
	// waiting a little for the supervisor to see a death it has not seen
	// yet (a connection refused can come before the exit is reaped).
	confirmOutage func(ctx context.Context) bool
}

func newReplayGate() *replayGate {
	idle := make(chan struct{})
	close(idle)
	return &replayGate{idle: idle, failCh: make(chan struct{})}
}

// setUnavailable makes every call fail at once with a GRPC error giving
// reason, until clearUnavailable. Calls already waiting fail too.
func (g *replayGate) setUnavailable(reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unavailable == "" {
		close(g.failCh)
	}
	g.unavailable = reason
	g.on.Store(true)
}

// clearUnavailable ends setUnavailable: calls wait for the replay again
// (if one is under way) or go straight through.
func (g *replayGate) clearUnavailable() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unavailable == "" {
		return
	}
	g.unavailable = ""
	g.failCh = make(chan struct{})
	g.on.Store(g.active)
}

// unavailableErr is the error of a call made while the gate fails calls.
func unavailableErr(reason string) error {
	return inferr.Errorf(inferr.GRPC, "sidecar unavailable (the call was not sent): %s", reason)
}

// begin activates the gate for the models in paths (again, if it was
// active: models already back are pending again, since a new sidecar has
// none of them; models no longer in the set are released). It returns the
// generation that finish takes.
func (g *replayGate) begin(paths []string, replaying bool) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	if !g.active {
		g.active = true
		g.on.Store(true)
		g.idle = make(chan struct{})
	}
	g.replaying = replaying
	next := make(map[string]chan struct{}, len(paths))
	g.listed = make(map[string]bool, len(paths))
	for _, p := range paths {
		ch, ok := g.pending[p]
		if !ok {
			ch = make(chan struct{})
		}
		next[p] = ch
		g.listed[p] = true
	}
	for p, ch := range g.pending {
		if _, ok := next[p]; !ok {
			close(ch)
		}
	}
	g.pending = next
	g.total, g.done = len(paths), 0
	return g.gen
}

// finish marks one model's replay as over: served, or failed (then it is
// no longer listed, and its waiters go on to get MODEL_NOT_FOUND). A
// replay whose sidecar died meanwhile (the gate began again) changes
// nothing: the next replay has the model to do.
//
// It reports whether the result applied (the gate did not begin again).
func (g *replayGate) finish(gen uint64, path string, served bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gen != g.gen {
		return false
	}
	if ch, ok := g.pending[path]; ok {
		close(ch)
		delete(g.pending, path)
		g.done++
	}
	if !served {
		delete(g.listed, path)
	}
	return true
}

// add puts a model into the replay set of an active gate (a registration
// the sidecar died during: the replay brings it in).
func (g *replayGate) add(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.active {
		return
	}
	if _, ok := g.pending[path]; !ok {
		g.pending[path] = make(chan struct{})
		g.total++
	}
	g.listed[path] = true
}

// unavailableReason is setUnavailable's reason, "" when calls may go.
func (g *replayGate) unavailableReason() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unavailable
}

// forget drops a model deleted during an outage.
func (g *replayGate) forget(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch, ok := g.pending[path]; ok {
		close(ch)
		delete(g.pending, path)
		g.total--
	}
	delete(g.listed, path)
}

// end deactivates the gate and releases every waiter.
func (g *replayGate) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.active {
		return
	}
	for _, ch := range g.pending {
		close(ch)
	}
	g.pending, g.listed = nil, nil
	g.active, g.replaying = false, false
	g.on.Store(g.unavailable != "")
	close(g.idle)
}

// engaged reports, without locking, whether the gate may hold calls back.
func (g *replayGate) engaged() bool { return g != nil && g.on.Load() }

// wait blocks until none of paths is pending, or ctx ends (then a GRPC
// error naming the model still awaited).
func (g *replayGate) wait(ctx context.Context, paths func(yield func(string) bool)) error {
	if !g.engaged() {
		return nil
	}
	g.mu.Lock()
	if g.unavailable != "" {
		reason := g.unavailable
		g.mu.Unlock()
		return unavailableErr(reason)
	}
	if !g.active {
		g.mu.Unlock()
		return nil
	}
	fail := g.failCh
	type waiting struct {
		path string
		ch   chan struct{}
	}
	var chans []waiting
	for p := range paths {
		if ch, ok := g.pending[p]; ok {
			chans = append(chans, waiting{p, ch})
		}
	}
	g.mu.Unlock()
	for _, w := range chans {
		select {
		case <-w.ch:
			continue // back already: whatever ctx says
		default:
		}
		select {
		case <-w.ch:
		case <-fail:
			g.mu.Lock()
			reason := g.unavailable
			g.mu.Unlock()
			if reason == "" {
				reason = "the sidecar was found unavailable while the call waited"
			}
			return unavailableErr(reason)
		case <-ctx.Done():
			return inferr.Errorf(inferr.GRPC, "model %q: still being replayed after a sidecar restart when the call was abandoned: %w", w.path, context.Cause(ctx))
		}
	}
	return nil
}

// modelPaths is the replay set, sorted, while the gate is active.
func (g *replayGate) modelPaths() ([]string, bool) {
	if g == nil {
		return nil, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.active {
		return nil, false
	}
	paths := make([]string, 0, len(g.listed))
	for p := range g.listed {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths, true
}

// state is what readiness reports while the gate is active ("" when it is
// not), and a channel closed once it is not.
func (g *replayGate) state() (string, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.unavailable != "":
		return g.unavailable, g.idle
	case !g.active:
		return "", g.idle
	case g.replaying:
		return fmt.Sprintf("replaying %d of %d models after a sidecar restart (%d done)", g.total-g.done, g.total, g.done), g.idle
	default:
		return fmt.Sprintf("sidecar down, restarting (%d models to replay)", g.total), g.idle
	}
}

// outage reports whether the sidecar is down or restarting, as far as the
// supervisor knows or learns within ctx.
func (g *replayGate) outage(ctx context.Context) bool {
	return g != nil && g.confirmOutage != nil && g.confirmOutage(ctx)
}

// isActive reports whether a sidecar's death was seen and its replay has
// not ended.
func (g *replayGate) isActive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}
