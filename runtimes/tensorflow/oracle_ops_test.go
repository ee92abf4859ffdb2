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
		// tfjs divides int32 with floor division, TensorFlow's Div truncates:
		// they agree on non-negative quotients only.
		{name: "int div", build: binary(tensor.Int32, []int64{3}, i32([]int64{3}, 3, 4, 5), "Div"),
			feed: map[string]tensor.Tensor{"x": i32([]int64{1, 3}, 7, 9, 10)}},
	}
	runOracleCases(t, cases)
}

// TestOracleLogical: comparisons and logical ops (outputs cast to int32:
// serving outputs cannot be bool).
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
		}
	}
	runOracleCases(t, []oracleCase{
		{name: "rows", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{3, 3}, 0, 1, -1, 1, 0, -2, -1, 2, 0)}},
		{name: "one row", build: build, feed: map[string]tensor.Tensor{"x": f32([]int64{1, 3}, 0, 2, -3)}},
	})
}
