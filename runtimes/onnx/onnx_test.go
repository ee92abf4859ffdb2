//go:build cgo

package onnx

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/conformance"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// requireLibrary skips the test when the ONNX Runtime library is not
// installed, unless INFERBID_REQUIRE_NATIVE=1 (make test), where it fails.
func requireLibrary(tb testing.TB) {
	tb.Helper()
	_, err := FindLibrary("")
	testhelp.RequireNative(tb, "the ONNX Runtime library (scripts/install-onnxruntime.sh)", err)
}

func readModel(tb testing.TB, name string) driver.Files {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return driver.Files{name: b}
}

func openRuntime(tb testing.TB, cfg driver.Config) *runtimes.Runtime {
	tb.Helper()
	rt, err := runtimes.Open(Name, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close() })
	return rt
}

func loadModel(tb testing.TB, rt *runtimes.Runtime, name string) *runtimes.Model {
	tb.Helper()
	m, err := rt.Load(context.Background(), "test/"+name, readModel(tb, name))
	if err != nil {
		tb.Fatalf("Load %s: %v", name, err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

func TestConformance(t *testing.T) {
	requireLibrary(t)
	fx := conformance.Fixtures{
		AllDTypes: readModel(t, "alldtypes.onnx"),
		AffineV1:  readModel(t, "affine_v1.onnx"),
		AffineV2:  readModel(t, "affine_v2.onnx"),
		// running_sum.onnx: the state pair sum_in/sum_out, zeros at the start.
		RunningSum: readModel(t, "running_sum.onnx"),
	}
	for name, cfg := range map[string]driver.Config{
		"threads=default": {},
		"threads=1":       {NumIntraopThreads: 1, NumInteropThreads: 1},
		"threads=2x2":     {NumIntraopThreads: 2, NumInteropThreads: 2},
	} {
		t.Run(name, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) *runtimes.Runtime { return openRuntime(t, cfg) }, fx)
		})
	}
}

// mlpWant computes the benchmark MLP of the team contract in Go, from the
// weight formula (weights rounded to float32 as the model stores them; sums
// in float64, so the reference is the exact value of the float32 model).
func mlpWant(x []float32, batch int) []float64 {
	var w1 [8][16]float32
	var b1, w2 [16]float32
	for i := range 8 {
		for j := range 16 {
			w1[i][j] = float32(0.5 * math.Sin(float64(i*16+j)))
		}
	}
	for j := range 16 {
		b1[j] = float32(0.1 * math.Cos(float64(j)))
		w2[j] = float32(0.5 * math.Sin(float64(100+j)))
	}
	b2 := float64(float32(0.05))
	y := make([]float64, batch)
	for b := range batch {
		out := b2
		for j := range 16 {
			h := float64(b1[j])
			for i := range 8 {
				h += float64(x[b*8+i]) * float64(w1[i][j])
			}
			out += math.Max(h, 0) * float64(w2[j])
		}
		y[b] = 1 / (1 + math.Exp(-out))
	}
	return y
}

// mlpInput is the benchmark input of the team contract: x[b][i] = float32((b*8+i)%10)/10.
func mlpInput(batch int) []float32 {
	x := make([]float32, batch*8)
	for i := range x {
		x[i] = float32(i%10) / 10
	}
	return x
}

func TestMLP(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{NumIntraopThreads: 1}), "mlp.onnx")
	sig := m.Signature()
	if len(sig.Inputs) != 1 || sig.Inputs[0].Name != "x" || sig.Inputs[0].DType != tensor.Float ||
		tensor.FormatShape(sig.Inputs[0].Shape) != "[-1,8]" {
		t.Fatalf("inputs %+v, want x FLOAT [-1,8]", sig.Inputs)
	}
	if len(sig.Outputs) != 1 || sig.Outputs[0].Name != "y" || tensor.FormatShape(sig.Outputs[0].Shape) != "[-1,1]" {
		t.Fatalf("outputs %+v, want y FLOAT [-1,1]", sig.Outputs)
	}
	for _, batch := range []int{1, 2, 64, 1000} {
		x := mlpInput(batch)
		out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{int64(batch), 8}, x)})
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		y, ok := tensor.Data[float32](out[0])
		if !ok || tensor.FormatShape(out[0].Shape) != tensor.FormatShape([]int64{int64(batch), 1}) {
			t.Fatalf("batch %d: output %q %s %s, want FLOAT [%d,1]", batch, out[0].Name, out[0].DType(), tensor.FormatShape(out[0].Shape), batch)
		}
		want := mlpWant(x, batch)
		distinct := map[float32]bool{}
		for b := range batch {
			if rel := math.Abs(float64(y[b])-want[b]) / want[b]; rel > 1e-6 {
				t.Errorf("batch %d: y[%d] = %v, want %v (relative error %.2g > 1e-6)", batch, b, y[b], want[b], rel)
			}
			distinct[y[b]] = true
		}
		if batch >= 10 && len(distinct) < 5 {
			t.Errorf("batch %d: only %d distinct outputs: the model is not using its input", batch, len(distinct))
		}
	}
}

func TestMissingLibrary(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, err error, mentions ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("Load succeeded without a library")
		}
		if inferr.TypeOf(err) != inferr.ModelExecution {
			t.Fatalf("error type %v, want MODEL_EXECUTION: %v", inferr.TypeOf(err), err)
		}
		for _, s := range append(mentions, "install-onnxruntime.sh", "make build") {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
	}
	files := readModel(t, "affine_v1.onnx")
	nowhere := filepath.Join(t.TempDir(), "nowhere", LibraryName)

	t.Run("config", func(t *testing.T) {
		rt := openRuntime(t, driver.Config{LibraryPath: nowhere})
		_, err := rt.Load(ctx, "missing/", files)
		check(t, err, nowhere, "library_path", `"missing/"`)
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv(LibraryEnv, nowhere)
		rt := openRuntime(t, driver.Config{})
		_, err := rt.Load(ctx, "missing/", files)
		check(t, err, nowhere, LibraryEnv)
	})
	t.Run("defaults", func(t *testing.T) {
		t.Setenv(LibraryEnv, "")
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		rt := openRuntime(t, driver.Config{})
		_, err := rt.Load(ctx, "missing/", files)
		check(t, err, filepath.Join(dir, "lib", "onnxruntime", LibraryName), "tried")
	})
	t.Run("not a library", func(t *testing.T) {
		// A file that exists but is no library: dlopen fails (or, once the
		// process runs another library, the switch is refused). Typed either way.
		bogus := filepath.Join(t.TempDir(), LibraryName)
		if err := os.WriteFile(bogus, []byte("not an ELF file"), 0o644); err != nil {
			t.Fatal(err)
		}
		rt := openRuntime(t, driver.Config{LibraryPath: bogus})
		_, err := rt.Load(ctx, "missing/", files)
		if err == nil || inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), bogus) {
			t.Fatalf("got %v (type %v), want MODEL_EXECUTION naming %s", err, inferr.TypeOf(err), bogus)
		}
	})
	t.Run("retry after failure", func(t *testing.T) {
		// A failed first Load must not poison the process: with the library
		// in place the next Load works.
		requireLibrary(t)
		m := loadModel(t, openRuntime(t, driver.Config{}), "affine_v1.onnx")
		if _, err := m.Predict(ctx, []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})}); err != nil {
			t.Fatal(err)
		}
		if LibraryVersion() == "" {
			t.Error("LibraryVersion is empty after a successful Load")
		}
		t.Logf("ONNX Runtime %s", LibraryVersion())
	})
}

// TestOddOutputs: BOOL and UINT8 outputs, which the batch contract cannot
// carry, come back typed (the v2 surfaces carry them; batch rendering
// refuses them).
func TestOddOutputs(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "odd_outputs.onnx")
	sig := m.Signature()
	if len(sig.Outputs) != 3 || sig.Outputs[1].Name != "positive" || sig.Outputs[1].DType != tensor.Bool || sig.Outputs[2].DType != tensor.Uint8 {
		t.Fatalf("outputs %+v, want y, positive (BOOL), bytes (UINT8)", sig.Outputs)
	}
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 2}, []float32{-1, 3})})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := tensor.Data[bool](out[1]); !reflect.DeepEqual(b, []bool{false, true}) {
		t.Errorf("positive = %v, want [false true]", out[1].Data)
	}
	if u, _ := tensor.Data[uint8](out[2]); len(u) != 2 || u[1] != 3 {
		t.Errorf("bytes = %v, want [.. 3]", out[2].Data)
	}
}

// TestBoolInput: a BOOL input is fed (Cast to FLOAT by the model).
func TestBoolInput(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "bool_input.onnx")
	if in := m.Signature().Inputs; len(in) != 1 || in[0].Name != "flag" || in[0].DType != tensor.Bool {
		t.Fatalf("inputs %+v, want flag BOOL", in)
	}
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("flag", []int64{2, 1}, []bool{true, false})})
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := tensor.Data[float32](out[0]); !reflect.DeepEqual(f, []float32{1, 0}) {
		t.Errorf("y = %v, want [1 0]", out[0].Data)
	}
}

// v2DTypesInputs are [2,2] inputs of every v2-only dtype with edge values:
// FP16 NaN (with payload), -Inf and the smallest subnormal; BYTES that are
// not UTF-8 and hold a delimiter.
func v2DTypesInputs() []tensor.Tensor {
	s := []int64{2, 2}
	return []tensor.Tensor{
		tensor.New("in_bool", s, []bool{true, false, false, true}),
		tensor.New("in_uint8", s, []uint8{0, 1, 254, math.MaxUint8}),
		tensor.New("in_uint16", s, []uint16{0, 1, 40000, math.MaxUint16}),
		tensor.New("in_uint32", s, []uint32{0, 1, 3e9, math.MaxUint32}),
		tensor.New("in_uint64", s, []uint64{0, 1, 1 << 63, math.MaxUint64}),
		tensor.New("in_fp16", s, []tensor.Float16{0x3c00, 0x7e01, 0xfc00, 0x0001}),
		tensor.New("in_bytes", s, [][]byte{{1, 0xff}, {}, []byte("é"), []byte("a,b]")}),
	}
}

// TestV2DTypes: every v2-only dtype goes through an Identity exactly, at
// batch 2 (outputs preallocated but BYTES); BYTES holding a NUL are refused.
func TestV2DTypes(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "v2dtypes.onnx")
	inputs := v2DTypesInputs()
	for i, in := range m.Signature().Inputs {
		if in.Name != inputs[i].Name || in.DType != inputs[i].DType() {
			t.Errorf("signature input %d: %s %s, want %s %s", i, in.Name, in.DType, inputs[i].Name, inputs[i].DType())
		}
	}
	out, err := m.Predict(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		got := out[i]
		got.Name = in.Name
		if !reflect.DeepEqual(got, in) {
			t.Errorf("%s: got %v %v, want %v", out[i].Name, got.Shape, got.Data, in.Data)
		}
	}
	inputs[6] = tensor.New("in_bytes", []int64{2, 2}, [][]byte{{'a', 0, 'b'}, {}, {}, {}})
	if _, err := m.Predict(context.Background(), inputs); inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), `"in_bytes"`) || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("BYTES with a NUL: %v (type %v), want INPUT_PARSING naming in_bytes and the NUL", err, inferr.TypeOf(err))
	}
}

func TestOverridableInitializerAndUnknownShape(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "overridable.onnx")
	sig := m.Signature()
	if len(sig.Inputs) != 2 || sig.Inputs[0].Name != "x" || sig.Inputs[1].Name != "scale_in" {
		t.Fatalf("inputs %+v, want x and scale_in (bias is an initializer)", sig.Inputs)
	}
	if tensor.FormatShape(sig.Inputs[0].Shape) != "[2,3]" || sig.Inputs[1].Shape != nil {
		t.Fatalf("shapes %v and %v, want [2,3] and unknown (nil)", sig.Inputs[0].Shape, sig.Inputs[1].Shape)
	}
	x := []float32{1, 2, 3, 4, 5, 6}
	out, err := m.Predict(context.Background(), []tensor.Tensor{
		tensor.New("x", []int64{2, 3}, x),
		tensor.New("scale_in", []int64{1}, []float32{2}),
	})
	if err != nil {
		t.Fatal(err)
	}
	bias := []float32{0.5, -0.5, 1.5}
	y := out[0].Data.([]float32)
	for i := range x {
		if want := x[i]*2 + bias[i%3]; y[i] != want {
			t.Errorf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
	// A fixed batch dimension is enforced before the runtime sees the input.
	_, err = m.Predict(context.Background(), []tensor.Tensor{
		tensor.New("x", []int64{1, 3}, x[:3]),
		tensor.New("scale_in", []int64{1}, []float32{2}),
	})
	if inferr.TypeOf(err) != inferr.InputParsing {
		t.Fatalf("batch 1 for a [2,3] input: %v, want INPUT_PARSING", err)
	}
	// Rank-0 input: a typed error, not a panic inside onnxruntime_go.
	_, err = m.Predict(context.Background(), []tensor.Tensor{
		tensor.New("x", []int64{2, 3}, x),
		tensor.New("scale_in", []int64{}, []float32{2}),
	})
	if inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), "scale_in") {
		t.Fatalf("scalar input: %v (type %v), want INPUT_PARSING naming scale_in", err, inferr.TypeOf(err))
	}
}

// TestModelInfoMatchesORT checks the protobuf reader against what ONNX
// Runtime itself reports for every test model.
func TestModelInfoMatchesORT(t *testing.T) {
	requireLibrary(t)
	loadModel(t, openRuntime(t, driver.Config{}), "affine_v1.onnx") // initializes the environment
	names, err := filepath.Glob("testdata/*.onnx")
	if err != nil || len(names) < 5 {
		t.Fatalf("test models: %v %v", names, err)
	}
	for _, path := range names {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		info, err := parseModelInfo(data)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ins, outs, err := ort.GetInputOutputInfoWithONNXData(data)
		if err != nil {
			t.Fatalf("%s: ORT: %v", path, err)
		}
		compare := func(kind string, ours []valueInfo, theirs []ort.InputOutputInfo) {
			if len(ours) != len(theirs) {
				t.Errorf("%s: %d %ss, ORT says %d", path, len(ours), kind, len(theirs))
				return
			}
			for i := range ours {
				o, r := ours[i], theirs[i]
				shape := o.Shape
				if shape == nil {
					shape = []int64{} // ORT reports an unknown rank as no dimensions
				}
				if o.Name != r.Name || o.Elem != int32(r.DataType) || tensor.FormatShape(shape) != tensor.FormatShape(r.Dimensions) {
					t.Errorf("%s: %s %d: ours %q elem %d shape %v; ORT %q elem %d shape %v", path, kind, i, o.Name, o.Elem, o.Shape, r.Name, r.DataType, r.Dimensions)
				}
			}
		}
		compare("input", info.Inputs, ins)
		compare("output", info.Outputs, outs)
	}
}

func TestMultipleFiles(t *testing.T) {
	requireLibrary(t)
	rt := openRuntime(t, driver.Config{})
	files := readModel(t, "affine_v1.onnx")
	files["README.md"] = []byte("an affine model")
	m, err := rt.Load(context.Background(), "test/with_readme/", files)
	if err != nil {
		t.Fatalf("one .onnx file among others: %v", err)
	}
	m.Close()
	files["other.onnx"] = files["affine_v1.onnx"]
	_, err = rt.Load(context.Background(), "test/two/", files)
	if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), "other.onnx") {
		t.Fatalf("two .onnx files: %v, want MODEL_EXECUTION naming them", err)
	}
}

// TestCancelledContext drives the terminate flag: calls whose context is
// already cancelled either finish or stop with a GRPC error, and the reused
// run options never leak a set terminate flag into later calls.
func TestCancelledContext(t *testing.T) {
	requireLibrary(t)
	bm, err := Open(driver.Config{NumIntraopThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := bm.Load(context.Background(), readModel(t, "mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The MLP is too fast to be worth stopping: lower the threshold so that
	// every call with a context that can end arms the terminate flag.
	m.(*model).cancelableRun = 0
	x := []tensor.Tensor{tensor.New("x", []int64{64, 8}, mlpInput(64))}
	var stopped atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				ctx, cancel := context.WithCancel(context.Background())
				if (g+i)%2 == 0 {
					cancel()
				}
				_, err := m.Predict(ctx, x)
				cancel()
				if err != nil {
					stopped.Add(1)
				}
				if err != nil && (inferr.TypeOf(err) != inferr.GRPC || !errors.Is(err, context.Canceled)) {
					t.Errorf("cancelled call: %v (type %v), want success or GRPC wrapping context.Canceled", err, inferr.TypeOf(err))
					return
				}
				live, stop := context.WithCancel(context.Background())
				_, err = m.Predict(live, x)
				stop()
				if err != nil {
					t.Errorf("call with a live context after a cancelled one: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d of 400 calls with a cancelled context were stopped by the terminate flag", stopped.Load())
}

// TestLyingOutputShape: the model declares y [batch,3] but returns
// [2*batch,3]. The preallocated guess fails inside ONNX Runtime's shape
// check, Predict falls back to ORT-allocated outputs and stays right.
func TestLyingOutputShape(t *testing.T) {
	requireLibrary(t)
	bm, err := Open(driver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := bm.Load(context.Background(), readModel(t, "lying_shape.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	m := loaded.(*model)
	if !m.preallocate.Load() || !m.plans[0].ok {
		t.Fatalf("the declared output shape [batch,3] should be planned for preallocation: %+v", m.plans)
	}
	for i := range 3 {
		x := []float32{1, 2, 3, 4, 5, 6}
		out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2, 3}, x)})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		want := append(append([]float32(nil), x...), x...)
		if tensor.FormatShape(out[0].Shape) != "[4,3]" || !slices.Equal(out[0].Data.([]float32), want) {
			t.Fatalf("call %d: got %s %v, want [4,3] %v", i, tensor.FormatShape(out[0].Shape), out[0].Data, want)
		}
		if m.preallocate.Load() {
			t.Fatalf("call %d: preallocation still on after ONNX Runtime refused the guessed shape", i)
		}
	}
}

// TestPassthroughOutputs: an output that is the input itself, Identity,
// Reshape and Flatten outputs (which ONNX Runtime may alias or optimize
// away) all come back as the input, also into preallocated buffers.
func TestPassthroughOutputs(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "passthrough.onnx")
	for _, batch := range []int{1, 5} {
		x := make([]int64, batch*3)
		for i := range x {
			x[i] = int64(i+1) * (1<<40 + 7)
		}
		out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{int64(batch), 3}, x)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 5 {
			t.Fatalf("%d outputs, want 5", len(out))
		}
		for i, name := range []string{"x", "y", "z", "r", "d"} {
			got, ok := tensor.Data[int64](out[i])
			if out[i].Name != name || !ok || !slices.Equal(got, x) || tensor.FormatShape(out[i].Shape) != tensor.FormatShape([]int64{int64(batch), 3}) {
				t.Errorf("batch %d output %d: %q %s %v, want %q = the input %v", batch, i, out[i].Name, tensor.FormatShape(out[i].Shape), out[i].Data, name, x)
			}
		}
		got := out[1].Data.([]int64)
		got[0]++ // outputs must not share memory with each other or the input
		if x[0] == got[0] || out[2].Data.([]int64)[0] == got[0] {
			t.Errorf("batch %d: outputs share memory with the input or each other", batch)
		}
	}
}

func TestNoInputs(t *testing.T) {
	requireLibrary(t)
	_, err := openRuntime(t, driver.Config{}).Load(context.Background(), "test/no_inputs/", readModel(t, "no_inputs.onnx"))
	if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), "no inputs") {
		t.Fatalf("got %v (type %v), want MODEL_EXECUTION: no inputs", err, inferr.TypeOf(err))
	}
}

// TestFastestRunDecidesCancelable: one slow run (a loaded machine) does not
// make a fast model pay for cancellation; only the fastest run counts.
func TestFastestRunDecidesCancelable(t *testing.T) {
	m := &model{}
	m.fastestRun.Store(math.MaxInt64)
	m.observeRun(5 * cancelableRun)
	if got := time.Duration(m.fastestRun.Load()); got < 5*cancelableRun {
		t.Fatalf("fastest run %v after one run of 5ms", got)
	}
	m.observeRun(cancelableRun / 100)
	m.observeRun(10 * cancelableRun)
	if got := time.Duration(m.fastestRun.Load()); got >= cancelableRun {
		t.Fatalf("fastest run %v after a fast run, want < %v", got, cancelableRun)
	}
}

// TestFP16OutputNotPreallocated: an FP16 output whose shape ONNX Runtime
// decides cannot be returned (onnxruntime_go would copy half of it): a clear
// OUTPUT_PARSING error naming the output, not a wrong answer.
func TestFP16OutputNotPreallocated(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "fp16_unplanned.onnx")
	_, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 2}, []tensor.Float16{0x3c00, 0x4000})})
	if inferr.TypeOf(err) != inferr.OutputParsing || !strings.Contains(err.Error(), `"y"`) || !strings.Contains(err.Error(), "FLOAT16") {
		t.Errorf("got %v (type %v), want OUTPUT_PARSING naming output \"y\" and FLOAT16", err, inferr.TypeOf(err))
	}
}
