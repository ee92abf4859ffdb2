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
// num_intraop_threads threads; the ONNX model is nil when ONNX Runtime
// cannot run here.
func denseModels(tb testing.TB, threads int) (tf, ort driver.Model) {
	tb.Helper()
	files, err := tfsave.Dense(denseIn, denseOut)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := driver.Config{NumIntraopThreads: threads}
	if tf, err = tensorflow.New(cfg).Load(context.Background(), files); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tf.Close() })
	if _, err := onnx.FindLibrary(""); err != nil {
		tb.Logf("ONNX Runtime not installed: %v", err)
		return tf, nil
	}
	ob, err := onnx.Open(cfg)
	if err != nil {
		tb.Logf("ONNX Runtime: %v", err)
		return tf, nil
	}
	kernel, bias := tfsave.DenseWeights(denseIn, denseOut)
	if ort, err = ob.Load(context.Background(), driver.Files{"dense.onnx": denseONNX(kernel, bias, denseIn, denseOut)}); err != nil {
		tb.Logf("ONNX Runtime cannot load the Dense model: %v", err)
		return tf, nil
	}
	tb.Cleanup(func() { ort.Close() })
	return tf, ort
}

func denseInput(batch int) []tensor.Tensor {
	x := make([]float32, batch*denseIn)
	for i := range x {
		x[i] = float32(i%13)/13 - 0.4
	}
	return []tensor.Tensor{tensor.New("x", []int64{int64(batch), denseIn}, x)}
}

// TestDenseSameAnswers checks both runtimes compute the same Dense layer
// (ONNX Runtime may fuse multiply-adds, so up to float32 rounding).
func TestDenseSameAnswers(t *testing.T) {
	tf, ort := denseModels(t, 0)
	if ort == nil {
		t.Skip("ONNX Runtime is not available")
	}
	in := denseInput(33)
	a, err := tf.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ort.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := tensor.Data[float32](a[0])
	y, _ := tensor.Data[float32](b[0])
	if len(x) != 33*denseOut || len(y) != len(x) {
		t.Fatalf("outputs of %d and %d values", len(x), len(y))
	}
	for i := range x {
		if math.Abs(float64(x[i]-y[i])) > 1e-4*(1+math.Abs(float64(y[i]))) {
			t.Fatalf("y[%d]: tensorflow %v, onnxruntime %v", i, x[i], y[i])
		}
	}
}

// BenchmarkDense runs the Dense model at batch 1 and 1024 on both
// runtimes with num_intraop_threads 1 and 0 (all cores), alternating the
// two runtimes' calls so that both see the same machine load, and reports
// each runtime's mean µs per call and their ratio (tf/ort; the target at
// batch 1024 is <= 1.2).
func BenchmarkDense(b *testing.B) {
	for _, threads := range []int{1, 0} {
		tf, ort := denseModels(b, threads)
		for _, batch := range []int{1, 1024} {
			in := denseInput(batch)
			b.Run(fmt.Sprintf("batch%d/threads%d", batch, threads), func(b *testing.B) {
				var tfTime, ortTime time.Duration
				for b.Loop() {
					t0 := time.Now()
					if _, err := tf.Predict(context.Background(), in); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					tfTime += t1.Sub(t0)
					if ort != nil {
						if _, err := ort.Predict(context.Background(), in); err != nil {
							b.Fatal(err)
						}
						ortTime += time.Since(t1)
					}
				}
				b.ReportMetric(float64(tfTime)/1e3/float64(b.N), "tf-µs/call")
				if ort != nil {
					b.ReportMetric(float64(ortTime)/1e3/float64(b.N), "ort-µs/call")
					b.ReportMetric(float64(tfTime)/float64(ortTime), "tf/ort")
				}
			})
		}
	}
}
