package jsworker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/proto/inferencepb"
	pb "github.com/inferbid/inferbid/proto/jsworkerpb"
	"github.com/inferbid/inferbid/sidecar/fastlane"
)

// Defaults for Options.
const (
	DefaultSlice      = 10 * time.Millisecond
	DefaultStartLimit = 30 * time.Second
	DefaultSpinWait   = 200 * time.Microsecond
)

// Inference is what the host answers for its workers: the replay-aware
// Predict after a sidecar restart and the model paths (*sidecar.Client).
type Inference interface {
	PredictProto(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error)
	ModelPaths(ctx context.Context) ([]string, error)
}

// Module is the bidding module the workers run.
type Module struct {
	Name   string
	Source string
}

// Options configure a Host. The zero value of every field means its
// default.
type Options struct {
	Module Module
	// Workers is the number of worker processes that run JS; 0 =
	// GOMAXPROCS.
	Workers int
	// Spares is the number of warm spare workers, started and loaded, that
	// take a failed worker's place at once; 0 = 1, < 0 = none.
	Spares int
	// Command returns the command that starts a worker: a process that
	// calls Main. The Host adds the connection (fd 3) and its environment.
	// nil = this executable.
	Command func() *exec.Cmd
	// RlimitMB caps each worker's address space (RLIMIT_AS) in MiB; 0 =
	// none.
	RlimitMB int
	// StartLimit bounds a worker's start (the module's load included); 0 =
	// DefaultStartLimit.
	StartLimit time.Duration

	// The JS settings of every worker's pool (jsbridge.Options).
	CallTimeout      time.Duration
	InterruptGrace   time.Duration
	HeapBudget       int64
	MaxCallStackSize int
	MaxArgumentBytes int
	RequireFunctions []string
	// LogConsole is UNSAFE: console lines of requests without consent go to
	// the log (local development only).
	LogConsole bool
	// ShareRuntimes is UNSAFE: runtimes serve call after call, across
	// requests (see jsbridge.Options).
	ShareRuntimes bool

	// SidecarSocket is the inference sidecar's socket, which every worker
	// dials itself; "" = inference off.
	SidecarSocket    string
	SidecarTransport string
	SidecarSpinWait  time.Duration
	// SpinWait is how long a worker polls its connection for its next
	// chunk after answering one, before it parks (fastlane.ExpectReader),
	// while chunks come back to back (after a longer wait it polls one
	// time in 16): a wake-up of a parked reader costs about 10 µs on a
	// virtual CPU and more under load. 0 = DefaultSpinWait, < 0 = never.
	SpinWait time.Duration
	// HostSpinWait, when > 0, is how long the host polls a worker's
	// connection for a chunk's answer (only while no other chunk runs).
	// 0 (the default) = never: the host would poll for as long as the
	// chunk runs, taking a CPU from the worker and the sidecar
	// (docs/architecture.md, "The JS path's tail").
	HostSpinWait time.Duration
	// Inference answers the workers' calls to the host; required with a
	// SidecarSocket.
	Inference Inference

	// RequestConcurrency bounds the chunks of one request that run at once
	// (each in its own worker); 0 = half the workers, at least 1.
	RequestConcurrency int
	// Slice is how long a worker keeps starting calls of one chunk before
	// it hands the rest back, so that the calls of concurrent requests
	// take turns; 0 = DefaultSlice.
	Slice time.Duration
	// RequestBudget bounds the JS time of one request, summed over its
	// workers; its calls not started by then fail with ErrRequestBudget. 0
	// = twice CallTimeout, < 0 = none.
	RequestBudget time.Duration
	// KillGrace is how long past a chunk's last possible deadline the host
	// waits for its answer before it kills the worker; 0 = a twentieth of
	// CallTimeout, at least 20ms.
	KillGrace time.Duration

	Logger *slog.Logger
	// Hooks observe the workers' calls (OnCall, OnInference, OnModelPaths),
	// replayed on the host from each chunk's answer.
	Hooks jsbridge.Hooks
	// OnRestart is called each time a worker is replaced.
	OnRestart func()
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Spares == 0 {
		o.Spares = 1
	}
	if o.StartLimit <= 0 {
		o.StartLimit = DefaultStartLimit
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = jsbridge.DefaultCallTimeout
	}
	if o.InterruptGrace <= 0 {
		o.InterruptGrace = jsbridge.DefaultInterruptGrace
	}
	if o.RequestConcurrency <= 0 {
		o.RequestConcurrency = max(1, o.Workers/2)
	}
	if o.Slice <= 0 {
		o.Slice = DefaultSlice
	}
	if o.RequestBudget == 0 {
		o.RequestBudget = 2 * o.CallTimeout
	}
	if o.KillGrace <= 0 {
		o.KillGrace = max(o.CallTimeout/20, 20*time.Millisecond)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SpinWait == 0 {
		o.SpinWait = DefaultSpinWait
	}
	if o.Module.Name == "" {
		o.Module.Name = "module.js"
	}
	return o
}

// Errors of a call that the host, not the script, gave.
var (
	// ErrWorkerDied: the worker running the call died (out of memory, its
	// address-space limit, a crash); it was replaced.
	ErrWorkerDied = errors.New("jsworker: the JS worker running the call died")
	// ErrWorkerKilled: the call's worker did not answer by its deadline
	// and was killed and replaced (with jsbridge.ErrDeadline).
	ErrWorkerKilled = errors.New("jsworker: the JS worker was killed at the deadline")
	// ErrRequestBudget: the request used its JS time budget; its calls not
	// started by then are not run.
	ErrRequestBudget = errors.New("jsworker: the request used its JS time budget")
	// ErrClosed: the host is closed.
	ErrClosed = errors.New("jsworker: host is closed")
)

// Request is one generateBids request: its interest groups run in workers
// of their own, never in a runtime another request used.
type Request struct {
	// Function is the global function called once per interest group; "" =
	// generateBid.
	Function string
	// InterestGroups are the groups' JSON, each the function's first
	// argument.
	InterestGroups [][]byte
	// Signals are the further arguments as JSON; nil = undefined.
	Signals [][]byte
	// IsolateCalls gives each call a fresh runtime of its own (by default
	// the calls of one request may share one).
	IsolateCalls bool
	// Consented collects the request's console lines and inference debug
	// lines into Response.Logs.
	Consented bool
}

// Result is one interest group's outcome: the function's value as JSON, or
// the error.
type Result struct {
	Bid []byte
	Err error
}

// LogLine is a console line (Source "console") or an inference debug line
// (Source "inference") of a consented request.
type LogLine struct {
	Source string
	Level  string
	Text   string
}

// Response is the outcome of a Request.
type Response struct {
	Results []Result
	Logs    []LogLine
}

// Host runs JS in supervised worker processes.
type Host struct {
	opts  Options
	log   *slog.Logger
	sched *scheduler

	spares chan *proc
	closed chan struct{}
	wg     sync.WaitGroup

	procsMu sync.Mutex
	procs   map[*proc]struct{}

	restarts atomic.Uint64
	kills    atomic.Uint64
	deaths   atomic.Uint64
	busy     atomic.Int64
	closeMu  sync.Once
}

// Start starts the workers and their spares, each loading the module. An
// error of the module (syntax, a top-level exception, a missing
// RequireFunctions entry) fails Start.
func Start(ctx context.Context, opts Options) (*Host, error) {
	opts = opts.withDefaults()
	if opts.SidecarSocket != "" && opts.Inference == nil {
		return nil, errors.New("jsworker: a SidecarSocket needs an Inference to answer the workers")
	}
	h := &Host{
		opts:   opts,
		log:    opts.Logger,
		sched:  newScheduler(opts.RequestConcurrency, opts.RequestBudget),
		spares: make(chan *proc),
		closed: make(chan struct{}),
		procs:  map[*proc]struct{}{},
	}
	// The first worker alone: a module that does not load fails here, once.
	first, err := h.startProc(ctx)
	if err != nil {
		return nil, err
	}
	workers := []*proc{first}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range opts.Workers - 1 {
		wg.Go(func() {
			p, perr := h.startProc(ctx)
			mu.Lock()
			defer mu.Unlock()
			if perr != nil {
				err = errors.Join(err, perr)
				return
			}
			workers = append(workers, p)
		})
	}
	wg.Wait()
	if err != nil {
		h.Close()
		return nil, err
	}
	for _, p := range workers {
		h.wg.Go(func() { h.slot(p) })
	}
	for range max(opts.Spares, 0) {
		h.wg.Go(h.fillSpares)
	}
	return h, nil
}

// Workers is the number of worker processes that run JS.
func (h *Host) Workers() int { return h.opts.Workers }

// Stats are the host's counters, for metrics.
type Stats struct {
	// Restarts counts workers replaced (killed or died).
	Restarts uint64
	// Kills counts workers killed because a call did not stop.
	Kills uint64
	// Deaths counts workers that died by themselves (out of memory, their
	// address-space limit, a crash, an abandoned runtime).
	Deaths uint64
	// Busy is the number of workers running a chunk now.
	Busy int
	// Queued is the number of requests waiting for a worker.
	Queued int
}

// Stats returns the host's counters.
func (h *Host) Stats() Stats {
	return Stats{Restarts: h.restarts.Load(), Kills: h.kills.Load(), Deaths: h.deaths.Load(),
		Busy: int(h.busy.Load()), Queued: h.sched.queued()}
}

// PIDs are the worker processes' ids (spares included).
func (h *Host) PIDs() []int {
	h.procsMu.Lock()
	defer h.procsMu.Unlock()
	pids := make([]int, 0, len(h.procs))
	for p := range h.procs {
		pids = append(pids, p.pid)
	}
	return pids
}

// Close stops the workers; requests in flight fail with ErrClosed.
func (h *Host) Close() error {
	h.closeMu.Do(func() {
		close(h.closed)
		h.sched.close()
		h.procsMu.Lock()
		procs := make([]*proc, 0, len(h.procs))
		for p := range h.procs {
			procs = append(procs, p)
		}
		h.procsMu.Unlock()
		for _, p := range procs {
			p.stop()
		}
	})
	h.wg.Wait()
	return nil
}

// GenerateBids runs req's interest groups and returns one result each, in
// order. ctx bounds the request: groups not started when it ends fail with
// its error, running ones are cancelled.
func (h *Host) GenerateBids(ctx context.Context, req Request) Response {
	r := newRequest(ctx, req, h.opts)
	select {
	case <-h.closed:
		r.stopAll(ErrClosed)
		return r.response()
	default:
	}
	stop := context.AfterFunc(ctx, func() { h.sched.stop(r, fmt.Errorf("not run: %w", context.Cause(ctx))) })
	defer stop()
	h.sched.add(r)
	<-r.done
	return r.response()
}

// slot runs chunks on one worker, replacing it when it dies or is killed.
func (h *Host) slot(p *proc) {
	defer func() { p.stop() }()
	for {
		c, ok := h.sched.next()
		if !ok {
			return
		}
		if !p.alive() {
			if p = h.replace(p); p == nil {
				h.sched.finish(c, nil, c.lo, 0, ErrClosed)
				return
			}
		}
		h.busy.Add(1)
		h.runChunk(p, c)
		h.busy.Add(-1)
	}
}

// replace returns a live worker in place of p (a spare, or a new one when
// there are no spares), or nil once the host is closed.
func (h *Host) replace(p *proc) *proc {
	p.stop()
	h.restarts.Add(1)
	if h.opts.OnRestart != nil {
		h.opts.OnRestart()
	}
	backoff := 100 * time.Millisecond
	for {
		if h.opts.Spares > 0 {
			select {
			case s := <-h.spares:
				if s.alive() {
					return s
				}
				s.stop()
				continue
			case <-h.closed:
				return nil
			}
		}
		s, err := h.startProc(context.Background())
		if err == nil {
			return s
		}
		h.log.Error("jsworker: cannot start a worker; retrying", "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-h.closed:
			return nil
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// fillSpares keeps one warm spare ready: started, module loaded.
func (h *Host) fillSpares() {
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-h.closed:
			return
		default:
		}
		s, err := h.startProc(context.Background())
		if err != nil {
			h.log.Error("jsworker: cannot start a spare worker; retrying", "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-h.closed:
				return
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		select {
		case h.spares <- s:
		case <-s.exited:
			s.stop() // a spare that died idle is replaced
		case <-h.closed:
			s.stop()
			return
		}
	}
}

// runChunk runs one chunk on p and hands its results to the scheduler.
func (h *Host) runChunk(p *proc, c *chunk) {
	r := c.r
	if err := h.sched.stopped(r); err != nil {
		h.sched.finish(c, nil, c.lo, 0, err)
		return
	}
	req := &pb.BidsRequest{
		InterestGroups: r.req.InterestGroups[c.lo:c.hi],
		Signals:        r.req.Signals,
		SliceMicros:    h.opts.Slice.Microseconds(),
		IsolateCalls:   r.req.IsolateCalls,
		Consented:      r.req.Consented,
		Function:       r.req.Function,
	}
	var timeout time.Duration
	if d, ok := r.ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Microsecond)
	}
	start := time.Now()
	var spin time.Duration
	if h.opts.HostSpinWait > 0 && h.busy.Load() <= 1 {
		// No other chunk runs: poll for the answer (with others running,
		// the CPU is theirs).
		spin = h.opts.HostSpinWait
	}
	id, ans, err := p.peer.startExpect(req, timeout, spin)
	if err != nil {
		// Never sent: run it on the next worker.
		h.sched.finish(c, nil, c.lo, 0, nil)
		return
	}
	// The worker starts calls for one slice, and each ends within its
	// deadline and the interrupt's grace, or the worker stops itself: an
	// answer later than that means a worker that cannot run Go (thrashing
	// at its memory limit, stopped).
	backstop := time.NewTimer(h.opts.Slice + h.opts.CallTimeout + h.opts.InterruptGrace + h.opts.KillGrace)
	defer backstop.Stop()
	ctxDone := r.ctx.Done()
	var f fastlane.Frame
	var ok, killed bool
wait:
	for {
		select {
		case f, ok = <-ans:
			break wait
		case <-ctxDone:
			ctxDone = nil
			_ = p.peer.write(fastlane.KindCancel, id, 0, nil)
		case <-backstop.C:
			killed = true
			h.kills.Add(1)
			p.kill()
			f, ok = <-ans
			break wait
		}
	}
	used := time.Since(start)
	if !ok {
		cause := p.exitReason(200 * time.Millisecond)
		var err error
		if killed {
			err = &callError{msg: fmt.Sprintf("jsworker: %s: the call did not stop within %v of its deadline of %v; its JS worker was killed and replaced",
				r.fn(), h.opts.InterruptGrace+h.opts.KillGrace, h.opts.CallTimeout), is: []error{jsbridge.ErrDeadline, ErrWorkerKilled}}
		} else {
			h.deaths.Add(1)
			err = &callError{msg: fmt.Sprintf("jsworker: %s: the JS worker running the call died (%s) and was replaced", r.fn(), cause), is: []error{ErrWorkerDied}}
			h.log.Warn("jsworker: a worker died while running a call", "pid", p.pid, "cause", cause)
		}
		h.sched.finish(c, nil, c.hi, used, err)
		h.sched.stop(r, &callError{msg: "not run: an earlier generateBid call of this request killed its JS worker", is: []error{jsbridge.ErrCutOff}})
		return
	}
	var resp pb.BidsResponse
	if err := p.peer.decode(f, true, &resp); err != nil {
		h.sched.finish(c, nil, c.hi, used, fmt.Errorf("jsworker: %s: %w", r.fn(), err))
		return
	}
	if len(resp.GetResults()) != c.hi-c.lo {
		h.sched.finish(c, nil, c.hi, used, fmt.Errorf("jsworker: worker answered %d results for %d interest groups", len(resp.GetResults()), c.hi-c.lo))
		return
	}
	results := make([]Result, 0, c.hi-c.lo)
	notRun := c.hi
	var stopErr error
	for i, cr := range resp.GetResults() {
		if cr.GetErrorKind() == pb.ErrorKind_ERROR_KIND_NOT_RUN {
			notRun = c.lo + i
			break
		}
		res := Result{Bid: cr.GetBid()}
		if k := cr.GetErrorKind(); k != pb.ErrorKind_ERROR_KIND_NONE {
			res.Bid, res.Err = nil, resultError(r.fn(), k, cr.GetError())
			switch k {
			case pb.ErrorKind_ERROR_KIND_ABANDONED:
				// The worker exits once it has answered: send it nothing
				// more.
				p.retiring.Store(true)
				stopErr = &callError{msg: "not run: an earlier generateBid call of this request could not be stopped at its deadline", is: []error{jsbridge.ErrCutOff}}
			case pb.ErrorKind_ERROR_KIND_HEAP_BUDGET:
				stopErr = &callError{msg: "not run: an earlier generateBid call of this request exceeded the JS heap budget", is: []error{jsbridge.ErrCutOff}}
			}
		}
		if k := cr.GetErrorKind(); k != pb.ErrorKind_ERROR_KIND_CUT_OFF {
			if hook := h.opts.Hooks.OnCall; hook != nil {
				hook(jsbridge.CallEvent{Func: r.fn(), Duration: time.Duration(cr.GetDurationMicros()) * time.Microsecond, Err: res.Err})
			}
		}
		results = append(results, res)
	}
	h.replayHooks(&resp)
	h.sched.finishWithLogs(c, results, notRun, used, nil, resp.GetLogs())
	if stopErr != nil {
		h.sched.stop(r, stopErr)
	}
}

// replayHooks calls the inference hooks for what the worker reported.
func (h *Host) replayHooks(resp *pb.BidsResponse) {
	if hook := h.opts.Hooks.OnInference; hook != nil {
		for _, e := range resp.GetInferences() {
			ev := &jsbridge.InferenceEvent{
				Duration:      time.Duration(e.GetDurationMicros()) * time.Microsecond,
				RequestBytes:  int(e.GetRequestBytes()),
				ObjectArg:     e.GetObjectArg(),
				ResponseBytes: int(e.GetResponseBytes()),
			}
			if e.GetFailed() {
				ev.Err = inferr.Errorf(inferr.Type(e.GetErrorType()), "runInference failed")
			}
			for _, en := range e.GetEntries() {
				ee := jsbridge.EntryEvent{ModelPath: en.GetModelPath(), BatchSize: en.GetBatchSize()}
				if en.GetFailed() {
					ee.Err = inferr.Errorf(inferr.Type(en.GetErrorType()), "entry failed")
				}
				ev.Entries = append(ev.Entries, ee)
			}
			hook(ev)
		}
	}
	if hook := h.opts.Hooks.OnModelPaths; hook != nil {
		for i := range resp.GetModelPathsCalls() {
			var err error
			if i < resp.GetModelPathsFailures() {
				err = errors.New("getModelPaths failed")
			}
			hook(err)
		}
	}
}

// callError is an error a worker reported, or the host gave a call: its
// message, and the package errors it stands for (errors.Is).
type callError struct {
	msg string
	is  []error
}

func (e *callError) Error() string   { return e.msg }
func (e *callError) Unwrap() []error { return e.is }

// resultError rebuilds a worker's error for a call of fn.
func resultError(fn string, k pb.ErrorKind, msg string) error {
	switch k {
	case pb.ErrorKind_ERROR_KIND_SCRIPT:
		return &jsbridge.ScriptError{Func: fn, Message: msg}
	case pb.ErrorKind_ERROR_KIND_DEADLINE:
		return &callError{msg: msg, is: []error{jsbridge.ErrDeadline}}
	case pb.ErrorKind_ERROR_KIND_ABANDONED:
		return &callError{msg: msg, is: []error{jsbridge.ErrDeadline, jsbridge.ErrAbandoned}}
	case pb.ErrorKind_ERROR_KIND_HEAP_BUDGET:
		return &callError{msg: msg, is: []error{jsbridge.ErrHeapBudget}}
	case pb.ErrorKind_ERROR_KIND_CUT_OFF:
		return &callError{msg: msg, is: []error{jsbridge.ErrCutOff}}
	case pb.ErrorKind_ERROR_KIND_NOT_FUNCTION:
		return &callError{msg: msg, is: []error{jsbridge.ErrNotFunction}}
	}
	return &callError{msg: msg}
}

// onHostCall answers a worker's call to the host, on a goroutine of its
// own (it may wait for a replay).
func (h *Host) onHostCall(p *proc, f fastlane.Frame) {
	go func() {
		var call pb.HostCall
		if err := proto.Unmarshal(f.Payload, &call); err != nil {
			p.peer.answer(f.ID, nil, inferr.Errorf(inferr.InputParsing, "jsworker: host call: %v", err))
			return
		}
		if h.opts.Inference == nil {
			p.peer.answer(f.ID, nil, inferr.Errorf(inferr.GRPC, "jsworker: inference is off"))
			return
		}
		ctx := context.Background()
		if f.TimeoutMicros > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(f.TimeoutMicros)*time.Microsecond)
			defer cancel()
		}
		switch c := call.GetCall().(type) {
		case *pb.HostCall_Predict:
			resp, err := h.opts.Inference.PredictProto(ctx, c.Predict)
			p.peer.answer(f.ID, &pb.HostAnswer{Answer: &pb.HostAnswer_Predict{Predict: resp}}, err)
		case *pb.HostCall_ModelPaths:
			paths, err := h.opts.Inference.ModelPaths(ctx)
			p.peer.answer(f.ID, &pb.HostAnswer{Answer: &pb.HostAnswer_ModelPaths{ModelPaths: &pb.ModelPaths{Paths: paths}}}, err)
		default:
			p.peer.answer(f.ID, nil, inferr.Errorf(inferr.InputParsing, "jsworker: unknown host call"))
		}
	}()
}

// proc is one worker process and the host's end of its connection.
type proc struct {
	cmd  *exec.Cmd
	pid  int
	peer *peer

	exited  chan struct{} // closed once the process was reaped
	exitErr error

	tailMu sync.Mutex
	fatal  string // the first line of a Go fatal error or panic it printed

	stopOnce sync.Once
	// retiring is set when the worker said it will exit (it abandoned a
	// runtime): it gets no more chunks.
	retiring atomic.Bool
}

func (p *proc) alive() bool {
	if p.retiring.Load() {
		return false
	}
	select {
	case <-p.exited:
		return false
	case <-p.peer.done:
		return false
	default:
		return true
	}
}

// kill ends the process at once.
func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
}

// stop closes the connection (a worker exits when the host hangs up) and
// kills the process if it is still there a second later.
func (p *proc) stop() {
	p.stopOnce.Do(func() {
		p.peer.close()
		go func() {
			select {
			case <-p.exited:
			case <-time.After(time.Second):
				p.kill()
			}
		}()
	})
}

// exitReason says why the process ended, waiting up to wait for it to be
// reaped.
func (p *proc) exitReason(wait time.Duration) string {
	select {
	case <-p.exited:
	case <-time.After(wait):
		return "its connection closed"
	}
	p.tailMu.Lock()
	fatal := p.fatal
	p.tailMu.Unlock()
	reason := "exited"
	if p.exitErr != nil {
		reason = p.exitErr.Error()
	}
	if ee, ok := errors.AsType[*exec.ExitError](p.exitErr); ok && ee.ExitCode() == ExitTainted {
		reason = "it stopped itself: a runtime could not be stopped"
	}
	if fatal != "" {
		reason += ": " + fatal
	}
	return reason
}

// startProc starts a worker process and loads the module into it.
func (h *Host) startProc(ctx context.Context) (*proc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("jsworker: socketpair: %w", err)
	}
	hostFile := os.NewFile(uintptr(fds[0]), "jsworker-host")
	childFile := os.NewFile(uintptr(fds[1]), "jsworker-child")
	defer hostFile.Close()
	defer childFile.Close()

	var cmd *exec.Cmd
	if h.opts.Command != nil {
		cmd = h.opts.Command()
	} else {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("jsworker: find this executable: %w", err)
		}
		cmd = exec.Command(exe)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, WorkerEnv+"=3")
	if h.opts.RlimitMB > 0 {
		cmd.Env = append(cmd.Env, RlimitEnv+"="+strconv.Itoa(h.opts.RlimitMB))
	}
	cmd.ExtraFiles = []*os.File{childFile}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("jsworker: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("jsworker: start worker %s: %w", cmd.Path, err)
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	if h.opts.RlimitMB > 0 {
		lim := uint64(h.opts.RlimitMB) << 20
		_ = unix.Prlimit(p.pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: lim, Max: lim}, nil)
	}
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		h.forwardLog(p, stderr)
	}()
	go func() {
		<-logDone // Wait closes the pipe: read it to the end first
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	conn, err := net.FileConn(hostFile)
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("jsworker: worker connection: %w", err)
	}
	p.peer = newPeer(conn, 1)
	p.peer.onRequest = func(f fastlane.Frame) { h.onHostCall(p, f) }
	go p.peer.readLoop()
	h.procsMu.Lock()
	h.procs[p] = struct{}{}
	h.procsMu.Unlock()
	go func() {
		<-p.exited
		p.peer.close()
		h.procsMu.Lock()
		delete(h.procs, p)
		h.procsMu.Unlock()
	}()

	cfg := &pb.Config{
		ModuleName:            h.opts.Module.Name,
		ModuleSource:          h.opts.Module.Source,
		SidecarSocket:         h.opts.SidecarSocket,
		SidecarTransport:      h.opts.SidecarTransport,
		SidecarSpinWaitMicros: h.opts.SidecarSpinWait.Microseconds(),
		SpinWaitMicros:        max(h.opts.SpinWait, 0).Microseconds(),
		CallTimeoutMicros:     h.opts.CallTimeout.Microseconds(),
		InterruptGraceMicros:  h.opts.InterruptGrace.Microseconds(),
		HeapBudgetBytes:       h.opts.HeapBudget,
		MaxCallStackSize:      int32(h.opts.MaxCallStackSize),
		MaxArgumentBytes:      int64(h.opts.MaxArgumentBytes),
		RequireFunctions:      h.opts.RequireFunctions,
		LogConsole:            h.opts.LogConsole,
		ShareRuntimes:         h.opts.ShareRuntimes,
	}
	sctx, cancel := context.WithTimeout(ctx, h.opts.StartLimit)
	defer cancel()
	var ack pb.ConfigAck
	if err := p.peer.call(sctx, cfg, &ack); err != nil {
		p.stop()
		p.kill()
		if !errors.Is(err, errPeerGone) {
			return nil, fmt.Errorf("jsworker: worker %d did not load the module within %v: %w", p.pid, h.opts.StartLimit, err)
		}
		return nil, fmt.Errorf("jsworker: worker %d ended while loading the module (%s)", p.pid, p.exitReason(time.Second))
	}
	if ack.GetError() != "" {
		p.stop()
		return nil, &ModuleError{Message: ack.GetError()}
	}
	return p, nil
}

// ModuleError is the bidding module's own failure to load (syntax, an
// exception at its top level, a missing required function), as a worker
// reported it.
type ModuleError struct{ Message string }

func (e *ModuleError) Error() string { return e.Message }

// forwardLog copies a worker's log (one slog JSON record per line) into the
// host's log, with source=js-worker and its pid. Other lines (a Go fatal
// error, a panic and its goroutine dump) are logged at debug, and the
// first line of a fatal error or panic is kept for the death's message.
func (h *Host) forwardLog(p *proc, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	log := h.log.With("source", "js-worker", "pid", p.pid)
	for sc.Scan() {
		line := sc.Text()
		var rec map[string]any
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &rec) == nil {
			var level slog.Level
			if s, ok := rec["level"].(string); ok {
				_ = level.UnmarshalText([]byte(s))
			}
			msg, _ := rec["msg"].(string)
			attrs := make([]any, 0, 2*len(rec))
			for k, v := range rec {
				if k != "level" && k != "msg" && k != "time" {
					attrs = append(attrs, k, v)
				}
			}
			log.Log(context.Background(), level, msg, attrs...)
			continue
		}
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "runtime: out of memory") {
			p.tailMu.Lock()
			if p.fatal == "" {
				p.fatal = inferr.Clip(line)
				log.Warn("js worker: " + p.fatal)
			}
			p.tailMu.Unlock()
		}
		log.Debug(line)
	}
	_, _ = io.Copy(io.Discard, r)
}
