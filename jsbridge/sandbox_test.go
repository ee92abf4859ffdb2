package jsbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
)

// noInference defines runInference and getModelPaths without a sidecar:
// tests that only need the host functions to exist use it.
type noInference struct{}

func (noInference) Predict(context.Context, []batch.Entry) ([]batch.Result, error) {
	return nil, errors.New("no sidecar in this test")
}
func (noInference) ModelPaths(context.Context) ([]string, error) { return []string{"m/"}, nil }

// isolationScript's probe reports every trace an earlier call could have
// left, then leaves all of them: globals, prototypes, replaced built-ins and
// replaced host functions.
const isolationScript = `
var counter = 0;
var origPush = Array.prototype.push, origParse = JSON.parse, origTrim = String.prototype.trim;
var origRun = runInference, origPaths = getModelPaths, origLog = console.log, origRandom = Math.random;
function probe(who) {
  var leaks = [];
  function leak(what) { leaks[leaks.length] = what; } // push may be replaced
  counter++;
  if (counter !== 1) leak("counter=" + counter);
  if (({}).polluted !== undefined) leak("Object.prototype.polluted=" + ({}).polluted);
  if (Array.prototype.push !== origPush) leak("Array.prototype.push");
  if (JSON.parse !== origParse || JSON.parse('{"a":1}').a !== 1) leak("JSON.parse");
  if (String.prototype.trim !== origTrim) leak("String.prototype.trim");
  if (runInference !== origRun || runInference("{").indexOf("INPUT_PARSING") < 0) leak("runInference");
  if (getModelPaths !== origPaths || getModelPaths() !== '["m/"]') leak("getModelPaths");
  if (console.log !== origLog) leak("console.log");
  if (Math.random !== origRandom) leak("Math.random");
  if (typeof secret !== "undefined") leak("global secret=" + secret);
  if (Object.isFrozen(Object.prototype)) leak("Object.prototype frozen");

  Object.prototype.polluted = who;
  Array.prototype.push = function () { return "pwned"; };
  JSON.parse = function () { return {pwned: who}; };
  String.prototype.trim = function () { return who; };
  runInference = function () { return '{"response":[]}'; };
  getModelPaths = function () { return "[]"; };
  console.log = function () {};
  Math.random = function () { return 0.5; };
  secret = who;
  return leaks;
}
function freeze() { Object.freeze(Object.prototype); return true; }
`

// TestIsolation: with the default options no call sees anything an earlier
// call wrote, across every member of the pool and under concurrency; with
// ShareRuntimes (the unsafe opt-out) the same probe does see it.
func TestIsolation(t *testing.T) {
	run := func(opts Options) (leaks []string) {
		opts.Inference = noInference{}
		opts.Logger = quietLogger()
		p, err := New("isolation.js", isolationScript, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 15 {
					who, _ := json.Marshal(fmt.Sprintf("user-%d-%d", g, i))
					fn := "probe"
					if i == 7 {
						fn = "freeze"
					}
					out, err := p.CallJSON(context.Background(), fn, who)
					mu.Lock()
					if err != nil {
						leaks = append(leaks, "error: "+err.Error())
					} else if fn == "probe" {
						var l []string
						if err := json.Unmarshal(out, &l); err != nil {
							leaks = append(leaks, "bad answer "+string(out))
						}
						leaks = append(leaks, l...)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return leaks
	}
	if leaks := run(Options{Size: 3}); len(leaks) > 0 {
		t.Errorf("isolated pool: calls saw what earlier calls left: %q", leaks)
	}
	leaks := run(Options{Size: 3, ShareRuntimes: true})
	for _, want := range []string{"counter=", "Object.prototype.polluted=", "Array.prototype.push", "JSON.parse",
		"runInference", "getModelPaths", "console.log", "Math.random", "global secret="} {
		found := false
		for _, l := range leaks {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("shared pool: the probe did not see %q (it saw %q)", want, leaks)
		}
	}
}

const hostileScript = `
function ok(x) { return x; }
function spin() { for (;;) {} }
function regex() { return /^(a|aa)*\1c$/.test("a".repeat(39) + "b"); }
function join(n) { return new Array(n + 1).join("x").length; }
function bomb() { var a = []; for (;;) a.push(new Array(100000).fill(a.length)); }
function overflow() { function f(n) { return f(n + 1) + 1; } return f(0); }
`

// onTime is the bound on when a caller gets its deadline error (10% + 50
// ms), plus a second of slack: the test machine has two cores shared with
// other builds, and every wake-up can wait. The bound itself is measured by
// BenchmarkHostileNeighbour in cmd/bidding-server.
func onTime(deadline time.Duration) time.Duration {
	return deadline + deadline/10 + 50*time.Millisecond + time.Second
}

// waitAbandonedDone waits until no abandoned runtime runs.
func waitAbandonedDone(t *testing.T, p *Pool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for p.Stats().AbandonedRunning > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("abandoned runtimes still running after 2 minutes: %+v", p.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHostileScriptsReturnOnTime: whatever the script does (a loop, a
// catastrophic regular expression, a long built-in call), the caller gets
// ErrDeadline on time; runtimes that could not be interrupted are
// abandoned, counted, and end; the pool keeps serving.
func TestHostileScriptsReturnOnTime(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p, err := New("hostile.js", hostileScript, Options{Size: 2, CallTimeout: timeout, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if RegexpMatchTimeout() == time.Duration(math.MaxInt64) {
		t.Error("regular expressions on regexp2 have no match timeout")
	}
	for _, c := range []struct {
		fn, arg   string
		abandoned bool // a built-in that cannot be interrupted
	}{
		{"spin", "", false},
		{"regex", "", true},
		{"join", "1e7", true},
	} {
		var arg []byte
		if c.arg != "" {
			arg = []byte(c.arg)
		}
		before := p.Stats().AbandonedTotal
		start := time.Now()
		_, err := p.CallJSON(context.Background(), c.fn, arg)
		took := time.Since(start)
		t.Logf("%s: returned after %v: %v", c.fn, took.Round(time.Millisecond), err)
		if !errors.Is(err, ErrDeadline) {
			t.Errorf("%s: %v, want ErrDeadline", c.fn, err)
		}
		if took > onTime(timeout) {
			t.Errorf("%s: returned after %v, want at most %v", c.fn, took, onTime(timeout))
		}
		if got := p.Stats().AbandonedTotal - before; c.abandoned && (got != 1 || !errors.Is(err, ErrAbandoned)) {
			t.Errorf("%s: %d runtimes abandoned (error %v), want 1", c.fn, got, err)
		}
		if out, err := p.CallJSON(context.Background(), "ok", []byte("7")); err != nil || string(out) != "7" {
			t.Errorf("after %s: ok(7) = %s, %v", c.fn, out, err)
		}
		start = time.Now()
		waitAbandonedDone(t, p)
		t.Logf("%s: abandoned work ended %v later", c.fn, time.Since(start).Round(time.Millisecond))
	}
	// A context deadline shorter than CallTimeout holds too.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := p.CallJSON(ctx, "join", []byte("1e7")); !errors.Is(err, ErrDeadline) || time.Since(start) > onTime(100*time.Millisecond) {
		t.Errorf("join under a 100ms context: %v after %v", err, time.Since(start))
	}
	waitAbandonedDone(t, p)
}

// TestAbandonedBound: while MaxAbandoned abandoned runtimes run, calls are
// refused at once with ErrOverloaded; once they end, calls run again.
func TestAbandonedBound(t *testing.T) {
	p, err := New("hostile.js", hostileScript, Options{Size: 2, MaxAbandoned: 1, CallTimeout: 100 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.CallJSON(context.Background(), "join", []byte("1e7")); !errors.Is(err, ErrAbandoned) {
		t.Fatalf("join: %v, want an abandoned runtime", err)
	}
	if p.Stats().AbandonedRunning == 1 { // unless the join already ended
		start := time.Now()
		_, err := p.CallJSON(context.Background(), "ok", []byte("1"))
		if !errors.Is(err, ErrOverloaded) || time.Since(start) > time.Second {
			t.Errorf("a call while the bound is reached: %v after %v, want ErrOverloaded at once", err, time.Since(start))
		}
		if p.Stats().Refused == 0 {
			t.Error("the refusal is not counted")
		}
	}
	waitAbandonedDone(t, p)
	if out, err := p.CallJSON(context.Background(), "ok", []byte("2")); err != nil || string(out) != "2" {
		t.Errorf("after the abandoned runtime ended: %s, %v", out, err)
	}
}

// heapObjects is the Go heap in use, garbage not yet swept included.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestHeapBudget: a script that allocates without limit fails its call with
// ErrHeapBudget and the heap stays near the budget; a call running next to
// it is not the one stopped, and the pool keeps serving.
func TestHeapBudget(t *testing.T) {
	const budget = 128 << 20
	runtime.GC()
	baseline := int64(heapObjects())
	p, err := New("hostile.js", hostileScript, Options{Size: 2, HeapBudget: budget, CallTimeout: time.Minute, Logger: quietLogger(),
		HeapBaseline: func() int64 { return baseline }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if h := heapObjects(); h > peak.Load() {
				peak.Store(h)
			}
		}
	}()
	// A quiet neighbour keeps calling while the bomb runs.
	neighbourDone := make(chan error, 1)
	quit := make(chan struct{})
	go func() {
		for {
			select {
			case <-quit:
				neighbourDone <- nil
				return
			default:
			}
			if _, err := p.CallJSON(context.Background(), "ok", []byte("1")); err != nil {
				neighbourDone <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	start := time.Now()
	_, err = p.CallJSON(context.Background(), "bomb")
	took := time.Since(start)
	close(quit)
	close(stop)
	<-sampled
	t.Logf("bomb: %v after %v; heap peak %d MiB, budget %d MiB over %d MiB; %+v", err, took.Round(time.Millisecond), peak.Load()>>20, budget>>20, baseline>>20, p.Stats())
	if !errors.Is(err, ErrHeapBudget) {
		t.Fatalf("bomb: %v, want ErrHeapBudget", err)
	}
	if err := <-neighbourDone; err != nil {
		t.Errorf("the neighbour's call failed: %v", err)
	}
	if peak.Load() > uint64(baseline)+budget*3/2 {
		t.Errorf("the heap peaked at %d MiB, budget %d MiB over %d MiB", peak.Load()>>20, budget>>20, baseline>>20)
	}
	waitAbandonedDone(t, p)
	runtime.GC()
	if h := heapObjects(); h > uint64(baseline)+budget/2 {
		t.Errorf("after the bomb the heap holds %d MiB", h>>20)
	}
	if out, err := p.CallJSON(context.Background(), "ok", []byte("3")); err != nil || string(out) != "3" {
		t.Errorf("after the bomb: %s, %v", out, err)
	}
}

func TestStackOverflowNamesItself(t *testing.T) {
	p, err := New("hostile.js", hostileScript, Options{Size: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.CallJSON(context.Background(), "overflow")
	var se *ScriptError
	if !errors.As(err, &se) {
		t.Fatalf("overflow: %v, want a ScriptError", err)
	}
	first, _, _ := strings.Cut(se.Message, "\n")
	if !strings.HasPrefix(first, "RangeError: Maximum call stack size exceeded") || !strings.Contains(se.Message, "at f (hostile.js") {
		t.Errorf("overflow: message %q", se.Message)
	}
	if n := strings.Count(se.Message, "\n"); n > 12 {
		t.Errorf("overflow: the message holds %d lines", n)
	}
}

func TestRequireFunctions(t *testing.T) {
	for src, want := range map[string]string{
		"var x = 1;":               "defines no function generateBid (the global generateBid is undefined)",
		"var generateBid = 1;":     "(the global generateBid is number)",
		"var generateBid = {};":    "(the global generateBid is object)",
		"function generateBid(){}": "",
	} {
		_, err := New("m.js", src, Options{Size: 1, RequireFunctions: []string{"generateBid"}, Logger: quietLogger()})
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", src, err)
		case want != "" && (!errors.Is(err, ErrNotFunction) || !strings.Contains(fmt.Sprint(err), want)):
			t.Errorf("%s: %v, want ErrNotFunction with %q", src, err, want)
		}
	}
}
