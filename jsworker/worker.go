package jsworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/proto/inferencepb"
	pb "github.com/inferbid/inferbid/proto/jsworkerpb"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/fastlane"
	"github.com/inferbid/inferbid/telemetry"
)

// Environment of a worker process, set by the Host that starts it.
const (
	// WorkerEnv holds the file descriptor of the worker's connection to
	// the host; a process that has it is a worker (IsWorker).
	WorkerEnv = "INFERBID_JS_WORKER_FD"
	// RlimitEnv holds the worker's address-space limit in MiB, which it
	// applies to itself before anything else (the host also sets it with
	// prlimit(2) on the pid).
	RlimitEnv = "INFERBID_JS_WORKER_RLIMIT_MB"
)

// ExitTainted is the exit status of a worker that stopped itself because
// a runtime of its own could not be stopped (it runs on, holding a
// goroutine, CPU and memory): the host starts a replacement.
const ExitTainted = 3

// IsWorker reports whether the process was started as a JS worker.
func IsWorker(getenv func(string) string) bool { return getenv(WorkerEnv) != "" }

// ExitCode is the exit status of a worker process whose Main returned err
// (0, ExitTainted, or 1 with err written to stderr): its main, or a test
// binary's TestMain, ends with os.Exit(ExitCode(Main(...), os.Stderr)).
func ExitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrTainted):
		return ExitTainted
	}
	fmt.Fprintln(stderr, "js worker:", err)
	return 1
}

// Main is a worker process's main: it applies the address-space limit,
// opens the connection the host passed it and serves it until the host
// closes it (nil) or a runtime had to be abandoned (an error; the process
// should exit with ExitTainted, see Tainted).
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	// The host stops a worker by hanging up; a ^C or SIGTERM sent to the
	// whole process group must not end it before the host has drained.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	if mb := getenv(RlimitEnv); mb != "" {
		n, err := strconv.ParseUint(mb, 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("%s=%q: want a positive number of MiB", RlimitEnv, mb)
		}
		lim := n << 20
		if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
			return fmt.Errorf("%s=%d: setrlimit RLIMIT_AS: %w", RlimitEnv, n, err)
		}
	}
	if getenv("GOMAXPROCS") == "" {
		// A worker runs one call at a time: its goroutines (the call's,
		// the reader's, the refill's, the collector's) take turns on one
		// CPU instead of waking a second thread for each hand-off, and
		// leave the machine's other CPUs to the host, the sidecar and the
		// other workers. Measured (bench, BenchmarkTail, two CPUs): p50
		// 0.70-0.82x and p99 0.66-0.93x of GOMAXPROCS=2.
		runtime.GOMAXPROCS(1)
	}
	fd, err := strconv.Atoi(getenv(WorkerEnv))
	if err != nil || fd < 3 {
		return fmt.Errorf("%s=%q: want the file descriptor of the host connection (3 or more)", WorkerEnv, getenv(WorkerEnv))
	}
	f := os.NewFile(uintptr(fd), "jsworker-host")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("jsworker: host connection (fd %d): %w", fd, err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return Serve(ctx, conn, ServeOptions{Logger: logger})
}

// ErrTainted is returned by Serve when a runtime had to be abandoned: the
// process must exit (with ExitTainted) so that the host replaces it.
var ErrTainted = errors.New("jsworker: a JS runtime could not be stopped; the worker must be replaced")

// ServeOptions configure Serve; the zero value means defaults.
type ServeOptions struct {
	Logger *slog.Logger // nil = slog.Default()
}

// worker is the worker process's side of the connection.
type worker struct {
	peer *peer
	log  *slog.Logger
	// pools holds one pool per code version, by name; def is the one a
	// request without a code version runs.
	pools      map[string]*jsbridge.Pool
	def        string
	configured bool

	reqs chan fastlane.Frame

	// releasing is set while releaseMemory runs.
	releasing atomic.Bool
	// spin is how long the worker polls for its next chunk after answering
	// one (Config.spin_wait_micros); slow: the last chunk came later than
	// that, so it polls only one time in probeEvery; answered: when the
	// last answer was sent.
	spin time.Duration
	slow bool
	// polling turns the sidecar client's polling on or off for a chunk
	// (BidsRequest.poll); nil without inference.
	polling  func(on bool)
	chunks   uint32
	answered time.Time

	// tracer, from Config.otel_exporter_endpoint, traces generateBid
	// calls; nil = off. provider exports its spans.
	tracer   trace.Tracer
	provider *telemetry.Provider

	// mu guards the running chunk's cancel and collected events.
	mu        sync.Mutex
	runningID uint64
	cancel    context.CancelFunc
	events    *chunkEvents
}

// chunkEvents are what the pool's hooks saw during one chunk.
type chunkEvents struct {
	inferences []*pb.InferenceEvent
	pathsCalls int32
	pathsFails int32
}

// Serve serves the host's requests on conn: a Config first, then
// BidsRequests, one at a time. It returns nil when the host closes the
// connection, and ErrTainted after answering a chunk whose runtime had to
// be abandoned.
func Serve(ctx context.Context, conn net.Conn, opts ServeOptions) error {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w := &worker{peer: newPeer(conn, 2), log: opts.Logger, reqs: make(chan fastlane.Frame, 4)}
	w.peer.onRequest = func(f fastlane.Frame) {
		select {
		case w.reqs <- f:
		default:
			// The host sends one chunk at a time; more is a protocol error.
			w.peer.answer(f.ID, nil, inferr.Errorf(inferr.GRPC, "jsworker: worker busy: request %d refused", f.ID))
		}
	}
	w.peer.onCancel = w.cancelChunk
	go w.peer.readLoop()
	defer w.peer.close()
	defer func() {
		for _, p := range w.pools {
			p.Close()
		}
		// The spans still buffered are exported before the worker exits.
		if err := w.provider.Shutdown(context.Background()); err != nil {
			w.log.Warn("jsworker: exporting the last spans failed", "err", err)
		}
	}()
	for {
		select {
		case <-w.peer.done:
			return nil
		case <-ctx.Done():
			return nil
		case f := <-w.reqs:
			if !w.configured {
				w.configure(f)
				continue
			}
			tainted, stopped := w.runChunk(ctx, f)
			if tainted {
				return ErrTainted
			}
			if stopped {
				w.releaseMemory()
			}
		}
	}
}

// configure builds the pool from the host's Config and answers whether the
// module loaded.
func (w *worker) configure(f fastlane.Frame) {
	var cfg pb.Config
	if err := proto.Unmarshal(f.Payload, &cfg); err != nil {
		w.peer.answer(f.ID, nil, inferr.Errorf(inferr.InputParsing, "jsworker: config: %v", err))
		return
	}
	w.spin = time.Duration(cfg.GetSpinWaitMicros()) * time.Microsecond
	if b := cfg.GetHeapBudgetBytes(); b > 0 {
		// As the in-process server does: collect rarely while the heap is
		// small, and hard before the budget is reached; GOGC and
		// GOMEMLIMIT in the worker's environment win.
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(400)
		}
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(b + b/4 + 64<<20)
		}
	}
	opts := jsbridge.Options{
		Size:             1,
		CallTimeout:      time.Duration(cfg.GetCallTimeoutMicros()) * time.Microsecond,
		InterruptGrace:   time.Duration(cfg.GetInterruptGraceMicros()) * time.Microsecond,
		HeapBudget:       cfg.GetHeapBudgetBytes(),
		MaxCallStackSize: int(cfg.GetMaxCallStackSize()),
		MaxArgumentBytes: int(cfg.GetMaxArgumentBytes()),
		RequireFunctions: cfg.GetRequireFunctions(),
		LogConsole:       cfg.GetLogConsole(),
		ShareRuntimes:    cfg.GetShareRuntimes(),
		WasmHelper:       cfg.GetWasmHelper(),
		Logger:           w.log,
		Hooks:            w.hooks(),
	}
	if ep := cfg.GetOtelExporterEndpoint(); ep != "" {
		p, err := telemetry.New(context.Background(), telemetry.Options{Endpoint: ep, Protocol: cfg.GetOtelExporterProtocol(), ServiceName: "js-worker", Logger: w.log})
		if err != nil {
			w.peer.answer(f.ID, nil, fmt.Errorf("jsworker: tracing: %w", err))
			return
		}
		w.provider, w.tracer = p, p.Tracer()
	}
	if sock := cfg.GetSidecarSocket(); sock != "" {
		transport, err := sidecar.ParseTransport(cfg.GetSidecarTransport())
		if err == nil {
			var client *sidecar.Client
			client, err = sidecar.NewClient(sock, sidecar.ClientOptions{
				Logger:           w.log,
				Transport:        transport,
				FastLaneConns:    2,
				FastLaneSpinWait: time.Duration(cfg.GetSidecarSpinWaitMicros()) * time.Microsecond,
				Fallback:         w.predictViaHost,
				Tracer:           w.tracer,
			})
			if err == nil {
				opts.Inference = &workerInference{client: client, w: w}
				w.polling = client.SetPolling
			}
		}
		if err != nil {
			w.peer.answer(f.ID, nil, fmt.Errorf("jsworker: sidecar client: %w", err))
			return
		}
	}
	mods := cfg.GetModules()
	if len(mods) == 0 {
		w.peer.answer(f.ID, nil, inferr.Errorf(inferr.InputParsing, "jsworker: config: no module"))
		return
	}
	ack := &pb.ConfigAck{Pid: int32(os.Getpid())}
	w.pools = make(map[string]*jsbridge.Pool, len(mods))
	// Every version is loaded now, not on its first request: a version
	// that does not load is reported here, before it may serve, and no
	// request pays for a compile.
	for _, m := range mods {
		opts := opts
		if h := m.GetWasmHelper(); len(h) > 0 {
			opts.WasmHelper = h
		}
		pool, err := jsbridge.New(m.GetName(), m.GetSource(), opts)
		if err != nil {
			if ack.ModuleErrors == nil {
				ack.ModuleErrors = map[string]string{}
			}
			ack.ModuleErrors[m.GetName()] = err.Error()
			if ack.Error == "" {
				ack.Error = err.Error()
			}
			continue
		}
		w.pools[m.GetName()] = pool
	}
	w.def = cfg.GetDefaultModule()
	if w.def == "" {
		w.def = mods[0].GetName()
	}
	w.configured = true
	w.peer.answer(f.ID, ack, nil)
}

func (w *worker) hooks() jsbridge.Hooks {
	return jsbridge.Hooks{
		OnInference: func(ev *jsbridge.InferenceEvent) {
			e := &pb.InferenceEvent{
				DurationMicros: ev.Duration.Microseconds(),
				RequestBytes:   int64(ev.RequestBytes),
				ObjectArg:      ev.ObjectArg,
				ResponseBytes:  int64(ev.ResponseBytes),
				Failed:         ev.Err != nil,
				ErrorType:      inferencepb.ErrorType(inferr.TypeOf(ev.Err)),
			}
			for _, en := range ev.Entries {
				e.Entries = append(e.Entries, &pb.EntryEvent{ModelPath: en.ModelPath, BatchSize: en.BatchSize,
					Failed: en.Err != nil, ErrorType: inferencepb.ErrorType(inferr.TypeOf(en.Err))})
			}
			w.mu.Lock()
			if w.events != nil {
				w.events.inferences = append(w.events.inferences, e)
			}
			w.mu.Unlock()
		},
		OnModelPaths: func(err error) {
			w.mu.Lock()
			if w.events != nil {
				w.events.pathsCalls++
				if err != nil {
					w.events.pathsFails++
				}
			}
			w.mu.Unlock()
		},
	}
}

// cancelChunk cancels the running chunk when it is the one with id.
func (w *worker) cancelChunk(id uint64) {
	w.mu.Lock()
	if w.cancel != nil && w.runningID == id {
		w.cancel()
	}
	w.mu.Unlock()
}

// runChunk runs one BidsRequest and answers it; it reports whether a
// runtime was abandoned (the worker must go), and whether a call was
// stopped (at its deadline, for the heap budget: its runtime was dropped
// with whatever it had allocated).
func (w *worker) runChunk(parent context.Context, f fastlane.Frame) (tainted, stopped bool) {
	if !w.answered.IsZero() {
		w.slow = time.Since(w.answered) >= w.spin
	}
	w.chunks++
	var req pb.BidsRequest
	if err := proto.Unmarshal(f.Payload, &req); err != nil {
		w.peer.answer(f.ID, nil, inferr.Errorf(inferr.InputParsing, "jsworker: bids request: %v", err))
		return false, false
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	if f.TimeoutMicros > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, time.Duration(f.TimeoutMicros)*time.Microsecond)
		defer c2()
	}
	ev := &chunkEvents{}
	w.mu.Lock()
	w.runningID, w.cancel, w.events = f.ID, cancel, ev
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.runningID, w.cancel, w.events = 0, nil, nil
		w.mu.Unlock()
	}()

	if w.polling != nil {
		w.polling(req.GetPoll())
	}
	var logs func() []LogLine
	if req.GetConsented() {
		ctx, logs = CollectLogs(ctx)
	}
	signals := make([][]byte, len(req.GetSignals()))
	for i, s := range req.GetSignals() {
		if len(s) > 0 {
			signals[i] = s
		}
	}
	calls := make([][][]byte, len(req.GetInterestGroups()))
	for i, ig := range req.GetInterestGroups() {
		calls[i] = append([][]byte{ig}, signals...)
	}
	fn := req.GetFunction()
	if fn == "" {
		fn = "generateBid"
	}
	version := req.GetCodeVersion()
	if version == "" {
		version = w.def
	}
	pool := w.pools[version]
	if pool == nil {
		// The host sends a chunk only to a worker that loaded its version.
		resp := &pb.BidsResponse{Results: make([]*pb.CallResult, len(calls))}
		for i := range resp.Results {
			resp.Results[i] = &pb.CallResult{ErrorKind: pb.ErrorKind_ERROR_KIND_OTHER, Error: fmt.Sprintf("jsworker: code version %q is not loaded in this worker", version)}
		}
		w.peer.answer(f.ID, resp, nil)
		return false, false
	}
	gopts := jsbridge.GroupOptions{
		Slice:        time.Duration(req.GetSliceMicros()) * time.Microsecond,
		IsolateCalls: req.GetIsolateCalls(),
	}
	if w.tracer != nil {
		gopts.Trace = TraceCalls(w.tracer, telemetry.WithTraceparent(ctx, req.GetTraceparent()), fn, version, 0)
	}
	results := pool.CallJSONGroup(ctx, fn, calls, gopts)
	resp := &pb.BidsResponse{Results: make([]*pb.CallResult, len(results))}
	for i, r := range results {
		cr := &pb.CallResult{Bid: r.Out, DurationMicros: r.Duration.Microseconds()}
		if r.Err != nil {
			cr.Bid = nil
			cr.ErrorKind, cr.Error = errorKind(r.Err), r.Err.Error()
			if se, ok := errors.AsType[*jsbridge.ScriptError](r.Err); ok {
				cr.Error = se.Message // the host makes it a ScriptError again
			}
			if errors.Is(r.Err, jsbridge.ErrAbandoned) {
				tainted = true
			}
			if errors.Is(r.Err, jsbridge.ErrDeadline) || errors.Is(r.Err, jsbridge.ErrHeapBudget) {
				stopped = true
			}
		}
		resp.Results[i] = cr
	}
	w.mu.Lock()
	resp.Inferences, resp.ModelPathsCalls, resp.ModelPathsFailures = ev.inferences, ev.pathsCalls, ev.pathsFails
	w.mu.Unlock()
	if logs != nil {
		for _, l := range logs() {
			resp.Logs = append(resp.Logs, &pb.LogLine{Source: l.Source, Level: l.Level, Text: l.Text})
		}
	}
	if w.spin > 0 && req.GetPoll() && !tainted && (!w.slow || w.chunks%probeEvery == 0) {
		// Poll for the next chunk while the host is quick to send it
		// (back to back). Before the answer: a next chunk that came before
		// the expectation was set would leave the read loop polling
		// through it.
		w.peer.expect(w.spin)
	}
	w.peer.answer(f.ID, resp, nil)
	w.answered = time.Now()
	if tainted {
		w.log.Warn("jsworker: a runtime could not be stopped at its deadline; this worker exits to be replaced")
	}
	return tainted, stopped
}

// releaseAbove is the heap (in use or kept by the Go runtime, not returned
// to the OS) past which a worker returns its free memory after a stopped
// call. A worker idles at about 40 MB; a call stopped at its deadline may
// leave up to the heap budget of garbage (a push bomb: 600 MB to 1 GB),
// which the Go runtime would keep resident until later calls allocate
// enough to collect it, and return to the OS slowly after.
const releaseAbove = 128 << 20

// releaseMemory collects and returns free memory to the OS, in the
// background (the next chunk does not wait), when the heap is over
// releaseAbove; at most one runs at a time.
func (w *worker) releaseMemory() {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(sample)
	if sample[1].Value.Kind() != metrics.KindUint64 || sample[0].Value.Kind() != metrics.KindUint64 ||
		sample[1].Value.Uint64()-sample[0].Value.Uint64() < releaseAbove {
		return
	}
	if !w.releasing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer w.releasing.Store(false)
		debug.FreeOSMemory()
	}()
}

// probeEvery: a worker whose chunks come slower than its spin wait still
// polls after one answer in this many, to see whether they come quicker.
const probeEvery = 16

// errorKind classifies a call's error for the host.
func errorKind(err error) pb.ErrorKind {
	var se *jsbridge.ScriptError
	switch {
	case errors.Is(err, jsbridge.ErrNotRun):
		return pb.ErrorKind_ERROR_KIND_NOT_RUN
	case errors.Is(err, jsbridge.ErrCutOff):
		return pb.ErrorKind_ERROR_KIND_CUT_OFF
	case errors.Is(err, jsbridge.ErrAbandoned):
		return pb.ErrorKind_ERROR_KIND_ABANDONED
	case errors.Is(err, jsbridge.ErrHeapBudget):
		return pb.ErrorKind_ERROR_KIND_HEAP_BUDGET
	case errors.Is(err, jsbridge.ErrDeadline):
		return pb.ErrorKind_ERROR_KIND_DEADLINE
	case errors.As(err, &se):
		return pb.ErrorKind_ERROR_KIND_SCRIPT
	case errors.Is(err, jsbridge.ErrNotFunction):
		return pb.ErrorKind_ERROR_KIND_NOT_FUNCTION
	case errors.Is(err, jsbridge.ErrUnsettled):
		return pb.ErrorKind_ERROR_KIND_UNSETTLED
	}
	return pb.ErrorKind_ERROR_KIND_OTHER
}

// predictViaHost is the worker's sidecar Fallback: the host's client waits
// out a sidecar restart's replay.
func (w *worker) predictViaHost(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
	var ans pb.HostAnswer
	if err := w.peer.call(ctx, &pb.HostCall{Call: &pb.HostCall_Predict{Predict: req}}, &ans); err != nil {
		return nil, hostCallError(err)
	}
	return ans.GetPredict(), nil
}

// hostCallError types an error of a call to the host (a typed error frame
// is returned as it is).
func hostCallError(err error) error {
	return inferr.Wrap(inferr.GRPC, err, "jsworker: call to the host")
}

// workerInference is a worker's jsbridge.Inference: Predict straight to the
// sidecar over the worker's own fast lane (the host only as Fallback),
// model paths from the host, which knows the replay set after a restart.
type workerInference struct {
	client *sidecar.Client
	w      *worker
}

func (i *workerInference) Predict(ctx context.Context, entries []batch.Entry) ([]batch.Result, error) {
	return i.client.Predict(ctx, entries)
}

func (i *workerInference) ModelPaths(ctx context.Context) ([]string, error) {
	var ans pb.HostAnswer
	if err := i.w.peer.call(ctx, &pb.HostCall{Call: &pb.HostCall_ModelPaths{ModelPaths: true}}, &ans); err != nil {
		return nil, hostCallError(err)
	}
	return ans.GetModelPaths().GetPaths(), nil
}

func (i *workerInference) Wake() { i.client.Wake() }
