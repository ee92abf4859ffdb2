//go:build pytorch && cgo

package pytorch_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/conformance"
	"github.com/inferbid/inferbid/runtimes/driver"
	_ "github.com/inferbid/inferbid/runtimes/pytorch"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// testConfig is what every test opens the backend with. TestMain sets the
// inter-op pool once, before any model runs, as a sidecar does at start.
var testConfig = driver.Config{NumIntraopThreads: 1, NumInteropThreads: 1}

func TestMain(m *testing.M) {
	if _, err := runtimes.Open("pytorch", testConfig); err != nil {
		fmt.Fprintln(os.Stderr, "open pytorch backend:", err)
		os.Exit(1)
	}
	code := m.Run()
	testhelp.RemoveBinaries()
	os.Exit(code)
}

func openRuntime(t testing.TB) *runtimes.Runtime {
	t.Helper()
	rt, err := runtimes.Open("pytorch", testConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func readTestdata(t testing.TB, name string) driver.Files {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return driver.Files{name: b}
}

func load(t testing.TB, rt *runtimes.Runtime, name string) *runtimes.Model {
	t.Helper()
	m, err := rt.Load(context.Background(), name, readTestdata(t, name))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) *runtimes.Runtime { return openRuntime(t) }, conformance.Fixtures{
		AllDTypes: readTestdata(t, "alldtypes.pt"),
		AffineV1:  readTestdata(t, "affine_v1.pt"),
		AffineV2:  readTestdata(t, "affine_v2.pt"),
		// running_sum.pt: the state argument sum_in, initial_state() zeros.
		RunningSum: readTestdata(t, "running_sum.pt"),
	})
}

// The same fixtures through an in-process sidecar over a real Unix socket.
func TestSidecarConformance(t *testing.T) {
	sidecartest.RunConformance(t, func(t *testing.T) *runtimes.Runtime { return openRuntime(t) }, sidecartest.Fixtures{
		AffineV1: readTestdata(t, "affine_v1.pt"),
		AffineV2: readTestdata(t, "affine_v2.pt"),
		BadUTF8:  badUTF8Model(t),
	})
}

// badUTF8Model is affine_v1.pt with "torch.mul" in its code spelled
// "torch.m\xffl": the file passes the preflight (a sound zip) and libtorch
// rejects the code with a message quoting the bytes, which are not UTF-8.
func badUTF8Model(t testing.TB) driver.Files {
	t.Helper()
	src := readTestdata(t, "affine_v1.pt")["affine_v1.pt"]
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	damaged := false
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f.Name, ".py") && bytes.Contains(b, []byte("torch.mul(")) {
			b = bytes.Replace(b, []byte("torch.mul("), []byte("torch.m\xffl("), 1)
			damaged = true
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: f.Method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil || !damaged {
		t.Fatalf("damaging affine_v1.pt: %v (damaged %v)", err, damaged)
	}
	return driver.Files{"affine_v1.pt": out.Bytes()}
}

func TestAffineKnownAnswer(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct {
		file         string
		scale, shift float32
	}{{"affine_v1.pt", 2, 1}, {"affine_v2.pt", 3, -1}} {
		m := load(t, rt, tc.file)
		x := []float32{0, 1, -2.5, 3.25, 100, -0.125}
		out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2, 3}, x)})
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if len(out) != 1 || out[0].Name != "0" || fmt.Sprint(out[0].Shape) != "[2 3]" {
			t.Fatalf("%s: got %d outputs, first %q %v", tc.file, len(out), out[0].Name, out[0].Shape)
		}
		y, ok := tensor.Data[float32](out[0])
		if !ok {
			t.Fatalf("%s: output dtype %s, want FLOAT", tc.file, out[0].DType())
		}
		for i := range x {
			if want := tc.scale*x[i] + tc.shift; y[i] != want {
				t.Errorf("%s: y[%d] = %v, want %v", tc.file, i, y[i], want)
			}
		}
	}
}

func TestAllDTypesRoundTrip(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "alldtypes.pt")
	sig := m.Signature()
	if !sig.Positional || len(sig.Inputs) != 6 {
		t.Fatalf("signature %+v: want positional with 6 inputs", sig)
	}
	for i, want := range []string{"a", "b", "c", "d", "e", "f"} {
		if sig.Inputs[i].Name != want {
			t.Errorf("input %d named %q, want %q", i, sig.Inputs[i].Name, want)
		}
	}
	shape := []int64{3, 2}
	in := []tensor.Tensor{
		tensor.New("a", shape, []float64{1.5, -2, 3e300, 4, 5, -6.25}),
		tensor.New("b", shape, []float32{1.5, -2, 3e30, 4, 5, -6.25}),
		tensor.New("c", shape, []int8{-128, 127, 0, 1, -1, 5}),
		tensor.New("d", shape, []int16{-32768, 32767, 0, 1, -1, 5}),
		tensor.New("e", shape, []int32{math.MinInt32, math.MaxInt32, 0, 1, -1, 5}),
		tensor.New("f", shape, []int64{math.MinInt64, math.MaxInt64, 0, 1, -1, 5}),
	}
	out, err := m.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("got %d outputs, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i].Name != fmt.Sprint(i) {
			t.Errorf("output %d named %q", i, out[i].Name)
		}
		if out[i].DType() != in[i].DType() || fmt.Sprint(out[i].Shape) != fmt.Sprint(in[i].Shape) ||
			fmt.Sprint(out[i].Data) != fmt.Sprint(in[i].Data) {
			t.Errorf("output %d = %s %v %v, want %s %v %v", i, out[i].DType(), out[i].Shape, out[i].Data,
				in[i].DType(), in[i].Shape, in[i].Data)
		}
	}
	// A wrong input count is caught from the schema before libtorch runs.
	_, err = m.Predict(context.Background(), in[:5])
	if inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), "6 input tensors") {
		t.Errorf("5 inputs: got %v, want INPUT_PARSING naming the count", err)
	}
	// A scalar (empty shape) goes through as a 0-d tensor.
	sc := make([]tensor.Tensor, 6)
	for i, d := range tensor.DTypes {
		sc[i] = tensor.Tensor{Name: "s", Shape: []int64{}, Data: tensor.MakeData(d, 1)}
	}
	out, err = m.Predict(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if len(out[i].Shape) != 0 || out[i].Len() != 1 {
			t.Errorf("scalar output %d: shape %v, %d values", i, out[i].Shape, out[i].Len())
		}
	}
}

// mlpReference computes CONTRACTS.md's benchmark MLP in float32, in Go.
func mlpReference(x []float32, rows int) []float32 {
	var w1 [8][16]float32
	var b1 [16]float32
	var w2 [16]float32
	for i := range 8 {
		for j := range 16 {
			w1[i][j] = float32(0.5 * math.Sin(float64(i*16+j)))
		}
	}
	for j := range 16 {
		b1[j] = float32(0.1 * math.Cos(float64(j)))
		w2[j] = float32(0.5 * math.Sin(float64(100+j)))
	}
	y := make([]float32, rows)
	for r := range rows {
		var z float32 = 0.05
		for j := range 16 {
			h := b1[j]
			var acc float32
			for i := range 8 {
				acc += x[r*8+i] * w1[i][j]
			}
			h += acc
			if h < 0 {
				h = 0
			}
			z += h * w2[j]
		}
		y[r] = float32(1 / (1 + math.Exp(-float64(z))))
	}
	return y
}

func benchInput(rows int) []float32 {
	x := make([]float32, rows*8)
	for b := range rows {
		for i := range 8 {
			x[b*8+i] = float32((b*8+i)%10) / 10
		}
	}
	return x
}

func closeRel(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(math.Abs(want), 1e-30)
}

func TestMLPKnownAnswer(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "mlp.pt")
	const rows = 64
	x := benchInput(rows)
	want := mlpReference(x, rows)
	for run := range 4 { // the profiling executor changes plans over the first runs
		out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{rows, 8}, x)})
		if err != nil {
			t.Fatal(err)
		}
		y, _ := tensor.Data[float32](out[0])
		if fmt.Sprint(out[0].Shape) != "[64 1]" || len(y) != rows {
			t.Fatalf("run %d: output shape %v dtype %s", run, out[0].Shape, out[0].DType())
		}
		for i := range y {
			if !closeRel(float64(y[i]), float64(want[i]), 1e-6) {
				t.Errorf("run %d: y[%d] = %v, want %v", run, i, y[i], want[i])
			}
		}
	}
}

func TestSignatureWithDefaultArgumentIsOpen(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "optional_arg.pt")
	if sig := m.Signature(); !sig.Positional || len(sig.Inputs) != 0 {
		t.Fatalf("signature %+v: want positional, inputs unknown", sig)
	}
	x := tensor.New("x", []int64{2}, []float32{1, 2})
	out, err := m.Predict(context.Background(), []tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := tensor.Data[float32](out[0]); fmt.Sprint(y) != "[2 3]" {
		t.Errorf("x + default ones = %v, want [2 3]", y)
	}
	out, err = m.Predict(context.Background(), []tensor.Tensor{x, tensor.New("y", []int64{2}, []float32{10, 20})})
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := tensor.Data[float32](out[0]); fmt.Sprint(y) != "[11 22]" {
		t.Errorf("x + y = %v, want [11 22]", y)
	}
	// Three tensors do not fit forward(x, y=...): libtorch says so.
	_, err = m.Predict(context.Background(), []tensor.Tensor{x, x, x})
	if inferr.TypeOf(err) != inferr.ModelExecution {
		t.Errorf("3 inputs: got %v, want MODEL_EXECUTION", err)
	}
}

func TestLoadRejects(t *testing.T) {
	rt := openRuntime(t)
	affine := readTestdata(t, "affine_v1.pt")["affine_v1.pt"]
	for _, tc := range []struct {
		name  string
		files driver.Files
		want  []string
	}{
		{"stateful", readTestdata(t, "stateful.pt"), []string{"stateful", "count"}},
		{"print", readTestdata(t, "side_effect_print.pt"), []string{"side-effect", "prim::Print"}},
		{"save in submodule", readTestdata(t, "side_effect_save.pt"), []string{"side-effect", "aten::save"}},
		{"print in a forked function", readTestdata(t, "side_effect_fork_print.pt"), []string{"side-effect", "prim::Print"}},
		{"int argument", readTestdata(t, "int_arg.pt"), []string{"argument 1 (n)", "int"}},
		{"garbage", driver.Files{"m.pt": []byte("definitely not a zip file")}, []string{"m.pt", "not a TorchScript file"}},
		{"truncated", driver.Files{"m.pt": affine[:len(affine)/2]}, []string{"not a TorchScript file"}},
		{"empty", driver.Files{"m.pt": {}}, []string{"m.pt", "empty file"}},
		{"two models", driver.Files{"a.pt": affine, "b.pt": affine}, []string{"a.pt, b.pt"}},
		{"no model among files", driver.Files{"README": affine, "LICENSE": affine}, []string{"LICENSE, README"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// From bytes, and from disk (LoadDisk: the sidecar's path).
			for _, from := range []string{"bytes", "disk"} {
				var m *runtimes.Model
				var err error
				if from == "bytes" {
					m, err = rt.Load(context.Background(), "models/"+tc.name, tc.files)
				} else {
					m, err = rt.LoadDisk(context.Background(), "models/"+tc.name, onDisk(t, tc.files))
				}
				if err == nil {
					m.Close()
					t.Fatalf("%s: loaded; want an error", from)
				}
				if inferr.TypeOf(err) != inferr.ModelExecution {
					t.Errorf("%s: type %s, want MODEL_EXECUTION: %v", from, inferr.TypeOf(err), err)
				}
				for _, w := range append(tc.want, "models/"+tc.name) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not mention %q", from, err, w)
					}
				}
			}
		})
	}
}

// onDisk writes files into a temporary directory, as the sidecar receives
// a registration.
func onDisk(t testing.TB, files driver.Files) runtimes.DiskFiles {
	t.Helper()
	dir := t.TempDir()
	disk := runtimes.DiskFiles{}
	i := 0
	for name, b := range files {
		p := filepath.Join(dir, strconv.Itoa(i))
		i++
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		disk[name] = p
	}
	return disk
}

// TestLoadDiskKnownAnswer: a model loaded from disk (pt_load_fd) answers
// as the one loaded from bytes.
func TestLoadDiskKnownAnswer(t *testing.T) {
	rt := openRuntime(t)
	m, err := rt.LoadDisk(context.Background(), "affine/", onDisk(t, readTestdata(t, "affine_v2.pt")))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x := []float32{0, 1, -2.5, 3.25, 100, -0.125}
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2, 3}, x)})
	if err != nil {
		t.Fatal(err)
	}
	y, ok := tensor.Data[float32](out[0])
	if !ok || len(y) != len(x) {
		t.Fatalf("output %v", out)
	}
	for i := range x {
		if want := 3*x[i] - 1; y[i] != want {
			t.Errorf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}

func TestOneModelAmongOtherFiles(t *testing.T) {
	rt := openRuntime(t)
	files := readTestdata(t, "affine_v1.pt")
	files["README.md"] = []byte("# notes")
	m, err := rt.Load(context.Background(), "m", files)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{4, 0, -1})})
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := tensor.Data[float32](out[0]); fmt.Sprint(y) != "[9 1 -1]" {
		t.Errorf("2x+1 = %v, want [9 1 -1]", y)
	}
}

func TestUnsupportedOutputs(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct{ file, want string }{
		{"bad_output_list.pt", "Tensor[]"},
		{"bad_output_dict.pt", "Dict"},
		{"bad_output_nested_tuple.pt", "output 1 is (Tensor, Tensor)"},
		{"bad_output_int.pt", "returned int"},
		{"bad_output_tuple_int.pt", "output 1 is int"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m := load(t, rt, tc.file)
			for range 2 {
				_, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2}, []float32{1, -1})})
				if inferr.TypeOf(err) != inferr.OutputParsing {
					t.Fatalf("got %v (type %s), want OUTPUT_PARSING", err, inferr.TypeOf(err))
				}
				if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.file) {
					t.Errorf("error %q does not mention %q and the model path", err, tc.want)
				}
			}
		})
	}
}

// TestV2DTypeOutputs: BOOL, UINT8 and FP16 outputs (which the batch
// contract cannot carry; the v2 surfaces do) come back exactly.
func TestV2DTypeOutputs(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct {
		file string
		want any
	}{
		{"bad_output_bool.pt", []bool{true, false}},
		{"bad_output_uint8.pt", []uint8{1, 255}}, // -1 wraps, as torch's .to(uint8) does
		{"bad_output_half.pt", []tensor.Float16{0x3c00, 0xbc00}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m := load(t, rt, tc.file)
			out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2}, []float32{1, -1})})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || !reflect.DeepEqual(out[0].Data, tc.want) || !reflect.DeepEqual(out[0].Shape, []int64{2}) {
				t.Errorf("got %+v, want %v of shape [2]", out, tc.want)
			}
		})
	}
}

// TestV2DTypeInputs: BOOL, UINT8 and FP16 inputs reach libtorch exactly
// (through the identity model); UINT16-64 and BYTES, which libtorch does
// not take, are an INPUT_PARSING error naming the input and its dtype.
func TestV2DTypeInputs(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "alldtypes.pt")
	s := []int64{2, 2}
	in := []tensor.Tensor{
		tensor.New("a", s, []bool{true, false, false, true}),
		tensor.New("b", s, []uint8{0, 1, 254, 255}),
		tensor.New("c", s, []tensor.Float16{0x3c00, 0x7e01, 0xfc00, 0x0001}),
		tensor.New("d", s, []bool{false, false, true, true}),
		tensor.New("e", s, []uint8{9, 8, 7, 6}),
		tensor.New("f", s, []tensor.Float16{0x0000, 0x8000, 0x7bff, 0x0400}),
	}
	out, err := m.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !reflect.DeepEqual(out[i].Data, in[i].Data) || !reflect.DeepEqual(out[i].Shape, s) {
			t.Errorf("output %d: %v %v, want %v", i, out[i].Shape, out[i].Data, in[i].Data)
		}
	}
	for _, bad := range []tensor.Tensor{
		tensor.New("b", s, []uint16{1, 2, 3, 4}),
		tensor.New("b", s, []uint64{1, 2, 3, 4}),
		tensor.New("b", s, [][]byte{{1}, {2}, {3}, {4}}),
	} {
		args := append([]tensor.Tensor{}, in...)
		args[1] = bad
		_, err := m.Predict(context.Background(), args)
		if inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), `"b"`) || !strings.Contains(err.Error(), bad.DType().String()) {
			t.Errorf("%s input: %v (type %v), want INPUT_PARSING naming \"b\" and %s", bad.DType(), err, inferr.TypeOf(err), bad.DType())
		}
	}
}

func TestNonContiguousOutput(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "transposed.pt")
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2, 3}, []int32{1, 2, 3, 4, 5, 6})})
	if err != nil {
		t.Fatal(err)
	}
	y, _ := tensor.Data[int32](out[0])
	if fmt.Sprint(out[0].Shape) != "[3 2]" || fmt.Sprint(y) != "[1 4 2 5 3 6]" {
		t.Errorf("transpose = %v %v, want [3 2] [1 4 2 5 3 6]", out[0].Shape, y)
	}
}

func TestInPlaceModelLeavesCallerInputAlone(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "inplace.pt")
	x := []float64{1, 2, 3}
	for range 3 {
		out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{3}, x)})
		if err != nil {
			t.Fatal(err)
		}
		if y, _ := tensor.Data[float64](out[0]); fmt.Sprint(y) != "[2 3 4]" {
			t.Errorf("x+1 = %v, want [2 3 4]", y)
		}
	}
	if fmt.Sprint(x) != "[1 2 3]" {
		t.Errorf("caller's input changed to %v", x)
	}
}

func TestRaisingModelIsExecutionError(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "input_check.pt")
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 2}, []float32{1, 2})})
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := tensor.Data[float32](out[0]); fmt.Sprint(y) != "[2 4]" {
		t.Errorf("2x = %v", y)
	}
	_, err = m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2}, []float32{1, 2})})
	if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), "want a 2-D input") {
		t.Errorf("1-D input: got %v, want MODEL_EXECUTION with the model's message", err)
	}
	if strings.Contains(err.Error(), "Traceback") || strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("error keeps the TorchScript traceback: %q", err)
	}
	// Wrong dtypes fail inside libtorch, as an execution error, not a crash.
	m2 := load(t, rt, "mlp.pt")
	_, err = m2.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 8}, make([]int8, 8))})
	if inferr.TypeOf(err) != inferr.ModelExecution {
		t.Errorf("int8 into a float matmul: got %v, want MODEL_EXECUTION", err)
	}
	_, err = m2.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 7}, make([]float32, 7))})
	if inferr.TypeOf(err) != inferr.ModelExecution {
		t.Errorf("[1,7] into a [8,16] matmul: got %v, want MODEL_EXECUTION", err)
	}
}

func TestForkWait(t *testing.T) {
	m := load(t, openRuntime(t), "fork_wait.pt")
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2}, []float32{2, -4})})
	if err != nil {
		t.Fatal(err)
	}
	// x*0.5 (forked) + x + 1
	if y, _ := tensor.Data[float32](out[0]); fmt.Sprint(y) != "[4 -5]" {
		t.Errorf("got %v, want [4 -5]", y)
	}
}

func TestWarmUpRuns(t *testing.T) {
	m := load(t, openRuntime(t), "mlp.pt")
	// The profiling executor needs two runs before the optimised plan.
	if got := m.WarmUpRuns(); got < 3 {
		t.Errorf("WarmUpRuns = %d, want at least 3", got)
	}
}

func TestThreadConfig(t *testing.T) {
	// TestMain set one inter-op thread; libtorch cannot change it afterwards.
	if _, err := runtimes.Open("pytorch", driver.Config{NumInteropThreads: 2}); err == nil || !strings.Contains(err.Error(), "once per process") {
		t.Errorf("changing num_interop_threads: got %v, want an error", err)
	}
	if _, err := runtimes.Open("pytorch", driver.Config{NumIntraopThreads: -1}); err == nil || !strings.Contains(err.Error(), "num_intraop_threads") {
		t.Errorf("negative num_intraop_threads: got %v", err)
	}
	if _, err := runtimes.Open("pytorch", testConfig); err != nil {
		t.Errorf("the same config again: %v", err)
	}
}

func TestConcurrentPredict(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "mlp.pt")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows := g + 1
			x := benchInput(rows)
			want := mlpReference(x, rows)
			for range 50 {
				out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{int64(rows), 8}, x)})
				if err != nil {
					errs <- err
					return
				}
				y, _ := tensor.Data[float32](out[0])
				for i := range want {
					if !closeRel(float64(y[i]), float64(want[i]), 1e-6) {
						errs <- fmt.Errorf("rows %d: y[%d] = %v, want %v", rows, i, y[i], want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCloseThenPredict(t *testing.T) {
	rt := openRuntime(t)
	m := load(t, rt, "affine_v1.pt")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})})
	if !errors.Is(err, runtimes.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// referenceDir is the folder of the B&A PyTorch reference models under
// testhelp.ReferenceModels: tests using it skip when
// INFERBID_REFERENCE_MODELS is unset and fail when the folder is missing
// from the directory it names.
func referenceDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(testhelp.ReferenceModels(t), "bidding-auction-servers", "pytorch")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("reference models: %v", err)
	}
	return dir
}

func loadReference(t testing.TB, rt *runtimes.Runtime, name string) (*runtimes.Model, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(referenceDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(context.Background(), "reference/"+name, driver.Files{name: b})
	if err == nil {
		t.Cleanup(func() { m.Close() })
	}
	return m, err
}

// e2eReferenceInputs is the known-answer request of the reference README.
func e2eReferenceInputs() []tensor.Tensor {
	in := []tensor.Tensor{}
	for _, v := range []int64{8, 6, 18, 11, 9} {
		in = append(in, tensor.New("i", []int64{1}, []int64{v}))
	}
	in = append(in,
		tensor.New("f0", []int64{1, 10}, []float32{0.4313, 0.3381, 0.3103, 0.3150, 0.9595, 0.7862, 0.6386, 0.9695, 0.0469, 0.5807}),
		tensor.New("f1", []int64{1, 10}, []float32{0.8201, 0.8321, 0.1021, 0.6779, 0.2152, 0.4805, 0.3957, 0.0825, 0.0230, 0.1711}))
	return in
}

func TestReferenceE2EKnownAnswer(t *testing.T) {
	rt := openRuntime(t)
	m, err := loadReference(t, rt, "pytorch_e2e_model.pt")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Signature().Inputs); n != 7 {
		t.Errorf("signature has %d inputs, want 7", n)
	}
	for run := range 4 {
		out, err := m.Predict(context.Background(), e2eReferenceInputs())
		if err != nil {
			t.Fatal(err)
		}
		y, ok := tensor.Data[float32](out[0])
		if len(out) != 1 || !ok || fmt.Sprint(out[0].Shape) != "[1 1]" {
			t.Fatalf("run %d: outputs %+v", run, out)
		}
		if !closeRel(float64(y[0]), 0.4846605658531189, 1e-6) {
			t.Errorf("run %d: got %v, want 0.4846605658531189", run, y[0])
		}
	}
}

func TestReferenceSimpleKnownAnswer(t *testing.T) {
	rt := openRuntime(t)
	m, err := loadReference(t, rt, "pytorch_simple_model.pt")
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1}, []float64{3.14})})
	if err != nil {
		t.Fatal(err)
	}
	if y, ok := tensor.Data[float64](out[0]); !ok || len(y) != 1 || y[0] != 3.14 || fmt.Sprint(out[0].Shape) != "[1]" {
		t.Errorf("got %s %v %v, want DOUBLE [1] [3.14]", out[0].DType(), out[0].Shape, out[0].Data)
	}
}

func TestReferenceRejections(t *testing.T) {
	rt := openRuntime(t)
	for _, tc := range []struct{ file, want string }{
		{"pytorch_stateful_model.pt", "stateful"},
		{"pytorch_unfreezable_model.pt", "cannot be frozen"},
		{"pytorch_submodule_model.pt", "aten::save"},
	} {
		_, err := loadReference(t, rt, tc.file)
		if err == nil {
			t.Errorf("%s loaded; want a rejection", tc.file)
			continue
		}
		if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.file) {
			t.Errorf("%s: %v; want MODEL_EXECUTION naming %q and the path", tc.file, err, tc.want)
		}
		t.Logf("%s: %v", tc.file, err)
	}
}

// FuzzLoad feeds arbitrary bytes to the loader: an error or a model, never
// a crash.
func FuzzLoad(f *testing.F) {
	affine, err := os.ReadFile(filepath.Join("testdata", "affine_v1.pt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(affine)
	f.Add(affine[:len(affine)-30])
	f.Add([]byte("PK\x03\x04"))
	rt := openRuntime(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := rt.Load(context.Background(), "fuzz", driver.Files{"m.pt": data})
		if err != nil {
			if inferr.TypeOf(err) != inferr.ModelExecution {
				t.Fatalf("untyped load error: %v", err)
			}
			return
		}
		m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})})
		m.Close()
	})
}

// e2eStyleReference computes testdata/e2e_style.pt's formulas (see
// scripts/gen-pytorch-models.py) in float64, in Go.
func e2eStyleReference(in []tensor.Tensor, rows int) []float64 {
	f32 := func(v float64) float64 { return float64(float32(v)) }
	y := make([]float64, rows)
	for r := range rows {
		x := make([]float64, 0, 60)
		for k := range 5 {
			idx := in[k].Data.([]int64)[r]
			for c := range 8 {
				x = append(x, f32(0.3*math.Sin(float64(k*1000+int(idx)*10+c))))
			}
		}
		for k := 5; k < 7; k++ {
			for _, v := range in[k].Data.([]float32)[r*10 : r*10+10] {
				x = append(x, float64(v))
			}
		}
		z := f32(-0.1)
		for o := range 10 {
			h := f32(0.01 * float64(o))
			for i, v := range x {
				h += f32(0.2*math.Cos(float64(o*60+i))) * v
			}
			z += f32(0.3*math.Sin(float64(7+o))) * math.Max(h, 0)
		}
		y[r] = 1 / (1 + math.Exp(-z))
	}
	return y
}

func TestE2EStyleKnownAnswer(t *testing.T) {
	m := load(t, openRuntime(t), "e2e_style.pt")
	for _, rows := range []int{1, 64} {
		in := e2eInputs(rows)
		want := e2eStyleReference(in, rows)
		for run := range 4 {
			out, err := m.Predict(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			y, ok := tensor.Data[float32](out[0])
			if !ok || fmt.Sprint(out[0].Shape) != fmt.Sprintf("[%d 1]", rows) {
				t.Fatalf("rows %d run %d: output %s %v", rows, run, out[0].DType(), out[0].Shape)
			}
			for i := range want {
				if !closeRel(float64(y[i]), want[i], 1e-5) {
					t.Errorf("rows %d run %d: y[%d] = %v, want %v", rows, run, i, y[i], want[i])
				}
			}
		}
	}
}
