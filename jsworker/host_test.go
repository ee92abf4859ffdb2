package jsworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/sidecar/fastlane"
)

// hangEnv makes a test worker load the module and then never answer a
// chunk: a worker that cannot run Go, for the host's kill.
const hangEnv = "JSWORKER_TEST_HANG"

// TestMain runs the test binary as a worker when a Host started it.
func TestMain(m *testing.M) {
	if IsWorker(os.Getenv) {
		switch os.Getenv(hangEnv) {
		case "":
		case "linger":
			os.Exit(lingerWorker())
		default:
			os.Exit(hangWorker())
		}
		os.Exit(ExitCode(Main(context.Background(), os.Getenv, os.Stderr), os.Stderr))
	}
	os.Exit(m.Run())
}

// hangWorker answers the Config and then reads chunks without answering.
func hangWorker() int {
	fd, _ := strconv.Atoi(os.Getenv(WorkerEnv))
	f := os.NewFile(uintptr(fd), "host")
	conn, err := net.FileConn(f)
	if err != nil {
		return 1
	}
	w := &worker{peer: newPeer(conn, 2), log: slog.Default(), reqs: make(chan fastlane.Frame, 4)}
	w.peer.onRequest = func(f fastlane.Frame) { w.reqs <- f }
	go w.peer.readLoop()
	w.configure(<-w.reqs)
	var giveUp <-chan time.Time
	if os.Getenv(lingerChildEnv) != "" {
		giveUp = time.After(lingerFor)
	}
	select {
	case <-w.peer.done:
	case <-giveUp:
	}
	return 0
}

// lingerWorker starts a hanging worker as its own child, handing it the
// connection and stderr, and waits: killed, it leaves both open for as long
// as the child lives (lingerFor), as the kernel leaves a killed process's
// open until it has torn down its memory.
func lingerWorker() int {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), hangEnv+"=1", lingerChildEnv+"=1")
	cmd.ExtraFiles = []*os.File{os.NewFile(3, "host")}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 1
	}
	select {}
}

// lingerChildEnv marks the child of lingerWorker, which gives up after
// lingerFor.
const lingerChildEnv = "JSWORKER_TEST_LINGER_CHILD"

const lingerFor = 5 * time.Second

// bufLogger is a logger whose output a test reads.
type bufLogger struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *bufLogger) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *bufLogger) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startHost(t *testing.T, src string, opts Options) (*Host, *bufLogger) {
	t.Helper()
	logs := &bufLogger{}
	if len(opts.Modules) == 0 {
		opts.Modules = []Module{{Name: "test.js", Source: src}}
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	h, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h, logs
}

func groups(names ...string) [][]byte {
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = []byte(fmt.Sprintf(`{"name":%q}`, n))
	}
	return out
}

func namesN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

const bidByName = `function generateBid(ig, auction) { return {ig: ig.name, bid: ig.name.length, a: auction}; }`

func TestBidsInOrder(t *testing.T) {
	// Workers polling for their next chunk (the default), parking, and
	// with the host polling for answers too; back to back, then with
	// pauses longer than the spin wait.
	t.Run("defaults", func(t *testing.T) { testBidsInOrder(t, Options{}) })
	t.Run("parked", func(t *testing.T) { testBidsInOrder(t, Options{SpinWait: -1}) })
	t.Run("host_polls", func(t *testing.T) { testBidsInOrder(t, Options{HostSpinWait: 200 * time.Microsecond}) })
}

func testBidsInOrder(t *testing.T, opts Options) {
	h, _ := startHost(t, bidByName, opts)
	for i := range 40 {
		if i%10 == 9 {
			time.Sleep(2 * time.Millisecond)
		}
		checkBidsInOrder(t, h)
	}
}

func checkBidsInOrder(t *testing.T, h *Host) {
	t.Helper()
	names := namesN("g", 37)
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups(names...), Signals: [][]byte{[]byte(`{"x":1}`), nil, nil, nil}})
	if len(resp.Results) != len(names) {
		t.Fatalf("%d results for %d groups", len(resp.Results), len(names))
	}
	for i, r := range resp.Results {
		if r.Err != nil {
			t.Fatalf("group %d: %v", i, r.Err)
		}
		var got struct {
			IG  string
			Bid int
			A   struct{ X int }
		}
		if err := json.Unmarshal(r.Bid, &got); err != nil {
			t.Fatalf("group %d: %s: %v", i, r.Bid, err)
		}
		if got.IG != names[i] || got.Bid != len(names[i]) || got.A.X != 1 {
			t.Fatalf("group %d answered %s", i, r.Bid)
		}
	}
}

func TestModuleErrorFailsStart(t *testing.T) {
	for name, src := range map[string]string{
		"syntax":    "function generateBid( {",
		"throws":    "throw new Error('top level boom');",
		"undefined": "var x = 1;",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Start(context.Background(), Options{Modules: []Module{{Name: "bad.js", Source: src}}, Workers: 1, Spares: -1,
				RequireFunctions: []string{"generateBid"}, Logger: slog.New(slog.DiscardHandler)})
			var me *ModuleError
			if !errors.As(err, &me) {
				t.Fatalf("Start = %v, want a *ModuleError", err)
			}
		})
	}
}

// hostile is a module whose generateBid misbehaves as its group's name
// says, and bids normally otherwise.
const hostile = `
function generateBid(ig) {
  switch (ig.name) {
  case "arraybuffer": new ArrayBuffer(2**35); break;
  case "join": new Array(1e8+1).join("x"); break;
  case "loop": for (;;) {} break;
  case "grow": var s = "x"; for (;;) { s = s + s; } break;
  case "throw": throw new Error("no bid for " + ig.name);
  }
  return {ig: ig.name};
}`

// TestHostileCallsFailAlone runs each hostile call beside well-behaved
// requests: every well-behaved call succeeds, the hostile one gets its own
// error, and the host keeps serving.
func TestHostileCallsFailAlone(t *testing.T) {
	h, logs := startHost(t, hostile, Options{CallTimeout: 500 * time.Millisecond, RlimitMB: 3072, HeapBudget: 256 << 20, Workers: 2})
	cases := []struct {
		name string
		want error
	}{
		{"arraybuffer", ErrWorkerDied},
		{"join", jsbridge.ErrDeadline},
		{"loop", jsbridge.ErrDeadline},
		{"grow", nil}, // the heap budget or the rlimit: either is its own error
		{"throw", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var goodMu sync.Mutex
			var good, bad int
			var firstBad string
			for i := range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						name := fmt.Sprintf("good%d", i)
						resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups(name, name+"b")})
						goodMu.Lock()
						for _, r := range resp.Results {
							if r.Err != nil || !bytes.Contains(r.Bid, []byte(name)) {
								bad++
								if firstBad == "" {
									firstBad = fmt.Sprintf("%s %v", r.Bid, r.Err)
								}
							} else {
								good++
							}
						}
						goodMu.Unlock()
					}
				})
			}
			resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups(c.name)})
			close(stop)
			wg.Wait()
			err := resp.Results[0].Err
			if err == nil {
				t.Fatalf("hostile %s bid %s", c.name, resp.Results[0].Bid)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("hostile %s: %v, want %v", c.name, err, c.want)
			}
			t.Logf("hostile %s: %v", c.name, err)
			if bad > 0 {
				t.Errorf("%d of %d well-behaved calls failed beside %s, the first: %s", bad, good+bad, c.name, firstBad)
			}
			// The host still serves after the worker was replaced.
			after := h.GenerateBids(context.Background(), Request{InterestGroups: groups("after")})
			if after.Results[0].Err != nil {
				t.Fatalf("after %s: %v", c.name, after.Results[0].Err)
			}
		})
	}
	st := h.Stats()
	t.Logf("stats %+v", st)
	if st.Restarts == 0 {
		t.Errorf("no worker was replaced: %+v\n%s", st, logs)
	}
}

// TestStoppedWorkerIsKilled: a worker that cannot answer (it never does) is
// killed at the chunk's deadline, and its calls fail with ErrDeadline.
func TestStoppedWorkerIsKilled(t *testing.T) {
	h, _ := startHost(t, bidByName, Options{Workers: 1, Spares: -1, CallTimeout: 200 * time.Millisecond,
		Command: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), hangEnv+"=1")
			return cmd
		}})
	start := time.Now()
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("a", "b")})
	took := time.Since(start)
	for i, r := range resp.Results {
		if !errors.Is(r.Err, jsbridge.ErrDeadline) || !errors.Is(r.Err, ErrWorkerKilled) {
			t.Fatalf("group %d: %v, want a deadline error of a killed worker", i, r.Err)
		}
	}
	if st := h.Stats(); st.Kills != 1 {
		t.Errorf("kills = %d, want 1", st.Kills)
	}
	t.Logf("answered after %v", took)
}

// TestKilledWorkerAnswersAtOnce: the calls of a killed worker get their
// error at the kill, not once the process is gone: the kernel keeps a
// killed process's connection open until its memory is torn down, which
// took hundreds of milliseconds for a worker holding gigabytes (here a
// child of the worker holds it for lingerFor).
func TestKilledWorkerAnswersAtOnce(t *testing.T) {
	const timeout = 200 * time.Millisecond
	h, _ := startHost(t, bidByName, Options{Workers: 1, Spares: -1, CallTimeout: timeout,
		Command: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), hangEnv+"=linger")
			return cmd
		}})
	start := time.Now()
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("a", "b")})
	took := time.Since(start)
	for i, r := range resp.Results {
		if !errors.Is(r.Err, ErrWorkerKilled) {
			t.Fatalf("group %d: %v, want a killed worker's error", i, r.Err)
		}
	}
	// The deadline holds: the last call's latest start (one slice), its
	// deadline, the interrupt's grace and the kill grace, and a second of
	// slack for a loaded machine.
	o := h.opts
	if bound := o.Slice + timeout + o.InterruptGrace + o.KillGrace + time.Second; took > bound {
		t.Errorf("a killed worker's calls were answered after %v, want at most %v (the kill's deadline, not the process's teardown)", took, bound)
	}
}

// TestOneCallChunkKilledAtItsDeadline: a chunk of one call starts it at
// once, so the host's kill does not wait a slice for a later call that
// cannot come.
func TestOneCallChunkKilledAtItsDeadline(t *testing.T) {
	const timeout, slice = 200 * time.Millisecond, 3 * time.Second
	h, _ := startHost(t, bidByName, Options{Workers: 1, Spares: -1, CallTimeout: timeout, Slice: slice,
		Command: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), hangEnv+"=1")
			return cmd
		}})
	start := time.Now()
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("a")})
	took := time.Since(start)
	if err := resp.Results[0].Err; !errors.Is(err, jsbridge.ErrDeadline) || !errors.Is(err, ErrWorkerKilled) {
		t.Fatalf("%v, want a deadline error of a killed worker", err)
	}
	o := h.opts
	if bound := timeout + o.InterruptGrace + o.KillGrace + time.Second; took > bound {
		t.Errorf("answered after %v, want at most %v: the deadline, the grace and the kill grace (the %v slice is for chunks of more calls)", took, bound, slice)
	}
}

// TestReplacedBeforeTheNextRequest: a worker that died running a call is
// replaced at once, not when the next request comes.
func TestReplacedBeforeTheNextRequest(t *testing.T) {
	h, _ := startHost(t, hostile, Options{Workers: 1, RlimitMB: 3072})
	pids := h.PIDs()
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("arraybuffer")})
	if !errors.Is(resp.Results[0].Err, ErrWorkerDied) {
		t.Fatalf("%v, want ErrWorkerDied", resp.Results[0].Err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.Stats().Restarts == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no replacement without a request: %+v (workers %v)", h.Stats(), pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := h.Stats(); st.Deaths != 1 || st.Restarts != 1 {
		t.Errorf("stats %+v, want one death and one restart", st)
	}
	after := h.GenerateBids(context.Background(), Request{InterestGroups: groups("after")})
	if after.Results[0].Err != nil {
		t.Fatal(after.Results[0].Err)
	}
}

// TestLostCallsReachOnCall: the call that got its worker killed, and the
// one whose worker died, are seen by Hooks.OnCall (the metrics count them)
// with their errors.
func TestLostCallsReachOnCall(t *testing.T) {
	var mu sync.Mutex
	var events []jsbridge.CallEvent
	hooks := jsbridge.Hooks{OnCall: func(ev jsbridge.CallEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}}
	killed, _ := startHost(t, bidByName, Options{Workers: 1, Spares: -1, CallTimeout: 100 * time.Millisecond, Hooks: hooks,
		Command: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), hangEnv+"=1")
			return cmd
		}})
	killed.GenerateBids(context.Background(), Request{InterestGroups: groups("a", "b")})
	died, _ := startHost(t, hostile, Options{Workers: 1, RlimitMB: 3072, Hooks: hooks})
	died.GenerateBids(context.Background(), Request{InterestGroups: groups("arraybuffer")})
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || !errors.Is(events[0].Err, ErrWorkerKilled) || !errors.Is(events[1].Err, ErrWorkerDied) {
		t.Fatalf("OnCall saw %+v, want the killed worker's call and the dead one's", events)
	}
}

// TestStoppedCallsMemoryReturned: a call stopped at its deadline holding
// hundreds of megabytes leaves its worker idle with them resident, unless
// the worker returns them.
func TestStoppedCallsMemoryReturned(t *testing.T) {
	const src = `
function generateBid(ig) {
  var a = [], mib = "x".repeat(1 << 20);
  for (var i = 0; i < 400; i++) a.push(mib + i);
  for (;;) {}
}`
	h, _ := startHost(t, src, Options{Workers: 1, Spares: -1, CallTimeout: 2 * time.Second, HeapBudget: 1 << 30})
	pid := h.PIDs()[0]
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("hog")})
	if !errors.Is(resp.Results[0].Err, jsbridge.ErrDeadline) {
		t.Fatalf("%v, want the deadline", resp.Results[0].Err)
	}
	if peak := statusKB(pid, "VmHWM"); peak < 400<<10 {
		t.Fatalf("the worker peaked at %d kB: the script did not allocate its 400 MiB", peak)
	}
	deadline := time.Now().Add(10 * time.Second)
	for statusKB(pid, "VmRSS") > 200<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle worker still holds %d kB after a stopped call", statusKB(pid, "VmRSS"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statusKB is a kB field of /proc/pid/status.
func statusKB(pid int, field string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// TestRequestsNeverShareRuntimes: what one request's calls leave in their
// runtime is seen by its own later calls and never by another request's.
func TestRequestsNeverShareRuntimes(t *testing.T) {
	const src = `
var seen = [];
function generateBid(ig) {
  seen.push(ig.name);
  Object.prototype.lastUser = ig.user;
  return {seen: seen, user: ig.user};
}`
	for _, isolate := range []bool{false, true} {
		t.Run(fmt.Sprintf("isolate_calls=%v", isolate), func(t *testing.T) {
			h, _ := startHost(t, src, Options{Workers: 2, RequestConcurrency: 1})
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for u := range 16 {
				wg.Go(func() {
					user := fmt.Sprintf("user%d", u)
					igs := make([][]byte, 5)
					for i := range igs {
						igs[i] = []byte(fmt.Sprintf(`{"name":"%s-%d","user":%q}`, user, i, user))
					}
					resp := h.GenerateBids(context.Background(), Request{InterestGroups: igs, IsolateCalls: isolate})
					for i, r := range resp.Results {
						if r.Err != nil {
							errs <- r.Err
							return
						}
						var got struct {
							Seen []string
							User string
						}
						if err := json.Unmarshal(r.Bid, &got); err != nil {
							errs <- err
							return
						}
						for _, s := range got.Seen {
							if !strings.HasPrefix(s, user+"-") {
								errs <- fmt.Errorf("%s's call %d saw %q of another request: %s", user, i, s, r.Bid)
								return
							}
						}
						if isolate && len(got.Seen) != 1 {
							errs <- fmt.Errorf("isolated call %d of %s saw %v", i, user, got.Seen)
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
		})
	}
}

// TestFairShares: a request of many slow groups does not hold the workers:
// a small request sent after it is answered while it still runs.
func TestFairShares(t *testing.T) {
	const src = `function generateBid(ig) { var t = Date.now() + ig.ms; while (Date.now() < t) {} return {ig: ig.name}; }`
	h, _ := startHost(t, src, Options{Workers: 2, RequestConcurrency: 2, Slice: 5 * time.Millisecond})
	big := make([][]byte, 200)
	for i := range big {
		big[i] = []byte(fmt.Sprintf(`{"name":"big%d","ms":10}`, i))
	}
	bigDone := make(chan struct{})
	go func() {
		defer close(bigDone)
		h.GenerateBids(context.Background(), Request{InterestGroups: big})
	}()
	time.Sleep(50 * time.Millisecond) // let it take both workers
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: [][]byte{[]byte(`{"name":"small","ms":1}`)}})
	if resp.Results[0].Err != nil {
		t.Fatal(resp.Results[0].Err)
	}
	select {
	case <-bigDone:
		t.Fatal("the small request waited for the whole big one (2 s of JS)")
	default:
	}
	<-bigDone
}

// TestLongRequestsLeaveWorkers: two requests whose calls run to their
// deadline do not hold every worker at the default request concurrency: a
// small request sent after them is answered while they still run.
func TestLongRequestsLeaveWorkers(t *testing.T) {
	h, _ := startHost(t, hostile, Options{Workers: 4, CallTimeout: 5 * time.Second})
	loopDone := make(chan struct{}, 2)
	for range 2 {
		go func() {
			h.GenerateBids(context.Background(), Request{InterestGroups: groups("loop", "loop", "loop", "loop")})
			loopDone <- struct{}{}
		}()
	}
	waitBusy(t, h, 2)
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("small")})
	if resp.Results[0].Err != nil {
		t.Fatal(resp.Results[0].Err)
	}
	select {
	case <-loopDone:
		t.Fatal("the small request waited for a looping one (their calls run 5 s)")
	default:
	}
	if st := h.Stats(); st.Busy != 2 {
		t.Errorf("busy workers %d, want the 2 looping ones: %+v", st.Busy, st)
	}
}

// waitBusy waits until n workers run chunks.
func waitBusy(t *testing.T, h *Host, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.Stats().Busy < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers busy, want %d: %+v", h.Stats().Busy, n, h.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDefaultWorkersOutnumberLongRequests: on any number of cores, the
// default workers and request concurrency leave workers free next to two
// requests that hold their share.
func TestDefaultWorkersOutnumberLongRequests(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3, 4, 8, 64} {
		runtime.GOMAXPROCS(procs)
		o := Options{}.withDefaults()
		if o.Workers <= 2*o.RequestConcurrency || o.Workers < 2*procs {
			t.Errorf("GOMAXPROCS %d: %d workers, %d per request: two requests leave %d", procs, o.Workers, o.RequestConcurrency, o.Workers-2*o.RequestConcurrency)
		}
	}
}

// TestPromises: an async function's value is its bid, and a promise that
// never settles fails with jsbridge.ErrUnsettled, as in process.
func TestPromises(t *testing.T) {
	const src = `
function generateBid(ig) {
  if (ig.name === "never") return new Promise(function () {});
  return (async function () { await null; return {ig: ig.name}; })();
}`
	h, _ := startHost(t, src, Options{})
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("async", "never")})
	if r := resp.Results[0]; r.Err != nil || string(r.Bid) != `{"ig":"async"}` {
		t.Errorf("async: %s %v", r.Bid, r.Err)
	}
	if r := resp.Results[1]; !errors.Is(r.Err, jsbridge.ErrUnsettled) {
		t.Errorf("never: %s %v, want ErrUnsettled", r.Bid, r.Err)
	}
}

// TestRequestBudget: a request's JS time is bounded over all its calls.
func TestRequestBudget(t *testing.T) {
	// A long KillGrace: a worker slow to answer on a loaded machine (the
	// race detector) is not killed, which would fail every call of its
	// chunk at once.
	h, _ := startHost(t, hostile, Options{Workers: 2, RequestConcurrency: 1, CallTimeout: 100 * time.Millisecond, RequestBudget: 250 * time.Millisecond,
		KillGrace: time.Second})
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("loop", "loop", "loop", "loop", "loop", "loop", "loop", "loop")})
	var deadline, budget int
	var first error
	for _, r := range resp.Results {
		if first == nil {
			first = r.Err
		}
		switch {
		case errors.Is(r.Err, ErrRequestBudget):
			budget++
		case errors.Is(r.Err, jsbridge.ErrDeadline):
			deadline++
		default:
			t.Fatalf("result %s %v", r.Bid, r.Err)
		}
	}
	// Two or three 100ms calls fit in 250ms; one, when a loaded machine
	// made the first answer late (the budget counts the host's wait).
	if deadline < 1 || deadline > 4 || budget == 0 {
		t.Fatalf("%d calls ran to their deadline and %d were cut by the budget; want 1-4 and the rest (the first: %v; %+v)", deadline, budget, first, h.Stats())
	}
}

// TestConsentedLogs: a consented request gets its console lines in order;
// without consent they go nowhere.
func TestConsentedLogs(t *testing.T) {
	const src = `function generateBid(ig) { console.log("secret of", ig.name); console.warn("warn", ig.name); return 1; }`
	h, logs := startHost(t, src, Options{Workers: 2})
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("a", "b", "c"), Consented: true})
	var lines []string
	for _, l := range resp.Logs {
		lines = append(lines, l.Level+" "+l.Text)
	}
	want := []string{"info secret of a", "warn warn a", "info secret of b", "warn warn b", "info secret of c", "warn warn c"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("logs %q, want %q", lines, want)
	}
	resp = h.GenerateBids(context.Background(), Request{InterestGroups: groups("zzz")})
	if len(resp.Logs) != 0 {
		t.Fatalf("a request without consent got logs %v", resp.Logs)
	}
	if s := logs.String(); strings.Contains(s, "secret of") {
		t.Fatalf("console output reached the server log:\n%s", s)
	}
}

// TestIdleWorkerDeathIsInvisible: a worker killed while idle is replaced
// before the next request reaches it.
func TestIdleWorkerDeathIsInvisible(t *testing.T) {
	h, _ := startHost(t, bidByName, Options{Workers: 2})
	for _, pid := range h.PIDs() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(100 * time.Millisecond) // reaped
	for i := range 20 {
		resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("a", "b", "c", "d")})
		for _, r := range resp.Results {
			if r.Err != nil {
				t.Fatalf("request %d after the kill: %v", i, r.Err)
			}
		}
	}
}

// TestCancelledRequest: a request whose ctx ends gets its calls' errors
// at once, running ones included (cancelled in the worker).
func TestCancelledRequest(t *testing.T) {
	h, _ := startHost(t, hostile, Options{Workers: 2, CallTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	resp := h.GenerateBids(ctx, Request{InterestGroups: groups("loop", "loop", "loop")})
	for _, r := range resp.Results {
		if r.Err == nil {
			t.Fatalf("a cancelled loop bid %s", r.Bid)
		}
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("a request cancelled after 200ms took %v", took)
	}
}

// TestLongCallsDoNotHoldWellBehaved: requests whose calls loop to their
// deadline hold every worker; a burst worker serves a well-behaved request
// meanwhile, which is answered before any of the loops' deadlines.
func TestLongCallsDoNotHoldWellBehaved(t *testing.T) {
	h, _ := startHost(t, hostile, Options{Workers: 2, CallTimeout: 2 * time.Second})
	hostileDone := make(chan struct{}, 2)
	for range 2 {
		go func() {
			h.GenerateBids(context.Background(), Request{InterestGroups: groups("loop", "loop", "loop")})
			hostileDone <- struct{}{}
		}()
	}
	time.Sleep(200 * time.Millisecond) // both workers are in a loop now
	for i := range 5 {
		resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups(fmt.Sprintf("good%d", i))})
		if resp.Results[0].Err != nil {
			t.Fatal(resp.Results[0].Err)
		}
	}
	select {
	case <-hostileDone:
		t.Fatal("the well-behaved requests waited for a looping call's deadline")
	default:
	}
	if st := h.Stats(); st.Bursts == 0 {
		t.Errorf("no burst worker: %+v", st)
	}
	<-hostileDone
	<-hostileDone
}

// TestVersionWasmHelper: a code version's own Wasm helper reaches its
// generateBid calls as browserSignals.wasmHelper; a version without one
// gets none.
func TestVersionWasmHelper(t *testing.T) {
	// (module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))
	add := []byte{0, 97, 115, 109, 1, 0, 0, 0, 1, 7, 1, 96, 2, 127, 127, 1, 127, 3, 2, 1, 0,
		7, 7, 1, 3, 97, 100, 100, 0, 0, 10, 9, 1, 7, 0, 32, 0, 32, 1, 106, 11}
	const src = `function generateBid(ig, a, p, t, bs) {
  if (!bs || !bs.wasmHelper) return "none";
  return new WebAssembly.Instance(bs.wasmHelper, {}).exports.add(40, 2);
}`
	h, _ := startHost(t, "", Options{Workers: 1, Modules: []Module{
		{Name: "with.js", Source: src, WasmHelper: add},
		{Name: "without.js", Source: src},
	}})
	for version, want := range map[string]string{"with.js": "42", "without.js": `"none"`} {
		resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("a"), CodeVersion: version})
		if r := resp.Results[0]; r.Err != nil || string(r.Bid) != want {
			t.Errorf("version %s: %s %v, want %s", version, r.Bid, r.Err, want)
		}
	}
}

// TestScriptErrorKeepsItsPosition: a script error from a worker is the
// same ScriptError as in-process: what was thrown, then goja's stack with
// the script, line and column.
func TestScriptErrorKeepsItsPosition(t *testing.T) {
	h, _ := startHost(t, "function generateBid(ig) {\n  return undefinedVar;\n}\n", Options{Workers: 1})
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("a")})
	var se *jsbridge.ScriptError
	if len(resp.Results) != 1 || !errors.As(resp.Results[0].Err, &se) {
		t.Fatalf("results %+v, want one ScriptError", resp.Results)
	}
	if !strings.HasPrefix(se.Message, "ReferenceError: undefinedVar is not defined\n") || !strings.Contains(se.Message, "test.js:2:10") || se.Func != "generateBid" {
		t.Errorf("ScriptError %+v, want the ReferenceError first, then test.js:2:10", se)
	}
}

// TestChunkPollOnlyWhileCPUsAreFree: a chunk is sent with poll=true while
// at most half the CPUs' worth of chunks run (this one counted), and with
// poll=false beyond, so that polling workers never take a CPU another
// chunk needs (BidsRequest.poll, Host.pollChunks).
func TestChunkPollOnlyWhileCPUsAreFree(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(4)
	h, _ := startHost(t, `function generateBid() { return {bid: 1}; }`, Options{})
	if h.pollChunks != 2 {
		t.Fatalf("GOMAXPROCS 4: pollChunks %d, want 2", h.pollChunks)
	}
	for busy, want := range map[int64]bool{1: true, 2: true, 3: false, 8: false} {
		h.busy.Store(busy)
		if got := h.chunkMayPoll(); got != want {
			t.Errorf("%d chunks running on 4 CPUs: poll %v, want %v", busy, got, want)
		}
	}
	h.busy.Store(0)
}
