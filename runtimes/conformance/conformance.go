package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

// Fixtures are the model files a runtime supplies to the suite.
type Fixtures struct {
	// AllDTypes: six inputs, one per dtype (DOUBLE, FLOAT, INT8, INT16, INT32, INT64), each shape [-1,2];
	// six outputs, each output the unchanged input of the same dtype (output order and names are the
	// runtime's own: the suite matches outputs to inputs by dtype).
	AllDTypes runtimes.Files
	// AffineV1: one FLOAT input of shape [-1,3]; one FLOAT output y = 2*x + 1. AffineV2: y = 3*x - 1.
	AffineV1, AffineV2 runtimes.Files
	// RunningSum: a stateful model with one state per sequence
	// (driver.SequenceModel): one FLOAT input "x" of shape [1] (named so
	// where the runtime names inputs); each call adds x to the state and
	// answers the new sum as its first output, FLOAT [1]. In a sequence the
	// answer is that output alone (state outputs hidden); outside sequences
	// a call starts from the initial state.
	RunningSum runtimes.Files
	// RunningSumStart is the sum a new sequence, and a call outside
	// sequences, starts from (0 for a state of zeros).
	RunningSumStart float32
}

// Model paths the suite loads under (they appear in error messages).
const (
	allDTypesPath = "conformance/alldtypes/"
	affineV1Path  = "conformance/affine_v1/"
	affineV2Path  = "conformance/affine_v2/"
)

// waitLimit bounds every wait of the suite, so that a runtime that hangs
// fails the test instead of stalling it. It is not a performance assertion.
const waitLimit = 2 * time.Minute

// Run runs the conformance suite as subtests of t. Each subtest opens a
// fresh runtime with open, so that no subtest sees state another left
// behind; open registers the runtime's Close with t.Cleanup (it then runs
// after the suite has closed the subtest's models). See the package
// documentation for what each subtest checks.
func Run(t *testing.T, open func(t *testing.T) *runtimes.Runtime, fx Fixtures) {
	t.Helper()
	if len(fx.AllDTypes) == 0 || len(fx.AffineV1) == 0 || len(fx.AffineV2) == 0 || len(fx.RunningSum) == 0 {
		t.Fatal("conformance: Fixtures must give AllDTypes, AffineV1, AffineV2 and RunningSum")
	}
	for _, c := range []struct {
		name string
		test func(*suite, *testing.T)
	}{
		{"LoadFromBytes", (*suite).testLoad},
		{"Signature", (*suite).testSignature},
		{"AllDTypes", (*suite).testAllDTypes},
		{"Affine", (*suite).testAffine},
		{"BadInput", (*suite).testBadInput},
		{"CorruptModel", (*suite).testCorruptModel},
		{"Concurrent", (*suite).testConcurrent},
		{"SwapWhileServing", (*suite).testSwap},
		{"Close", (*suite).testClose},
		{"Sequences", (*suite).testSequences},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := open(t)
			if rt == nil {
				t.Fatal("conformance: open returned no runtime")
			}
			c.test(&suite{rt: rt, fx: fx}, t)
		})
	}
}

type suite struct {
	rt *runtimes.Runtime
	fx Fixtures
}

// load loads a fixture (from a private copy of its bytes) and closes it at the end of the test.
func (s *suite) load(t *testing.T, path string, files runtimes.Files) *runtimes.Model {
	t.Helper()
	var m *runtimes.Model
	err := noPanic(func() error {
		var err error
		m, err = s.rt.Load(context.Background(), path, copyFiles(files))
		return err
	})
	if err != nil {
		t.Fatalf("Load(%q): %v", path, err)
	}
	if m == nil {
		t.Fatalf("Load(%q) returned no model and no error", path)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func copyFiles(files runtimes.Files) runtimes.Files {
	c := make(runtimes.Files, len(files))
	for name, b := range files {
		c[name] = append([]byte(nil), b...)
	}
	return c
}

// noPanic runs fn and turns a panic into an error carrying the stack.
func noPanic(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("PANIC: %v\n%s", r, debug.Stack())
		}
	}()
	return fn()
}

// predict runs m.Predict, turning a panic into an error that fails the test.
func predict(m *runtimes.Model, inputs []tensor.Tensor) (out []tensor.Tensor, err error) {
	err = noPanic(func() error {
		var err error
		out, err = m.Predict(context.Background(), inputs)
		return err
	})
	return out, err
}

func isPanic(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "PANIC: ") }

// --- LoadFromBytes -----------------------------------------------------------

func (s *suite) testLoad(t *testing.T) {
	for _, f := range []struct {
		path  string
		files runtimes.Files
	}{{allDTypesPath, s.fx.AllDTypes}, {affineV1Path, s.fx.AffineV1}, {affineV2Path, s.fx.AffineV2}} {
		m := s.load(t, f.path, f.files)
		if m.Path() != f.path {
			t.Errorf("Path() = %q, want %q", m.Path(), f.path)
		}
		if m.WarmUpRuns() < 1 {
			t.Errorf("%s: WarmUpRuns() = %d, want >= 1", f.path, m.WarmUpRuns())
		}
	}
	t.Run("NoFiles", func(t *testing.T) {
		err := noPanic(func() error {
			m, err := s.rt.Load(context.Background(), "conformance/empty/", runtimes.Files{})
			if m != nil {
				m.Close()
			}
			return err
		})
		checkLoadError(t, "no files", "conformance/empty/", err)
	})
}

// --- Signature -----------------------------------------------------------------

func (s *suite) testSignature(t *testing.T) {
	t.Run("AllDTypes", func(t *testing.T) {
		sig := s.load(t, allDTypesPath, s.fx.AllDTypes).Signature()
		checkSpecs(t, "input", sig.Inputs, sig.Positional, 2)
		checkSpecs(t, "output", sig.Outputs, true, 2)
	})
	t.Run("Affine", func(t *testing.T) {
		for _, f := range []struct {
			path  string
			files runtimes.Files
		}{{affineV1Path, s.fx.AffineV1}, {affineV2Path, s.fx.AffineV2}} {
			sig := s.load(t, f.path, f.files).Signature()
			if len(sig.Inputs) == 0 && !sig.Positional {
				t.Fatalf("%s: a named (non-positional) model must list its inputs", f.path)
			}
			for _, specs := range []struct {
				kind  string
				specs []runtimes.TensorSpec
			}{{"input", sig.Inputs}, {"output", sig.Outputs}} {
				if len(specs.specs) == 0 {
					continue // positional runtimes may not know
				}
				if len(specs.specs) != 1 {
					t.Errorf("%s: %d %ss, want 1: %+v", f.path, len(specs.specs), specs.kind, specs.specs)
					continue
				}
				spec := specs.specs[0]
				if spec.DType != tensor.Invalid && spec.DType != tensor.Float {
					t.Errorf("%s: %s dtype %s, want FLOAT", f.path, specs.kind, spec.DType)
				}
				checkShape(t, f.path+" "+specs.kind+" "+spec.Name, spec.Shape, 3)
				if specs.kind == "input" && !sig.Positional && spec.Name == "" {
					t.Errorf("%s: input has no name", f.path)
				}
			}
		}
	})
}

// checkSpecs checks a six-dtype signature list: names unique (and present
// where names matter), each known dtype once, shapes [-1|n, inner].
func checkSpecs(t *testing.T, kind string, specs []runtimes.TensorSpec, namesOptional bool, inner int64) {
	t.Helper()
	if len(specs) == 0 {
		if !namesOptional {
			t.Errorf("no %ss listed; a named (non-positional) model must list them", kind)
		}
		return
	}
	if len(specs) != 6 {
		t.Errorf("%d %ss, want 6: %+v", len(specs), kind, specs)
	}
	names := map[string]bool{}
	dtypes := map[tensor.DType]bool{}
	for _, sp := range specs {
		if sp.Name == "" && !namesOptional {
			t.Errorf("%s without a name: %+v", kind, sp)
		}
		if sp.Name != "" && names[sp.Name] {
			t.Errorf("%s name %q listed twice", kind, sp.Name)
		}
		names[sp.Name] = true
		if sp.DType == tensor.Invalid {
			continue
		}
		if sp.DType.Size() == 0 {
			t.Errorf("%s %q: dtype %v is not one of the six", kind, sp.Name, sp.DType)
		}
		if dtypes[sp.DType] {
			t.Errorf("%s dtype %s listed twice", kind, sp.DType)
		}
		dtypes[sp.DType] = true
		checkShape(t, kind+" "+sp.Name, sp.Shape, inner)
	}
}

// checkShape accepts an unknown shape, or rank 2 with a batch dimension of
// -1 (or a positive size) and an inner dimension of -1 or inner.
func checkShape(t *testing.T, what string, shape []int64, inner int64) {
	t.Helper()
	if shape == nil {
		return
	}
	if len(shape) != 2 || shape[0] == 0 || shape[0] < -1 || (shape[1] != -1 && shape[1] != inner) {
		t.Errorf("%s: shape %s, want [-1,%d] (or unknown)", what, tensor.FormatShape(shape), inner)
	}
}

// --- AllDTypes -------------------------------------------------------------------

// dtypeValues are the values (in order, repeated as needed) sent for each
// dtype: both extremes, values next to them, zero, sign changes, and for the
// floats subnormals, -0 and values no narrower type holds. No NaN or Inf:
// those cannot travel in the batch JSON.
func dtypeValues(d tensor.DType) any {
	switch d {
	case tensor.Double:
		return []float64{math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
			2.2250738585072014e-308, math.Copysign(0, -1), 0, 1, -1, 0.1, 1.0 / 3, math.Pi, 9007199254740993, -1e300, 1e-300, 123456789.125}
	case tensor.Float:
		return []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
			1.17549435e-38, float32(math.Copysign(0, -1)), 0, 1, -1, 0.1, 1.0 / 3, math.Pi, 16777217, -1e30, 1e-30, 3.140000104904175}
	case tensor.Int8:
		return []int8{-128, 127, -127, 126, 0, -1, 1, 42, -100, 99, 64, -64, 2, -2, 3, -3}
	case tensor.Int16:
		return []int16{-32768, 32767, -32767, 32766, 0, -1, 1, 128, -129, 255, 256, -256, 1000, -1000, 12345, -12345}
	case tensor.Int32:
		return []int32{math.MinInt32, math.MaxInt32, math.MinInt32 + 1, math.MaxInt32 - 1, 0, -1, 1, 1 << 24, -(1 << 24) - 1,
			65536, -65537, 16777217, 123456789, -123456789, 2, -2}
	case tensor.Int64:
		return []int64{1<<62 + 1, -(1 << 62) - 1, 1 << 62, -(1 << 62), 1<<62 - 1, -(1<<62 - 1), math.MaxInt64, math.MinInt64,
			0, -1, 1, 9007199254740993, -9007199254740993, 1 << 32, -(1 << 32) - 1, 4611686018427387903}
	}
	return nil
}

// dtypeTensor makes a [rows,2] tensor of d from dtypeValues, starting at offset.
func dtypeTensor(name string, d tensor.DType, rows, offset int) tensor.Tensor {
	n := rows * 2
	shape := []int64{int64(rows), 2}
	switch v := dtypeValues(d).(type) {
	case []float64:
		return tensor.New(name, shape, cycle(v, n, offset))
	case []float32:
		return tensor.New(name, shape, cycle(v, n, offset))
	case []int8:
		return tensor.New(name, shape, cycle(v, n, offset))
	case []int16:
		return tensor.New(name, shape, cycle(v, n, offset))
	case []int32:
		return tensor.New(name, shape, cycle(v, n, offset))
	case []int64:
		return tensor.New(name, shape, cycle(v, n, offset))
	}
	panic("conformance: no values for " + d.String())
}

func cycle[T tensor.Element](vals []T, n, offset int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = vals[(i+offset)%len(vals)]
	}
	return out
}

// inputSlot is one input of the six-dtype model: its name and dtype.
type inputSlot struct {
	name  string
	dtype tensor.DType
}

// allDTypesSlots maps the model's inputs to dtypes, from its signature.
// Runtimes that do not know the input dtypes get them in the contract order
// (DOUBLE, FLOAT, INT8, INT16, INT32, INT64).
func allDTypesSlots(sig runtimes.Signature) ([]inputSlot, error) {
	slots := make([]inputSlot, 0, len(tensor.DTypes))
	if len(sig.Inputs) == 0 || sig.Inputs[0].DType == tensor.Invalid {
		for i, d := range tensor.DTypes {
			name := fmt.Sprintf("input_%d", i)
			if i < len(sig.Inputs) && sig.Inputs[i].Name != "" {
				name = sig.Inputs[i].Name
			}
			slots = append(slots, inputSlot{name, d})
		}
		return slots, nil
	}
	for _, spec := range sig.Inputs {
		if spec.DType == tensor.Invalid {
			return nil, fmt.Errorf("input %q has no dtype while others do: the suite cannot tell which dtype it takes", spec.Name)
		}
		slots = append(slots, inputSlot{spec.Name, spec.DType})
	}
	return slots, nil
}

// allDTypesInputs builds one [rows,2] input per slot.
func allDTypesInputs(slots []inputSlot, rows, offset int) []tensor.Tensor {
	inputs := make([]tensor.Tensor, len(slots))
	for i, sl := range slots {
		inputs[i] = dtypeTensor(sl.name, sl.dtype, rows, offset)
	}
	return inputs
}

func (s *suite) testAllDTypes(t *testing.T) {
	m := s.load(t, allDTypesPath, s.fx.AllDTypes)
	slots, err := allDTypesSlots(m.Signature())
	if err != nil {
		t.Fatal(err)
	}
	for _, rows := range []int{1, 8, 64} {
		t.Run(fmt.Sprintf("batch%d", rows), func(t *testing.T) {
			inputs := allDTypesInputs(slots, rows, rows)
			before := cloneTensors(inputs)
			out, err := predict(m, inputs)
			if err != nil {
				t.Fatalf("Predict: %v", err)
			}
			checkIdentityOutputs(t, out, before)
			for i := range inputs {
				if !sameTensor(inputs[i], before[i]) {
					t.Errorf("Predict modified input %q", inputs[i].Name)
				}
			}
		})
	}
}

// checkIdentityOutputs matches outputs to inputs by dtype and compares them
// bit for bit (so -0, subnormals and int64 beyond 2^53 count).
func checkIdentityOutputs(t *testing.T, out, inputs []tensor.Tensor) {
	t.Helper()
	if len(out) != len(inputs) {
		t.Fatalf("%d outputs, want %d (one per dtype): %s", len(out), len(inputs), describe(out))
	}
	byDType := map[tensor.DType]tensor.Tensor{}
	for _, o := range out {
		if o.Name == "" {
			t.Errorf("an output of dtype %s has no name", o.DType())
		}
		if err := o.Validate(1 << 40); err != nil {
			t.Errorf("output %q is not a valid tensor: %v", o.Name, err)
			continue
		}
		if _, dup := byDType[o.DType()]; dup {
			t.Errorf("two outputs of dtype %s: %s", o.DType(), describe(out))
		}
		byDType[o.DType()] = o
	}
	for _, in := range inputs {
		o, ok := byDType[in.DType()]
		if !ok {
			t.Errorf("no output of dtype %s (input %q): %s", in.DType(), in.Name, describe(out))
			continue
		}
		if !sameTensor(o, in) {
			t.Errorf("output %q (%s): shape %s, data %v; want the input %q unchanged: shape %s, data %v",
				o.Name, o.DType(), tensor.FormatShape(o.Shape), o.Data, in.Name, tensor.FormatShape(in.Shape), in.Data)
		}
	}
}

func describe(ts []tensor.Tensor) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%q %s %s", t.Name, t.DType(), tensor.FormatShape(t.Shape))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func cloneTensors(ts []tensor.Tensor) []tensor.Tensor {
	c := make([]tensor.Tensor, len(ts))
	for i, t := range ts {
		c[i] = tensor.Tensor{Name: t.Name, Shape: append([]int64(nil), t.Shape...)}
		switch d := t.Data.(type) {
		case []float64:
			c[i].Data = append([]float64(nil), d...)
		case []float32:
			c[i].Data = append([]float32(nil), d...)
		case []int8:
			c[i].Data = append([]int8(nil), d...)
		case []int16:
			c[i].Data = append([]int16(nil), d...)
		case []int32:
			c[i].Data = append([]int32(nil), d...)
		case []int64:
			c[i].Data = append([]int64(nil), d...)
		default:
			c[i].Data = t.Data
		}
	}
	return c
}

// sameTensor compares dtype, shape and data bit for bit.
func sameTensor(a, b tensor.Tensor) bool {
	if a.DType() != b.DType() || tensor.FormatShape(a.Shape) != tensor.FormatShape(b.Shape) || a.Len() != b.Len() {
		return false
	}
	switch x := a.Data.(type) {
	case []float64:
		y := b.Data.([]float64)
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return false
			}
		}
	case []float32:
		y := b.Data.([]float32)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
	case []int8:
		return slices.Equal(x, b.Data.([]int8))
	case []int16:
		return slices.Equal(x, b.Data.([]int16))
	case []int32:
		return slices.Equal(x, b.Data.([]int32))
	case []int64:
		return slices.Equal(x, b.Data.([]int64))
	default:
		return false
	}
	return true
}

// --- Affine ----------------------------------------------------------------------

// affineInput is a [rows,3] FLOAT tensor whose values depend on seed; none is
// 2, where y = 2x+1 and y = 3x-1 meet, so v1 and v2 answers always differ.
func affineInput(name string, rows, seed int) tensor.Tensor {
	x := make([]float32, rows*3)
	for i := range x {
		v := float32((i*7+seed*13)%41-20) * 0.375 // multiples of 3/8 in [-7.5, 7.5]
		if v == 2 {
			v = 2.5
		}
		x[i] = v
	}
	return tensor.New(name, []int64{int64(rows), 3}, x)
}

// affineWant computes y = a*x + b in float32, one rounding per operation, as
// a runtime does it.
func affineWant(x []float32, a, b float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		ax := a * v
		y[i] = ax + b
	}
	return y
}

// affineCheck reports how out differs from a*x+b, or "" when it matches.
func affineCheck(out []tensor.Tensor, x tensor.Tensor, a, b float32) string {
	if len(out) != 1 {
		return fmt.Sprintf("%d outputs, want 1: %s", len(out), describe(out))
	}
	o := out[0]
	if o.Name == "" {
		return "the output has no name"
	}
	got, ok := tensor.Data[float32](o)
	if !ok {
		return fmt.Sprintf("output %q is %s, want FLOAT", o.Name, o.DType())
	}
	if tensor.FormatShape(o.Shape) != tensor.FormatShape(x.Shape) {
		return fmt.Sprintf("output %q shape %s, want %s", o.Name, tensor.FormatShape(o.Shape), tensor.FormatShape(x.Shape))
	}
	xs := x.Data.([]float32)
	want := affineWant(xs, a, b)
	if len(got) != len(want) {
		return fmt.Sprintf("output %q has %d values, want %d", o.Name, len(got), len(want))
	}
	for i := range want {
		if !closeTo(got[i], want[i]) {
			return fmt.Sprintf("output %q[%d] = %v, want %v*%v%+v = %v", o.Name, i, got[i], a, xs[i], b, want[i])
		}
	}
	return ""
}

func closeTo(got, want float32) bool {
	return math.Abs(float64(got)-float64(want)) <= 1e-6*math.Max(1, math.Abs(float64(want)))
}

func affineName(m *runtimes.Model) string {
	if in := m.Signature().Inputs; len(in) > 0 && in[0].Name != "" {
		return in[0].Name
	}
	return "x"
}

func (s *suite) testAffine(t *testing.T) {
	for _, v := range []struct {
		path  string
		files runtimes.Files
		a, b  float32
	}{{affineV1Path, s.fx.AffineV1, 2, 1}, {affineV2Path, s.fx.AffineV2, 3, -1}} {
		m := s.load(t, v.path, v.files)
		for _, rows := range []int{1, 64, 7} {
			t.Run(fmt.Sprintf("%s/batch%d", strings.Trim(v.path, "/"), rows), func(t *testing.T) {
				x := affineInput(affineName(m), rows, rows)
				out, err := predict(m, []tensor.Tensor{x})
				if err != nil {
					t.Fatalf("Predict: %v", err)
				}
				if msg := affineCheck(out, x, v.a, v.b); msg != "" {
					t.Fatal(msg)
				}
			})
		}
	}
}

// --- BadInput ----------------------------------------------------------------------

func (s *suite) testBadInput(t *testing.T) {
	m := s.load(t, affineV1Path, s.fx.AffineV1)
	sig := m.Signature()
	name := affineName(m)
	good := affineInput(name, 2, 1)
	f64 := make([]float64, 6)
	cases := []struct {
		desc   string
		inputs []tensor.Tensor
		// inName: a wrong input name (only checked for named runtimes).
		inName bool
		// positionalMayRun: a positional runtime may legitimately run it.
		positionalMayRun bool
		mention          string // the error must mention this
	}{
		{desc: "wrong name", inputs: []tensor.Tensor{tensor.New("no_such_input", good.Shape, good.Data.([]float32))},
			inName: true, mention: "no_such_input"},
		{desc: "wrong dtype", inputs: []tensor.Tensor{tensor.New(name, []int64{2, 3}, f64)}, mention: "DOUBLE"},
		{desc: "wrong dtype INT64", inputs: []tensor.Tensor{tensor.New(name, []int64{2, 3}, make([]int64, 6))}, mention: "INT64"},
		{desc: "wrong inner dimension", inputs: []tensor.Tensor{tensor.New(name, []int64{3, 2}, make([]float32, 6))}, mention: "[3,2]"},
		{desc: "wrong rank", inputs: []tensor.Tensor{tensor.New(name, []int64{6}, make([]float32, 6))}, mention: "[6]"},
		{desc: "rank 3", inputs: []tensor.Tensor{tensor.New(name, []int64{1, 2, 3}, make([]float32, 6))}, mention: "[1,2,3]"},
		{desc: "content count mismatch", inputs: []tensor.Tensor{tensor.New(name, []int64{2, 3}, make([]float32, 5))}, mention: "5"},
		{desc: "zero dimension", inputs: []tensor.Tensor{tensor.New(name, []int64{0, 3}, []float32{})}},
		{desc: "negative dimension", inputs: []tensor.Tensor{tensor.New(name, []int64{-2, 3}, make([]float32, 6))}},
		{desc: "overflowing shape", inputs: []tensor.Tensor{tensor.New(name, []int64{1 << 40, 1 << 40, 3}, make([]float32, 6))}},
		{desc: "unsupported Go data", inputs: []tensor.Tensor{{Name: name, Shape: []int64{2, 3}, Data: make([]uint8, 6)}}},
		{desc: "nil data", inputs: []tensor.Tensor{{Name: name, Shape: []int64{2, 3}}}},
		{desc: "no inputs", inputs: nil},
		{desc: "input given twice", inputs: []tensor.Tensor{good, good}, positionalMayRun: false},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.desc, " ", "_"), func(t *testing.T) {
			out, err := predict(m, c.inputs)
			if isPanic(err) {
				t.Fatalf("%s: %v", c.desc, err)
			}
			if sig.Positional && c.inName {
				// Names are ignored: the tensor is the first input and must run right.
				if err != nil {
					t.Fatalf("positional runtime: a tensor name must not matter, got %v", err)
				}
				if msg := affineCheck(out, good, 2, 1); msg != "" {
					t.Fatalf("positional runtime with an unknown name: %s", msg)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s: Predict succeeded with %s, want INPUT_PARSING", c.desc, describe(out))
			}
			typ := inferr.TypeOf(err)
			switch {
			case typ == inferr.InputParsing:
			case sig.Positional && typ == inferr.ModelExecution:
				// The runtime found the fault when running: allowed for positional runtimes.
			default:
				t.Fatalf("%s: error type %v (%v), want INPUT_PARSING", c.desc, typ, err)
			}
			if !strings.Contains(err.Error(), affineV1Path) {
				t.Errorf("%s: error %q does not name the model path %q", c.desc, err, affineV1Path)
			}
			if c.mention != "" && typ == inferr.InputParsing && !strings.Contains(err.Error(), c.mention) {
				t.Errorf("%s: error %q does not mention %q", c.desc, err, c.mention)
			}
		})
	}
	// The model still answers right after all the faults.
	out, err := predict(m, []tensor.Tensor{good})
	if err != nil {
		t.Fatalf("Predict after bad inputs: %v", err)
	}
	if msg := affineCheck(out, good, 2, 1); msg != "" {
		t.Fatalf("after bad inputs: %s", msg)
	}
}

// --- CorruptModel ------------------------------------------------------------------

func (s *suite) testCorruptModel(t *testing.T) {
	variants := []struct {
		desc  string
		apply func(b []byte, seed int) []byte
	}{
		{"truncated to half", func(b []byte, _ int) []byte { return b[:len(b)/2] }},
		{"truncated by one byte", func(b []byte, _ int) []byte {
			if len(b) == 0 {
				return b
			}
			return b[:len(b)-1]
		}},
		{"one byte", func(b []byte, _ int) []byte { return b[:min(1, len(b))] }},
		{"empty", func([]byte, int) []byte { return []byte{} }},
		{"garbage", func(b []byte, seed int) []byte { return garbage(len(b), uint64(seed)+1) }},
		{"text", func([]byte, int) []byte { return []byte("this is not a model\n") }},
		{"invalid UTF-8", func(b []byte, _ int) []byte { return append([]byte("\xff\xfe\xc3\x28"), b[min(4, len(b)):]...) }},
	}
	for _, v := range variants {
		t.Run(strings.ReplaceAll(v.desc, " ", "_"), func(t *testing.T) {
			// Every file of the model is damaged, so a runtime that ignores
			// some of them (metadata) still meets the damage.
			files := make(runtimes.Files, len(s.fx.AffineV1))
			names := make([]string, 0, len(s.fx.AffineV1))
			for name := range s.fx.AffineV1 {
				names = append(names, name)
			}
			sort.Strings(names)
			for i, name := range names {
				files[name] = v.apply(append([]byte(nil), s.fx.AffineV1[name]...), i)
			}
			const path = "conformance/corrupt/"
			err := noPanic(func() error {
				m, err := s.rt.Load(context.Background(), path, files)
				if err == nil {
					m.Close()
				}
				return err
			})
			checkLoadError(t, v.desc, path, err)
		})
	}
}

func checkLoadError(t *testing.T, desc, path string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: Load succeeded, want a typed load error", desc)
	}
	if isPanic(err) {
		t.Fatalf("%s: %v", desc, err)
	}
	if _, ok := errors.AsType[*inferr.Error](err); !ok || inferr.TypeOf(err) != inferr.ModelExecution {
		t.Fatalf("%s: load error of type %v, want MODEL_EXECUTION: %v", desc, inferr.TypeOf(err), err)
	}
	if !utf8.ValidString(err.Error()) {
		t.Errorf("%s: load error is not valid UTF-8: %q", desc, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%s: load error %q does not name the model path %q", desc, err, path)
	}
}

// garbage returns n deterministic pseudo-random bytes (xorshift64).
func garbage(n int, seed uint64) []byte {
	b := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// --- Concurrent ----------------------------------------------------------------------

func (s *suite) testConcurrent(t *testing.T) {
	const goroutines, calls = 64, 25
	affine := s.load(t, affineV1Path, s.fx.AffineV1)
	dtypes := s.load(t, allDTypesPath, s.fx.AllDTypes)
	name := affineName(affine)
	slots, err := allDTypesSlots(dtypes.Signature())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for i := range calls {
				seed := g*calls + i
				if g%8 == 7 { // some goroutines use the six-dtype model at the same time
					inputs := allDTypesInputs(slots, 1+seed%5, seed)
					before := cloneTensors(inputs)
					out, err := predict(dtypes, inputs)
					if err != nil {
						errs <- fmt.Sprintf("goroutine %d call %d (alldtypes): %v", g, i, err)
						return
					}
					if msg := identityMismatch(out, before); msg != "" {
						errs <- fmt.Sprintf("goroutine %d call %d (alldtypes): %s", g, i, msg)
						return
					}
					continue
				}
				x := affineInput(name, 1+seed%9, seed)
				out, err := predict(affine, []tensor.Tensor{x})
				if err != nil {
					errs <- fmt.Sprintf("goroutine %d call %d: %v", g, i, err)
					return
				}
				if msg := affineCheck(out, x, 2, 1); msg != "" {
					errs <- fmt.Sprintf("goroutine %d call %d: %s", g, i, msg)
					return
				}
			}
		})
	}
	close(start)
	if !waitGroup(&wg) {
		t.Fatalf("%d goroutines x %d calls did not finish within %v", goroutines, calls, waitLimit)
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if st := affine.Stats(); st.Calls == 0 || st.Failures != 0 {
		t.Errorf("affine model stats %+v: want calls and no failures", st)
	}
}

// identityMismatch is checkIdentityOutputs for goroutines (no t).
func identityMismatch(out, inputs []tensor.Tensor) string {
	if len(out) != len(inputs) {
		return fmt.Sprintf("%d outputs, want %d", len(out), len(inputs))
	}
	for _, in := range inputs {
		found := false
		for _, o := range out {
			if o.DType() == in.DType() {
				found = true
				if !sameTensor(o, in) {
					return fmt.Sprintf("output %q differs from input %q", o.Name, in.Name)
				}
			}
		}
		if !found {
			return fmt.Sprintf("no output of dtype %s", in.DType())
		}
	}
	return ""
}

func waitGroup(wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(waitLimit):
		return false
	}
}

// --- SwapWhileServing ------------------------------------------------------------------

// testSwap serves v1 from many goroutines, loads v2 while they run, publishes
// it and closes v1 under them (what the sidecar's registry does on
// re-registration). Every answer must be a correct v1 or v2 answer, or
// MODEL_NOT_FOUND from runtimes.ErrClosed for a call that picked v1 just
// before it closed; nothing else.
func (s *suite) testSwap(t *testing.T) {
	const goroutines = 16
	v1, err := s.rt.Load(context.Background(), affineV1Path, copyFiles(s.fx.AffineV1))
	if err != nil {
		t.Fatalf("Load v1: %v", err)
	}
	t.Cleanup(func() { v1.Close() }) // Close is idempotent; this covers early failures
	var current atomic.Pointer[runtimes.Model]
	current.Store(v1)
	var v1Answers, v2Answers, closedAnswers atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	name := affineName(v1)
	for g := range goroutines {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				m := current.Load()
				x := affineInput(name, 1+(g+i)%4, g*1000+i)
				out, err := predict(m, []tensor.Tensor{x})
				switch {
				case err != nil && m == v1 && errors.Is(err, runtimes.ErrClosed) && inferr.TypeOf(err) == inferr.ModelNotFound:
					closedAnswers.Add(1)
				case err != nil:
					errs <- fmt.Sprintf("goroutine %d call %d on %s: %v (type %v)", g, i, versionOf(m, v1), err, inferr.TypeOf(err))
					return
				case affineCheck(out, x, 2, 1) == "":
					v1Answers.Add(1)
					if m != v1 {
						errs <- fmt.Sprintf("goroutine %d call %d: v2 gave a v1 answer", g, i)
						return
					}
				case affineCheck(out, x, 3, -1) == "":
					v2Answers.Add(1)
					if m == v1 {
						errs <- fmt.Sprintf("goroutine %d call %d: v1 gave a v2 answer", g, i)
						return
					}
				default:
					errs <- fmt.Sprintf("goroutine %d call %d on %s: neither a v1 nor a v2 answer: %s", g, i, versionOf(m, v1), affineCheck(out, x, 2, 1))
					return
				}
			}
		})
	}
	defer func() {
		stop.Store(true)
		waitGroup(&wg)
	}()
	if !waitFor(func() bool { return v1Answers.Load() >= goroutines }) {
		t.Fatalf("v1 gave %d answers within %v", v1Answers.Load(), waitLimit)
	}
	// Load v2 while v1 serves.
	v2, err := s.rt.Load(context.Background(), affineV2Path, copyFiles(s.fx.AffineV2))
	if err != nil {
		t.Fatalf("Load v2 while serving v1: %v", err)
	}
	t.Cleanup(func() { v2.Close() })
	current.Store(v2)
	if err := v1.Close(); err != nil {
		t.Errorf("v1.Close while serving: %v", err)
	}
	if !waitFor(func() bool { return v2Answers.Load() >= goroutines }) {
		t.Fatalf("v2 gave %d answers within %v", v2Answers.Load(), waitLimit)
	}
	stop.Store(true)
	if !waitGroup(&wg) {
		t.Fatalf("goroutines did not stop within %v", waitLimit)
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("answers: v1 %d, v2 %d, closed %d", v1Answers.Load(), v2Answers.Load(), closedAnswers.Load())
	// A call that still holds v1 now gets MODEL_NOT_FOUND.
	_, err = predict(v1, []tensor.Tensor{affineInput(name, 1, 0)})
	if !errors.Is(err, runtimes.ErrClosed) || inferr.TypeOf(err) != inferr.ModelNotFound {
		t.Errorf("Predict on the swapped-out v1: %v (type %v), want MODEL_NOT_FOUND from runtimes.ErrClosed", err, inferr.TypeOf(err))
	}
}

func versionOf(m, v1 *runtimes.Model) string {
	if m == v1 {
		return "v1"
	}
	return "v2"
}

func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// --- Close ------------------------------------------------------------------------------

func (s *suite) testClose(t *testing.T) {
	m, err := s.rt.Load(context.Background(), affineV1Path, copyFiles(s.fx.AffineV1))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	x := affineInput(affineName(m), 2, 3)
	if _, err := predict(m, []tensor.Tensor{x}); err != nil {
		t.Fatalf("Predict before Close: %v", err)
	}
	if err := noPanic(m.Close); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := noPanic(m.Close); err != nil {
		t.Fatalf("second Close: %v (Close must be idempotent)", err)
	}
	for range 2 {
		out, err := predict(m, []tensor.Tensor{x})
		if err == nil {
			t.Fatalf("Predict after Close succeeded: %s", describe(out))
		}
		if !errors.Is(err, runtimes.ErrClosed) || inferr.TypeOf(err) != inferr.ModelNotFound {
			t.Fatalf("Predict after Close: %v (type %v), want MODEL_NOT_FOUND from runtimes.ErrClosed", err, inferr.TypeOf(err))
		}
		if !strings.Contains(err.Error(), affineV1Path) {
			t.Errorf("Predict after Close: %q does not name the model path", err)
		}
	}
}
