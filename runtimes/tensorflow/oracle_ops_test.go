package tensorflow

import (
	"testing"

	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// The op tests against TensorFlow.js 4.22.0 (oracle_test.go): each case
// builds a graph with tfsave, runs it here and on tfjs-converter's graph
// executor, and compares every output. They cover the ops the op-coverage
// table (doc.go) lists as tested against TensorFlow.js, with their
// attribute variants and one-row batches.

// seq returns n float32 values spread over [lo, hi) with a mix of signs
// and non-integers (deterministic, no two equal).
func seq(n int, lo, hi float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = lo + (hi-lo)*float32((i*7)%n)/float32(n) + 0.125
	}
	return v
}

func runOracleCases(t *testing.T, cases []oracleCase) {
	t.Helper()
	for _, oc := range cases {
		t.Run(oc.name, func(t *testing.T) { checkOracle(t, oc) })
	}
}

// TestOracleElementwise: unary and binary element-wise ops, float32 and
// int32, broadcasting ([1,1] against [3], [2,3] against [2,1]).
func TestOracleElementwise(t *testing.T) {
	xs := f32([]int64{2, 4}, -2.5, -1.5, -0.5, 0, 0.5, 1.5, 2.5, 3.75)
	unary := func(ops ...string) func(b *tfsave.Builder) (map[string]string, map[string]string) {
		return func(b *tfsave.Builder) (map[string]string, map[string]string) {
			x := b.Placeholder("x", tensor.Float, []int64{-1, 4})
			outs := map[string]string{}
			for _, op := range ops {
				outs[op] = b.Op(op, []string{x}, nil)
			}
			return map[string]string{"x": x}, outs
		}
	}
	binary := func(dt tensor.DType, yShape []int64, y tensor.Tensor, ops ...string) func(b *tfsave.Builder) (map[string]string, map[string]string) {
		return func(b *tfsave.Builder) (map[string]string, map[string]string) {
			x := b.Placeholder("x", dt, []int64{-1, -1})
			c := b.Const("y", y)
			outs := map[string]string{}
			for _, op := range ops {
				outs[op] = b.Op(op, []string{x, c}, nil)
				outs[op+"_swapped"] = b.Op(op, []string{c, x}, nil)
				if op == "FloorDiv" && dt == tensor.Float {
					// tfjs's floorDiv answers int32 whatever its inputs
					// (TensorFlow keeps float): compare the integral values.
					for _, k := range []string{op, op + "_swapped"} {
						outs[k] = b.Op("Cast", []string{outs[k]}, map[string]any{"DstT": tensor.Int32})
					}
				}
			}
			return map[string]string{"x": x}, outs
		}
	}
	cases := []oracleCase{
		{name: "rounding", build: unary("Abs", "Sign", "Floor", "Ceil", "Round", "Neg", "Square"), feed: map[string]tensor.Tensor{"x": xs}},
		{name: "rounding one row", build: unary("Abs", "Sign", "Floor", "Ceil", "Round"), feed: map[string]tensor.Tensor{"x": f32([]int64{1, 4}, -3.5, 4.5, -0.25, 1e-3)}},
		{name: "activations", build: unary("Softplus", "Elu", "Selu", "Relu", "Relu6", "Sigmoid", "Tanh"), feed: map[string]tensor.Tensor{"x": f32([]int64{3, 4}, seq(12, -8, 8)...)}},
		{name: "activations extremes", build: unary("Softplus", "Elu", "Selu", "Sigmoid", "Tanh"), feed: map[string]tensor.Tensor{"x": f32([]int64{1, 4}, -40, -15.9, 16.2, 40)}},
		{name: "logs", build: unary("Log1p", "Reciprocal", "Exp", "Log", "Sqrt", "Rsqrt"), feed: map[string]tensor.Tensor{"x": f32([]int64{2, 4}, 1e-4, 0.01, 0.3, 1, 2.5, 7, 100, 12345)}},
		{name: "erf", build: unary("Erf"), feed: map[string]tensor.Tensor{"x": f32([]int64{3, 4}, seq(12, -3, 3)...)}},
		{name: "leaky relu", build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
			x := b.Placeholder("x", tensor.Float, []int64{-1, 4})
			return map[string]string{"x": x}, map[string]string{
				"default": b.Op("LeakyRelu", []string{x}, map[string]any{"alpha": float32(0.2)}),
				"small":   b.Op("LeakyRelu", []string{x}, map[string]any{"alpha": float32(0.01)}),
			}
		}, feed: map[string]tensor.Tensor{"x": xs}},
		{name: "int unary", build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
			x := b.Placeholder("x", tensor.Int32, []int64{-1})
			return map[string]string{"x": x}, map[string]string{
				"abs": b.Op("Abs", []string{x}, nil), "sign": b.Op("Sign", []string{x}, nil), "neg": b.Op("Neg", []string{x}, nil),
			}
		}, feed: map[string]tensor.Tensor{"x": i32([]int64{5}, -7, -1, 0, 1, 9)}},
		{name: "float binary one row", build: binary(tensor.Float, []int64{3}, f32([]int64{3}, 2, -0.75, 4),
			"Div", "RealDiv", "DivNoNan", "SquaredDifference", "FloorDiv", "FloorMod", "Maximum", "Minimum", "Sub", "AddV2", "Add", "Mul"),
			feed: map[string]tensor.Tensor{"x": f32([]int64{1, 1}, -5.5)}},
		{name: "float binary column", build: binary(tensor.Float, []int64{2, 1}, f32([]int64{2, 1}, 2, -0.75),
			"Div", "DivNoNan", "SquaredDifference", "FloorDiv", "FloorMod"),
			feed: map[string]tensor.Tensor{"x": f32([]int64{2, 3}, -5.5, 3, 0.25, 7.25, -1, 0.5)}},
		{name: "div no nan by zero", build: binary(tensor.Float, []int64{3}, f32([]int64{3}, 0, 2, 0), "DivNoNan"),
			feed: map[string]tensor.Tensor{"x": f32([]int64{2, 3}, 1, 2, 0, -4, 0, 6)}},
		{name: "pow", build: binary(tensor.Float, []int64{4}, f32([]int64{4}, 2, 0.5, 3, -1), "Pow"),
			feed: map[string]tensor.Tensor{"x": f32([]int64{2, 4}, 1.5, 4, 2, 8, 0.25, 9, 0.5, 3)}},
		{name: "int binary", build: binary(tensor.Int32, []int64{3}, i32([]int64{3}, 3, -4, 5),
			"FloorDiv", "FloorMod", "SquaredDifference", "Maximum", "Minimum", "Sub", "Mul", "AddV2"),
			feed: map[string]tensor.Tensor{"x": i32([]int64{2, 3}, -7, 9, 10, 7, -9, -10)}},
		{name: "int pow", build: binary(tensor.Int32, []int64{3}, i32([]int64{3}, 0, 2, 3), "Pow"),
			feed: map[string]tensor.Tensor{"x": i32([]int64{2, 3}, 0, 9, 10, 7, 3, 2)}},
		// Powers past int32 wrap around, as TensorFlow's integer pow
		// (repeated squaring) and tfjs's int32 cast of Math.pow do.
		{name: "int pow overflow", build: binary(tensor.Int32, []int64{3}, i32([]int64{3}, 10, 21, 31), "Pow"),
			feed: map[string]tensor.Tensor{"x": i32([]int64{1, 3}, 10, 3, 2)}},
		// tfjs divides int32 with floor division, TensorFlow's Div truncates:
		// they agree on non-negative quotients only.
		{name: "int div", build: binary(tensor.Int32, []int64{3}, i32([]int64{3}, 3, 4, 5), "Div"),
			feed: map[string]tensor.Tensor{"x": i32([]int64{1, 3}, 7, 9, 10)}},
	}
	runOracleCases(t, cases)
}

// TestOracleLogical: comparisons and logical ops (outputs cast to int32:
// serving outputs cannot be bool), Select, SelectV2, Cast.
func TestOracleLogical(t *testing.T) {
	build := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
		c := tfsave.ConstOf[float32](b, "c", []int64{3}, 0, 1, -1)
		ge := b.Op("GreaterEqual", []string{x, c}, nil)
		ne := b.Op("NotEqual", []string{x, c}, nil)
		lt := b.Op("Less", []string{x, c}, nil)
		cast := func(v string) string { return b.Op("Cast", []string{v}, map[string]any{"DstT": tensor.Int32}) }
		return map[string]string{"x": x}, map[string]string{
			"ge": cast(ge), "ne": cast(ne),
			"and": cast(b.Op("LogicalAnd", []string{ge, ne}, nil)),
			"or":  cast(b.Op("LogicalOr", []string{lt, ne}, nil)),
			"not": cast(b.Op("LogicalNot", []string{ge}, nil)),
			"eq":  cast(b.Op("Equal", []string{ge, ne}, nil)),
			"neb": cast(b.Op("NotEqual", []string{ge, lt}, nil)),
			"gt":  cast(b.Op("Greater", []string{x, c}, nil)),
			"le":  cast(b.Op("LessEqual", []string{c, x}, nil)),
			// Select with a condition of the inputs' shape; SelectV2
			// broadcasting a [3] condition and a scalar.
			"select":   b.Op("Select", []string{ge, x, b.Op("Neg", []string{x}, nil)}, nil),
			"selectv2": b.Op("SelectV2", []string{b.Op("Less", []string{c, tfsave.ConstOf[float32](b, "zero", []int64{}, 0)}, nil), x, tfsave.ConstOf[float32](b, "nine", []int64{}, 9)}, nil),
			// Cast truncates toward zero; bool and int32 to float.
			"trunc": b.Op("Cast", []string{b.Op("Mul", []string{x, tfsave.ConstOf[float32](b, "k", []int64{}, 2.75)}, nil)}, map[string]any{"DstT": tensor.Int32}),
			"boolf": b.Op("Cast", []string{ge}, map[string]any{"DstT": tensor.Float}),
			"intf":  b.Op("Cast", []string{cast(lt)}, map[string]any{"DstT": tensor.Float}),
		}
	}
	runOracleCases(t, []oracleCase{
		{name: "rows", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{3, 3}, 0, 1, -1, 1, 0, -2, -1, 2, 0)}},
		{name: "one row", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{1, 3}, 0, 2, -3)}},
	})
}

// TestOracleReductions: Sum, Mean, Max, Min, Prod over one axis, several,
// negative and none, with and without keep_dims, on one-row batches too;
// Softmax and LogSoftmax.
func TestOracleReductions(t *testing.T) {
	build := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 3, 2})
		outs := map[string]string{}
		axes := map[string][]int32{"a0": {0}, "a1": {1}, "am1": {-1}, "a12": {1, 2}, "all": {0, 1, 2}, "none": {}}
		for _, op := range []string{"Sum", "Mean", "Max", "Min", "Prod"} {
			for name, ax := range axes {
				c := tfsave.ConstOf(b, op+"_"+name+"_axes", []int64{int64(len(ax))}, ax...)
				for _, keep := range []bool{false, true} {
					key := op + "_" + name
					if keep {
						key += "_keep"
					}
					outs[key] = b.Op(op, []string{x, c}, map[string]any{"keep_dims": keep})
				}
			}
		}
		scalarAxis := tfsave.ConstOf[int32](b, "scalar_axis", []int64{}, 1)
		outs["Sum_scalar_axis"] = b.Op("Sum", []string{x, scalarAxis}, nil)
		flat := b.Op("Reshape", []string{x, tfsave.ConstOf[int32](b, "flat", []int64{2}, -1, 6)}, nil)
		outs["Softmax"] = b.Op("Softmax", []string{flat}, nil)
		outs["LogSoftmax"] = b.Op("LogSoftmax", []string{flat}, nil)
		return map[string]string{"x": x}, outs
	}
	runOracleCases(t, []oracleCase{
		{name: "two rows", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{2, 3, 2}, seq(12, -2, 3)...)}},
		{name: "one row", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{1, 3, 2}, 0.5, -1.25, 2, 3.5, -0.75, 1)}},
	})
	intBuild := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Int32, []int64{-1, 3})
		ax := tfsave.ConstOf[int32](b, "ax", []int64{1}, 1)
		outs := map[string]string{}
		// Not Mean: tfjs's mean of int32 is float32, TensorFlow's an
		// int32 (truncated) quotient.
		for _, op := range []string{"Sum", "Max", "Min", "Prod"} {
			outs[op] = b.Op(op, []string{x, ax}, map[string]any{"keep_dims": true})
		}
		return map[string]string{"x": x}, outs
	}
	runOracleCases(t, []oracleCase{{name: "int32", build: intBuild, feed: map[string]tensor.Tensor{"x": i32([]int64{2, 3}, -3, 5, 7, 2, 2, -9)}}})
}

// TestOracleShapeOps: Size, Rank, Shape, Fill, ZerosLike, OnesLike,
// IdentityN, StopGradient, Snapshot, Identity, ExpandDims, Squeeze,
// Reshape, Pack, Unpack, ConcatV2, OneHot, Cast, Tile-free shapes.
func TestOracleShapeOps(t *testing.T) {
	build := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 1})
		idn := tfNode(b.Op("IdentityN", []string{x, b.Op("Neg", []string{x}, nil)}, nil))
		dims := tfsave.ConstOf[int32](b, "dims", []int64{2}, 2, 3)
		sq := b.Op("Squeeze", []string{x}, nil)
		return map[string]string{"x": x}, map[string]string{
			"size":     b.Op("Size", []string{x}, nil),
			"rank":     b.Op("Rank", []string{x}, nil),
			"shape":    b.Op("Shape", []string{x}, nil),
			"fill":     b.Op("Fill", []string{dims, tfsave.ConstOf[float32](b, "v", []int64{}, 1.5)}, nil),
			"filli":    b.Op("Fill", []string{dims, tfsave.ConstOf[int32](b, "vi", []int64{}, -4)}, nil),
			"zeros":    b.Op("ZerosLike", []string{x}, nil),
			"ones":     b.Op("OnesLike", []string{x}, nil),
			"idn0":     tfsave.Output(idn, 0),
			"idn1":     tfsave.Output(idn, 1),
			"stop":     b.Op("StopGradient", []string{x}, nil),
			"snap":     b.Op("Snapshot", []string{x}, nil),
			"expand0":  b.Op("ExpandDims", []string{x, tfsave.ConstOf[int32](b, "e0", []int64{}, 0)}, nil),
			"expandm1": b.Op("ExpandDims", []string{x, tfsave.ConstOf[int32](b, "em1", []int64{}, -1)}, nil),
			"squeeze":  sq,
			"squeeze1": b.Op("Squeeze", []string{x}, map[string]any{"squeeze_dims": []int{1}}),
			"reshape":  b.Op("Reshape", []string{x, tfsave.ConstOf[int32](b, "r", []int64{3}, 1, -1, 1)}, nil),
			"pack1":    b.Op("Pack", []string{x, x}, map[string]any{"axis": 1}),
			"packm1":   b.Op("Pack", []string{x, x}, map[string]any{"axis": -1}),
			"concat":   b.Op("ConcatV2", []string{x, x, tfsave.ConstOf[int32](b, "c1", []int64{}, 1)}, nil),
			"concatm2": b.Op("ConcatV2", []string{x, x, tfsave.ConstOf[int32](b, "cm2", []int64{}, -2)}, nil),
			"unpack":   b.Op("Unpack", []string{x}, map[string]any{"num": 1, "axis": 1}),
			"onehot": b.Op("OneHot", []string{b.Op("Cast", []string{sq}, map[string]any{"DstT": tensor.Int32}),
				tfsave.ConstOf[int32](b, "depth", []int64{}, 4), tfsave.ConstOf[float32](b, "on", []int64{}, 5), tfsave.ConstOf[float32](b, "off", []int64{}, -1)}, nil),
		}
	}
	runOracleCases(t, []oracleCase{
		{name: "one row", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{1, 1}, 2)}},
		{name: "three rows", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{3, 1}, 2, 0, 3)}},
	})
}

// TestOracleBatchMatMul: BatchMatMul and BatchMatMulV2 with adj_x/adj_y
// and (V2) a broadcast batch dimension; MatMul transposes.
func TestOracleBatchMatMul(t *testing.T) {
	build := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 2, 3})
		w := tfsave.ConstOf(b, "w", []int64{1, 3, 4}, seq(12, -1, 1)...)
		wt := tfsave.ConstOf(b, "wt", []int64{1, 4, 3}, seq(12, -2, 1)...)
		xt := b.Op("Transpose", []string{x, tfsave.ConstOf[int32](b, "perm", []int64{3}, 0, 2, 1)}, nil)
		m := tfsave.ConstOf(b, "m", []int64{3, 2}, seq(6, -1, 2)...)
		x2 := b.Op("Reshape", []string{x, tfsave.ConstOf[int32](b, "r", []int64{2}, -1, 3)}, nil)
		return map[string]string{"x": x}, map[string]string{
			"v2":     b.Op("BatchMatMulV2", []string{x, w}, nil),
			"v2adjy": b.Op("BatchMatMulV2", []string{x, wt}, map[string]any{"adj_y": true}),
			"v2adjx": b.Op("BatchMatMulV2", []string{xt, w}, map[string]any{"adj_x": true}),
			"v1":     b.Op("BatchMatMul", []string{x, xt}, nil),
			"v1adj":  b.Op("BatchMatMul", []string{x, x}, map[string]any{"adj_y": true}),
			"mm":     b.Op("MatMul", []string{x2, m}, nil),
			"mmtt":   b.Op("MatMul", []string{m, x2}, map[string]any{"transpose_a": true, "transpose_b": true}),
		}
	}
	runOracleCases(t, []oracleCase{
		{name: "one row", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{1, 2, 3}, seq(6, -3, 3)...)}},
		{name: "two rows", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{2, 2, 3}, seq(12, -3, 3)...)}},
	})
}

// TestOracleIndexing: StridedSlice with every mask, negative strides and
// indices; Slice; GatherV2 on axes 0, 1, -1 with int32/int64 indices
// (batch_dims != 0: TestOraclePadTile); Transpose perms; Split,
// SplitV, ReverseV2.
func TestOracleIndexing(t *testing.T) {
	build := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 3, 4})
		v := func(name string, vals ...int32) string {
			return tfsave.ConstOf(b, name, []int64{int64(len(vals))}, vals...)
		}
		ss := func(name string, begin, end, strides []int32, masks map[string]any) string {
			return b.Op("StridedSlice", []string{x, v(name+"_b", begin...), v(name+"_e", end...), v(name+"_s", strides...)}, masks)
		}
		outs := map[string]string{
			"ss_plain":    ss("plain", []int32{0, 1, 0}, []int32{1, 3, 4}, []int32{1, 1, 2}, nil),
			"ss_masks":    ss("masks", []int32{0, 1, 1}, []int32{0, 0, 3}, []int32{1, 1, 1}, map[string]any{"begin_mask": 1, "end_mask": 3}),
			"ss_shrink":   ss("shrink", []int32{0, 2, 0}, []int32{0, 3, 4}, []int32{1, 1, 1}, map[string]any{"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2}),
			"ss_lastcol":  ss("lastcol", []int32{0, 0, -1}, []int32{0, 0, 0}, []int32{1, 1, 1}, map[string]any{"begin_mask": 3, "end_mask": 3, "shrink_axis_mask": 4}),
			"ss_reverse":  ss("reverse", []int32{0, -1, -1}, []int32{0, 0, 0}, []int32{1, -1, -2}, map[string]any{"begin_mask": 1, "end_mask": 7}),
			"ss_newaxis":  ss("newaxis", []int32{0, 0, 1}, []int32{0, 0, 3}, []int32{1, 1, 1}, map[string]any{"begin_mask": 1, "end_mask": 1, "new_axis_mask": 2}),
			"ss_ellipsis": ss("ellipsis", []int32{0, 1}, []int32{0, 3}, []int32{1, 1}, map[string]any{"ellipsis_mask": 1}),
			"ss_ell_shr":  ss("ell_shr", []int32{0, 2}, []int32{0, 3}, []int32{1, 1}, map[string]any{"ellipsis_mask": 1, "shrink_axis_mask": 2}),
			"ss_clamp":    ss("clamp", []int32{0, -10, 2}, []int32{5, 10, 100}, []int32{1, 1, 1}, nil),
			"slice":       b.Op("Slice", []string{x, v("sl_b", 0, 1, 1), v("sl_s", -1, 2, -1)}, nil),
			"gather0":     b.Op("GatherV2", []string{x, v("g0", 0, 0), v("g0a", 0)}, nil),
			"gather1":     b.Op("GatherV2", []string{x, v("g1", 2, 0, 1, 2), tfsave.ConstOf[int32](b, "g1a", []int64{}, 1)}, nil),
			"gatherm1":    b.Op("GatherV2", []string{x, tfsave.ConstOf[int64](b, "gm1", []int64{2, 2}, 3, 0, 1, 1), tfsave.ConstOf[int64](b, "gm1a", []int64{}, -1)}, nil),
			"transpose0":  b.Op("Transpose", []string{x, v("p0", 0, 2, 1)}, nil),
			"transpose1":  b.Op("Transpose", []string{x, v("p1", 2, 0, 1)}, nil),
			"transpose2":  b.Op("Transpose", []string{x, v("p2", 1, 2, 0)}, nil),
			"reverse1":    b.Op("ReverseV2", []string{x, v("rv1", 1)}, nil),
			"reverse02":   b.Op("ReverseV2", []string{x, v("rv02", 0, -1)}, nil),
		}
		split := tfNode(b.Op("Split", []string{tfsave.ConstOf[int32](b, "sd", []int64{}, 2), x}, map[string]any{"num_split": 2}))
		splitv := tfNode(b.Op("SplitV", []string{x, v("svs", 1, -1), tfsave.ConstOf[int32](b, "svd", []int64{}, 1)}, map[string]any{"num_split": 2}))
		for i := range 2 {
			outs["split"+string(rune('0'+i))] = tfsave.Output(split, i)
			outs["splitv"+string(rune('0'+i))] = tfsave.Output(splitv, i)
		}
		return map[string]string{"x": x}, outs
	}
	runOracleCases(t, []oracleCase{
		{name: "one row", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{1, 3, 4}, seq(12, 0, 12)...)}},
		{name: "two rows", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{2, 3, 4}, seq(24, 0, 24)...)}},
	})
}

// TestOracleConv: Conv2D (VALID, SAME with odd sizes and stride 2,
// EXPLICIT, dilation 2), DepthwiseConv2dNative (channel multiplier 2,
// strides, dilation), MaxPool and AvgPool (VALID/SAME, strides 1 and 2),
// FusedBatchNormV3 (inference) and BiasAdd, on one and two images.
func TestOracleConv(t *testing.T) {
	build := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 5, 6, 2})
		w := tfsave.ConstOf(b, "w", []int64{3, 3, 2, 3}, seq(54, -1, 1)...)
		dw := tfsave.ConstOf(b, "dw", []int64{2, 3, 2, 2}, seq(24, -1, 1)...)
		conv := func(padding string, sh, sw, dh, dw int) string {
			return b.Op("Conv2D", []string{x, w}, convAttrs(padding, sh, sw, dh, dw))
		}
		explicit := convAttrs("EXPLICIT", 1, 2, 1, 1)
		explicit["explicit_paddings"] = []int{0, 0, 1, 2, 0, 1, 0, 0}
		depth := func(padding string, sh, sw, dh, dwl int) string {
			return b.Op("DepthwiseConv2dNative", []string{x, dw}, convAttrs(padding, sh, sw, dh, dwl))
		}
		bn := b.OpNamed("bn", "FusedBatchNormV3", []string{conv("SAME", 1, 1, 1, 1),
			tfsave.ConstOf[float32](b, "scale", []int64{3}, 2, 0.5, -1),
			tfsave.ConstOf[float32](b, "offset", []int64{3}, 1, -1, 0.25),
			tfsave.ConstOf[float32](b, "mean", []int64{3}, 0.5, -2, 0),
			tfsave.ConstOf[float32](b, "variance", []int64{3}, 3.5, 0.5, 0.2),
		}, map[string]any{"epsilon": float32(1e-3), "exponential_avg_factor": float32(1), "is_training": false})
		return map[string]string{"x": x}, map[string]string{
			"conv_valid":      conv("VALID", 1, 1, 1, 1),
			"conv_same":       conv("SAME", 1, 1, 1, 1),
			"conv_same_s2":    conv("SAME", 2, 2, 1, 1),
			"conv_valid_s21":  conv("VALID", 2, 1, 1, 1),
			"conv_dilated":    conv("VALID", 1, 1, 2, 2),
			"conv_same_dil":   conv("SAME", 1, 1, 1, 2),
			"conv_explicit":   b.Op("Conv2D", []string{x, w}, explicit),
			"depth_valid":     depth("VALID", 1, 1, 1, 1),
			"depth_same_s2":   depth("SAME", 2, 2, 1, 1),
			"depth_dilated":   depth("VALID", 1, 1, 2, 1),
			"maxpool_valid":   b.Op("MaxPool", []string{x}, poolAttrs("VALID", 2, 2, 2, 2)),
			"maxpool_same":    b.Op("MaxPool", []string{x}, poolAttrs("SAME", 3, 3, 2, 2)),
			"maxpool_s1":      b.Op("MaxPool", []string{x}, poolAttrs("SAME", 2, 3, 1, 1)),
			"avgpool_valid":   b.Op("AvgPool", []string{x}, poolAttrs("VALID", 2, 2, 2, 2)),
			"avgpool_same":    b.Op("AvgPool", []string{x}, poolAttrs("SAME", 3, 3, 2, 2)),
			"avgpool_same_s1": b.Op("AvgPool", []string{x}, poolAttrs("SAME", 2, 3, 1, 1)),
			"bn":              bn,
			"bias":            b.Op("BiasAdd", []string{bn, tfsave.ConstOf[float32](b, "bias", []int64{3}, 0.5, -0.25, 3)}, nil),
		}
	}
	// Inputs in [-3, 3], weights in [-1, 1], at most 18 terms a sum: a
	// result that cancels to near zero may move by 18*3*2^-24*a few in
	// another summation order, hence atol (measured: at most 1.1e-6, on a
	// batch-norm output; larger outputs keep 1e-6 relative).
	runOracleCases(t, []oracleCase{
		{name: "one image", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{1, 5, 6, 2}, seq(60, -3, 3)...)}, atol: 4e-6},
		{name: "two images", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{2, 5, 6, 2}, seq(120, -3, 3)...)}, atol: 4e-6},
	})
}

// TestOracleTensorList: TensorListFromTensor, TensorListLength,
// TensorListGetItem, TensorListSetItem, TensorListReserve and
// TensorListStack in the main graph (the Keras loops use them inside a
// While: TestOracleKerasLSTM).
func TestOracleTensorList(t *testing.T) {
	build := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{3, -1})
		elem := tfsave.ConstOf[int32](b, "elem", []int64{1}, -1)
		l := b.Op("TensorListFromTensor", []string{x, elem}, nil)
		one := tfsave.ConstOf[int32](b, "one", []int64{}, 1)
		two := tfsave.ConstOf[int32](b, "two", []int64{}, 2)
		item := b.Op("TensorListGetItem", []string{l, one, elem}, map[string]any{"element_dtype": tensor.Float})
		set := b.Op("TensorListSetItem", []string{l, two, b.Op("Neg", []string{item}, nil)}, map[string]any{"element_dtype": tensor.Float})
		res := b.Op("TensorListReserve", []string{elem, tfsave.ConstOf[int32](b, "n", []int64{}, 2)}, map[string]any{"element_dtype": tensor.Float})
		res = b.Op("TensorListSetItem", []string{res, one, item}, map[string]any{"element_dtype": tensor.Float})
		res = b.Op("TensorListSetItem", []string{res, tfsave.ConstOf[int32](b, "zero", []int64{}, 0), b.Op("Exp", []string{item}, nil)}, map[string]any{"element_dtype": tensor.Float})
		return map[string]string{"x": x}, map[string]string{
			"len":      b.Op("TensorListLength", []string{l}, nil),
			"item":     item,
			"stack":    b.Op("TensorListStack", []string{set, elem}, map[string]any{"element_dtype": tensor.Float, "num_elements": 3}),
			"reserved": b.Op("TensorListStack", []string{res, elem}, map[string]any{"element_dtype": tensor.Float, "num_elements": 2}),
		}
	}
	runOracleCases(t, []oracleCase{
		{name: "one column", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{3, 1}, 1.5, -2, 3)}},
		{name: "four columns", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{3, 4}, seq(12, -2, 2)...)}},
	})
}

// TestOraclePadTile: Pad, PadV2, MirrorPad (REFLECT, SYMMETRIC), Tile
// (float32 and int32, int64 paddings and multiples) and GatherV2 with
// batch_dims 1 and -1 on axes 1 and 2, on one and two rows.
func TestOraclePadTile(t *testing.T) {
	build := func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 3, 4})
		ix := b.Placeholder("i", tensor.Int32, []int64{-1, 2})
		m := func(name string, shape []int64, vals ...int32) string { return tfsave.ConstOf(b, name, shape, vals...) }
		xi := b.Op("Cast", []string{x}, map[string]any{"DstT": tensor.Int32})
		return map[string]string{"x": x, "i": ix}, map[string]string{
			"pad":       b.Op("Pad", []string{x, m("p", []int64{3, 2}, 0, 1, 2, 0, 1, 1)}, nil),
			"pad_int":   b.Op("Pad", []string{xi, tfsave.ConstOf[int64](b, "p64", []int64{3, 2}, 1, 0, 0, 0, 0, 2)}, nil),
			"padv2":     b.Op("PadV2", []string{x, m("p2", []int64{3, 2}, 0, 0, 1, 1, 2, 0), tfsave.ConstOf[float32](b, "cv", []int64{}, -2.5)}, nil),
			"reflect":   b.Op("MirrorPad", []string{x, m("pr", []int64{3, 2}, 0, 0, 2, 1, 3, 3)}, map[string]any{"mode": "REFLECT"}),
			"symmetric": b.Op("MirrorPad", []string{x, m("ps", []int64{3, 2}, 0, 0, 3, 2, 1, 4)}, map[string]any{"mode": "SYMMETRIC"}),
			"tile":      b.Op("Tile", []string{x, m("t", []int64{3}, 2, 1, 3)}, nil),
			"tile_int":  b.Op("Tile", []string{xi, tfsave.ConstOf[int64](b, "t64", []int64{3}, 1, 2, 1)}, nil),
			"gb1":       b.Op("GatherV2", []string{x, ix, m("a1", []int64{}, 1)}, map[string]any{"batch_dims": 1}),
			"gb1a2":     b.Op("GatherV2", []string{x, ix, m("a2", []int64{}, 2)}, map[string]any{"batch_dims": 1}),
			"gbm1":      b.Op("GatherV2", []string{x, ix, m("am1", []int64{}, -1)}, map[string]any{"batch_dims": -1}),
		}
	}
	runOracleCases(t, []oracleCase{
		{name: "one row", build: build, feed: map[string]tensor.Tensor{
			"x": f32([]int64{1, 3, 4}, seq(12, -6, 6)...), "i": i32([]int64{1, 2}, 2, 0)}},
		{name: "two rows", build: build, feed: map[string]tensor.Tensor{
			"x": f32([]int64{2, 3, 4}, seq(24, -12, 12)...), "i": i32([]int64{2, 2}, 1, 1, 0, 2)}},
	})
}
