//go:build cgo

package onnx

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/runtimes"
)

// BenchmarkMLP measures the bare runtime call on the benchmark MLP (8-16-1)
// at batch 1 and 64: through the portable *runtimes.Model (input checks,
// error typing, stats) and directly on the backend model. "cancelable" runs
// with a context that can end, as gRPC requests have (it arms ORT's
// terminate flag). p50/p99 are per call, in ns.
func BenchmarkMLP(b *testing.B) {
	requireLibrary(b)
	for _, threads := range []int{1, 0} {
		cfg := runtimes.Config{NumIntraopThreads: threads}
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
			inputs := []runtimes.Tensor{runtimes.NewTensor("x", []int64{int64(batch), 8}, mlpInput(batch))}
			calls := []struct {
				name string
				fn   func() ([]runtimes.Tensor, error)
			}{
				{"model", func() ([]runtimes.Tensor, error) { return m.Predict(context.Background(), inputs) }},
				{"model-cancelable", func() ([]runtimes.Tensor, error) { return m.Predict(cancelable, inputs) }},
				{"backend", func() ([]runtimes.Tensor, error) { return bm.Predict(context.Background(), inputs) }},
			}
			for _, c := range calls {
				b.Run(fmt.Sprintf("%s/%s/batch%d", threadName, c.name, batch), func(b *testing.B) {
					out, err := c.fn()
					if err != nil || out[0].Len() != batch {
						b.Fatalf("warm-up call: %v", err)
					}
					lat := make([]time.Duration, 0, b.N)
					b.ReportAllocs()
					b.ResetTimer()
					cpu0 := processCPU()
					for b.Loop() {
						start := time.Now()
						if _, err := c.fn(); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(start))
					}
					b.StopTimer()
					b.ReportMetric(float64(processCPU()-cpu0)/float64(len(lat)), "cpu-ns/op")
					reportPercentiles(b, lat)
				})
			}
		}
	}
}

// BenchmarkMLPParallel measures throughput with concurrent callers on one
// model (RunParallel uses GOMAXPROCS goroutines).
func BenchmarkMLPParallel(b *testing.B) {
	requireLibrary(b)
	m := loadModel(b, openRuntime(b, runtimes.Config{NumIntraopThreads: 1}), "mlp.onnx")
	for _, batch := range []int{1, 64} {
		inputs := []runtimes.Tensor{runtimes.NewTensor("x", []int64{int64(batch), 8}, mlpInput(batch))}
		b.Run(fmt.Sprintf("threads=1/model/batch%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := m.Predict(context.Background(), inputs); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// processCPU is the process's user+system CPU time in ns. On a loaded
// machine, CPU time per call says more about the code than wall time.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}
