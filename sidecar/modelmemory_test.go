package sidecar_test

import (
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// bigTFModel is a SavedModel y = x·W with W a [1024,32768] FLOAT variable:
// 128 MiB of checkpoint.
func bigTFModel(t *testing.T) runtimes.Files {
	t.Helper()
	const in, out = 1024, 32768
	b := tfsave.NewBuilderWith(tfsave.Options{FunctionCall: true})
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, in})
	w := make([]float32, in*out)
	for i := range w {
		w[i] = float32(i%97) / 97
	}
	k := b.Variable("dense/kernel", tensor.New("", []int64{in, out}, w))
	y := b.OpNamed("y", "MatMul", []string{x, k.Value}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSidecarModelMemoryTensorFlow: a 128 MiB TensorFlow model in a real
// inference-sidecar-tensorflow process. go test -v -run ModelMemory ./sidecar/
func TestSidecarModelMemoryTensorFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("registers a 128 MiB model")
	}
	sidecartest.ModelMemory(t, buildBinary(t, "inference-sidecar-tensorflow", false), bigTFModel(t), 1.5)
}
