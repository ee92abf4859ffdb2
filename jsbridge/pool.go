package jsbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/jsbridge/nativejson"
)

// Defaults for Options.
const (
	DefaultCallTimeout      = 2 * time.Second
	DefaultMaxArgumentBytes = 8 << 20
	DefaultMaxCallStackSize = 2048
	DefaultModelPathsTTL    = 100 * time.Millisecond
	DefaultInterruptGrace   = 25 * time.Millisecond
	defaultMaxLogBytes      = 4096
)

// Inference is what runInference and getModelPaths call; *sidecar.Client
// satisfies it.
type Inference interface {
	// Predict answers one result per entry, in order, or fails the whole
	// batch. Entries that carry an Err are not run; their result is that
	// Err. (*sidecar.Client is the implementation.)
	Predict(ctx context.Context, entries []batch.Entry) ([]batch.Result, error)
	ModelPaths(ctx context.Context) ([]string, error)
}

// Waker is implemented by an Inference that can prepare for a call about
// to come (*sidecar.Client: it wakes the sidecar's reader, so that the
// request finds it polling). A pool whose module has called runInference
// wakes it as each call starts.
type Waker interface {
	Wake()
}

// Options configure a Pool. The zero value of every field means its default,
// and the defaults are the safe settings: every call gets a fresh runtime.
type Options struct {
	// Size is the number of calls that run JS at once; 0 = GOMAXPROCS.
	Size int
	// Inference serves getModelPaths and runInference; nil disables
	// inference (the two functions are not defined).
	Inference Inference
	// CallTimeout bounds every call into JS, inference included; 0 =
	// DefaultCallTimeout. A context deadline that comes earlier wins.
	CallTimeout time.Duration
	// MaxArgumentBytes bounds the batch JSON string runInference accepts
	// (for an object argument, Limits bound the walk); 0 =
	// DefaultMaxArgumentBytes.
	MaxArgumentBytes int
	// Limits bound a parsed batch (entries, tensors, elements).
	Limits batch.Limits
	// MaxCallStackSize bounds JS call depth (deep recursion is an error,
	// not a Go stack blow-up); 0 = DefaultMaxCallStackSize.
	MaxCallStackSize int
	// ModelPathsTTL is how long getModelPaths reuses the sidecar's answer
	// (many concurrent generateBid calls then cost one RPC); 0 =
	// DefaultModelPathsTTL, negative = ask the sidecar every time.
	ModelPathsTTL time.Duration
	// Logger receives the pool's events (and console output with
	// LogConsole); nil = slog.Default().
	Logger *slog.Logger
	// LogConsole is UNSAFE, for local development only: console lines of
	// calls made without a ConsoleSink (WithConsole), and of the module's
	// top level, go to Logger, one user's data in the operator's log. By
	// default they go nowhere.
	LogConsole bool
	// Hooks observe calls and inferences (metrics); nil fields are skipped.
	Hooks Hooks

	// ShareRuntimes is the unsafe opt-out of isolation: a runtime serves
	// call after call, so whatever one call leaves in globals, prototypes or
	// replaced built-ins (one user's data included) is seen by later calls.
	// A shared runtime whose call panicked, was stopped for the heap or
	// was interrupted (deadline, cancelled ctx) is replaced, not reused.
	// By default every call runs in a runtime that ran the module and
	// nothing else, taken from a set of ready runtimes that background
	// goroutines refill, and is dropped afterwards.
	ShareRuntimes bool
	// IsolateCalls is the former opt-in to isolation, now the default.
	//
	// Deprecated: calls are isolated unless ShareRuntimes is set; setting
	// IsolateCalls overrides ShareRuntimes.
	IsolateCalls bool

	// InterruptGrace is how long a call past its deadline (or stopped by
	// the heap watchdog) waits for its runtime to stop after the interrupt.
	// A runtime still running after it (inside one long built-in call: a
	// catastrophic regular expression, a huge join) is abandoned: the
	// caller gets its error at once and the runtime never serves again.
	// 0 = DefaultInterruptGrace.
	InterruptGrace time.Duration
	// MaxAbandoned bounds the abandoned runtimes that are still running;
	// while that many run, new calls fail at once with ErrOverloaded. 0 =
	// Size.
	MaxAbandoned int
	// HeapBudget, in bytes, turns on the heap watchdog: when the live Go
	// heap (JS values are Go objects) passes HeapBudget plus HeapBaseline,
	// the longest-running call is stopped with ErrHeapBudget and its runtime
	// dropped, one call at a time until the heap is back under. 0 = no
	// watchdog.
	HeapBudget int64
	// HeapBaseline, when set, is the heap the host holds for itself (e.g.
	// model files kept for replay), which the budget comes on top of. It is
	// called every few milliseconds and must be cheap.
	HeapBaseline func() int64
	// RequireFunctions are globals the module must define as functions;
	// New fails, naming the first one missing, when it does not.
	RequireFunctions []string

	// WasmHelper is a WebAssembly module (its bytes) compiled once for the
	// pool and handed to every call of WasmHelperArg's function as that
	// argument's wasmHelper property, a WebAssembly.Module (B&A's
	// browserSignals.wasmHelper); nil = none. New fails when it does not
	// compile.
	WasmHelper []byte
	// WasmHelperArg is where the helper goes; the zero value is
	// generateBid's browserSignals (argument 4).
	WasmHelperArg WasmHelperArg
	// WasmMaxMemoryBytes bounds the linear memory of the Wasm instances of
	// one call (or of the module's top level), together; memory.grow past
	// it returns -1. 0 = DefaultWasmMaxMemoryBytes (1 GiB).
	WasmMaxMemoryBytes int64
	// WasmMaxTableElements bounds a Wasm table's elements (declared, or
	// grown to), and the declared elements of a module's tables together;
	// 0 = DefaultWasmMaxTableElements.
	WasmMaxTableElements int
}

func (o Options) withDefaults() Options {
	if o.Size <= 0 {
		o.Size = runtime.GOMAXPROCS(0)
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.MaxArgumentBytes <= 0 {
		o.MaxArgumentBytes = DefaultMaxArgumentBytes
	}
	if o.MaxCallStackSize <= 0 {
		o.MaxCallStackSize = DefaultMaxCallStackSize
	}
	if o.ModelPathsTTL == 0 {
		o.ModelPathsTTL = DefaultModelPathsTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.InterruptGrace <= 0 {
		o.InterruptGrace = DefaultInterruptGrace
	}
	if o.MaxAbandoned <= 0 {
		o.MaxAbandoned = o.Size
	}
	if o.IsolateCalls {
		o.ShareRuntimes = false
	}
	o.Limits = o.Limits.WithDefaults()
	return o
}

// Errors returned by Pool calls. A JS exception is a *ScriptError.
var (
	// ErrDeadline: the call ran past its deadline and was interrupted (or,
	// when it could not be, abandoned).
	ErrDeadline = errors.New("jsbridge: call exceeded its deadline")
	// ErrAbandoned comes with ErrDeadline or ErrHeapBudget when the runtime
	// did not stop within the interrupt grace and was abandoned.
	ErrAbandoned = errors.New("jsbridge: runtime abandoned")
	// ErrHeapBudget: the heap watchdog stopped the call.
	ErrHeapBudget = errors.New("jsbridge: heap budget exceeded")
	// ErrOverloaded: too many abandoned runtimes are still running.
	ErrOverloaded = errors.New("jsbridge: overloaded")
	// ErrClosed: the pool is closed.
	ErrClosed = errors.New("jsbridge: pool is closed")
	// ErrNotFunction: the named global is not a function.
	ErrNotFunction = errors.New("jsbridge: not a function")
)

// ScriptError is an exception thrown by the JS module (or a failure of the
// runtime such as stack overflow), with the JS stack when goja has one.
type ScriptError struct {
	Func    string // the function called, "" for the module itself
	Message string
}

func (e *ScriptError) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Func == "" {
		return "jsbridge: module: " + e.Message
	}
	return "jsbridge: " + e.Func + ": " + e.Message
}

// Pool runs calls into one compiled module: in a fresh runtime each
// (the default) or in a fixed set of shared runtimes (Options.ShareRuntimes).
type Pool struct {
	name string
	prog *goja.Program
	opts Options

	// slots holds a token per call running JS: Size at most.
	slots chan struct{}
	// idle holds runtimes no call is using. Isolated: fresh ones, each
	// taken by exactly one call, built by the refillers; readyPerSlot per
	// slot, refilled in batches when half are gone. Shared: the warm
	// runtimes.
	idle chan *vm
	// need wakes a refiller.
	need chan struct{}
	// jobs hands calls to the executors: Size goroutines that run the JS
	// (their stacks stay grown), plus one started for each executor
	// abandoned inside a call, which ends once that call does.
	jobs chan job

	paths *pathsCache
	// consoleLog is the logger of console output without a sink; nil
	// unless Options.LogConsole.
	consoleLog *slog.Logger

	callsMu sync.Mutex
	calls   map[*call]struct{} // running, for the heap watchdog

	// waker is Options.Inference when it is a Waker; inferenceUsed: the
	// module has called runInference (so calls start by waking it).
	waker         Waker
	inferenceUsed atomic.Bool

	abandonedRunning atomic.Int64
	abandonedTotal   atomic.Uint64
	refused          atomic.Uint64
	heapStops        atomic.Uint64
	inlineBuilds     atomic.Uint64

	// runners are idle moduleRunners, for builds.
	runners sync.Pool

	// wasm is the pool's WebAssembly engine (wasm.go).
	wasm *wasmEngine

	closeOnce sync.Once
	closed    chan struct{}
}

// New compiles source once (name is used in stack traces) and builds
// opts.Size runtimes, each running the module. A syntax error, an exception
// at the module's top level or a missing RequireFunctions entry fails New.
func New(name, source string, opts Options) (*Pool, error) {
	opts = opts.withDefaults()
	// Before Compile: regular expression literals are compiled with it.
	setRegexpMatchTimeout(opts.CallTimeout)
	prog, err := goja.Compile(name, source, false)
	if err != nil {
		return nil, &ScriptError{Message: fmt.Sprintf("compile %s: %v", name, err)}
	}
	wasm, err := newWasmEngine(opts)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		name:   name,
		prog:   prog,
		opts:   opts,
		wasm:   wasm,
		slots:  make(chan struct{}, opts.Size),
		idle:   make(chan *vm, opts.Size),
		need:   make(chan struct{}, 1),
		jobs:   make(chan job),
		calls:  map[*call]struct{}{},
		closed: make(chan struct{}),
	}
	if opts.LogConsole {
		p.consoleLog = opts.Logger.With("script", name)
	}
	if !opts.ShareRuntimes {
		p.idle = make(chan *vm, readyPerSlot*opts.Size)
	}
	if opts.Inference != nil {
		p.paths = &pathsCache{inf: opts.Inference, ttl: opts.ModelPathsTTL}
		p.waker, _ = opts.Inference.(Waker)
	}
	// The first runtime answers whether the module defines what is
	// required; an isolated pool does not let a call use it afterwards
	// (looking a global up may run a getter).
	v, err := p.newVM()
	if err != nil {
		return nil, err
	}
	if err := p.checkRequired(v); err != nil {
		return nil, err
	}
	for len(p.idle) < opts.Size {
		if v == nil || !opts.ShareRuntimes {
			if v, err = p.newVM(); err != nil {
				return nil, err
			}
		}
		p.idle <- v
		v = nil
	}
	for range opts.Size {
		go p.executor()
	}
	if !opts.ShareRuntimes {
		for range max(1, opts.Size/4) {
			go p.refiller()
		}
		p.need <- struct{}{}
	}
	if opts.HeapBudget > 0 {
		go p.watchHeap()
	}
	return p, nil
}

// Size is the number of calls that run JS at once.
func (p *Pool) Size() int { return p.opts.Size }

// Isolated reports whether every call gets a fresh runtime.
func (p *Pool) Isolated() bool { return !p.opts.ShareRuntimes }

// InferenceEnabled reports whether getModelPaths/runInference are defined.
func (p *Pool) InferenceEnabled() bool { return p.opts.Inference != nil }

// Close stops handing out runtimes and refilling them, and ends the pool's
// goroutines; calls in flight finish.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return nil
}

// Stats are the pool's counters, for metrics.
type Stats struct {
	// AbandonedRunning is the number of abandoned runtimes whose call has
	// not returned yet (each holds a goroutine, CPU and its heap).
	AbandonedRunning int
	// AbandonedTotal counts runtimes abandoned since New.
	AbandonedTotal uint64
	// Refused counts calls refused with ErrOverloaded.
	Refused uint64
	// HeapStops counts calls the heap watchdog stopped.
	HeapStops uint64
	// InlineBuilds counts calls that found no ready runtime and ran the
	// module on their own time.
	InlineBuilds uint64
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	return Stats{
		AbandonedRunning: int(p.abandonedRunning.Load()),
		AbandonedTotal:   p.abandonedTotal.Load(),
		Refused:          p.refused.Load(),
		HeapStops:        p.heapStops.Load(),
		InlineBuilds:     p.inlineBuilds.Load(),
	}
}

// acquire takes a slot: a call may run JS.
func (p *Pool) acquire(ctx context.Context) error {
	select {
	case <-p.closed:
		return ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jsbridge: not started: %w", err)
	}
	if err := p.checkOverload(); err != nil {
		return err
	}
	select {
	case p.slots <- struct{}{}:
	case <-p.closed:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("jsbridge: waiting for a free runtime: %w", ctx.Err())
	}
	// Runtimes may have been abandoned while it waited.
	if err := p.checkOverload(); err != nil {
		<-p.slots
		return err
	}
	return nil
}

func (p *Pool) checkOverload() error {
	if n := p.abandonedRunning.Load(); n >= int64(p.opts.MaxAbandoned) {
		p.refused.Add(1)
		return fmt.Errorf("%w: %d abandoned runtimes are still running past their deadlines (the limit is %d); call refused",
			ErrOverloaded, n, p.opts.MaxAbandoned)
	}
	return nil
}

// readyPerSlot is how many fresh runtimes an isolated pool keeps ready per
// slot. Refilling in batches saves a refiller wake-up per call.
const readyPerSlot = 4

// take returns a runtime for one call: an idle one when there is one, else
// a new one, built on the caller's time.
func (p *Pool) take() (*vm, error) {
	select {
	case v := <-p.idle:
		if !p.opts.ShareRuntimes && len(p.idle) <= cap(p.idle)/2 {
			select {
			case p.need <- struct{}{}:
			default:
			}
		}
		return v, nil
	default:
	}
	p.inlineBuilds.Add(1)
	return p.newVM()
}

// release ends a runtime's call. A shared runtime that can serve again goes
// back to the idle set; any other is dropped (a shared pool builds its
// replacement in the background).
func (p *Pool) release(v *vm, reusable bool) {
	if !p.opts.ShareRuntimes {
		return
	}
	if !reusable {
		go p.refill()
		return
	}
	select {
	case p.idle <- v:
	default: // a refill and an inline build both replaced one runtime
	}
}

// refiller fills an isolated pool's idle set with fresh runtimes each time
// it is woken.
func (p *Pool) refiller() {
	for {
		select {
		case <-p.need:
		case <-p.closed:
			return
		}
		for len(p.idle) < cap(p.idle) {
			v := p.build()
			if v == nil {
				return
			}
			select {
			case p.idle <- v:
			default: // another refiller filled it
			}
		}
	}
}

// refill replaces a shared runtime that was dropped.
func (p *Pool) refill() {
	if v := p.build(); v != nil {
		select {
		case p.idle <- v:
		default: // an inline build replaced it already
		}
	}
}

// build builds a runtime, retrying while the module fails to run (it ran
// before, so a failure is transient, e.g. a deadline on a loaded machine);
// nil once the pool is closed.
func (p *Pool) build() *vm {
	for {
		select {
		case <-p.closed:
			return nil
		default:
		}
		v, err := p.newVM()
		if err == nil {
			return v
		}
		p.opts.Logger.Error("jsbridge: cannot build a fresh runtime; retrying", "err", err)
		select {
		case <-p.closed:
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// vm is one runtime and the state of the call it is running.
type vm struct {
	rt     *goja.Runtime
	parse  goja.Callable // JSON.parse
	strfy  goja.Callable // JSON.stringify
	broken bool

	// host runs hostBody as a host function (hostCall); made on first use.
	host     goja.Callable
	hostBody func() goja.Value

	// ctx is the current call's context (host functions use it for RPCs).
	ctx context.Context
	// console is the current call's console sink; nil: none (the module's
	// top level, a call without one).
	console *callConsole
	// wasmEng is the pool's WebAssembly engine; wasmState the runtime's
	// WebAssembly, made on first use (wasm_api.go).
	wasmEng   *wasmEngine
	wasmState *wasmState
	// runs counts the runs that ended (the module's top level is run 0).
	runs int
	// mu and running order Interrupt against the end of a call, so that a
	// late timer never interrupts the runtime's next user.
	mu      sync.Mutex
	running bool
}

// newVM builds a runtime: the globals the pool provides, then the module,
// run under the call deadline.
func (p *Pool) newVM() (*vm, error) {
	rt := goja.New()
	rt.SetMaxCallStackSize(p.opts.MaxCallStackSize)
	v := &vm{rt: rt, ctx: context.Background(), wasmEng: p.wasm}
	if err := p.installGlobals(v); err != nil {
		return nil, err
	}
	run := &moduleRun{v: v}
	run.ctx.At = time.Now().Add(p.opts.CallTimeout)
	run.ctx.Context, run.cancel = context.WithCancelCause(context.Background())
	defer run.cancel(nil)
	r := p.moduleRunner()
	r.cur.Store(run)
	r.timer.Reset(p.opts.CallTimeout)
	v.begin(&run.ctx)
	_, err := rt.RunProgram(p.prog)
	v.end()
	r.timer.Stop()
	r.cur.Store(nil)
	p.runners.Put(r)
	if err = p.translate("", &run.ctx, err); err != nil {
		var se *ScriptError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, fmt.Errorf("jsbridge: module %s: %w", p.name, err)
	}
	return v, nil
}

// installGlobals sets up what every runtime has before the module runs:
// JSON.parse and JSON.stringify captured for the host's own use, console,
// and the host functions. Per-runtime globals belong here.
func (p *Pool) installGlobals(v *vm) error {
	rt := v.rt
	// Native JSON.parse/stringify (package nativejson), installed before
	// the module runs and captured below for the host's own use.
	if err := nativejson.Install(rt); err != nil {
		return err
	}
	json := rt.Get("JSON").ToObject(rt)
	v.parse, _ = goja.AssertFunction(json.Get("parse"))
	v.strfy, _ = goja.AssertFunction(json.Get("stringify"))
	if err := installConsole(v, p.consoleLog); err != nil {
		return err
	}
	if err := installWasm(v); err != nil {
		return err
	}
	if p.wasm.helper != nil {
		// Every call of the helper's function needs the namespace: make it
		// now, on the refillers' time, not on the call's.
		if _, err := v.wasm(); err != nil {
			return err
		}
	}
	if p.opts.Inference != nil {
		b := &bindings{pool: p, vm: v}
		if err := rt.Set("getModelPaths", b.getModelPaths); err != nil {
			return err
		}
		if err := rt.Set("runInference", b.runInference); err != nil {
			return err
		}
	}
	return nil
}

// checkRequired fails when the module does not define every
// RequireFunctions entry as a function.
func (p *Pool) checkRequired(v *vm) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.CallTimeout)
	defer cancel()
	v.begin(ctx)
	defer v.end()
	defer v.interruptWhenDone(ctx)()
	for _, fn := range p.opts.RequireFunctions {
		val := v.rt.Get(fn)
		if _, ok := goja.AssertFunction(val); !ok {
			return fmt.Errorf("%w: the module %s defines no function %s (the global %s is %s)",
				ErrNotFunction, p.name, fn, fn, jsTypeOf(val))
		}
	}
	return nil
}

// parseJSON turns JSON text into a JS value with the runtime's JSON.parse
// (the native one), captured before the module ran (real JS objects, not
// wrapped Go maps; a module that reassigns JSON does not change it).
func (v *vm) parseJSON(text []byte) (goja.Value, error) {
	return v.parse(goja.Undefined(), v.rt.ToValue(string(text)))
}

// stringify is JSON.stringify(val), with undefined (and functions) as null.
func (v *vm) stringify(val goja.Value) ([]byte, error) {
	s, err := v.strfy(goja.Undefined(), val)
	if err != nil {
		return nil, err
	}
	if goja.IsUndefined(s) {
		return []byte("null"), nil
	}
	return []byte(s.String()), nil
}
