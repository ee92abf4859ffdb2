package runtimes

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferbid/inferbid/inferr"
)

// Config is the sidecar's runtime config, the JSON of
// INFERENCE_SIDECAR_RUNTIME_CONFIG. The zero value means defaults everywhere.
type Config struct {
	// NumInteropThreads and NumIntraopThreads size the runtime's thread
	// pools; 0 lets the runtime choose.
	NumInteropThreads int `json:"num_interop_threads,omitempty"`
	NumIntraopThreads int `json:"num_intraop_threads,omitempty"`
	// ModuleName names the runtime the config is meant for ("tensorflow",
	// "pytorch", "onnx"); when set it must match the sidecar's runtime.
	ModuleName string `json:"module_name,omitempty"`
	// Cpuset pins the sidecar to these CPUs.
	Cpuset []int `json:"cpuset,omitempty"`
	// ModelResetProbability is the chance per inference that a stateful
	// model's state is restored from its checkpoint (a privacy feature).
	ModelResetProbability float64 `json:"model_reset_probability,omitempty"`
	// LibraryPath points a runtime at its native library (ONNX Runtime);
	// empty means the runtime's default location.
	LibraryPath string `json:"library_path,omitempty"`
	// MaxTensorElements bounds the element count of any one input tensor;
	// 0 means DefaultMaxElements.
	MaxTensorElements int64 `json:"max_tensor_elements,omitempty"`
}

// Files are the files of one model: slash-separated paths relative to the
// model's root (e.g. "saved_model.pb", "variables/variables.index") mapped to
// their contents. A single-file model has one entry.
type Files map[string][]byte

// Size is the total size of the files in bytes.
func (f Files) Size() int64 {
	var n int64
	for _, b := range f {
		n += int64(len(b))
	}
	return n
}

// Signature describes what a model takes and returns.
type Signature struct {
	Inputs  []TensorSpec
	Outputs []TensorSpec
	// Positional models take their inputs by position and ignore names
	// (PyTorch's forward()). Inputs may then be empty (unknown).
	Positional bool
}

// TensorSpec describes one input or output of a model.
type TensorSpec struct {
	// Name is the canonical name: the graph tensor name for TensorFlow
	// ("serving_default_x:0"), the graph input name for ONNX.
	Name string
	// Aliases are other names accepted for an input (TensorFlow's
	// signature key, "x").
	Aliases []string
	// DType is the element type; Invalid means any.
	DType DType
	// Shape is nil when even the rank is unknown; -1 marks an unknown
	// dimension.
	Shape []int64
	// Optional inputs may be left out (TensorFlow PlaceholderWithDefault).
	Optional bool
}

// Backend is what a runtime implements: it loads models from bytes.
type Backend interface {
	// Load parses, validates and prepares a model. It must not keep a
	// reference to files beyond what the model needs.
	Load(ctx context.Context, files Files) (BackendModel, error)
	Close() error
}

// BackendModel is one loaded model of a backend. Predict is called
// concurrently from many goroutines; Close is called once, after every
// Predict has returned.
type BackendModel interface {
	Signature() Signature
	// Predict runs one request. Inputs are aligned with Signature().Inputs
	// (for positional models: as the caller gave them) and already checked
	// against it; an absent optional input has nil Data. inputs may be the
	// caller's own slice: Predict must not modify it. Every output must be
	// a valid tensor with a name.
	Predict(ctx context.Context, inputs []Tensor) ([]Tensor, error)
	Close() error
}

// WarmUpRunner is implemented by backend models that need the warm-up
// request run more than once before they are fast (TorchScript's profiling
// executor).
type WarmUpRunner interface {
	WarmUpRuns() int
}

// Opener opens a backend with a config.
type Opener func(Config) (Backend, error)

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
	backend Backend
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
func NewRuntime(name string, cfg Config, b Backend) *Runtime {
	return &Runtime{name: name, cfg: cfg, backend: b}
}

// Name is the backend's registered name.
func (r *Runtime) Name() string { return r.name }

// Config is the config the runtime was opened with.
func (r *Runtime) Config() Config { return r.cfg }

// Close closes the backend. Models must be closed first.
func (r *Runtime) Close() error { return r.backend.Close() }

// Load loads the model at path (the registry key, used in errors) from
// files. Every failure is a MODEL_EXECUTION error naming the path, unless the
// backend typed it otherwise.
func (r *Runtime) Load(ctx context.Context, path string, files Files) (*Model, error) {
	if len(files) == 0 {
		return nil, inferr.Errorf(inferr.ModelExecution, "load model %q: no model files", path)
	}
	bm, err := r.backend.Load(ctx, files)
	if err != nil {
		return nil, inferr.Wrap(inferr.ModelExecution, err, fmt.Sprintf("load model %q", path))
	}
	return newModel(path, bm, r.cfg.MaxTensorElements), nil
}

// Model is a loaded model, safe for concurrent use.
type Model struct {
	path        string
	backend     BackendModel
	sig         Signature
	byName      map[string]int // input name or alias -> index in sig.Inputs
	maxElements int64

	// closeMu is held shared by every Predict and exclusively by Close, so
	// Close waits for calls in flight and later calls see closed.
	closeMu sync.RWMutex
	closed  bool

	calls, failures atomic.Int64
	nanos           atomic.Int64
}

func newModel(path string, bm BackendModel, maxElements int64) *Model {
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
	if w, ok := m.backend.(WarmUpRunner); ok && w.WarmUpRuns() > 1 {
		return w.WarmUpRuns()
	}
	return 1
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
func (m *Model) Predict(ctx context.Context, inputs []Tensor) ([]Tensor, error) {
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("model %q: %w", m.path, ErrClosed)
	}
	start := time.Now()
	out, err := m.predict(ctx, inputs)
	m.calls.Add(1)
	m.nanos.Add(int64(time.Since(start)))
	if err != nil {
		m.failures.Add(1)
	}
	return out, err
}

func (m *Model) predict(ctx context.Context, inputs []Tensor) ([]Tensor, error) {
	ordered, err := m.bind(inputs)
	if err != nil {
		return nil, inferr.Wrap(inferr.InputParsing, err, fmt.Sprintf("model %q", m.path))
	}
	if err := ctx.Err(); err != nil {
		return nil, inferr.Wrap(inferr.GRPC, err, fmt.Sprintf("model %q", m.path))
	}
	out, err := m.backend.Predict(ctx, ordered)
	if err != nil {
		return nil, inferr.Wrap(inferr.ModelExecution, err, fmt.Sprintf("model %q: inference failed", m.path))
	}
	for i, t := range out {
		if err := t.Validate(1 << 62); err != nil {
			return nil, inferr.Errorf(inferr.OutputParsing, "model %q: output %d: %v", m.path, i, err)
		}
	}
	return out, nil
}

// bind checks inputs against the signature and orders them like it.
func (m *Model) bind(inputs []Tensor) ([]Tensor, error) {
	for _, t := range inputs {
		if err := t.Validate(m.maxElements); err != nil {
			return nil, err
		}
	}
	if m.sig.Positional {
		if n := len(m.sig.Inputs); n > 0 && len(inputs) != n {
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
	ordered := make([]Tensor, len(m.sig.Inputs))
	for _, t := range inputs {
		i, ok := m.byName[t.Name]
		if !ok {
			return nil, fmt.Errorf("unknown input tensor %q (model inputs: %s)", t.Name, m.inputNames())
		}
		if ordered[i].Data != nil {
			return nil, fmt.Errorf("input tensor %q given twice", m.sig.Inputs[i].Name)
		}
		if err := checkSpec(m.sig.Inputs[i], t); err != nil {
			return nil, err
		}
		ordered[i] = t
	}
	for i, spec := range m.sig.Inputs {
		if ordered[i].Data == nil && !spec.Optional {
			return nil, fmt.Errorf("missing input tensor %q", spec.Name)
		}
	}
	return ordered, nil
}

// inSignatureOrder reports whether inputs name each signature input once,
// in signature order (by name or alias).
func (m *Model) inSignatureOrder(inputs []Tensor) bool {
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

func checkSpec(spec TensorSpec, t Tensor) error {
	name := spec.Name
	if name == "" {
		name = t.Name
	}
	if spec.DType != Invalid && t.DType() != spec.DType {
		return fmt.Errorf("input tensor %q: data_type %s, model expects %s", name, t.DType(), spec.DType)
	}
	if spec.Shape == nil {
		return nil
	}
	if len(t.Shape) != len(spec.Shape) {
		return fmt.Errorf("input tensor %q: tensor_shape %s, model expects %s", name, FormatShape(t.Shape), FormatShape(spec.Shape))
	}
	for i, d := range spec.Shape {
		if d >= 0 && t.Shape[i] != d {
			return fmt.Errorf("input tensor %q: tensor_shape %s, model expects %s", name, FormatShape(t.Shape), FormatShape(spec.Shape))
		}
	}
	return nil
}

func (m *Model) inputNames() string {
	names := make([]string, len(m.sig.Inputs))
	for i, in := range m.sig.Inputs {
		names[i] = in.Name
	}
	return strings.Join(names, ", ")
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
