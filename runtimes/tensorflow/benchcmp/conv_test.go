package benchcmp

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// The Conv2D benchmark model: a 32x32 image of 32 channels, a 3x3 SAME
// convolution to 64 channels, BiasAdd, Relu.
const convH, convW, convC, convM, convK = 32, 32, 32, 64, 3

// convWeights returns the filter (HWIO, TensorFlow's layout) and bias.
func convWeights() (filter, bias []float32) {
	return tfsave.Weight(31, 1/math.Sqrt(convK*convK*convC), convK*convK*convC*convM), tfsave.Weight(32, 0.1, convM)
}

// convModels loads the Conv2D model on both runtimes with
// num_intraop_threads threads, and on the TensorFlow runtime once more with
// fused_multiply_add (tfFMA); ort is nil when ONNX Runtime cannot run.
func convModels(tb testing.TB, threads int) (tf, tfFMA, ort driver.Model) {
	tb.Helper()
	filter, bias := convWeights()
	b := tfsave.NewBuilder()
	x := b.Placeholder("image", tensor.Float, []int64{-1, convH, convW, convC})
	w := b.Variable("conv/kernel", tensor.New("", []int64{convK, convK, convC, convM}, filter))
	bv := b.Variable("conv/bias", tensor.New("", []int64{convM}, bias))
	conv := b.Op("Conv2D", []string{x, w.Value}, map[string]any{"strides": []int{1, 1, 1, 1}, "padding": "SAME", "dilations": []int{1, 1, 1, 1}})
	y := b.Op("Relu", []string{b.Op("BiasAdd", []string{conv, bv.Value}, nil)}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"image": x}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		tb.Fatal(err)
	}
	cfg := driver.Config{NumIntraopThreads: threads}
	tf, tfFMA = loadTF(tb, files, cfg)
	if _, err := onnx.FindLibrary(""); err != nil {
		tb.Logf("ONNX Runtime not installed: %v", err)
		return tf, tfFMA, nil
	}
	ob, err := onnx.Open(cfg)
	if err != nil {
		tb.Logf("ONNX Runtime: %v", err)
		return tf, tfFMA, nil
	}
	// HWIO -> OIHW.
	oihw := make([]float32, len(filter))
	for ky := range convK {
		for kx := range convK {
			for c := range convC {
				for m := range convM {
					oihw[((m*convC+c)*convK+ky)*convK+kx] = filter[((ky*convK+kx)*convC+c)*convM+m]
				}
			}
		}
	}
	if ort, err = ob.Load(context.Background(), driver.Files{"conv.onnx": convONNX(oihw, bias, convC, convH, convW, convM, convK, convK)}); err != nil {
		tb.Logf("ONNX Runtime cannot load the Conv2D model: %v", err)
		return tf, tfFMA, nil
	}
	tb.Cleanup(func() { ort.Close() })
	return tf, tfFMA, ort
}

// convInputs returns the same images as NHWC (TensorFlow) and NCHW (ONNX).
func convInputs(batch int) (nhwc, nchw []tensor.Tensor) {
	a := make([]float32, batch*convH*convW*convC)
	b := make([]float32, len(a))
	for i := range a {
		a[i] = float32(i%17)/17 - 0.45
	}
	for n := range batch {
		for y := range convH {
			for x := range convW {
				for c := range convC {
					b[((n*convC+c)*convH+y)*convW+x] = a[((n*convH+y)*convW+x)*convC+c]
				}
			}
		}
	}
	return []tensor.Tensor{tensor.New("image", []int64{int64(batch), convH, convW, convC}, a)},
		[]tensor.Tensor{tensor.New("x", []int64{int64(batch), convC, convH, convW}, b)}
}

// TestConvSameAnswers checks both runtimes compute the same convolution
// (up to float32 rounding: ONNX Runtime fuses multiply-adds and sums in
// its own order), the TensorFlow runtime with and without
// fused_multiply_add.
func TestConvSameAnswers(t *testing.T) {
	tf, tfFMA, ort := convModels(t, 0)
	if ort == nil {
		t.Skip("ONNX Runtime is not available")
	}
	const batch = 2
	nhwc, nchw := convInputs(batch)
	b, err := ort.Predict(context.Background(), nchw)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := tensor.Data[float32](b[0])
	for _, tm := range []driver.Model{tf, tfFMA} {
		a, err := tm.Predict(context.Background(), nhwc)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := tensor.Data[float32](a[0])
		if len(x) != batch*convH*convW*convM || len(y) != len(x) {
			t.Fatalf("outputs of %d and %d values", len(x), len(y))
		}
		for n := range batch {
			for r := range convH {
				for c := range convW {
					for m := range convM {
						u, v := x[((n*convH+r)*convW+c)*convM+m], y[((n*convM+m)*convH+r)*convW+c]
						if math.Abs(float64(u-v)) > 1e-4*(1+math.Abs(float64(v))) {
							t.Fatalf("image %d pixel (%d,%d) channel %d: tensorflow %v, onnxruntime %v", n, r, c, m, u, v)
						}
					}
				}
			}
		}
	}
}

// BenchmarkConv2D runs the Conv2D model at batch 1 and 16 on both
// runtimes with num_intraop_threads 1 and 0, the TensorFlow runtime with
// and without fused_multiply_add, alternating calls as BenchmarkDense
// does, and reports mean µs per call and the ratios tf/ort and tf-fma/ort.
func BenchmarkConv2D(b *testing.B) {
	for _, threads := range []int{1, 0} {
		tf, tfFMA, ort := convModels(b, threads)
		for _, batch := range []int{1, 16} {
			nhwc, nchw := convInputs(batch)
			b.Run(fmt.Sprintf("batch%d/threads%d", batch, threads), func(b *testing.B) {
				timeAlternating(b, tf, tfFMA, ort, nhwc, nchw)
			})
		}
	}
}
