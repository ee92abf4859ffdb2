//go:build cgo

package onnx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

func init() { runtimes.Register(Name, Open) }

// Open returns the ONNX backend for cfg. It never fails: the library is
// looked up and loaded at the first Load, so a missing library is a typed
// load error, not a sidecar that cannot start.
func Open(cfg driver.Config) (driver.Backend, error) {
	return &backend{cfg: cfg}, nil
}

// environment is the process-wide ONNX Runtime environment. ONNX Runtime
// allows one per process, so it is created once, from one library; unlike
// sync.Once, a failed attempt (missing library) can be retried later.
var environment struct {
	mu      sync.Mutex
	ready   bool
	library string
}

// ensureEnvironment loads the library at path and creates the ORT
// environment, once per process.
func ensureEnvironment(path string) error {
	environment.mu.Lock()
	defer environment.mu.Unlock()
	if environment.ready {
		if environment.library == path || sameFile(environment.library, path) {
			return nil
		}
		return fmt.Errorf("onnx: this process already runs ONNX Runtime from %s and cannot switch to %s", environment.library, path)
	}
	if ort.IsInitialized() { // initialized outside this package: use it as it is
		environment.ready, environment.library = true, path
		return nil
	}
	ort.SetSharedLibraryPath(path)
	// Errors come back as statuses and reach the caller typed; ORT's own
	// stderr logging would only duplicate them, unstructured.
	if err := ort.InitializeEnvironment(ort.WithLogLevelFatal()); err != nil {
		return fmt.Errorf("onnx: cannot load ONNX Runtime from %s: %w; %s", path, err, installHint)
	}
	environment.ready, environment.library = true, path
	return nil
}

func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// LibraryVersion is the version of the loaded ONNX Runtime library, or ""
// before the first successful Load.
func LibraryVersion() string {
	environment.mu.Lock()
	defer environment.mu.Unlock()
	if !environment.ready {
		return ""
	}
	return ort.GetVersion()
}

type backend struct {
	cfg driver.Config
}

func (b *backend) Close() error { return nil } // the environment is process-wide and stays

// Load creates an ONNX Runtime session from the model bytes. A model whose
// weights are ONNX external data in its other files is staged in a
// temporary directory instead, for ONNX Runtime to read from there.
func (b *backend) Load(ctx context.Context, files driver.Files) (driver.Model, error) {
	name, data, err := modelFile(files)
	if err != nil {
		return nil, err
	}
	refs, err := externalFiles(data, name, func(p string) bool { _, ok := files[p]; return ok })
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", name, err)
	}
	return b.load(ctx, name, data, func(opts *ort.SessionOptions, inputs, outputs []string) (*ort.DynamicAdvancedSession, error) {
		if len(refs) == 0 {
			return ort.NewDynamicAdvancedSessionWithONNXData(data, inputs, outputs, opts)
		}
		dir, err := os.MkdirTemp("", "inferbid-onnx-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		model := filepath.Join(dir, stagedModelName)
		if err := os.WriteFile(model, data, 0o600); err != nil {
			return nil, err
		}
		for location, p := range refs {
			if err := stageFile(dir, location, func(dst string) error { return os.WriteFile(dst, files[p], 0o600) }); err != nil {
				return nil, fmt.Errorf("staging %s: %w", p, err)
			}
		}
		return ort.NewDynamicAdvancedSession(model, inputs, outputs, opts)
	})
}

// LoadDisk creates an ONNX Runtime session from the model's file on disk:
// ONNX Runtime reads it itself, so that the model's bytes are never held
// in Go memory as well (the sidecar's peak during a registration), and
// maps its large initializers rather than copying them (external.go). The
// signature is read from a read-only mapping of the file, whose pages
// stay in the page cache: only the few that hold the graph's inputs and
// outputs are touched, never the weights. External data in the model's
// other files is linked beside it, under the locations the model names.
func (b *backend) LoadDisk(ctx context.Context, files driver.DiskFiles) (driver.Model, error) {
	names := make(map[string][]byte, len(files))
	for name := range files {
		names[name] = nil
	}
	name, _, err := modelFile(names)
	if err != nil {
		return nil, err
	}
	local := files[name]
	f, err := os.Open(local)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", name, err)
	}
	defer f.Close()
	data, unmap, err := driver.MapFile(f)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", name, err)
	}
	defer unmap()
	refs, err := externalFiles(data, name, func(p string) bool { _, ok := files[p]; return ok })
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", name, err)
	}
	return b.load(ctx, name, data, func(opts *ort.SessionOptions, inputs, outputs []string) (*ort.DynamicAdvancedSession, error) {
		// The large initializers go to a weights file that ONNX Runtime
		// maps (external.go); the directory is removed once the session
		// exists (the mapping keeps the file).
		dir, err := os.MkdirTemp(filepath.Dir(local), "onnx-external-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		weights := weightsName
		for i := 1; refs[weights] != ""; i++ {
			weights = fmt.Sprintf("weights-%d.bin", i)
		}
		path, err := externalize(data, f, dir, weights)
		if err != nil {
			return nil, fmt.Errorf("moving the weights out of the model: %w", err)
		}
		if len(refs) == 0 {
			if path == "" {
				path = local
			}
			return ort.NewDynamicAdvancedSession(path, inputs, outputs, opts)
		}
		if path == "" {
			path = filepath.Join(dir, stagedModelName)
			if err := linkOrCopy(local, path); err != nil {
				return nil, fmt.Errorf("staging %s: %w", name, err)
			}
		}
		for location, p := range refs {
			if err := stageFile(dir, location, func(dst string) error { return linkOrCopy(files[p], dst) }); err != nil {
				return nil, fmt.Errorf("staging %s: %w", p, err)
			}
		}
		return ort.NewDynamicAdvancedSession(path, inputs, outputs, opts)
	})
}

// stageFile makes dir/location (a slash-separated local path) with put,
// creating its directories.
func stageFile(dir, location string, put func(dst string) error) error {
	dst := filepath.Join(dir, filepath.FromSlash(location))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return put(dst)
}

// linkOrCopy makes dst a new file with src's content: a hard link (no
// copy, and the file stays for as long as ONNX Runtime maps it), else (src
// on another filesystem) a copy, which io.Copy between two *os.File makes
// in the kernel (copy_file_range or sendfile). Not a symbolic link: ONNX
// Runtime resolves one and refuses external data whose file lies outside
// the model's directory.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// load reads the signature from data (the model file's bytes) and creates
// the session with newSession.
func (b *backend) load(ctx context.Context, name string, data []byte, newSession func(opts *ort.SessionOptions, inputs, outputs []string) (*ort.DynamicAdvancedSession, error)) (driver.Model, error) {
	info, err := parseModelInfo(data)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", name, err)
	}
	sig, err := signature(info)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", name, err)
	}
	lib, err := FindLibrary(b.cfg.LibraryPath)
	if err != nil {
		return nil, err
	}
	if err := ensureEnvironment(lib); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts, err := b.sessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: session options: %w", err)
	}
	defer opts.Destroy()
	states, stateProblem := findStates(sig)
	for _, st := range states {
		// A state input may be left out: outside a sequence it starts
		// from zeros, in a sequence the server feeds it.
		sig.Inputs[st.input].Optional = true
	}
	m := &model{
		states:       states,
		stateProblem: stateProblem,
		sig:          sig,
		inputNames:   make([]string, len(sig.Inputs)),
		outputNames:  make([]string, len(sig.Outputs)),
		runOptions:   make(chan *runOptions, runOptionsKept),
	}
	for i, in := range sig.Inputs {
		m.inputNames[i] = in.Name
	}
	for i, out := range sig.Outputs {
		m.outputNames[i] = out.Name
	}
	m.fastestRun.Store(math.MaxInt64)
	m.cancelableRun = int64(cancelableRun)
	plans, anyPlanned := planOutputs(info, sig)
	m.plans = plans
	m.preallocate.Store(anyPlanned)
	m.session, err = newSession(opts, m.inputNames, m.outputNames)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: ONNX Runtime rejected the model: %w", name, driver.NativeError(err))
	}
	return m, nil
}

// modelFile picks the model's .onnx file: the only file, or the only *.onnx.
func modelFile(files driver.Files) (string, []byte, error) {
	if len(files) == 1 {
		for name, data := range files {
			return name, data, nil
		}
	}
	var onnxFiles []string
	for name := range files {
		if strings.HasSuffix(name, ".onnx") {
			onnxFiles = append(onnxFiles, name)
		}
	}
	if len(onnxFiles) == 1 {
		return onnxFiles[0], files[onnxFiles[0]], nil
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	return "", nil, fmt.Errorf("onnx: a model is one .onnx file, got %d files with %d ending in .onnx (%s)", len(files), len(onnxFiles), strings.Join(names, ", "))
}

func (b *backend) sessionOptions() (*ort.SessionOptions, error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	if n := b.cfg.NumIntraopThreads; n > 0 {
		if err := opts.SetIntraOpNumThreads(n); err != nil {
			opts.Destroy()
			return nil, fmt.Errorf("num_intraop_threads %d: %w", n, err)
		}
	}
	// The inter-op pool serves only ORT's parallel executor, which stays
	// off: with many concurrent requests (the sidecar's case) it ran the
	// 64-goroutine conformance test 40x slower than the sequential one.
	// Concurrency comes from concurrent requests instead.
	if n := b.cfg.NumInteropThreads; n > 0 {
		if err := opts.SetInterOpNumThreads(n); err != nil {
			opts.Destroy()
			return nil, fmt.Errorf("num_interop_threads %d: %w", n, err)
		}
	}
	return opts, nil
}

// runOptionsKept bounds the per-model free list of RunOptions (they hold C
// memory, so sync.Pool, which drops items silently, would leak them).
const runOptionsKept = 16

// model is one ONNX Runtime session. OrtSession::Run is thread-safe, so
// Predict needs no lock.
type model struct {
	session     *ort.DynamicAdvancedSession
	sig         driver.Signature
	inputNames  []string
	outputNames []string
	runOptions  chan *runOptions
	plans       []outputPlan
	// preallocate is cleared when a run shows that the plans are wrong.
	preallocate atomic.Bool
	// fastestRun is the shortest run so far in ns (MaxInt64 before the first).
	fastestRun atomic.Int64
	// cancelableRun is the package's cancelableRun in ns (tests lower it).
	cancelableRun int64
	// states are the model's state pairs (sequence.go); stateProblem names
	// a pair that cannot be a state (dynamic shape), "" if none.
	states       []stateSlot
	stateProblem string
}

// observeRun records the duration of a run.
func (m *model) observeRun(took time.Duration) {
	d := int64(took)
	for {
		cur := m.fastestRun.Load()
		if d >= cur || m.fastestRun.CompareAndSwap(cur, d) {
			return
		}
	}
}

func (m *model) Signature() driver.Signature { return m.sig }

// Predict wraps the callers' slices as ORT tensors (no copy). Outputs whose
// shape follows from the inputs' (see outputPlan) are allocated here, in Go
// memory, and ONNX Runtime writes into them directly; the others ONNX
// Runtime allocates, and onnxruntime_go copies them once into Go memory.
func (m *model) Predict(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	inputs = m.withZeroStates(inputs)
	values := make([]ort.Value, len(inputs)+len(m.outputNames))
	ins, outs := values[:len(inputs)], values[len(inputs):]
	defer destroyValues(values)
	for i, t := range inputs {
		v, err := newValue(t)
		if err != nil {
			return nil, fmt.Errorf("%w: onnx: input %q: %w", driver.ErrInvalidInput, m.inputNames[i], err)
		}
		ins[i] = v
	}
	result := make([]tensor.Tensor, len(outs))
	preallocated := false
	if m.preallocate.Load() {
		for i := range m.plans {
			if t, ok := m.plans[i].tensor(m.outputNames[i], inputs); ok {
				v, err := newValue(t)
				if err != nil {
					continue // let ONNX Runtime allocate it
				}
				outs[i], result[i], preallocated = v, t, true
			}
		}
	}
	if err := m.checkFP16Allocated(result); err != nil {
		return nil, err
	}
	err := m.run(ctx, ins, outs)
	if err != nil && preallocated && ctx.Err() == nil {
		// The model's outputs did not have the shapes its dim_params
		// promise (ONNX Runtime checks): run again with ONNX Runtime
		// allocating, and stop guessing for this model if that works.
		destroyValues(outs)
		clear(result)
		if err := m.checkFP16Allocated(result); err != nil {
			return nil, err
		}
		if err = m.run(ctx, ins, outs); err == nil {
			m.preallocate.Store(false)
		}
	}
	if err != nil {
		return nil, err
	}
	for i, v := range outs {
		if result[i].Data != nil {
			continue // ONNX Runtime wrote into our slice
		}
		t, err := goTensor(m.outputNames[i], v)
		if err != nil {
			return nil, err
		}
		result[i] = t
	}
	return result, nil
}

// checkFP16Allocated refuses a run that would leave an FP16 output to ONNX
// Runtime's allocation: onnxruntime_go copies only half of such an output
// (one byte per element), so it is allocated here or not returned at all.
func (m *model) checkFP16Allocated(result []tensor.Tensor) error {
	for i, p := range m.plans {
		if p.dtype == tensor.Half && result[i].Data == nil {
			return fmt.Errorf("%w: onnx: output %q is FLOAT16 and its shape does not follow from the inputs' (dim_params): onnxruntime_go cannot return an FLOAT16 output ONNX Runtime allocates", driver.ErrInvalidOutput, m.outputNames[i])
		}
	}
	return nil
}

func destroyValues(values []ort.Value) {
	for i, v := range values {
		// onnxruntime_go can leave a typed nil behind a failed conversion.
		if v != nil && !reflect.ValueOf(v).IsNil() {
			v.Destroy()
		}
		values[i] = nil
	}
}

// cancelableRun is the run time from which a model's runs can be stopped
// when their context ends. Arming ORT's terminate flag costs about a
// microsecond per call; a model that can finish within a millisecond is not
// worth stopping.
const cancelableRun = time.Millisecond

// run runs the session. While this model's fastest run so far took
// cancelableRun or more (and before its first run), runs whose context can
// end get RunOptions whose terminate flag the context's end sets, so a
// cancelled request stops the model. The fastest run, not the last, decides:
// a loaded machine makes any run slow now and then.
func (m *model) run(ctx context.Context, ins, outs []ort.Value) error {
	start := time.Now()
	err := m.runOnce(ctx, ins, outs)
	m.observeRun(time.Since(start))
	return err
}

func (m *model) runOnce(ctx context.Context, ins, outs []ort.Value) error {
	if ctx.Done() == nil || m.fastestRun.Load() < m.cancelableRun {
		if err := m.session.Run(ins, outs); err != nil {
			return fmt.Errorf("onnx: %w", driver.NativeError(err))
		}
		return nil
	}
	ro, err := m.getRunOptions()
	if err != nil {
		return fmt.Errorf("onnx: run options: %w", err)
	}
	ro.pending.Add(1)
	stop := context.AfterFunc(ctx, ro.terminate)
	err = m.session.RunWithOptions(ins, outs, ro.opts)
	if stop() {
		ro.pending.Done() // the callback will never run
		m.putRunOptions(ro)
	} else {
		// The context ended: wait for the callback to have set the flag,
		// then clear it before the options are reused.
		ro.pending.Wait()
		if ro.opts.UnsetTerminate() == nil {
			m.putRunOptions(ro)
		} else {
			ro.opts.Destroy()
		}
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("onnx: run stopped: %w", ctxErr)
		}
		return fmt.Errorf("onnx: %w", driver.NativeError(err))
	}
	return nil
}

// runOptions are reusable ORT RunOptions with a prebuilt terminate callback
// (no closure to allocate per call).
type runOptions struct {
	opts      *ort.RunOptions
	pending   sync.WaitGroup // held while a terminate callback may still run
	terminate func()
}

func (m *model) getRunOptions() (*runOptions, error) {
	select {
	case ro := <-m.runOptions:
		return ro, nil
	default:
	}
	opts, err := ort.NewRunOptions()
	if err != nil {
		return nil, err
	}
	ro := &runOptions{opts: opts}
	ro.terminate = func() {
		ro.opts.Terminate()
		ro.pending.Done()
	}
	return ro, nil
}

func (m *model) putRunOptions(ro *runOptions) {
	select {
	case m.runOptions <- ro:
	default:
		ro.opts.Destroy()
	}
}

// Close releases the session; the runtime calls it once, after every
// Predict has returned.
func (m *model) Close() error {
	for len(m.runOptions) > 0 {
		(<-m.runOptions).opts.Destroy()
	}
	if m.session == nil {
		return nil
	}
	err := m.session.Destroy()
	m.session = nil
	return err
}

// newValue wraps t's slice as an ORT tensor without copying it (BYTES,
// which ONNX Runtime holds as its own strings, are copied).
func newValue(t tensor.Tensor) (ort.Value, error) {
	if len(t.Shape) == 0 {
		return nil, errors.New("scalar (rank 0) tensors are not supported by the ONNX runtime; give shape [1] if the model allows it")
	}
	shape := ort.Shape(t.Shape)
	switch d := t.Data.(type) {
	case []float64:
		return ort.NewTensor(shape, d)
	case []float32:
		return ort.NewTensor(shape, d)
	case []int8:
		return ort.NewTensor(shape, d)
	case []int16:
		return ort.NewTensor(shape, d)
	case []int32:
		return ort.NewTensor(shape, d)
	case []int64:
		return ort.NewTensor(shape, d)
	case []bool:
		return ort.NewTensor(shape, d)
	case []uint8:
		return ort.NewTensor(shape, d)
	case []uint16:
		return ort.NewTensor(shape, d)
	case []uint32:
		return ort.NewTensor(shape, d)
	case []uint64:
		return ort.NewTensor(shape, d)
	case []tensor.Float16:
		// The bits as bytes, in place: ONNX Runtime reads (or, for a
		// preallocated output, writes) the Go slice itself.
		return ort.NewCustomDataTensor(shape, halfBytes(d), ort.TensorElementDataTypeFloat16)
	case [][]byte:
		strs := make([]string, len(d))
		for i, b := range d {
			// onnxruntime_go fills string tensors from C strings, which
			// end at the first NUL: refuse rather than truncate.
			if bytes.IndexByte(b, 0) >= 0 {
				return nil, fmt.Errorf("BYTES element %d holds a NUL byte, which the ONNX runtime's string tensors cannot take", i)
			}
			strs[i] = string(b)
		}
		v, err := ort.NewStringTensor(shape)
		if err != nil {
			return nil, err
		}
		if err := v.SetContents(strs); err != nil {
			v.Destroy()
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("unsupported data %T", t.Data)
}

// halfBytes views FP16 bits as their little-endian bytes (the host's order,
// which is what ONNX Runtime reads).
func halfBytes(d []tensor.Float16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), 2*len(d))
}

// goTensor turns an output into a tensor.Tensor. onnxruntime_go has
// already copied the data into a Go slice, which stays valid after the value
// is destroyed: no second copy.
func goTensor(name string, v ort.Value) (tensor.Tensor, error) {
	t := tensor.Tensor{Name: name}
	switch tv := v.(type) {
	case *ort.Tensor[float64]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[float32]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[int8]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[int16]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[int32]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[int64]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[bool]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[uint8]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[uint16]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[uint32]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.Tensor[uint64]:
		t.Shape, t.Data = tv.GetShape(), tv.GetData()
	case *ort.StringTensor:
		strs, err := tv.GetContents()
		if err != nil {
			return t, fmt.Errorf("%w: onnx: output %q: %w", driver.ErrInvalidOutput, name, err)
		}
		b := make([][]byte, len(strs))
		for i, s := range strs {
			b[i] = []byte(s)
		}
		t.Shape, t.Data = tv.GetShape(), b
	case nil:
		return t, fmt.Errorf("%w: onnx: output %q: ONNX Runtime returned no value", driver.ErrInvalidOutput, name)
	default:
		// FLOAT16 included: onnxruntime_go copies only half of an FP16
		// output ONNX Runtime allocated, so one is returned only when
		// preallocated (its shape follows from the inputs').
		return t, fmt.Errorf("%w: onnx: output %q is a %s, which cannot be returned (FLOAT16 only when its shape follows from the inputs' dim_params)", driver.ErrInvalidOutput, name, describeValue(v))
	}
	return t, nil
}

func describeValue(v ort.Value) string {
	if v.GetONNXType() != ort.ONNXTypeTensor {
		return v.GetONNXType().String()
	}
	return "tensor of " + elemName(int32(v.DataType()))
}
