package tfsave

import (
	"math"

	"github.com/inferbid/inferbid/tensor"
)

// DenseWeights returns the Dense model's kernel [in,out] (row-major) and
// bias [out].
func DenseWeights(in, out int) (kernel, bias []float32) {
	return Weight(21, 1/math.Sqrt(float64(in)), in*out), Weight(22, 0.1, out)
}

// Dense returns one wide Dense layer, the MatMul benchmark model: signature
// input "x" (placeholder "serving_default_x") FLOAT [-1,in], output "y"
// FLOAT [-1,out]; y = relu(x·kernel + bias) with DenseWeights held in the
// variables dense/kernel and dense/bias.
func Dense(in, out int) (map[string][]byte, error) {
	w, bias := DenseWeights(in, out)
	b := NewBuilder()
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, int64(in)})
	y := b.dense("dense", x, w, bias, int64(in), int64(out), "Relu")
	y = b.OpNamed("y", "Identity", []string{y}, nil)
	b.Signature(ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	return b.Files()
}
