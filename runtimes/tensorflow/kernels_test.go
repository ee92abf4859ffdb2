package tensorflow

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// graphCase builds a one-signature model with tfsave and checks its outputs.
type graphCase struct {
	name  string
	build func(b *tfsave.Builder) (ins, outs map[string]string)
	feed  []tensor.Tensor // named by signature key
	want  map[string]tensor.Tensor
}

func f32(shape []int64, v ...float32) tensor.Tensor { return tensor.New("", shape, v) }
func i32(shape []int64, v ...int32) tensor.Tensor   { return tensor.New("", shape, v) }
func i64(shape []int64, v ...int64) tensor.Tensor   { return tensor.New("", shape, v) }
func f64(shape []int64, v ...float64) tensor.Tensor { return tensor.New("", shape, v) }
func named(name string, t tensor.Tensor) tensor.Tensor {
	t.Name = name
	return t
}

func runCase(t *testing.T, opts tfsave.Options, gc graphCase) {
	t.Helper()
	b := tfsave.NewBuilderWith(opts)
	ins, outs := gc.build(b)
	b.Signature(tfsave.ServingSignature, ins, outs)
	files, err := b.Files()
	if err != nil {
		t.Fatalf("tfsave: %v", err)
	}
	m := loadFiles(t, files, driver.Config{})
	got, err := m.Predict(context.Background(), gc.feed)
	if err != nil {
		t.Fatal(err)
	}
	sig := m.Signature()
	for i, spec := range sig.Outputs {
		want, ok := gc.want[spec.Aliases[0]]
		if !ok {
			t.Fatalf("unexpected output %q", spec.Aliases[0])
		}
		g := got[i]
		if !reflect.DeepEqual(g.Shape, want.Shape) && !(len(g.Shape) == 0 && len(want.Shape) == 0) {
			t.Errorf("%s: shape %v, want %v", spec.Aliases[0], g.Shape, want.Shape)
		}
		if g.DType() != want.DType() {
			t.Errorf("%s: dtype %s, want %s", spec.Aliases[0], g.DType(), want.DType())
			continue
		}
		if !closeData(g.Data, want.Data) {
			t.Errorf("%s: got %v, want %v", spec.Aliases[0], g.Data, want.Data)
		}
	}
}

// closeData compares integer data exactly and float data within 1e-6
// relative (kernels compute in float32; expectations are float64 math).
func closeData(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Len() != vb.Len() {
		return false
	}
	for i := range va.Len() {
		x, y := va.Index(i), vb.Index(i)
		switch x.Kind() {
		case reflect.Float32, reflect.Float64:
			p, q := x.Float(), y.Float()
			if math.Abs(p-q) > 1e-6*math.Max(1, math.Abs(q)) {
				return false
			}
		default:
			if x.Int() != y.Int() {
				return false
			}
		}
	}
	return true
}

func TestKernels(t *testing.T) {
	x23 := f32([]int64{2, 3}, 1, -2, 3, -4, 5, -6)
	cases := []graphCase{
		{
			name: "broadcast arithmetic",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				row := tfsave.ConstOf[float32](b, "row", []int64{3}, 10, 20, 30)
				two := tfsave.ConstOf[float32](b, "two", []int64{}, 2)
				col := tfsave.ConstOf[float32](b, "col", []int64{2, 1}, 100, 200)
				return map[string]string{"x": x}, map[string]string{
					"add": b.Op("AddV2", []string{x, row}, nil),
					"sub": b.Op("Sub", []string{two, x}, nil),
					"mul": b.Op("Mul", []string{x, col}, nil),
					"div": b.Op("RealDiv", []string{x, two}, nil),
					"min": b.Op("Minimum", []string{x, two}, nil),
					"max": b.Op("Maximum", []string{x, two}, nil),
				}
			},
			feed: []tensor.Tensor{named("x", x23)},
			want: map[string]tensor.Tensor{
				"add": f32([]int64{2, 3}, 11, 18, 33, 6, 25, 24),
				"sub": f32([]int64{2, 3}, 1, 4, -1, 6, -3, 8),
				"mul": f32([]int64{2, 3}, 100, -200, 300, -800, 1000, -1200),
				"div": f32([]int64{2, 3}, 0.5, -1, 1.5, -2, 2.5, -3),
				"min": f32([]int64{2, 3}, 1, -2, 2, -4, 2, -6),
				"max": f32([]int64{2, 3}, 2, 2, 3, 2, 5, 2),
			},
		},
		{
			name: "unary",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				ax := b.Op("Sqrt", []string{b.Op("Square", []string{x}, nil)}, nil)
				return map[string]string{"x": x}, map[string]string{
					"neg": b.Op("Neg", []string{x}, nil), "relu": b.Op("Relu", []string{x}, nil), "relu6": b.Op("Relu6", []string{x}, nil),
					"square": b.Op("Square", []string{x}, nil), "sqrt": b.Op("Sqrt", []string{ax}, nil), "rsqrt": b.Op("Rsqrt", []string{ax}, nil),
					"exp": b.Op("Exp", []string{x}, nil), "log": b.Op("Log", []string{ax}, nil), "tanh": b.Op("Tanh", []string{x}, nil),
					"sigmoid": b.Op("Sigmoid", []string{x}, nil),
				}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{2, 3}, 0.5, -2, 7, -0.25, 20, -30))},
			want: func() map[string]tensor.Tensor {
				xs := []float64{0.5, -2, 7, -0.25, 20, -30}
				m := map[string]func(float64) float64{
					"neg": func(v float64) float64 { return -v }, "relu": func(v float64) float64 { return math.Max(v, 0) },
					"relu6": func(v float64) float64 { return math.Min(math.Max(v, 0), 6) }, "square": func(v float64) float64 { return v * v },
					"sqrt": func(v float64) float64 { return math.Sqrt(math.Abs(v)) }, "rsqrt": func(v float64) float64 { return 1 / math.Sqrt(math.Abs(v)) },
					"exp": math.Exp, "log": func(v float64) float64 { return math.Log(math.Abs(v)) }, "tanh": math.Tanh,
					"sigmoid": func(v float64) float64 { return 1 / (1 + math.Exp(-v)) },
				}
				out := map[string]tensor.Tensor{}
				for k, f := range m {
					v := make([]float32, len(xs))
					for i, x := range xs {
						v[i] = float32(f(x))
					}
					out[k] = f32([]int64{2, 3}, v...)
				}
				return out
			}(),
		},
		{
			name: "compare and select",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				zero := tfsave.ConstOf[float32](b, "zero", []int64{}, 0)
				gt := b.Op("Greater", []string{x, zero}, nil)
				le := b.Op("LessEqual", []string{x, zero}, nil)
				eq := b.Op("Equal", []string{gt, le}, nil)
				return map[string]string{"x": x}, map[string]string{
					"abs":    b.Op("SelectV2", []string{gt, x, b.Op("Neg", []string{x}, nil)}, nil),
					"clip":   b.Op("SelectV2", []string{le, zero, x}, nil),
					"rows":   b.Op("Select", []string{b.Op("Cast", []string{tfsave.ConstOf[int32](b, "cond", []int64{2}, 1, 0)}, map[string]any{"DstT": dtBool}), x, b.Op("Sub", []string{x, x}, nil)}, nil),
					"never":  b.Op("Cast", []string{eq}, map[string]any{"DstT": tensor.Int32}),
					"gtcast": b.Op("Cast", []string{gt}, map[string]any{"DstT": tensor.Float}),
				}
			},
			feed: []tensor.Tensor{named("x", x23)},
			want: map[string]tensor.Tensor{
				"abs":    f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6),
				"clip":   f32([]int64{2, 3}, 1, 0, 3, 0, 5, 0),
				"rows":   f32([]int64{2, 3}, 1, -2, 3, 0, 0, 0),
				"never":  i32([]int64{2, 3}, 0, 0, 0, 0, 0, 0),
				"gtcast": f32([]int64{2, 3}, 1, 0, 1, 0, 1, 0),
			},
		},
		{
			name: "shapes",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				r := b.Op("Reshape", []string{x, tfsave.ConstOf[int32](b, "s", nil, 3, -1)}, nil)
				e := b.Op("ExpandDims", []string{x, tfsave.ConstOf[int32](b, "ax", []int64{}, 1)}, nil)
				return map[string]string{"x": x}, map[string]string{
					"reshape": r,
					"shape":   b.Op("Shape", []string{e}, nil),
					"shape64": b.Op("Shape", []string{r}, map[string]any{"out_type": tensor.Int64}),
					"squeeze": b.Op("Squeeze", []string{e}, map[string]any{"squeeze_dims": []int{1}}),
					"cast":    b.Op("Cast", []string{x}, map[string]any{"DstT": tensor.Int64}),
				}
			},
			feed: []tensor.Tensor{named("x", f32([]int64{2, 3}, 1.5, -2.5, 3, -4, 5.9, -6.9))},
			want: map[string]tensor.Tensor{
				"reshape": f32([]int64{3, 2}, 1.5, -2.5, 3, -4, 5.9, -6.9),
				"shape":   i32([]int64{3}, 2, 1, 3),
				"shape64": i64([]int64{2}, 3, 2),
				"squeeze": f32([]int64{2, 3}, 1.5, -2.5, 3, -4, 5.9, -6.9),
				"cast":    i64([]int64{2, 3}, 1, -2, 3, -4, 5, -6),
			},
		},
		{
			name: "concat pack unpack",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				y := b.Placeholder("y", tensor.Float, []int64{-1, 1})
				u := b.Op("Unpack", []string{x}, map[string]any{"num": 3, "axis": 1})
				return map[string]string{"x": x, "y": y}, map[string]string{
					"concat":  b.Op("ConcatV2", []string{x, y, x, tfsave.ConstOf[int32](b, "axis", []int64{}, -1)}, nil),
					"concat0": b.Op("ConcatV2", []string{x, x, tfsave.ConstOf[int64](b, "axis0", []int64{}, 0)}, nil),
					"pack":    b.Op("Pack", []string{x, x}, map[string]any{"axis": 1}),
					"unpack2": tfsave.Output(tfNode(u), 2),
				}
			},
			feed: []tensor.Tensor{named("x", x23), named("y", f32([]int64{2, 1}, 7, 8))},
			want: map[string]tensor.Tensor{
				"concat":  f32([]int64{2, 7}, 1, -2, 3, 7, 1, -2, 3, -4, 5, -6, 8, -4, 5, -6),
				"concat0": f32([]int64{4, 3}, 1, -2, 3, -4, 5, -6, 1, -2, 3, -4, 5, -6),
				"pack":    f32([]int64{2, 2, 3}, 1, -2, 3, 1, -2, 3, -4, 5, -6, -4, 5, -6),
				"unpack2": f32([]int64{2}, 3, -6),
			},
		},
		{
			name: "gather slice onehot",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				ids := b.Placeholder("ids", tensor.Int64, []int64{-1, 1})
				table := tfsave.ConstOf[float32](b, "table", []int64{4, 2}, 0, 1, 10, 11, 20, 21, 30, 31)
				g := b.Op("GatherV2", []string{table, ids, tfsave.ConstOf[int32](b, "ax", []int64{}, 0)}, nil)
				m := tfsave.ConstOf[float32](b, "m", []int64{3, 4}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
				i32c := func(name string, v ...int32) string { return tfsave.ConstOf[int32](b, name, nil, v...) }
				return map[string]string{"ids": ids}, map[string]string{
					"gather": g,
					"slice":  b.Op("Slice", []string{m, i32c("b", 1, 1), i32c("s", -1, 2)}, nil),
					// m[1:, ::2] and m[:, -1] (shrink) and m[::-1, 1:3]
					"ss1": b.Op("StridedSlice", []string{m, i32c("b1", 1, 0), i32c("e1", 0, 0), i32c("s1", 1, 2)}, map[string]any{"end_mask": 3, "begin_mask": 2}),
					"ss2": b.Op("StridedSlice", []string{m, i32c("b2", 0, -1), i32c("e2", 0, 0), i32c("s2", 1, 1)}, map[string]any{"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2}),
					"ss3": b.Op("StridedSlice", []string{m, i32c("b3", 0, 1), i32c("e3", 0, 3), i32c("s3", -1, 1)}, map[string]any{"begin_mask": 1, "end_mask": 1}),
					"onehot": b.Op("OneHot", []string{ids, tfsave.ConstOf[int32](b, "depth", []int64{}, 3),
						tfsave.ConstOf[float32](b, "on", []int64{}, 5), tfsave.ConstOf[float32](b, "off", []int64{}, -1)}, nil),
				}
			},
			feed: []tensor.Tensor{named("ids", i64([]int64{3, 1}, 3, 0, 2))},
			want: map[string]tensor.Tensor{
				"gather": f32([]int64{3, 1, 2}, 30, 31, 0, 1, 20, 21),
				"slice":  f32([]int64{2, 2}, 5, 6, 9, 10),
				"ss1":    f32([]int64{2, 2}, 4, 6, 8, 10),
				"ss2":    f32([]int64{3}, 3, 7, 11),
				"ss3":    f32([]int64{3, 2}, 9, 10, 5, 6, 1, 2),
				"onehot": f32([]int64{3, 1, 3}, -1, -1, -1, 5, -1, -1, -1, -1, 5),
			},
		},
		{
			name: "reductions and softmax",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				ax := func(name string, v ...int32) string { return tfsave.ConstOf[int32](b, name, nil, v...) }
				return map[string]string{"x": x}, map[string]string{
					"sum1":    b.Op("Sum", []string{x, ax("a1", 1)}, nil),
					"sum0k":   b.Op("Sum", []string{x, ax("a0", 0)}, map[string]any{"keep_dims": true}),
					"mean":    b.Op("Mean", []string{x, ax("a01", 0, 1)}, nil),
					"max":     b.Op("Max", []string{x, ax("am", -1)}, nil),
					"min":     b.Op("Min", []string{x, ax("an", 0)}, nil),
					"softmax": b.Op("Softmax", []string{x}, nil),
				}
			},
			feed: []tensor.Tensor{named("x", x23)},
			want: map[string]tensor.Tensor{
				"sum1":  f32([]int64{2}, 2, -5),
				"sum0k": f32([]int64{1, 3}, -3, 3, -3),
				"mean":  f32([]int64{}, -0.5),
				"max":   f32([]int64{2}, 3, 5),
				"min":   f32([]int64{3}, -4, -2, -6),
				"softmax": func() tensor.Tensor {
					v := []float64{1, -2, 3, -4, 5, -6}
					out := make([]float32, 6)
					for r := range 2 {
						s := 0.0
						for j := range 3 {
							s += math.Exp(v[r*3+j])
						}
						for j := range 3 {
							out[r*3+j] = float32(math.Exp(v[r*3+j]) / s)
						}
					}
					return f32([]int64{2, 3}, out...)
				}(),
			},
		},
		{
			name: "matmul",
			build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
				x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
				w := tfsave.ConstOf[float32](b, "w", []int64{3, 5}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
				wt := tfsave.ConstOf[float32](b, "wt", []int64{5, 3}, 1, 6, 11, 2, 7, 12, 3, 8, 13, 4, 9, 14, 5, 10, 15)
				xd := b.Placeholder("xd", tensor.Double, []int64{-1, 2})
				return map[string]string{"x": x, "xd": xd}, map[string]string{
					"mm":    b.Op("MatMul", []string{x, w}, nil),
					"mmtb":  b.Op("MatMul", []string{x, wt}, map[string]any{"transpose_b": true}),
					"mmxx":  b.Op("MatMul", []string{x, x}, map[string]any{"transpose_b": true}),
					"mmta":  b.Op("MatMul", []string{x, x}, map[string]any{"transpose_a": true}),
					"mmd":   b.Op("MatMul", []string{xd, tfsave.ConstOf[float64](b, "wd", []int64{2, 1}, 0.5, -1)}, nil),
					"batch": b.Op("BatchMatMulV2", []string{b.Op("Reshape", []string{x, tfsave.ConstOf[int32](b, "s", nil, 2, 1, 3)}, nil), w}, nil),
				}
			},
			feed: []tensor.Tensor{named("x", x23), named("xd", f64([]int64{3, 2}, 1, 2, 3, 4, 5, 6))},
			want: map[string]tensor.Tensor{
				"mm":    f32([]int64{2, 5}, 22, 24, 26, 28, 30, -40, -45, -50, -55, -60),
				"mmtb":  f32([]int64{2, 5}, 22, 24, 26, 28, 30, -40, -45, -50, -55, -60),
				"mmxx":  f32([]int64{2, 2}, 14, -32, -32, 77),
				"mmta":  f32([]int64{3, 3}, 17, -22, 27, -22, 29, -36, 27, -36, 45),
				"mmd":   f64([]int64{3, 1}, -1.5, -2.5, -3.5),
				"batch": f32([]int64{2, 1, 5}, 22, 24, 26, 28, 30, -40, -45, -50, -55, -60),
			},
		},
	}
	for _, opts := range []tfsave.Options{{}, {FunctionCall: true}} {
		for _, gc := range cases {
			t.Run(fmt.Sprintf("%s/function=%v", gc.name, opts.FunctionCall), func(t *testing.T) { runCase(t, opts, gc) })
		}
	}
}

func tfNode(name string) string {
	n, _, _ := splitTensorName(name)
	return n
}

// TestMatMulSizes checks the blocked float32 kernel against a naive loop
// over odd sizes (row and column tails), bit for bit: both accumulate in
// index order.
func TestMatMulSizes(t *testing.T) {
	for _, m := range []int{1, 2, 3, 5, 8} {
		for _, k := range []int{1, 3, 8, 17} {
			for _, n := range []int{1, 2, 4, 5, 16, 19} {
				a := make([]float32, m*k)
				bm := make([]float32, k*n)
				for i := range a {
					a[i] = float32(math.Sin(float64(i)*1.3)) * 3
				}
				for i := range bm {
					bm[i] = float32(math.Cos(float64(i)*0.7)) / 3
				}
				want := make([]float32, m*n)
				for i := range m {
					for j := range n {
						var s float32
						for p := range k {
							s = float32(s + float32(a[i*k+p]*bm[p*n+j]))
						}
						want[i*n+j] = s
					}
				}
				got := make([]float32, m*n)
				if n == 1 {
					matvec32(got, a, bm, m, k)
				} else {
					matmul32(got, a, packB(nil, bm, k, n), m, k, n, nil)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("m=%d k=%d n=%d: got %v, want %v", m, k, n, got, want)
				}
			}
		}
	}
}

// TestSigmoidEigen checks the float32 logistic is Eigen's form: exp of the
// input clamped at the cutoff, over one plus itself, and saturates to 1.
func TestSigmoidEigen(t *testing.T) {
	for _, x := range []float32{-30, -5, -1e-3, 0, 0.3, 2, 10, 16.6, 17, 40, 1e30} {
		c := math.Min(float64(x), 16.635532333438687)
		e := float32(math.Exp(c))
		want := e / (1 + e)
		if got := sigmoid32(x); got != want {
			t.Errorf("sigmoid32(%v) = %v, want %v", x, got, want)
		}
	}
	if sigmoid32(40) != 1 {
		t.Errorf("sigmoid32(40) = %v, want 1", sigmoid32(40))
	}
}

func TestOptionalInput(t *testing.T) {
	b := tfsave.NewBuilder()
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, 1})
	scale := b.PlaceholderWithDefault("serving_default_scale", f32([]int64{}, 3), []int64{})
	y := b.Op("Mul", []string{x, scale}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x, "scale": scale}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	m := loadFiles(t, files, driver.Config{})
	if !m.Signature().Inputs[0].Optional || m.Signature().Inputs[1].Optional {
		t.Fatalf("inputs %+v: scale should be optional, x not", m.Signature().Inputs)
	}
	out, err := m.Predict(context.Background(), []tensor.Tensor{named("x", f32([]int64{2, 1}, 1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tensor.Data[float32](out[0]); !reflect.DeepEqual(got, []float32{3, 6}) {
		t.Fatalf("default scale: %v, want [3 6]", got)
	}
	out, err = m.Predict(context.Background(), []tensor.Tensor{named("x", f32([]int64{2, 1}, 1, 2)), named("scale", f32([]int64{}, -1))})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tensor.Data[float32](out[0]); !reflect.DeepEqual(got, []float32{-1, -2}) {
		t.Fatalf("fed scale: %v, want [-1 -2]", got)
	}
}

// tfsaveBuilderChain is a model y = x + n·1 as a chain of n AddV2 nodes.
func tfsaveBuilderChain(t *testing.T, n int) driver.Files {
	t.Helper()
	b := tfsave.NewBuilder()
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, 1})
	one := tfsave.ConstOf[float32](b, "one", []int64{}, 1)
	y := x
	for i := range n {
		// Explicit names: tfsave's automatic naming is quadratic.
		y = b.OpNamed(fmt.Sprintf("add%d", i), "AddV2", []string{y, one}, nil)
	}
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}
