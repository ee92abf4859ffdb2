package jsworker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
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
	"github.com/inferbid/inferbid/telemetry"
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

// Module is a bidding module the workers run: one code version, named
// (the bucket key, or the file) so that a request can pick it.
type Module struct {
	Name   string
	Source string
	// WasmHelper is the version's own Wasm helper (a bucket's x.wasm
	// beside x.js); nil = Options.WasmHelper.
	WasmHelper []byte
}

// Options configure a Host. The zero value of every field means its
// default.
type Options struct {
	// Modules are the code versions every worker loads (at least one); a
	// Request picks one by name (Request.CodeVersion). SetModules replaces
	// them live.
	Modules []Module
	// DefaultModule is the version a Request without CodeVersion runs; ""
	// = the first of Modules.
	DefaultModule string
	// Workers is the number of worker processes that run JS; 0 = twice
	// GOMAXPROCS, at least 3 (DefaultWorkers).
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
	// WasmHelper is the Wasm helper module every worker compiles once and
	// hands to generateBid as browserSignals.wasmHelper (see
	// jsbridge.Options); nil = none. A helper that does not compile fails
	// Start.
	WasmHelper []byte

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
	// (each in its own worker); 0 = a quarter of the workers, at least 1.
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

	// MaxBurst bounds the extra workers started while every worker is busy,
	// requests wait, and workers have run one chunk for longer than
	// BurstAfter (calls near their deadline: a script looping, stuck or
	// slow), so that well-behaved requests are not held up behind them; 0
	// = Workers, < 0 = none.
	MaxBurst int
	// BurstAfter is how long a chunk runs before its worker counts as held
	// by a long call; 0 = 5 slices, at least 20ms.
	BurstAfter time.Duration

	Logger *slog.Logger
	// Hooks observe the workers' calls (OnCall, OnInference, OnModelPaths),
	// replayed on the host from each chunk's answer.
	Hooks jsbridge.Hooks
	// OnRestart is called each time a worker is replaced.
	OnRestart func()
	// OTLPEndpoint, when set, turns tracing on in the workers: each exports
	// its spans (a "generateBid" span per call, a "runInference" span per
	// hop to the sidecar) there with OTLPProtocol (package telemetry), and
	// each chunk carries its request's span (GenerateBids' ctx) as their
	// parent. "" = no tracing, at no cost.
	OTLPEndpoint, OTLPProtocol string
}

// DefaultWorkers is the number of workers when Options.Workers is 0: twice
// GOMAXPROCS, at least 3. A call holds its worker until it returns or its
// deadline, and goja cannot be preempted, but a process can: with more
// workers than cores, and each request on at most a quarter of them (the
// default RequestConcurrency), two requests whose calls all run to their
// deadline hold at most half the workers, and the kernel shares the cores
// between them and everyone else's calls. With as many workers as cores,
// two such requests held all of them, and every other request waited for
// their deadlines (BenchmarkHostileNeighbour in cmd/bidding-server, 2
// cores, 300 ms deadlines: a client's p99 went from 2-3 ms to 340-380 ms
// next to two requests of 1,000 looping groups; with twice the workers it
// stayed at 5-18 ms, the loaded machine's noise). An idle worker costs
// about 40 MB.
func DefaultWorkers() int { return max(3, 2*runtime.GOMAXPROCS(0)) }

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers()
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
		o.RequestConcurrency = max(1, o.Workers/4)
	}
	if o.Slice <= 0 {
		o.Slice = DefaultSlice
	}
	if o.RequestBudget == 0 {
		o.RequestBudget = 2 * o.CallTimeout
	}
	if o.MaxBurst == 0 {
		o.MaxBurst = o.Workers
	}
	if o.BurstAfter <= 0 {
		o.BurstAfter = max(5*o.Slice, 20*time.Millisecond)
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
	// CodeVersion is the module to run, by name; "" = the default. A
	// version the host does not serve fails every group with
	// ErrUnknownVersion.
	CodeVersion string
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
	// pollChunks: chunks up to this many running at once may poll (half
	// the CPUs, at least 1).
	pollChunks int
	bursts     atomic.Uint64
	swaps      atomic.Uint64
	closeMu    sync.Once
	// swapMu serialises SetModules; startMu orders its swap with Close (no
	// slot starts once the host is closed).
	swapMu  sync.Mutex
	startMu sync.Mutex

	// slots are the running slots (the Workers and any burst ones), for
	// the burst watcher.
	slotsMu sync.Mutex
	slots   map[*slotState]struct{}
	extra   int // burst slots running (slotsMu)
}

// slotState is what the burst watcher reads of a slot: when its running
// chunk started (0 = idle).
type slotState struct {
	start atomic.Int64 // unix nanoseconds
}

// Start starts the workers and their spares, each loading the module. An
// error of the module (syntax, a top-level exception, a missing
// RequireFunctions entry) fails Start.
func Start(ctx context.Context, opts Options) (*Host, error) {
	opts = opts.withDefaults()
	if opts.SidecarSocket != "" && opts.Inference == nil {
		return nil, errors.New("jsworker: a SidecarSocket needs an Inference to answer the workers")
	}
	gen, err := newGeneration(opts.Modules, opts.DefaultModule)
	if err != nil {
		return nil, err
	}
	h := &Host{
		pollChunks: max(1, runtime.GOMAXPROCS(0)/2),
		opts:       opts,
		log:        opts.Logger,
		sched:      newScheduler(opts.RequestConcurrency, opts.RequestBudget, gen),
		spares:     make(chan *proc),
		closed:     make(chan struct{}),
		procs:      map[*proc]struct{}{},
		slots:      map[*slotState]struct{}{},
	}
	workers, err := h.startWorkers(ctx, gen)
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
	if opts.MaxBurst > 0 {
		h.wg.Go(h.watchBurst)
	}
	return h, nil
}

// startWorkers starts the Workers processes of generation g. The first
// starts alone: a module that does not load fails here, once.
func (h *Host) startWorkers(ctx context.Context, g *generation) ([]*proc, error) {
	first, err := h.startProc(ctx, g)
	if err != nil {
		return nil, err
	}
	workers := []*proc{first}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range h.opts.Workers - 1 {
		wg.Go(func() {
			p, perr := h.startProc(ctx, g)
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
		for _, p := range workers {
			p.stop()
		}
		return nil, err
	}
	return workers, nil
}

// Workers is the number of worker processes that run JS.
func (h *Host) Workers() int { return h.opts.Workers }

// Versions returns the names of the code versions served now, sorted, and
// the default.
func (h *Host) Versions() (names []string, def string) {
	g := h.sched.current()
	return g.names(), g.def
}

// SetModules replaces the code versions served, live: it starts Workers
// new worker processes that load every one of mods, and only when all have
// loaded (a version that does not load fails SetModules with a
// *ModuleError naming it, and nothing changes) does it swap them in. New
// requests then run on the new workers; requests already admitted finish
// on the old ones, which then stop. No request fails because of a swap.
// def is the default version ("" = the first).
func (h *Host) SetModules(ctx context.Context, mods []Module, def string) error {
	g, err := newGeneration(mods, def)
	if err != nil {
		return err
	}
	h.swapMu.Lock()
	defer h.swapMu.Unlock()
	workers, err := h.startWorkers(ctx, g)
	if err != nil {
		return err
	}
	h.startMu.Lock()
	defer h.startMu.Unlock()
	select {
	case <-h.closed:
		for _, p := range workers {
			p.stop()
		}
		return ErrClosed
	default:
	}
	h.sched.swap(g)
	for _, p := range workers {
		h.wg.Go(func() { h.slot(p) })
	}
	h.swaps.Add(1)
	h.log.Info("jsworker: code versions swapped in", "versions", len(mods), "default", g.def)
	return nil
}

// Validate loads mods in one fresh worker process (never in the host: a
// module's top level is untrusted code) and returns the error of each that
// does not load, by name: a syntax error (with its line and column), an
// exception at its top level, a missing required function, or the worker
// dying while loading it. The worker is stopped afterwards.
func (h *Host) Validate(ctx context.Context, mods []Module) map[string]error {
	errs := map[string]error{}
	if len(mods) == 0 {
		return errs
	}
	g, err := newGeneration(mods, "")
	if err != nil {
		for _, m := range mods {
			errs[m.Name] = err
		}
		return errs
	}
	p, err := h.startProc(ctx, g)
	if err == nil {
		p.stop()
		return errs
	}
	if me, ok := errors.AsType[*ModuleError](err); ok && len(me.Versions) > 0 {
		for name, msg := range me.Versions {
			errs[name] = &ModuleError{Message: msg}
		}
		return errs
	}
	if len(mods) == 1 {
		errs[mods[0].Name] = err
		return errs
	}
	// The worker died (or timed out) loading them: which one did it?
	for _, m := range mods {
		maps.Copy(errs, h.Validate(ctx, []Module{m}))
	}
	return errs
}

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
	// Bursts counts extra workers started while long calls held every
	// worker.
	Bursts uint64
	// Queued is the number of requests waiting for a worker.
	Queued int
	// Swaps counts code version sets swapped in by SetModules.
	Swaps uint64
}

// Stats returns the host's counters.
func (h *Host) Stats() Stats {
	return Stats{Restarts: h.restarts.Load(), Kills: h.kills.Load(), Deaths: h.deaths.Load(),
		Busy: int(h.busy.Load()), Bursts: h.bursts.Load(), Queued: h.sched.queued(), Swaps: h.swaps.Load()}
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
		h.startMu.Lock()
		close(h.closed)
		h.startMu.Unlock()
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

// slot runs chunks on one worker, replacing it when it dies or is killed:
// after the chunk it held, before it waits for the next (a worker that dies
// while the slot waits is replaced when a chunk comes, by runOn, from the
// warm spare).
func (h *Host) slot(p *proc) {
	st := h.addSlot(false)
	defer h.removeSlot(st, false)
	defer func() {
		if p != nil {
			p.stop()
		}
	}()
	for {
		if !p.alive() {
			if p = h.replace(p); p == nil {
				return
			}
		}
		c, ok := h.sched.next(p.gen)
		if !ok {
			return
		}
		if p = h.runOn(p, st, c); p == nil {
			return
		}
	}
}

// runOn runs chunk c on p (or on its replacement when p is dead) and
// returns the worker for the next chunk; nil once the host is closed.
func (h *Host) runOn(p *proc, st *slotState, c *chunk) *proc {
	if !p.alive() {
		if p = h.replace(p); p == nil {
			h.sched.finish(c, nil, c.lo, 0, ErrClosed)
			return nil
		}
	}
	h.busy.Add(1)
	st.start.Store(time.Now().UnixNano())
	h.runChunk(p, c)
	st.start.Store(0)
	h.busy.Add(-1)
	return p
}

func (h *Host) addSlot(extra bool) *slotState {
	st := &slotState{}
	h.slotsMu.Lock()
	h.slots[st] = struct{}{}
	if extra {
		h.extra++
	}
	h.slotsMu.Unlock()
	return st
}

func (h *Host) removeSlot(st *slotState, extra bool) {
	h.slotsMu.Lock()
	delete(h.slots, st)
	if extra {
		h.extra--
	}
	h.slotsMu.Unlock()
}

// held counts the slots whose chunk has run longer than BurstAfter, and
// reports whether any slot is idle.
func (h *Host) held() (long, extra int, idle bool) {
	now := time.Now().UnixNano()
	h.slotsMu.Lock()
	defer h.slotsMu.Unlock()
	for st := range h.slots {
		start := st.start.Load()
		switch {
		case start == 0:
			idle = true
		case now-start > int64(h.opts.BurstAfter):
			long++
		}
	}
	return long, h.extra, idle
}

// watchBurst starts a burst slot (on a spare worker) while requests wait,
// no slot is idle and long calls hold more slots than there are burst
// slots: a script looping to its deadline holds its worker for the whole
// call timeout, and without it the well-behaved requests behind it would
// wait as long. Burst slots end when the long calls do.
func (h *Host) watchBurst() {
	t := time.NewTicker(h.opts.BurstAfter / 2)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-h.closed:
			return
		}
		if h.sched.queued() == 0 {
			continue
		}
		long, extra, idle := h.held()
		if idle || long <= extra || extra >= h.opts.MaxBurst {
			continue
		}
		st := h.addSlot(true)
		h.bursts.Add(1)
		h.wg.Go(func() { h.burstSlot(st) })
	}
}

// burstSlot runs chunks on a spare worker while long calls hold the
// regular slots, then stops it.
func (h *Host) burstSlot(st *slotState) {
	defer h.removeSlot(st, true)
	var p *proc
	select {
	case p = <-h.spares:
	case <-h.closed:
		return
	default:
	}
	if p != nil && p.gen != h.sched.current() {
		p.stop()
		p = nil
	}
	if p == nil {
		var err error
		if p, err = h.startProc(context.Background(), h.sched.current()); err != nil {
			h.log.Warn("jsworker: cannot start a burst worker", "err", err)
			return
		}
	}
	defer func() {
		if p != nil {
			p.stop()
		}
	}()
	h.log.Debug("jsworker: a burst worker serves while long calls hold the others", "pid", p.pid)
	for {
		c, ok := h.sched.tryNext(p.gen)
		if !ok {
			long, extra, _ := h.held()
			if long < extra {
				return
			}
			select {
			case <-time.After(time.Millisecond):
			case <-h.closed:
				return
			}
			continue
		}
		if p = h.runOn(p, st, c); p == nil {
			return
		}
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
		select {
		case <-h.closed:
			return nil
		default:
		}
		// Spares are of the current generation; a worker of a retired one
		// (draining after a swap) is replaced by a new one of its own.
		if h.opts.Spares > 0 && p.gen == h.sched.current() {
			select {
			case s := <-h.spares:
				if s.alive() && s.gen == p.gen {
					return s
				}
				s.stop()
				continue
			case <-p.gen.retiredCh:
				continue
			case <-h.closed:
				return nil
			}
		}
		s, err := h.startProc(context.Background(), p.gen)
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
		g := h.sched.current()
		s, err := h.startProc(context.Background(), g)
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
		case <-g.retiredCh:
			s.stop() // new code was swapped in: a spare of it replaces this one
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
		CodeVersion:    r.version,
		Poll:           h.chunkMayPoll(),
	}
	if h.opts.OTLPEndpoint != "" {
		req.Traceparent = telemetry.Traceparent(r.ctx)
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
	// The worker starts calls for one slice (a chunk of one call starts
	// it at once), and each ends within its deadline and the interrupt's
	// grace, or the worker stops itself: an answer later than that means a
	// worker that cannot run Go (thrashing at its memory limit, stopped).
	lastStart := h.opts.Slice
	if c.hi-c.lo == 1 {
		lastStart = 0
	}
	backstop := time.NewTimer(lastStart + h.opts.CallTimeout + h.opts.InterruptGrace + h.opts.KillGrace)
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
			// Answer now: the connection closes only once the kernel has
			// torn the process down, which takes long for one that holds
			// gigabytes (hundreds of ms were measured).
			killed = true
			h.kills.Add(1)
			p.retiring.Store(true)
			p.kill()
			select {
			case f, ok = <-ans: // it answered after all: the answer stands
			default:
			}
			break wait
		}
	}
	used := time.Since(start)
	if !ok {
		var err error
		if killed {
			err = &callError{msg: fmt.Sprintf("jsworker: %s: the call did not stop within %v of its deadline of %v; its JS worker was killed and replaced",
				r.fn(), h.opts.InterruptGrace+h.opts.KillGrace, h.opts.CallTimeout), is: []error{jsbridge.ErrDeadline, ErrWorkerKilled}}
		} else {
			h.deaths.Add(1)
			cause := p.exitReason(200 * time.Millisecond)
			err = &callError{msg: fmt.Sprintf("jsworker: %s: the JS worker running the call died (%s) and was replaced", r.fn(), cause), is: []error{ErrWorkerDied}}
			h.log.Warn("jsworker: a worker died while running a call", "pid", p.pid, "cause", cause)
		}
		if hook := h.opts.Hooks.OnCall; hook != nil {
			// The call that ended the worker: which of the chunk's calls
			// had run is lost with it, but that one did.
			hook(jsbridge.CallEvent{Func: r.fn(), Duration: used, Err: err})
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
		// The worker sent ScriptError.Error(): the Message alone, as
		// in-process, is what was thrown and where (goja's stack lines).
		return &jsbridge.ScriptError{Func: fn, Message: strings.TrimPrefix(msg, "jsbridge: "+fn+": ")}
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
	case pb.ErrorKind_ERROR_KIND_UNSETTLED:
		return &callError{msg: msg, is: []error{jsbridge.ErrUnsettled}}
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
	gen  *generation // the code versions it loaded

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

// startProc starts a worker process and loads the modules of g into it.
func (h *Host) startProc(ctx context.Context, g *generation) (*proc, error) {
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
			// No /proc (a bare chroot): the path it was started by.
			if exe, err = exec.LookPath(os.Args[0]); err != nil {
				return nil, fmt.Errorf("jsworker: find this executable to start a worker: %w", err)
			}
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
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{}), gen: g}
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

	mods := make([]*pb.Module, len(g.order))
	for i, m := range g.order {
		mods[i] = &pb.Module{Name: m.Name, Source: m.Source, WasmHelper: m.WasmHelper}
	}
	cfg := &pb.Config{
		Modules:               mods,
		DefaultModule:         g.def,
		SidecarSocket:         h.opts.SidecarSocket,
		SidecarTransport:      h.opts.SidecarTransport,
		SidecarSpinWaitMicros: h.opts.SidecarSpinWait.Microseconds(),
		SpinWaitMicros:        max(h.opts.SpinWait, 0).Microseconds(),
		OtelExporterEndpoint:  h.opts.OTLPEndpoint,
		OtelExporterProtocol:  h.opts.OTLPProtocol,
		CallTimeoutMicros:     h.opts.CallTimeout.Microseconds(),
		InterruptGraceMicros:  h.opts.InterruptGrace.Microseconds(),
		HeapBudgetBytes:       h.opts.HeapBudget,
		MaxCallStackSize:      int32(h.opts.MaxCallStackSize),
		MaxArgumentBytes:      int64(h.opts.MaxArgumentBytes),
		RequireFunctions:      h.opts.RequireFunctions,
		LogConsole:            h.opts.LogConsole,
		ShareRuntimes:         h.opts.ShareRuntimes,
		WasmHelper:            h.opts.WasmHelper,
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
		return nil, &ModuleError{Message: ack.GetError(), Versions: ack.GetModuleErrors()}
	}
	return p, nil
}

// ModuleError is the bidding module's own failure to load (syntax, an
// exception at its top level, a missing required function), as a worker
// reported it.
type ModuleError struct {
	Message string
	// Versions holds the error of each version that failed, by name.
	Versions map[string]string
}

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
				switch k {
				case "level", "msg", "time":
				case "source", "pid":
					// The worker's own (a record from jsbridge names its
					// source) must not repeat the host's keys.
					attrs = append(attrs, "worker_"+k, v)
				default:
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

// chunkMayPoll reports whether the chunk being sent may poll (its
// BidsRequest.poll). Polling (see fastlane.DefaultSpinWait) pays while a
// CPU is idle; with more chunks running than half the CPUs (each keeps
// about one busy: its worker and the sidecar take turns), a worker that
// polls takes a CPU another chunk needs.
func (h *Host) chunkMayPoll() bool {
	return h.busy.Load() <= int64(h.pollChunks)
}
