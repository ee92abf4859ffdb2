//go:build cgo

package registry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// BenchmarkDynamicBatching measures what dynamic batching does to the
// benchmark MLP (TensorFlow and ONNX Runtime) and to a wider TensorFlow
// MLP (wideMLP) under 8 and 32 concurrent callers of one row each, calling
// back to back, through the registry (the path Server.Predict takes,
// without the socket): batching off; on with max_batch_size 64 and
// max_delay_us 50 or 200 (the callers can never fill a batch: each waits
// out the delay); and "full", max_batch_size equal to the callers and
// max_delay_us 200 (a batch runs as soon as every caller waits). Each
// reports p50-µs, p99-µs and calls/s
// (benchlat, all callers together), cpu-µs/call (process CPU time per
// call: on a shared machine it says more than wall time), rows/batch (the
// mean rows per merged call) and merged-frac (the share of batched calls
// that found company); both 0 when off.
func BenchmarkDynamicBatching(b *testing.B) {
	tfFiles, err := tfsave.MLP(tfsave.Options{})
	if err != nil {
		b.Fatal(err)
	}
	wideFiles, err := wideMLP()
	if err != nil {
		b.Fatal(err)
	}
	type model struct {
		runtime string
		cfg     runtimes.Config
		files   runtimes.Files
	}
	models := []struct {
		name string
		get  func(b *testing.B) model
	}{
		{"tf-mlp", func(*testing.B) model { return model{tensorflow.Name, runtimes.Config{}, tfFiles} }},
		{"tf-wide", func(*testing.B) model { return model{tensorflow.Name, runtimes.Config{}, wideFiles} }},
		{"onnx-mlp", func(b *testing.B) model {
			lib, err := onnx.FindLibrary("")
			testhelp.RequireNative(b, "the ONNX Runtime library (scripts/install-onnxruntime.sh)", err)
			return model{onnx.Name, runtimes.Config{LibraryPath: lib, NumIntraopThreads: 1, NumInteropThreads: 1},
				runtimes.Files{"mlp.onnx": testhelp.ReadFile(b, "runtimes/onnx/testdata/mlp.onnx")}}
		}},
	}
	modes := []struct {
		name            string
		maxBatch, delay int // maxBatch 0: the callers
	}{{"off", 0, 0}, {"max_delay_us=50", 64, 50}, {"max_delay_us=200", 64, 200}, {"full", 0, 200}}
	for _, mod := range models {
		cols := 8
		if mod.name == "tf-wide" {
			cols = wideIn
		}
		in := []tensor.Tensor{tensor.New("x", []int64{1, int64(cols)}, tfsave.Weight(7, 1, cols))}
		for _, callers := range []int{8, 32} {
			for _, mode := range modes {
				b.Run(fmt.Sprintf("%s/callers=%d/%s", mod.name, callers, mode.name), func(b *testing.B) {
					m := mod.get(b)
					var settings Settings
					if mode.delay > 0 {
						maxBatch := mode.maxBatch
						if maxBatch == 0 {
							maxBatch = callers
						}
						settings = batching(map[string]BatchSettings{"mlp/": {MaxBatchSize: maxBatch, MaxDelayMicros: mode.delay}})
					}
					rt, err := runtimes.Open(m.runtime, m.cfg)
					if err != nil {
						b.Fatal(err)
					}
					defer rt.Close()
					r := newTestRegistryWith(b, rt, Options{Settings: settings})
					if _, err := r.register(context.Background(), "mlp/", m.files, ""); err != nil {
						b.Fatal(err)
					}
					benchCallers(b, r, callers, in)
				})
			}
		}
	}
}

// benchCallers runs b.N calls of in from callers goroutines and reports.
func benchCallers(b *testing.B, r *Registry, callers int, in []tensor.Tensor) {
	ctx := context.Background()
	var lat benchlat.Recorder
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu := benchlat.ProcessCPU()
	b.ResetTimer()
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := lat.TimeErr(func() error { _, err := r.predict(ctx, "mlp/", in); return err }); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	lat.Report(b)
	b.ReportMetric(float64(benchlat.ProcessCPU()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/call")
	var rows, merged float64
	if st, ok := r.BatchingStats()["mlp/"]; ok && st.Batches > 0 {
		rows = float64(st.Rows) / float64(st.Batches)
		merged = float64(st.Merged) / float64(st.Merged+st.Alone)
	}
	b.ReportMetric(rows, "rows/batch")
	b.ReportMetric(merged, "merged-frac")
}

// The wide MLP's layer sizes.
const wideIn, wideHidden = 256, 512

// wideMLP is a TensorFlow MLP much heavier per row than the benchmark MLP:
// x FLOAT [-1,256] -> Dense(512, relu) -> Dense(512, relu) -> Dense(1,
// sigmoid), weights from tfsave.Weight.
func wideMLP() (map[string][]byte, error) {
	b := tfsave.NewBuilder()
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, wideIn})
	dense := func(scope, x string, in, out int, act string, seed float64) string {
		k := b.Variable(scope+"/kernel", tensor.New("", []int64{int64(in), int64(out)}, tfsave.Weight(seed, 0.1, in*out)))
		bias := b.Variable(scope+"/bias", tensor.New("", []int64{int64(out)}, tfsave.Weight(seed+1, 0.1, out)))
		y := b.OpNamed(scope+"/MatMul", "MatMul", []string{x, k.Value}, nil)
		y = b.OpNamed(scope+"/BiasAdd", "BiasAdd", []string{y, bias.Value}, nil)
		return b.OpNamed(scope+"/"+act, act, []string{y}, nil)
	}
	h := dense("dense", x, wideIn, wideHidden, "Relu", 1)
	h = dense("dense_1", h, wideHidden, wideHidden, "Relu", 3)
	y := dense("dense_2", h, wideHidden, 1, "Sigmoid", 5)
	y = b.OpNamed("y", "Identity", []string{y}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	return b.Files()
}
