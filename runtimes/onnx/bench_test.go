//go:build cgo

package onnx

import (
	"context"
	"fmt"
	"testing"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// BenchmarkMLP measures the bare runtime call on the benchmark MLP (8-16-1)
// at batch 1 and 64: through the portable *runtimes.Model (input checks,
// error typing, stats) and directly on the backend model. "cancelable" runs
// with a context that can end, as gRPC requests have (it arms ORT's
// terminate flag). It reports p50-µs, p99-µs and calls/s (benchlat) and
// the process CPU time per call (cpu-ns/op).
func BenchmarkMLP(b *testing.B) {
	requireLibrary(b)
	for _, threads := range []int{1, 0} {
		cfg := driver.Config{NumIntraopThreads: threads}
		rt := openRuntime(b, cfg)
		m := loadModel(b, rt, "mlp.onnx")
		backend, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		bm, err := backend.Load(context.Background(), readModel(b, "mlp.onnx"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bm.Close() })
		cancelable, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)

		threadName := "threads=default"
		if threads > 0 {
			threadName = fmt.Sprintf("threads=%d", threads)
		}
		for _, batch := range []int{1, 64} {
			inputs := []tensor.Tensor{tensor.New("x", []int64{int64(batch), 8}, mlpInput(batch))}
			calls := []struct {
				name string
				fn   func() ([]tensor.Tensor, error)
			}{
				{"model", func() ([]tensor.Tensor, error) { return m.Predict(context.Background(), inputs) }},
				{"model-cancelable", func() ([]tensor.Tensor, error) { return m.Predict(cancelable, inputs) }},
				{"backend", func() ([]tensor.Tensor, error) { return bm.Predict(context.Background(), inputs) }},
			}
			for _, c := range calls {
				b.Run(fmt.Sprintf("%s/%s/batch%d", threadName, c.name, batch), func(b *testing.B) {
					out, err := c.fn()
					if err != nil || out[0].Len() != batch {
						b.Fatalf("warm-up call: %v", err)
					}
					var r benchlat.Recorder
					b.ReportAllocs()
					cpu0 := benchlat.ProcessCPU()
					n := 0
					for b.Loop() {
						if err := r.TimeErr(func() error { _, err := c.fn(); return err }); err != nil {
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
}

// BenchmarkMLPParallel measures throughput with concurrent callers on one
// model (RunParallel uses GOMAXPROCS goroutines): calls/s is the
// throughput of all callers together.
func BenchmarkMLPParallel(b *testing.B) {
	requireLibrary(b)
	m := loadModel(b, openRuntime(b, driver.Config{NumIntraopThreads: 1}), "mlp.onnx")
	for _, batch := range []int{1, 64} {
		inputs := []tensor.Tensor{tensor.New("x", []int64{int64(batch), 8}, mlpInput(batch))}
		b.Run(fmt.Sprintf("threads=1/model/batch%d", batch), func(b *testing.B) {
			var r benchlat.Recorder
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := r.TimeErr(func() error { _, err := m.Predict(context.Background(), inputs); return err }); err != nil {
						b.Error(err)
						return
					}
				}
			})
			r.Report(b)
		})
	}
}
