package jsbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
)

// groupScript's probe reports what earlier calls of its runtime left (a
// global, an Object.prototype property, a module-scope array, a method on
// Array.prototype), then leaves its own group's name in all of them.
const groupScript = `
var seen = [];
function probe(req) {
  var saw = {
    global: typeof leftGlobal === "undefined" ? null : leftGlobal,
    proto: ({}).leftProto === undefined ? null : ({}).leftProto,
    module: seen.slice(),
    builtin: typeof Array.prototype.leftFn === "function" ? Array.prototype.leftFn() : null
  };
  var g = req.group;
  leftGlobal = g;
  Object.prototype.leftProto = g;
  seen.push(g);
  Array.prototype.leftFn = function () { return g; };
  return saw;
}

// step runs action and returns what the module-scope state held before.
var state = [];
function step(action) {
  var before = state.slice();
  switch (action) {
  case "spin": for (;;) {}
  case "throw": state.push("threw"); throw new Error("boom");
  case "join": return new Array(1e7 + 1).join("x").length;
  case "bomb": var a = []; for (;;) a.push(new Array(100000).fill(a.length));
  }
  if (action.indexOf("busy") === 0) {
    var until = Date.now() + Number(action.slice(4));
    while (Date.now() < until) {}
  }
  state.push(action);
  return before;
}
`

type probeSaw struct {
	Global  *string
	Proto   *string
	Module  []string
	Builtin *string
}

func newGroupPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	p, err := New("group.js", groupScript, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// steps is a group's calls of step, one per action.
func steps(actions ...string) [][][]byte {
	calls := make([][][]byte, len(actions))
	for i, a := range actions {
		js, _ := json.Marshal(a)
		calls[i] = [][]byte{js}
	}
	return calls
}

// runProbeGroups runs groups groups of calls probes each, all at once, and
// returns every call's report, by group.
func runProbeGroups(t *testing.T, p *Pool, groups, calls int, opts GroupOptions) [][]probeSaw {
	t.Helper()
	saw := make([][]probeSaw, groups)
	var wg sync.WaitGroup
	for g := range groups {
		wg.Go(func() {
			args := make([][][]byte, calls)
			for i := range args {
				args[i] = [][]byte{fmt.Appendf(nil, `{"group":"g%d"}`, g)}
			}
			res := p.CallJSONGroup(context.Background(), "probe", args, opts)
			if len(res) != calls {
				t.Errorf("group %d: %d results for %d calls", g, len(res), calls)
				return
			}
			saw[g] = make([]probeSaw, calls)
			for i, r := range res {
				if r.Err != nil || r.Duration <= 0 {
					t.Errorf("group %d call %d: %v (duration %v)", g, i, r.Err, r.Duration)
					continue
				}
				if err := json.Unmarshal(r.Out, &saw[g][i]); err != nil {
					t.Errorf("group %d call %d: %s: %v", g, i, r.Out, err)
				}
			}
		})
	}
	wg.Wait()
	return saw
}

// TestGroupIsolation: what a group's call leaves (a global, a prototype
// change, a module-scope variable, a replaced built-in) is seen by the
// group's later calls and never by another group, with many groups running
// at once on a pool smaller than their number; with IsolateCalls not even
// by the group's own later calls. The same probe sees other groups in a
// ShareRuntimes pool: the test can fail.
func TestGroupIsolation(t *testing.T) {
	const groups, calls = 12, 6
	var hooked atomic.Int64
	p := newGroupPool(t, Options{Size: 3, Hooks: Hooks{OnCall: func(CallEvent) { hooked.Add(1) }}})
	str := func(s *string) string {
		if s == nil {
			return "<none>"
		}
		return *s
	}
	for g, saw := range runProbeGroups(t, p, groups, calls, GroupOptions{}) {
		own := fmt.Sprintf("g%d", g)
		for i, s := range saw {
			want, wantModule := own, strings.Repeat(own+",", i)
			if i == 0 {
				want = "<none>"
			}
			got := [4]string{str(s.Global), str(s.Proto), str(s.Builtin), strings.Join(s.Module, ",")}
			if exp := [4]string{want, want, want, strings.TrimSuffix(wantModule, ",")}; got != exp {
				t.Errorf("group %s call %d saw global, prototype, built-in, module = %q; want %q", own, i, got, exp)
			}
		}
	}
	if n := hooked.Load(); n != groups*calls {
		t.Errorf("OnCall fired %d times for %d calls", n, groups*calls)
	}

	for g, saw := range runProbeGroups(t, p, groups, calls, GroupOptions{IsolateCalls: true}) {
		for i, s := range saw {
			if s.Global != nil || s.Proto != nil || s.Builtin != nil || len(s.Module) > 0 {
				t.Errorf("IsolateCalls: group g%d call %d saw %+v", g, i, s)
			}
		}
	}

	shared := newGroupPool(t, Options{Size: 3, ShareRuntimes: true})
	others := 0
	for g, saw := range runProbeGroups(t, shared, groups, calls, GroupOptions{}) {
		if s := saw[0]; s.Global != nil && *s.Global != fmt.Sprintf("g%d", g) {
			others++
		}
	}
	if others == 0 {
		t.Error("ShareRuntimes: no group saw another's leftovers; the probe detects nothing")
	}
}

// TestGroupBrokenRuntime: an exception leaves the group's runtime in use;
// an interrupt at the deadline makes the next call take a fresh one.
func TestGroupBrokenRuntime(t *testing.T) {
	p := newGroupPool(t, Options{Size: 1, CallTimeout: 200 * time.Millisecond})
	res := p.CallJSONGroup(context.Background(), "step", steps("a", "b", "throw", "c", "spin", "d", "e"), GroupOptions{})
	want := []string{`[]`, `["a"]`, "boom", `["a","b","threw"]`, "deadline", `[]`, `["d"]`}
	for i, r := range res {
		var got string
		var se *ScriptError
		switch {
		case r.Err == nil:
			got = string(r.Out)
		case errors.As(r.Err, &se) && strings.Contains(se.Message, "Error: boom"):
			got = "boom"
		case errors.Is(r.Err, ErrDeadline):
			got = "deadline"
		default:
			got = r.Err.Error()
		}
		if got != want[i] {
			t.Errorf("call %d: %s, want %s", i, got, want[i])
		}
	}
}

// TestGroupCutOff: once a call of a group was abandoned, or stopped for
// the heap, the group's remaining calls are not run (ErrCutOff, not
// ErrNotRun); the pool keeps serving other groups.
func TestGroupCutOff(t *testing.T) {
	p := newGroupPool(t, Options{Size: 2, CallTimeout: 100 * time.Millisecond})
	res := p.CallJSONGroup(context.Background(), "step", steps("a", "join", "b", "c"), GroupOptions{})
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrAbandoned) || !errors.Is(res[1].Err, ErrDeadline) {
		t.Fatalf("a, join: %v, %v; want ok, abandoned", res[0].Err, res[1].Err)
	}
	for _, r := range res[2:] {
		if !errors.Is(r.Err, ErrCutOff) || errors.Is(r.Err, ErrNotRun) || r.Duration != 0 ||
			!strings.Contains(r.Err.Error(), "could not be stopped at its deadline") {
			t.Errorf("after the abandoned call: %v (ran %v), want ErrCutOff", r.Err, r.Duration)
		}
	}
	if res := p.CallJSONGroup(context.Background(), "step", steps("x", "y"), GroupOptions{}); res[1].Err != nil || string(res[1].Out) != `["x"]` {
		t.Errorf("another group after: %s, %v", res[1].Out, res[1].Err)
	}
	waitAbandonedDone(t, p)

	t.Run("heap", func(t *testing.T) {
		if testing.Short() {
			t.Skip("allocates the heap budget")
		}
		const budget = 64 << 20
		baseline := int64(heapObjects())
		p := newGroupPool(t, Options{Size: 1, CallTimeout: time.Minute, HeapBudget: budget,
			HeapBaseline: func() int64 { return baseline }})
		res := p.CallJSONGroup(context.Background(), "step", steps("a", "bomb", "b"), GroupOptions{})
		if res[0].Err != nil || !errors.Is(res[1].Err, ErrHeapBudget) {
			t.Fatalf("a, bomb: %v, %v; want ok, ErrHeapBudget", res[0].Err, res[1].Err)
		}
		if r := res[2]; !errors.Is(r.Err, ErrCutOff) || !strings.Contains(r.Err.Error(), "heap budget") {
			t.Errorf("after the heap stop: %v, want ErrCutOff", r.Err)
		}
		waitAbandonedDone(t, p)
	})
}

// TestGroupDeadlines: every call has its own deadline from its start, so
// a group runs longer than CallTimeout; a ctx deadline ends the call it
// falls in, and the calls after it are not started.
func TestGroupDeadlines(t *testing.T) {
	const timeout = 400 * time.Millisecond
	p := newGroupPool(t, Options{Size: 1, CallTimeout: timeout})
	start := time.Now()
	res := p.CallJSONGroup(context.Background(), "step", steps("busy150", "busy150", "busy150", "busy150"), GroupOptions{})
	for i, r := range res {
		if r.Err != nil || r.Duration < 145*time.Millisecond { // Date.now counts whole milliseconds
			t.Errorf("call %d of 150 ms: %v after %v", i, r.Err, r.Duration)
		}
	}
	if took := time.Since(start); took < timeout {
		t.Errorf("the group took %v, want more than one CallTimeout (%v)", took, timeout)
	}

	long := newGroupPool(t, Options{Size: 1, CallTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	res = long.CallJSONGroup(ctx, "step", steps("a", "spin", "b"), GroupOptions{})
	if took := time.Since(start); took > onTime(200*time.Millisecond) {
		t.Errorf("the group under a 200 ms context returned after %v", took)
	}
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrDeadline) {
		t.Errorf("a, spin: %v, %v; want ok, ErrDeadline", res[0].Err, res[1].Err)
	}
	if r := res[2]; !errors.Is(r.Err, context.DeadlineExceeded) || errors.Is(r.Err, ErrNotRun) || errors.Is(r.Err, ErrCutOff) || r.Duration != 0 {
		t.Errorf("after the context's deadline: %v, want not started", r.Err)
	}

	long.Close()
	for i, r := range long.CallJSONGroup(context.Background(), "step", steps("a", "b"), GroupOptions{}) {
		if !errors.Is(r.Err, ErrClosed) {
			t.Errorf("closed pool, call %d: %v", i, r.Err)
		}
	}
}

// TestGroupSlice: once the slice has run out the group starts no more
// calls, and those get ErrNotRun; the first call always runs.
func TestGroupSlice(t *testing.T) {
	p := newGroupPool(t, Options{Size: 1})
	res := p.CallJSONGroup(context.Background(), "step", steps("busy40", "busy40", "busy40", "busy40", "busy40", "busy40", "busy40", "busy40"),
		GroupOptions{Slice: 100 * time.Millisecond})
	ran := 0
	for ran < len(res) && res[ran].Err == nil {
		ran++
	}
	if ran == 0 || ran == len(res) || ran > 3 {
		t.Errorf("%d of %d calls of 40 ms ran in a slice of 100 ms", ran, len(res))
	}
	for i, r := range res[ran:] {
		if !errors.Is(r.Err, ErrNotRun) || r.Duration != 0 || r.Out != nil {
			t.Errorf("call %d after the slice: %v (ran %v)", ran+i, r.Err, r.Duration)
		}
	}
	// The last call that ran saw the earlier ones: the runtime is the group's.
	if want := strings.Repeat(`"busy40",`, ran-1); ran > 0 && string(res[ran-1].Out) != "["+strings.TrimSuffix(want, ",")+"]" {
		t.Errorf("call %d: %s", ran-1, res[ran-1].Out)
	}

	res = p.CallJSONGroup(context.Background(), "step", steps("a", "b"), GroupOptions{Slice: time.Nanosecond})
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrNotRun) {
		t.Errorf("slice of 1 ns: %v, %v; want the first call run, the second ErrNotRun", res[0].Err, res[1].Err)
	}
	for i, r := range p.CallJSONGroup(context.Background(), "step", steps("a", "b", "c"), GroupOptions{}) {
		if r.Err != nil {
			t.Errorf("no slice, call %d: %v", i, r.Err)
		}
	}
}

// BenchmarkGroup is 20 generateBid-like calls (a bid computed in JS from
// JSON arguments, no inference) run as one group (one fresh runtime for
// the 20) against 20 CallJSON calls (a fresh runtime each, the default),
// from one goroutine; an op is the 20 calls. cpu-µs/op counts the whole
// process, the background refill of fresh runtimes included.
func BenchmarkGroup(b *testing.B) {
	const n = 20
	script := `
function bid(ig, signals) {
  var best = null;
  for (var i = 0; i < ig.ads.length; i++) {
    var ad = ig.ads[i], score = ad.value;
    for (var j = 0; j < signals.weights.length; j++) score *= 1 + signals.weights[j] * ig.dense[j];
    if (best === null || score > best.bid) best = {render: ad.render_url, bid: score};
  }
  return best;
}`
	ig := []byte(`{"name":"shoes","dense":[0.9,0.1,0.4,0.0,0.7,0.3],"ads":[{"render_url":"https://ads.example/a","value":2.5},{"render_url":"https://ads.example/b","value":1.8}]}`)
	signals := []byte(`{"weights":[0.3,1.2,-0.4,0.0,2.0,0.1]}`)
	calls := make([][][]byte, n)
	for i := range calls {
		calls[i] = [][]byte{ig, signals}
	}
	p, err := New("bench.js", script, Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	for _, mode := range []string{"group", "calljson"} {
		b.Run(mode, func(b *testing.B) {
			cpu0 := benchlat.ProcessCPU()
			for b.Loop() {
				if mode == "group" {
					for _, r := range p.CallJSONGroup(ctx, "bid", calls, GroupOptions{}) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
					continue
				}
				for range n {
					if _, err := p.CallJSON(ctx, "bid", ig, signals); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric((benchlat.ProcessCPU()-cpu0).Seconds()*1e6/float64(b.N), "cpu-µs/op")
		})
	}
}
