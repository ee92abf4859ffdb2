package runtimes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// DefaultMaxModelBytes caps the total file size of one model where a limit
// is left zero (the sidecar's registrations, the bucket watcher's downloads).
const DefaultMaxModelBytes int64 = 2 << 30

// The data types of the driver interface, under the names users of the
// portable layer know them by.
type (
	Config     = driver.Config
	Files      = driver.Files
	DiskFiles  = driver.DiskFiles
	Signature  = driver.Signature
	TensorSpec = driver.TensorSpec
)

// Opener opens a backend with a config.
type Opener func(driver.Config) (driver.Backend, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// Register makes a backend available by name. Backends call it from init();
// registering a name twice panics, as database/sql does.
func Register(name string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("runtimes: Register called twice for " + name)
	}
	registry[name] = open
}

// Names lists the registered backends, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Runtime is an opened backend.
type Runtime struct {
	name    string
	cfg     Config
	backend driver.Backend
}

// Open opens the named backend.
func Open(name string, cfg Config) (*Runtime, error) {
	registryMu.RLock()
	open, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("runtimes: no runtime %q (registered: %s)", name, strings.Join(Names(), ", "))
	}
	if cfg.ModuleName != "" && cfg.ModuleName != name {
		return nil, fmt.Errorf("runtimes: runtime config is for module_name %q, this is %q", cfg.ModuleName, name)
	}
	b, err := open(cfg)
	if err != nil {
		return nil, fmt.Errorf("runtimes: open %s: %w", name, err)
	}
	return NewRuntime(name, cfg, b), nil
}

// NewRuntime wraps a backend directly, without the registry (for tests and
// benchmarks of one backend).
func NewRuntime(name string, cfg Config, b driver.Backend) *Runtime {
	if cfg.MaxTensorElements <= 0 {
		cfg.MaxTensorElements = tensor.DefaultMaxElements
	}
	return &Runtime{name: name, cfg: cfg, backend: b}
}

// Name is the backend's registered name.
func (r *Runtime) Name() string { return r.name }

// Config is the config the runtime was opened with.
func (r *Runtime) Config() Config { return r.cfg }

// Close closes the backend. Models must be closed first.
func (r *Runtime) Close() error { return r.backend.Close() }

// Load loads the model at path (the registry key, used in errors) from
// files. Every failure is a typed error naming the path, with a valid UTF-8
// message: MODEL_EXECUTION (a model that cannot be loaded, whatever the
// backend says went wrong), or GRPC when ctx ended.
func (r *Runtime) Load(ctx context.Context, path string, files Files) (*Model, error) {
	if len(files) == 0 {
		return nil, inferr.Errorf(inferr.ModelExecution, "load model %s: no model files", inferr.Quote(path))
	}
	if err := r.checkLoadOptions(ctx, path); err != nil {
		return nil, err
	}
	bm, err := r.backend.Load(ctx, files)
	return r.loaded(path, bm, err)
}

// LoadOptions are one model's own load settings (driver.LoadOptions); a
// load takes them from its context.
type LoadOptions = driver.LoadOptions

// WithLoadOptions returns ctx carrying o for a load (driver.WithLoadOptions).
func WithLoadOptions(ctx context.Context, o LoadOptions) context.Context {
	return driver.WithLoadOptions(ctx, o)
}

// LoadOptionsFrom returns the options ctx carries (driver.LoadOptionsFrom).
func LoadOptionsFrom(ctx context.Context) LoadOptions { return driver.LoadOptionsFrom(ctx) }

// checkLoadOptions refuses options the backend cannot serve.
func (r *Runtime) checkLoadOptions(ctx context.Context, path string) error {
	o := driver.LoadOptionsFrom(ctx)
	if len(o.ExternalVariables) == 0 {
		return nil
	}
	if _, ok := r.backend.(driver.ExternalVariableLoader); !ok {
		return inferr.Errorf(inferr.ModelExecution, "load model %s: external_variables: the %s runtime cannot serve variables from a store (only TensorFlow SavedModels can)", inferr.Quote(path), r.name)
	}
	return nil
}

// ExternalVariableStats reports the caches of the stores serving external
// variables (nil for a backend that serves none).
func (r *Runtime) ExternalVariableStats() []driver.StoreStats {
	if l, ok := r.backend.(driver.ExternalVariableLoader); ok {
		return l.ExternalVariableStats()
	}
	return nil
}

// LoadDisk is Load from files on local disk (the sidecar receives a
// streamed registration into files): a backend that can load from disk
// (driver.DiskLoader: ONNX, PyTorch, and TensorFlow for the shards it maps) does, so that no copy of the model passes
// through this process's memory; the others get the files read into memory,
// once. The files can be removed once it returns.
func (r *Runtime) LoadDisk(ctx context.Context, path string, files DiskFiles) (*Model, error) {
	if len(files) == 0 {
		return nil, inferr.Errorf(inferr.ModelExecution, "load model %s: no model files", inferr.Quote(path))
	}
	if err := r.checkLoadOptions(ctx, path); err != nil {
		return nil, err
	}
	if dl, ok := r.backend.(driver.DiskLoader); ok {
		bm, err := dl.LoadDisk(ctx, files)
		return r.loaded(path, bm, err)
	}
	mem := make(Files, len(files))
	for name, local := range files {
		b, err := os.ReadFile(local)
		if err != nil {
			return nil, inferr.Wrap(inferr.GRPC, err, "load model "+inferr.Quote(path)+": file "+inferr.Quote(name))
		}
		mem[name] = b
	}
	bm, err := r.backend.Load(ctx, mem)
	return r.loaded(path, bm, err)
}

func (r *Runtime) loaded(path string, bm driver.Model, err error) (*Model, error) {
	if err != nil {
		t := inferr.ModelExecution
		if ErrorType(err) == inferr.GRPC {
			t = inferr.GRPC
		}
		return nil, inferr.Wrap(t, driver.NativeError(err), "load model "+inferr.Quote(path))
	}
	return newModel(path, bm, r.cfg.MaxTensorElements), nil
}

// Model is a loaded model, safe for concurrent use.
type Model struct {
	path        string
	backend     driver.Model
	sig         Signature
	byName      map[string]int // input name or alias -> index in sig.Inputs
	maxElements int64

	// closeMu is held shared by every Predict and exclusively by Close, so
	// Close waits for calls in flight and later calls see closed.
	closeMu sync.RWMutex
	closed  bool

	calls, failures atomic.Int64
	nanos           atomic.Int64

	// observer, set before the model serves (SetObserver), sees each call.
	observer CallObserver
}

// CallObserver sees each call into a model's backend (Predict and
// PredictSequence, warm-up included once set): the call's rows (the first
// input's leading dimension; 0 when it has none), how long it took and its
// error. The sidecar's per-model metrics are one.
type CallObserver interface {
	ObserveCall(rows int, d time.Duration, err error)
}

// SetObserver makes o see every later call. Call it before the model
// serves (before its first concurrent call), as ShareState.
func (m *Model) SetObserver(o CallObserver) { m.observer = o }

// Observer is the CallObserver SetObserver set (nil: none).
func (m *Model) Observer() CallObserver { return m.observer }

// observe records one call in the counters and the observer.
func (m *Model) observe(inputs []tensor.Tensor, start time.Time, err error) {
	d := time.Since(start)
	m.calls.Add(1)
	m.nanos.Add(int64(d))
	if err != nil {
		m.failures.Add(1)
	}
	if m.observer != nil {
		rows := 0
		if len(inputs) > 0 && len(inputs[0].Shape) > 0 {
			rows = int(inputs[0].Shape[0])
		}
		m.observer.ObserveCall(rows, d, err)
	}
}

func newModel(path string, bm driver.Model, maxElements int64) *Model {
	m := &Model{path: path, backend: bm, sig: bm.Signature(), maxElements: maxElements}
	if !m.sig.Positional {
		m.byName = make(map[string]int, 2*len(m.sig.Inputs))
		for i, in := range m.sig.Inputs {
			m.byName[in.Name] = i
			for _, a := range in.Aliases {
				if _, taken := m.byName[a]; !taken {
					m.byName[a] = i
				}
			}
		}
	}
	return m
}

// Path is the model's registry path.
func (m *Model) Path() string { return m.path }

// Signature describes the model's inputs and outputs.
func (m *Model) Signature() Signature { return m.sig }

// WarmUpRuns is how many times the warm-up request should run (at least 1).
func (m *Model) WarmUpRuns() int {
	if w, ok := m.backend.(driver.WarmUpRunner); ok && w.WarmUpRuns() > 1 {
		return w.WarmUpRuns()
	}
	return 1
}

// Stateful reports whether the backend says the model's calls change its
// state (driver.StatefulModel); such calls must not be merged or reordered.
func (m *Model) Stateful() bool {
	s, ok := m.backend.(driver.StatefulModel)
	return ok && s.Stateful()
}

// MapsFile reports whether the runtime serves the model file name of size
// bytes from a memory mapping (driver.FileMapper) rather than the heap.
func (r *Runtime) MapsFile(name string, size int64) bool {
	m, ok := r.backend.(driver.FileMapper)
	return ok && m.MapsFile(name, size)
}

// WeightMemory says how the backend holds the model's weights, when it
// can tell (driver.WeightMemoryReporter).
func (m *Model) WeightMemory() (driver.WeightMemory, bool) {
	if r, ok := m.backend.(driver.WeightMemoryReporter); ok {
		return r.WeightMemory(), true
	}
	return driver.WeightMemory{}, false
}

// ModelStats are a model's call counters since load.
type ModelStats struct {
	Calls, Failures int64
	Total           time.Duration
}

// Stats returns the model's call counters.
func (m *Model) Stats() ModelStats {
	return ModelStats{Calls: m.calls.Load(), Failures: m.failures.Load(), Total: time.Duration(m.nanos.Load())}
}

// ErrClosed is returned by Predict after Close.
var ErrClosed = inferr.Errorf(inferr.ModelNotFound, "model is closed")

// Predict checks inputs against the signature and runs the model. Errors are
// typed: INPUT_PARSING for inputs that do not fit, MODEL_EXECUTION when the
// runtime fails, OUTPUT_PARSING for outputs that cannot be returned; each
// names the model path.
func (m *Model) Predict(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("model %s: %w", inferr.Quote(m.path), ErrClosed)
	}
	start := time.Now()
	out, err := m.predict(ctx, inputs)
	m.observe(inputs, start, err)
	return out, err
}

// SupportsSequences reports whether the backend keeps one state per
// sequence (driver.SequenceModel).
func (m *Model) SupportsSequences() bool {
	_, ok := m.backend.(driver.SequenceModel)
	return ok
}

// ShareState makes the model's calls outside sequences share one state
// (driver.SharedStateModel: the runtime config's shared_state_models
// opt-out). Call it before the model's first call. It fails, untyped,
// saying why, when the backend has no shared state to keep or the model no
// state.
func (m *Model) ShareState() error {
	s, ok := m.backend.(driver.SharedStateModel)
	if !ok {
		return errors.New("the runtime keeps no state shared by calls")
	}
	return s.ShareState()
}

// NewSequenceState returns a fresh sequence state (driver.SequenceModel).
// Errors are MODEL_EXECUTION and name the model path.
func (m *Model) NewSequenceState() (any, error) {
	sm, ok := m.backend.(driver.SequenceModel)
	if !ok {
		return nil, inferr.Errorf(inferr.ModelExecution, "model %s: the runtime keeps no per-sequence state", inferr.Quote(m.path))
	}
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("model %s: %w", inferr.Quote(m.path), ErrClosed)
	}
	st, err := sm.NewSequenceState()
	if err != nil {
		return nil, typed(err, "model "+inferr.Quote(m.path)+": new sequence state")
	}
	return st, nil
}

// PredictSequence is Predict on a sequence's state (from NewSequenceState);
// the caller serialises the calls of one state.
func (m *Model) PredictSequence(ctx context.Context, st any, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	sm, ok := m.backend.(driver.SequenceModel)
	if !ok {
		return nil, inferr.Errorf(inferr.ModelExecution, "model %s: the runtime keeps no per-sequence state", inferr.Quote(m.path))
	}
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("model %s: %w", inferr.Quote(m.path), ErrClosed)
	}
	start := time.Now()
	out, err := m.run(ctx, inputs, func(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
		return sm.PredictSequence(ctx, st, in)
	})
	m.observe(inputs, start, err)
	return out, err
}

func (m *Model) predict(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	return m.run(ctx, inputs, m.backend.Predict)
}

func (m *Model) run(ctx context.Context, inputs []tensor.Tensor, call func(context.Context, []tensor.Tensor) ([]tensor.Tensor, error)) ([]tensor.Tensor, error) {
	ordered, err := m.Bind(inputs)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, typed(err, "model "+inferr.Quote(m.path))
	}
	out, err := call(ctx, ordered)
	if err != nil {
		return nil, typed(err, "model "+inferr.Quote(m.path)+": inference failed")
	}
	for i, t := range out {
		if err := t.Validate(math.MaxInt64); err != nil {
			return nil, inferr.Errorf(inferr.OutputParsing, "model %s: output %d: %w", inferr.Quote(m.path), i, err)
		}
	}
	return out, nil
}

// Bind checks inputs against the signature as Predict does, without
// running the model, and returns them in signature order (for positional
// models: as given; an absent optional input has nil Data). The result may
// be inputs itself and must not be modified. An error is the INPUT_PARSING
// error Predict would return for these inputs. Bind works on a closed model
// too: the signature outlives the backend.
func (m *Model) Bind(inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	ordered, err := m.bind(inputs)
	if err != nil {
		return nil, inferr.Wrap(inferr.InputParsing, err, "model "+inferr.Quote(m.path))
	}
	return ordered, nil
}

// ErrorType is the one classifier of backend errors, as go-cloud's
// ErrorCode is for its drivers: a context error is the call's deadline or
// cancellation (GRPC, as at any other edge), driver.ErrInvalidInput is
// INPUT_PARSING, driver.ErrInvalidOutput is OUTPUT_PARSING, and anything else
// the runtime could not do is MODEL_EXECUTION.
func ErrorType(err error) inferr.Type {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return inferr.GRPC
	case errors.Is(err, driver.ErrInvalidInput):
		return inferr.InputParsing
	case errors.Is(err, driver.ErrInvalidOutput):
		return inferr.OutputParsing
	}
	return inferr.ModelExecution
}

// typed gives a backend error its type and the context msg (which names the
// model path). Every backend error passes here, so this is where a message
// that is not valid UTF-8 (a backend quoting bytes of a model file) is
// mended for all of them (driver.NativeError).
func typed(err error, msg string) error {
	return inferr.Wrap(ErrorType(err), driver.NativeError(err), msg)
}

// requiredInputs counts the inputs a positional model cannot do without.
func (m *Model) requiredInputs() int {
	n := 0
	for _, spec := range m.sig.Inputs {
		if !spec.Optional {
			n++
		}
	}
	return n
}

// withAbsentOptional places the inputs of a positional model given without
// its optional ones (a PyTorch sequence's state) at the required positions,
// in order; the optional positions get nil Data.
func (m *Model) withAbsentOptional(inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	ordered := make([]tensor.Tensor, len(m.sig.Inputs))
	next := 0
	for i, spec := range m.sig.Inputs {
		if spec.Optional {
			ordered[i] = tensor.Tensor{Name: spec.Name}
			continue
		}
		if err := checkSpec(spec, inputs[next]); err != nil {
			return nil, err
		}
		ordered[i] = inputs[next]
		next++
	}
	return ordered, nil
}

// bind checks inputs against the signature and orders them like it.
func (m *Model) bind(inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	for _, t := range inputs {
		if err := t.Validate(m.maxElements); err != nil {
			return nil, err
		}
	}
	if m.sig.Positional {
		if n := len(m.sig.Inputs); n > 0 && len(inputs) != n {
			if len(inputs) == m.requiredInputs() {
				return m.withAbsentOptional(inputs)
			}
			return nil, fmt.Errorf("model takes %d input tensors, got %d", n, len(inputs))
		}
		for i, t := range inputs {
			if i < len(m.sig.Inputs) {
				if err := checkSpec(m.sig.Inputs[i], t); err != nil {
					return nil, err
				}
			}
		}
		return inputs, nil
	}
	if m.inSignatureOrder(inputs) {
		// The usual request: every input once, in signature order. The
		// caller's slice serves as is; no reordered copy per call.
		for i, t := range inputs {
			if err := checkSpec(m.sig.Inputs[i], t); err != nil {
				return nil, err
			}
		}
		return inputs, nil
	}
	ordered := make([]tensor.Tensor, len(m.sig.Inputs))
	for _, t := range inputs {
		i, ok := m.byName[t.Name]
		if !ok {
			return nil, m.unknownInput(t.Name)
		}
		if ordered[i].Data != nil {
			return nil, fmt.Errorf("input tensor %s given twice", specName(m.sig.Inputs[i], t.Name))
		}
		if err := checkSpec(m.sig.Inputs[i], t); err != nil {
			return nil, err
		}
		ordered[i] = t
	}
	for i, spec := range m.sig.Inputs {
		if ordered[i].Data == nil && !spec.Optional {
			return nil, fmt.Errorf("missing input tensor %s", specName(spec, ""))
		}
	}
	return ordered, nil
}

// inSignatureOrder reports whether inputs name each signature input once,
// in signature order (by name or alias).
func (m *Model) inSignatureOrder(inputs []tensor.Tensor) bool {
	if len(inputs) != len(m.sig.Inputs) {
		return false
	}
	for i, t := range inputs {
		if j, ok := m.byName[t.Name]; !ok || j != i {
			return false
		}
	}
	return true
}

func checkSpec(spec TensorSpec, t tensor.Tensor) error {
	if spec.DType != tensor.Invalid && t.DType() != spec.DType {
		return fmt.Errorf("input tensor %s: data_type %s, model expects %s", specName(spec, t.Name), t.DType(), spec.DType)
	}
	if spec.Shape == nil {
		return nil
	}
	if len(t.Shape) != len(spec.Shape) {
		return fmt.Errorf("input tensor %s: tensor_shape %s, model expects %s", specName(spec, t.Name), tensor.FormatShape(t.Shape), tensor.FormatShape(spec.Shape))
	}
	for i, d := range spec.Shape {
		if d >= 0 && t.Shape[i] != d {
			return fmt.Errorf("input tensor %s: tensor_shape %s, model expects %s", specName(spec, t.Name), tensor.FormatShape(t.Shape), tensor.FormatShape(spec.Shape))
		}
	}
	return nil
}

// specName names a tensor in an error as its users know it: its signature
// key (TensorFlow's "ad_id", the first alias) with the model's internal
// name in parentheses ("ad_id" (serving_default_ad_id:0)), or the internal
// name alone when there is no key. given is the name the caller wrote; one
// that is neither comes first ("adid" = "ad_id" (...)). Built on error
// paths only.
func specName(spec TensorSpec, given string) string {
	key := spec.Name
	if len(spec.Aliases) > 0 && spec.Aliases[0] != "" {
		key = spec.Aliases[0]
	}
	name := inferr.Quote(key)
	switch {
	case key == "":
		name = inferr.Quote(given)
	case spec.Name != "" && spec.Name != key:
		name += " (" + spec.Name + ")"
	}
	if given != "" && given != key && given != spec.Name {
		name = inferr.Quote(given) + " = " + name
	}
	return name
}

// unknownInput is the error of an input name the model does not have: the
// model's inputs by signature key (internal names in parentheses) and, when
// one is close to the name given, a suggestion.
func (m *Model) unknownInput(given string) error {
	names := make([]string, len(m.sig.Inputs))
	for i, in := range m.sig.Inputs {
		names[i] = specName(in, "")
	}
	msg := fmt.Sprintf("unknown input tensor %s (model inputs: %s)", inferr.Quote(given), strings.Join(names, ", "))
	if near := m.nearestInput(given); near != "" {
		msg += "; did you mean " + near + "?"
	}
	return errors.New(msg)
}

// nearestInput is the input whose key or name is within a small edit
// distance of given (case and "_"/"-" ignored), as specName names it; ""
// when none is.
func (m *Model) nearestInput(given string) string {
	fold := func(s string) string {
		return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(s))
	}
	g := fold(given)
	best, bestD := "", 3 // at most 2 edits
	if len(g) <= 3 {
		bestD = 1 // a short name: only the same name, folded
	}
	for _, in := range m.sig.Inputs {
		for _, n := range append([]string{in.Name}, in.Aliases...) {
			if d := editDistance(g, fold(n), bestD); d < bestD {
				best, bestD = specName(in, ""), d
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or limit when it
// is at least limit (names are short: the loop is bounded by their length).
func editDistance(a, b string, limit int) int {
	if len(a) > 256 || len(b) > 256 {
		return limit
	}
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

// Close waits for calls in flight, then releases the model. Later Predict
// calls fail with ErrClosed. Close is idempotent.
func (m *Model) Close() error {
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.backend.Close()
}
