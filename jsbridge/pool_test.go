package jsbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const poolScript = `
var calls = 0;
function add(a, b) { calls++; return {sum: a.x + b.x, calls: calls}; }
function spin() { for (;;) {} }
function recurse(n) { return recurse(n + 1) + 1; }
function thrower() { throw new Error("bad bid " + 7); }
function undef() {}
function sandbox() {
  return [typeof require, typeof process, typeof module, typeof fetch, typeof XMLHttpRequest,
          typeof setTimeout, typeof Deno, typeof Bun, typeof os, typeof fs].join(",");
}
function say(x) { console.log("hello", x, {a: 1}); console.error("oops"); return true; }
// inUse detects two goroutines inside one runtime at once (with -race, the
// detector fires first).
var inUse = 0;
function exclusive(n) {
  inUse++;
  if (inUse !== 1) throw new Error("runtime shared: inUse=" + inUse);
  var s = 0;
  for (var i = 0; i < n; i++) s += i;
  inUse--;
  return s;
}
`

func newPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	p, err := New("pool.js", poolScript, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestCallJSON(t *testing.T) {
	p := newPool(t, Options{Size: 1})
	out, err := p.CallJSON(context.Background(), "add", []byte(`{"x":2}`), []byte(`{"x":40}`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Sum, Calls int }
	if err := json.Unmarshal(out, &got); err != nil || got.Sum != 42 || got.Calls != 1 {
		t.Fatalf("add = %s (%v), want sum 42, calls 1", out, err)
	}
	if out, err := p.CallJSON(context.Background(), "undef"); err != nil || string(out) != "null" {
		t.Errorf("undef() = %s, %v; want null", out, err)
	}
	if _, err := p.CallJSON(context.Background(), "add", []byte(`{nope`)); err == nil {
		t.Error("a non-JSON argument was accepted")
	}
	if _, err := p.CallJSON(context.Background(), "missing"); !errors.Is(err, ErrNotFunction) {
		t.Errorf("missing function: %v, want ErrNotFunction", err)
	}
	_, err = p.CallJSON(context.Background(), "thrower")
	var se *ScriptError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "bad bid 7") || se.Func != "thrower" {
		t.Errorf("thrower: %v, want a ScriptError with the message", err)
	}
}

func TestNewRejectsBadModules(t *testing.T) {
	for name, src := range map[string]string{
		"syntax":         "function (",
		"throws at load": "throw new Error('no')",
		"loops at load":  "for(;;){}",
	} {
		_, err := New(name, src, Options{Size: 1, CallTimeout: 100 * time.Millisecond, Logger: quietLogger()})
		if err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestDeadline: an infinite loop ends with ErrDeadline and the runtime goes
// back to the pool healthy.
func TestDeadline(t *testing.T) {
	// The pool's own CallTimeout.
	// A long interrupt grace: a loop stops at its next instruction, but a
	// loaded machine may not run it within the default 25ms, and an
	// abandoned runtime would refuse the follow-up call (MaxAbandoned 1).
	short := newPool(t, Options{Size: 1, CallTimeout: 50 * time.Millisecond, InterruptGrace: 5 * time.Second})
	if _, err := short.CallJSON(context.Background(), "spin"); !errors.Is(err, ErrDeadline) {
		t.Fatalf("spin: %v, want ErrDeadline", err)
	}
	// A context deadline earlier than CallTimeout; the follow-up calls get
	// the long CallTimeout, so a loaded machine cannot fail them.
	p := newPool(t, Options{Size: 1, CallTimeout: time.Minute, InterruptGrace: 5 * time.Second})
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := p.CallJSON(ctx, "spin")
		cancel()
		if !errors.Is(err, ErrDeadline) {
			t.Fatalf("spin: %v, want ErrDeadline", err)
		}
		out, err := p.CallJSON(context.Background(), "exclusive", []byte("10"))
		if err != nil || string(out) != "45" {
			t.Fatalf("after a deadline, exclusive(10) = %s, %v; want 45", out, err)
		}
	}
	// Deep recursion is an error, not a Go stack blow-up.
	p3 := newPool(t, Options{Size: 1, CallTimeout: time.Minute})
	_, err := p3.CallJSON(context.Background(), "recurse", []byte("0"))
	var se *ScriptError
	if !errors.As(err, &se) {
		t.Fatalf("recurse: %v, want a ScriptError", err)
	}
	if out, err := p3.CallJSON(context.Background(), "exclusive", []byte("3")); err != nil || string(out) != "3" {
		t.Fatalf("after a stack overflow: %s, %v", out, err)
	}
	// A cancelled context interrupts too.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	p2 := newPool(t, Options{Size: 1, CallTimeout: time.Hour})
	if _, err := p2.CallJSON(ctx, "spin"); !errors.Is(err, context.Canceled) {
		t.Fatalf("spin with a cancelled context: %v, want context.Canceled", err)
	}
	if out, err := p2.CallJSON(context.Background(), "exclusive", []byte("4")); err != nil || string(out) != "6" {
		t.Fatalf("after a cancellation: %s, %v", out, err)
	}
}

// TestDeadlineDuringInference: the deadline also cancels the sidecar call a
// script is blocked in.
func TestDeadlineDuringInference(t *testing.T) {
	client := startInProcessSidecar(t)
	register(t, client, "slow/", "sleep 60000")
	p := newInferencePool(t, client, Options{Size: 1, CallTimeout: time.Minute})
	arg, _ := json.Marshal("runInference(" + batchJSON("slow/", "[1]", "[1]") + ")")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.CallJSON(ctx, "call", arg); !errors.Is(err, ErrDeadline) {
		t.Fatalf("slow inference: %v, want ErrDeadline", err)
	}
	if got := evalJS(t, p, "1+1"); got != "2" {
		t.Fatalf("after the deadline: %s", got)
	}
}

func TestPoolConcurrency(t *testing.T) {
	p := newPool(t, Options{Size: 4})
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			for i := range 10 {
				n := (g*10 + i) % 50
				out, err := p.CallJSON(context.Background(), "exclusive", fmt.Appendf(nil, "%d", n))
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprint(n * (n - 1) / 2); string(out) != want {
					errs <- fmt.Errorf("exclusive(%d) = %s, want %s", n, out, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPoolConcurrentInference: many goroutines through few runtimes into one
// sidecar, each checking its own answer.
func TestPoolConcurrentInference(t *testing.T) {
	client := startInProcessSidecar(t)
	register(t, client, "affine/", "affine 3 -1")
	p := newInferencePool(t, client, Options{Size: 3})
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			for i := range 10 {
				x := g*10 + i
				expr := fmt.Sprintf(`JSON.parse(runInference(%s)).response[0].tensors[0].tensor_content[0]`, batchJSON("affine/", "[1]", fmt.Sprintf("[%d]", x)))
				arg, _ := json.Marshal(expr)
				out, err := p.CallJSON(context.Background(), "call", arg)
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprint(3*x - 1); string(out) != want {
					errs <- fmt.Errorf("x=%d: got %s, want %s", x, out, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSandbox(t *testing.T) {
	p := newPool(t, Options{Size: 1})
	out, err := p.CallJSON(context.Background(), "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range strings.Split(strings.Trim(string(out), `"`), ",") {
		if typ != "undefined" {
			t.Errorf("sandbox globals: %s, want all undefined", out)
			break
		}
	}
}

// TestConsoleObject: console's methods are made on first use, and the
// object behaves as a plain one otherwise.
func TestConsoleObject(t *testing.T) {
	p, err := New("console.js", `function probe() {
  var r = [Object.keys(console).join(), typeof console.log, console.log === console.log, "log" in console];
  console.extra = 1;
  console.log = 7;
  delete console.warn;
  r.push(Object.keys(console).join(), console.log, typeof console.warn, "warn" in console, console.extra);
  return r;
}`, Options{Size: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out, err := p.CallJSON(context.Background(), "probe")
	want := `["log,info,debug,warn,error","function",true,true,"log,info,debug,error,extra",7,"undefined",false,1]`
	if err != nil || string(out) != want {
		t.Errorf("probe() = %s, %v; want %s", out, err, want)
	}
}

// TestInterruptedSharedRuntimeDropped: a shared runtime whose call was
// interrupted serves no more calls. Interrupted inside an async function, a
// goja runtime never runs its job queue again: a later call's promise
// reactions would not run.
func TestInterruptedSharedRuntimeDropped(t *testing.T) {
	p, err := New("jobs.js", `
async function spinAsync() { for (;;) {} }
function jobsRun() { var r = {ran: false}; Promise.resolve().then(function () { r.ran = true; }); return r; }
`, Options{Size: 1, ShareRuntimes: true, CallTimeout: 100 * time.Millisecond, Logger: quietLogger(),
		// A loop stops at its next instruction, but a loaded machine may
		// not run it within the default 25ms grace, and an abandoned
		// runtime would refuse the next call (MaxAbandoned 1).
		InterruptGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 3 {
		if _, err := p.CallJSON(context.Background(), "spinAsync"); !errors.Is(err, ErrDeadline) {
			t.Fatalf("spinAsync: %v, want ErrDeadline", err)
		}
		if out, err := p.CallJSON(context.Background(), "jobsRun"); err != nil || string(out) != `{"ran":true}` {
			t.Errorf("call %d after an interrupt: jobsRun() = %s, %v; want the job run", i, out, err)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestClosedPool(t *testing.T) {
	p := newPool(t, Options{Size: 1})
	p.Close()
	if _, err := p.CallJSON(context.Background(), "undef"); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
}

func TestHooks(t *testing.T) {
	client := startInProcessSidecar(t)
	register(t, client, "affine/", "affine 1 0")
	var mu sync.Mutex
	var calls []CallEvent
	var infs []InferenceEvent
	p := newInferencePool(t, client, Options{Size: 1, Hooks: Hooks{
		OnCall:      func(e CallEvent) { mu.Lock(); calls = append(calls, e); mu.Unlock() },
		OnInference: func(e *InferenceEvent) { mu.Lock(); infs = append(infs, *e); mu.Unlock() },
	}})
	req := `{"request":[` +
		`{"model_path":"affine/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[4,1],"tensor_content":[1,2,3,4]}]},` +
		`{"model_path":"nope/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1],"tensor_content":[1]}]}]}`
	evalJS(t, p, "runInference(JSON.stringify("+req+"))")
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || calls[0].Func != "call" || calls[0].Err != nil {
		t.Errorf("call events %+v", calls)
	}
	if len(infs) != 1 {
		t.Fatalf("inference events %+v", infs)
	}
	ev := infs[0]
	if ev.Err != nil || len(ev.Entries) != 2 || ev.RequestBytes != len(req)-strings.Count(req, " ") {
		t.Errorf("inference event %+v (request %d bytes)", ev, len(req))
	}
	if len(ev.Entries) == 2 && (ev.Entries[0].BatchSize != 4 || ev.Entries[0].Err != nil || ev.Entries[1].Err == nil) {
		t.Errorf("entry events %+v", ev.Entries)
	}
}

// TestDeadlineInsideRunInference: JS that runs inside runInference (a getter
// of the batch object) is interrupted too, and the runtime stays usable.
func TestDeadlineInsideRunInference(t *testing.T) {
	client := startInProcessSidecar(t)
	p := newInferencePool(t, client, Options{Size: 1, CallTimeout: time.Minute})
	for _, expr := range []string{
		`runInference({get request() { for (;;) {} }})`,
		`runInference({request: [], toJSON: function() { for (;;) {} }})`,
	} {
		arg, _ := json.Marshal(expr)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := p.CallJSON(ctx, "call", arg)
		cancel()
		if !errors.Is(err, ErrDeadline) {
			t.Fatalf("%s: %v, want ErrDeadline", expr, err)
		}
		if got := evalJS(t, p, "1+1"); got != "2" {
			t.Fatalf("after %s: %s", expr, got)
		}
	}
}

func TestIsolateCalls(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		// The module's global call counter survives between calls only
		// in shared runtimes.
		{"default", Options{Size: 1}, `{"sum":2,"calls":1}`},
		{"shared", Options{Size: 1, ShareRuntimes: true}, `{"sum":2,"calls":3}`},
		{"IsolateCalls overrides ShareRuntimes", Options{Size: 1, ShareRuntimes: true, IsolateCalls: true}, `{"sum":2,"calls":1}`},
	} {
		p := newPool(t, c.opts)
		var last string
		for range 3 {
			out, err := p.CallJSON(context.Background(), "add", []byte(`{"x":1}`), []byte(`{"x":1}`))
			if err != nil {
				t.Fatal(err)
			}
			last = string(out)
		}
		if last != c.want {
			t.Errorf("%s: third call returned %s, want %s", c.name, last, c.want)
		}
	}
}

// wakeCounter is an Inference that counts Wake calls.
type wakeCounter struct {
	noInference
	wakes atomic.Int32
}

func (w *wakeCounter) Wake() { w.wakes.Add(1) }

// A pool wakes its Inference as each call starts, once the module has
// called runInference, and not before.
func TestPoolWakesTheSidecarForModulesThatInfer(t *testing.T) {
	inf := &wakeCounter{}
	p, err := New("wake.js", `
function idle() { return 1; }
function infer() { runInference("{}"); return 2; }
`, Options{Size: 1, Inference: inf, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	for range 2 {
		if _, err := p.CallJSON(ctx, "idle"); err != nil {
			t.Fatal(err)
		}
	}
	if n := inf.wakes.Load(); n != 0 {
		t.Fatalf("%d wakes before the module ever called runInference", n)
	}
	for range 3 {
		if _, err := p.CallJSON(ctx, "infer"); err != nil {
			t.Fatal(err)
		}
	}
	if n := inf.wakes.Load(); n != 2 {
		t.Errorf("%d wakes for three calls of a module that infers, want 2 (all but the first)", n)
	}
}
