package benchcmp

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

type backend struct {
	name  string
	model driver.Model
}

func backends(tb testing.TB) []backend {
	tb.Helper()
	files, err := tfsave.MLP(tfsave.Options{FunctionCall: true})
	if err != nil {
		tb.Fatal(err)
	}
	tf, err := tensorflow.New(driver.Config{}).Load(context.Background(), files)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tf.Close() })
	out := []backend{{"tensorflow", tf}}

	if _, err := onnx.FindLibrary(""); err != nil {
		tb.Logf("ONNX Runtime not installed, comparing nothing: %v", err)
		return out
	}
	onnxModel, err := os.ReadFile(filepath.Join(testhelp.ModuleRoot(tb), "runtimes", "onnx", "testdata", "mlp.onnx"))
	if err != nil {
		tb.Logf("no ONNX MLP: %v", err)
		return out
	}
	ob, err := onnx.Open(driver.Config{NumIntraopThreads: 1})
	if err != nil {
		tb.Logf("ONNX Runtime: %v", err)
		return out
	}
	om, err := ob.Load(context.Background(), driver.Files{"mlp.onnx": onnxModel})
	if err != nil {
		// E.g. a CGO_ENABLED=0 build, where ONNX Runtime cannot run.
		tb.Logf("ONNX Runtime cannot load the MLP: %v", err)
		return out
	}
	tb.Cleanup(func() { om.Close() })
	return append(out, backend{"onnxruntime", om})
}

func input(batch int) []tensor.Tensor {
	return []tensor.Tensor{tensor.New("x", []int64{int64(batch), 8}, tfsave.MLPInput(batch))}
}

// TestSameAnswers checks both runtimes compute the same MLP.
func TestSameAnswers(t *testing.T) {
	bs := backends(t)
	if len(bs) < 2 {
		t.Skip("ONNX Runtime is not available")
	}
	in := input(64)
	a, err := bs[0].model.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bs[1].model.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := tensor.Data[float32](a[0])
	y, _ := tensor.Data[float32](b[0])
	if len(x) != 64 || len(y) != 64 {
		t.Fatalf("outputs of %d and %d values", len(x), len(y))
	}
	for i := range x {
		if math.Abs(float64(x[i]-y[i])) > 1e-6 {
			t.Fatalf("row %d: tensorflow %v, onnxruntime %v", i, x[i], y[i])
		}
	}
}

// BenchmarkMLP runs the benchmark MLP at batch 1, 64 and 1024 on each
// backend model (no portable-layer checks), reporting CPU ns per call and
// p50-µs, p99-µs and calls/s (benchlat).
func BenchmarkMLP(b *testing.B) {
	bs := backends(b)
	for _, batch := range []int{1, 64, 1024} {
		in := input(batch)
		for _, be := range bs {
			b.Run(fmt.Sprintf("batch%d/%s", batch, be.name), func(b *testing.B) {
				var r benchlat.Recorder
				b.ReportAllocs()
				cpu0 := benchlat.ProcessCPU()
				n := 0
				for b.Loop() {
					if err := r.TimeErr(func() error { _, err := be.model.Predict(context.Background(), in); return err }); err != nil {
						b.Fatal(err)
					}
					n++
				}
				b.ReportMetric(float64(benchlat.ProcessCPU()-cpu0)/float64(n), "cpu-ns/op")
				r.Report(b)
			})
		}
	}
}

// The MatMul benchmark model: one Dense layer, 256 -> 256, Relu.
const denseIn, denseOut = 256, 256

// denseModels loads tfsave.Dense on both runtimes, each with
// num_intraop_threads threads, and on the TensorFlow runtime once more with
// the fused_multiply_add opt-in (tfFMA); the ONNX model is nil when ONNX
// Runtime cannot run here.
func denseModels(tb testing.TB, threads int) (tf, tfFMA, ort driver.Model) {
	tb.Helper()
	files, err := tfsave.Dense(denseIn, denseOut)
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
	kernel, bias := tfsave.DenseWeights(denseIn, denseOut)
	if ort, err = ob.Load(context.Background(), driver.Files{"dense.onnx": denseONNX(kernel, bias, denseIn, denseOut)}); err != nil {
		tb.Logf("ONNX Runtime cannot load the Dense model: %v", err)
		return tf, tfFMA, nil
	}
	tb.Cleanup(func() { ort.Close() })
	return tf, tfFMA, ort
}

// loadTF loads files on the TensorFlow runtime with cfg, and with cfg plus
// fused_multiply_add.
func loadTF(tb testing.TB, files driver.Files, cfg driver.Config) (tf, tfFMA driver.Model) {
	tb.Helper()
	var err error
	if tf, err = tensorflow.New(cfg).Load(context.Background(), files); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tf.Close() })
	cfg.FusedMultiplyAdd = true
	if tfFMA, err = tensorflow.New(cfg).Load(context.Background(), files); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tfFMA.Close() })
	return tf, tfFMA
}

// timeAlternating calls the TensorFlow model (default rounding), the same
// model with fused_multiply_add and the ONNX Runtime model (when not nil)
// in turn, b.N times each, so that all three see the same machine load,
// and reports each one's mean µs per call and the ratios tf/ort and
// tf-fma/ort.
func timeAlternating(b *testing.B, tf, tfFMA, ort driver.Model, tfIn, ortIn []tensor.Tensor) {
	models := []driver.Model{tf, tfFMA, ort}
	inputs := [][]tensor.Tensor{tfIn, tfIn, ortIn}
	var spent [3]time.Duration
	for b.Loop() {
		for i, m := range models {
			if m == nil {
				continue
			}
			t0 := time.Now()
			if _, err := m.Predict(context.Background(), inputs[i]); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(t0)
		}
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 / float64(b.N) }
	b.ReportMetric(us(spent[0]), "tf-µs/call")
	b.ReportMetric(us(spent[1]), "tf-fma-µs/call")
	if ort != nil {
		b.ReportMetric(us(spent[2]), "ort-µs/call")
		b.ReportMetric(float64(spent[0])/float64(spent[2]), "tf/ort")
		b.ReportMetric(float64(spent[1])/float64(spent[2]), "tf-fma/ort")
	}
}

func denseInput(batch int) []tensor.Tensor {
	x := make([]float32, batch*denseIn)
	for i := range x {
		x[i] = float32(i%13)/13 - 0.4
	}
	return []tensor.Tensor{tensor.New("x", []int64{int64(batch), denseIn}, x)}
}

// TestDenseSameAnswers checks both runtimes compute the same Dense layer
// (ONNX Runtime may fuse multiply-adds, so up to float32 rounding), the
// TensorFlow runtime with and without fused_multiply_add.
func TestDenseSameAnswers(t *testing.T) {
	tf, tfFMA, ort := denseModels(t, 0)
	if ort == nil {
		t.Skip("ONNX Runtime is not available")
	}
	in := denseInput(33)
	b, err := ort.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := tensor.Data[float32](b[0])
	for _, m := range []driver.Model{tf, tfFMA} {
		a, err := m.Predict(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := tensor.Data[float32](a[0])
		if len(x) != 33*denseOut || len(y) != len(x) {
			t.Fatalf("outputs of %d and %d values", len(x), len(y))
		}
		for i := range x {
			if math.Abs(float64(x[i]-y[i])) > 1e-4*(1+math.Abs(float64(y[i]))) {
				t.Fatalf("y[%d]: tensorflow %v, onnxruntime %v", i, x[i], y[i])
			}
		}
	}
}

// BenchmarkDense runs the Dense model at batch 1 and 1024 on both
// runtimes with num_intraop_threads 1 and 0 (all cores), the TensorFlow
// runtime with its default rounding and with fused_multiply_add,
// alternating the calls (timeAlternating), and reports mean µs per call
// and the ratios tf/ort and tf-fma/ort (the target at batch 1024 is
// <= 1.2).
func BenchmarkDense(b *testing.B) {
	for _, threads := range []int{1, 0} {
		tf, tfFMA, ort := denseModels(b, threads)
		for _, batch := range []int{1, 1024} {
			in := denseInput(batch)
			b.Run(fmt.Sprintf("batch%d/threads%d", batch, threads), func(b *testing.B) {
				timeAlternating(b, tf, tfFMA, ort, in, in)
			})
		}
	}
}
