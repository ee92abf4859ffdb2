package benchcmp

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

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
