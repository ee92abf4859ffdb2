package tensorflow

import (
	"context"
	"testing"
	"time"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// TestV2DTypesIntoKernelsNeverPanic: models whose inputs are of a v2-only
// dtype (which load since the v2 datatypes) feed them into common kernels;
// each model fails to load, fails its call with an error, or runs: never
// a panic. Which ones run is the kernels' business, not checked here.
func TestV2DTypesIntoKernelsNeverPanic(t *testing.T) {
	inputs := map[tensor.DType]tensor.Tensor{
		tensor.Bool:   tensor.New("x", []int64{2, 2}, []bool{true, false, true, false}),
		tensor.Uint8:  tensor.New("x", []int64{2, 2}, []uint8{1, 2, 3, 4}),
		tensor.Uint16: tensor.New("x", []int64{2, 2}, []uint16{1, 2, 3, 4}),
		tensor.Uint32: tensor.New("x", []int64{2, 2}, []uint32{1, 2, 3, 4}),
		tensor.Uint64: tensor.New("x", []int64{2, 2}, []uint64{1, 2, 3, 4}),
		tensor.Half:   tensor.New("x", []int64{2, 2}, []tensor.Float16{1, 2, 3, 4}),
		tensor.Bytes:  tensor.New("x", []int64{2, 2}, [][]byte{{1}, {2}, {3}, {4}}),
	}
	for _, op := range []string{"Add", "Mul", "MatMul", "Sub", "Relu", "Sigmoid", "Neg", "Abs", "Square", "Sum", "Max", "Equal", "Greater", "LogicalNot", "Tanh", "Exp", "Reshape", "Transpose", "ExpandDims", "Shape", "ZerosLike", "Cast", "StringToHashBucketFast", "AddV2", "Maximum", "BiasAdd", "Softmax", "ArgMax", "GatherV2", "Select", "SelectV2", "Pack", "ConcatV2", "Tile", "Slice", "StridedSlice", "Squeeze", "Prod", "Mean", "Min", "All", "Any", "Pow", "RealDiv", "FloorDiv", "FloorMod", "Sqrt", "Rsqrt", "Log", "Round", "Floor", "Ceil", "Sign", "Less", "NotEqual", "LessEqual", "GreaterEqual", "LogicalAnd", "LogicalOr", "OneHot", "Fill", "Size", "Rank", "Range", "ClipByValue", "Minimum", "Softplus", "Erf", "BatchMatMulV2", "Einsum", "Bucketize", "StringToNumber", "AsString", "StringJoin"} {
		for d, in := range inputs {
			b := tfsave.NewBuilderWith(tfsave.Options{})
			x := b.Placeholder("serving_default_x", d, []int64{-1, 2})
			var y string
			switch op {
			case "Add", "Mul", "MatMul", "Sub", "Equal", "Greater", "AddV2", "Maximum", "BiasAdd", "Pow", "RealDiv", "FloorDiv", "FloorMod", "Less", "NotEqual", "LessEqual", "GreaterEqual", "LogicalAnd", "LogicalOr", "Minimum", "BatchMatMulV2", "StringJoin":
				y = b.OpNamed("y", op, []string{x, x}, nil)
			default:
				y = b.OpNamed("y", op, []string{x}, nil)
			}
			b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
			files, err := b.Files()
			if err != nil {
				continue
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s on a %s input panicked: %v", op, d, r)
					}
				}()
				rt := openRuntime(t)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				m, err := rt.Load(ctx, "m/", runtimes.Files(files))
				if err != nil {
					return
				}
				defer m.Close()
				in.Name = "x"
				_, _ = m.Predict(ctx, []tensor.Tensor{in})
			}()
		}
	}
}
