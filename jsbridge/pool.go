package jsbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
)

// Defaults for Options.
const (
	DefaultCallTimeout      = 2 * time.Second
	DefaultMaxArgumentBytes = 8 << 20
	DefaultMaxCallStackSize = 2048
	DefaultModelPathsTTL    = 100 * time.Millisecond
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

// Options configure a Pool. The zero value of every field means its default.
type Options struct {
	// Size is the number of runtimes; 0 = GOMAXPROCS.
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
	// Logger receives console output and pool events; nil = slog.Default().
	Logger *slog.Logger
	// Hooks observe calls and inferences (metrics); nil fields are skipped.
	Hooks Hooks
	// IsolateCalls gives every call a runtime no earlier call touched: after
	// a call its runtime is dropped and a fresh one (the module run again)
	// is built in the background to take its place. Nothing a script keeps
	// in globals then survives from one generateBid to the next (B&A's
	// privacy model), at the cost of building a runtime per call. Off by
	// default: a runtime's globals persist across the calls it serves.
	IsolateCalls bool
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
	o.Limits = o.Limits.WithDefaults()
	return o
}

// Errors returned by Pool calls. A JS exception is a *ScriptError.
var (
	// ErrDeadline: the call ran past its deadline and was interrupted.
	ErrDeadline = errors.New("jsbridge: call exceeded its deadline")
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
	if e.Func == "" {
		return "jsbridge: module: " + e.Message
	}
	return "jsbridge: " + e.Func + ": " + e.Message
}

// Pool is a fixed set of goja runtimes that all ran the same compiled module.
type Pool struct {
	name string
	prog *goja.Program
	opts Options
	free chan *vm

	paths *pathsCache

	closeOnce sync.Once
	closed    chan struct{}
}

// New compiles source once (name is used in stack traces) and starts
// opts.Size runtimes, each running the module. A syntax error or an
// exception at the module's top level fails New.
func New(name, source string, opts Options) (*Pool, error) {
	opts = opts.withDefaults()
	prog, err := goja.Compile(name, source, false)
	if err != nil {
		return nil, &ScriptError{Message: fmt.Sprintf("compile %s: %v", name, err)}
	}
	p := &Pool{
		name:   name,
		prog:   prog,
		opts:   opts,
		free:   make(chan *vm, opts.Size),
		closed: make(chan struct{}),
	}
	if opts.Inference != nil {
		p.paths = &pathsCache{inf: opts.Inference, ttl: opts.ModelPathsTTL}
	}
	for range opts.Size {
		v, err := p.newVM()
		if err != nil {
			return nil, err
		}
		p.free <- v
	}
	return p, nil
}

// Size is the number of runtimes.
func (p *Pool) Size() int { return p.opts.Size }

// InferenceEnabled reports whether getModelPaths/runInference are defined.
func (p *Pool) InferenceEnabled() bool { return p.opts.Inference != nil }

// Close stops handing out runtimes; calls in flight finish.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	return nil
}

func (p *Pool) acquire(ctx context.Context) (*vm, error) {
	select {
	case <-p.closed:
		return nil, ErrClosed
	default:
	}
	select {
	case v := <-p.free:
		return v, nil
	case <-p.closed:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("jsbridge: waiting for a free runtime: %w", ctx.Err())
	}
}

func (p *Pool) release(v *vm) {
	if p.opts.IsolateCalls {
		go p.replace()
		return
	}
	if v.broken {
		// A Go panic escaped the runtime mid-call: its state is unknown,
		// replace it.
		nv, err := p.newVM()
		if err != nil {
			p.opts.Logger.Error("jsbridge: cannot replace a broken runtime", "err", err)
			// Keep the pool size: the old runtime is still better than none.
			v.broken = false
		} else {
			v = nv
		}
	}
	p.free <- v
}

// replace builds a fresh runtime for the pool (IsolateCalls), retrying while
// the module fails to run (it ran before, so a failure is transient, e.g. a
// deadline on a loaded machine).
func (p *Pool) replace() {
	for {
		nv, err := p.newVM()
		if err == nil {
			p.free <- nv
			return
		}
		p.opts.Logger.Error("jsbridge: cannot build a fresh runtime; retrying", "err", err)
		select {
		case <-p.closed:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// CallJSON calls the global function fn with arguments given as JSON texts
// (each becomes a JS value through JSON.parse; nil means undefined) and
// returns what it returned, as JSON (undefined gives null). The call runs
// under the pool's deadline and ctx.
func (p *Pool) CallJSON(ctx context.Context, fn string, args ...[]byte) ([]byte, error) {
	var out []byte
	err := p.run(ctx, fn, func(v *vm, f goja.Callable) error {
		jsArgs := make([]goja.Value, len(args))
		for i, a := range args {
			if a == nil {
				jsArgs[i] = goja.Undefined()
				continue
			}
			val, err := v.parseJSON(a)
			if err != nil {
				return fmt.Errorf("jsbridge: %s: argument %d is not JSON: %w", fn, i, err)
			}
			jsArgs[i] = val
		}
		res, err := f(goja.Undefined(), jsArgs...)
		if err != nil {
			return err
		}
		out, err = v.stringify(res)
		return err
	})
	return out, err
}

// Do runs body on a free runtime with the global function fn resolved,
// under the pool's deadline and ctx. body must not keep rt or f. It is the
// building block of CallJSON, exported for callers (benchmarks, servers)
// that build their arguments with the goja API directly.
func (p *Pool) Do(ctx context.Context, fn string, body func(rt *goja.Runtime, f goja.Callable) error) error {
	return p.run(ctx, fn, func(v *vm, f goja.Callable) error { return body(v.rt, f) })
}

func (p *Pool) run(ctx context.Context, fn string, body func(v *vm, f goja.Callable) error) (err error) {
	v, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	defer p.release(v)
	start := time.Now()
	defer func() {
		if h := p.opts.Hooks.OnCall; h != nil {
			h(CallEvent{Func: fn, Duration: time.Since(start), Err: err})
		}
	}()

	ctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	v.begin(ctx)
	defer v.end()

	defer func() {
		if r := recover(); r != nil {
			v.broken = true
			err = fmt.Errorf("jsbridge: %s: internal error: %v", fn, r)
			p.opts.Logger.Error("jsbridge: panic in a call", "func", fn, "panic", r)
		}
	}()

	f, ok := goja.AssertFunction(v.rt.Get(fn))
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFunction, fn)
	}
	return p.translate(fn, ctx, body(v, f))
}

// translate maps goja's errors to the package's.
func (p *Pool) translate(fn string, ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ie, ok := errors.AsType[*goja.InterruptedError](err); ok {
		cause := ctx.Err()
		if cause == nil {
			cause, _ = ie.Value().(error)
		}
		if errors.Is(cause, context.DeadlineExceeded) {
			return fmt.Errorf("%w (%s: %v)", ErrDeadline, fn, p.opts.CallTimeout)
		}
		if cause != nil {
			return fmt.Errorf("jsbridge: %s: %w", fn, cause)
		}
		return fmt.Errorf("jsbridge: %s: interrupted: %v", fn, ie.Value())
	}
	if ex, ok := errors.AsType[*goja.Exception](err); ok {
		return &ScriptError{Func: fn, Message: ex.String()}
	}
	if so, ok := errors.AsType[*goja.StackOverflowError](err); ok {
		return &ScriptError{Func: fn, Message: so.Error()}
	}
	return err
}

// vm is one runtime and the state of the call it is running.
type vm struct {
	rt     *goja.Runtime
	parse  goja.Callable // JSON.parse
	strfy  goja.Callable // JSON.stringify
	broken bool

	// ctx is the current call's context (host functions use it for RPCs).
	ctx context.Context
	// mu and running order Interrupt against the end of a call, so that a
	// late timer never interrupts the runtime's next user.
	mu      sync.Mutex
	running bool
	gen     uint64 // counts calls, so a late timer knows it is late
	stop    func() bool
}

func (p *Pool) newVM() (*vm, error) {
	rt := goja.New()
	rt.SetMaxCallStackSize(p.opts.MaxCallStackSize)
	v := &vm{rt: rt, ctx: context.Background()}
	// Native JSON.parse/stringify (json_native.go), installed before the
	// module runs and captured below for the host's own use.
	if _, err := installNativeJSON(rt); err != nil {
		return nil, err
	}
	json := rt.Get("JSON").ToObject(rt)
	v.parse, _ = goja.AssertFunction(json.Get("parse"))
	v.strfy, _ = goja.AssertFunction(json.Get("stringify"))
	if err := installConsole(rt, v.strfy, p.opts.Logger.With("script", p.name)); err != nil {
		return nil, err
	}
	if p.opts.Inference != nil {
		b := &bindings{pool: p, vm: v}
		if err := rt.Set("getModelPaths", b.getModelPaths); err != nil {
			return nil, err
		}
		if err := rt.Set("runInference", b.runInference); err != nil {
			return nil, err
		}
	}
	// The module's top level runs under the call deadline too.
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.CallTimeout)
	defer cancel()
	v.begin(ctx)
	_, err := rt.RunProgram(p.prog)
	v.end()
	if err = p.translate("", ctx, err); err != nil {
		var se *ScriptError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, fmt.Errorf("jsbridge: module %s: %w", p.name, err)
	}
	return v, nil
}

func (v *vm) begin(ctx context.Context) {
	v.mu.Lock()
	v.ctx = ctx
	v.running = true
	v.gen++
	gen := v.gen
	v.mu.Unlock()
	v.stop = context.AfterFunc(ctx, func() {
		v.mu.Lock()
		// A timer of an earlier call that fires late must not interrupt
		// this one.
		if v.running && v.gen == gen {
			v.rt.Interrupt(ctx.Err())
		}
		v.mu.Unlock()
	})
}

// interruptIfDone interrupts the runtime now when the call's deadline passed
// while a host function ran, so the call ends with ErrDeadline whether or not
// the timer goroutine got there first.
func (v *vm) interruptIfDone() {
	err := v.ctx.Err()
	if dl, ok := v.ctx.Deadline(); ok && err == nil && !time.Now().Before(dl) {
		// gRPC's own deadline timer can fire before the context's.
		err = context.DeadlineExceeded
	}
	if err != nil {
		v.rt.Interrupt(err)
	}
}

func (v *vm) end() {
	v.stop()
	v.mu.Lock()
	v.running = false
	v.ctx = context.Background()
	v.mu.Unlock()
	// An interrupt that fired after JS returned (while Go code ran) must not
	// hit the next call.
	v.rt.ClearInterrupt()
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
