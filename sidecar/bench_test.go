//go:build cgo

package sidecar_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// mlpInput is the benchmark input of the team contract:
// x[b][i] = float32((b*8+i)%10)/10.
func mlpInput(rows int) []float32 {
	x := make([]float32, rows*8)
	for i := range x {
		x[i] = float32(i%10) / 10
	}
	return x
}

func mlpBatchJSON(path string, x []float32) []byte { return []byte(floatBatchJSON(path, 8, x)) }

// benchMLPConfig is the runtime config of the benchmark MLP's sidecar: one
// thread, so the rows compare transports, not thread pools.
const benchMLPConfig = `{"num_intraop_threads":1,"num_interop_threads":1}`

// loadBenchMLP loads the benchmark MLP on ONNX Runtime in this process (the
// bare row) and returns its files and the sidecar's runtime config; it
// skips without the library, and everything closes when b ends.
func loadBenchMLP(b *testing.B) (runtimes.Files, *runtimes.Model, string) {
	lib := requireONNX(b)
	b.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	files := onnxFixture(b, "mlp.onnx")
	rtCfg, err := sidecar.ParseRuntimeConfig(benchMLPConfig)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := runtimes.Open(onnx.Name, rtCfg.Config)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	bare, err := rt.Load(context.Background(), "mlp/", files)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bare.Close() })
	return files, bare, benchMLPConfig
}

// BenchmarkPredictMLP compares, for the benchmark MLP at batch 1 and 64:
// the bare ONNX Runtime call in this process; and Predict over the Unix
// socket to a real inference-sidecar-onnx process, on the typed path (over
// the fast lane, the client's default) and on the JSON path (over gRPC;
// JSON encode on the host excluded, sidecar-side parse and render
// included). BenchmarkTransports compares the transports themselves. Each reports p50-µs, p99-µs and calls/s
// (benchlat); the parallel run's calls/s is all callers together.
func BenchmarkPredictMLP(b *testing.B) {
	files, bare, cfg := loadBenchMLP(b)
	ctx := context.Background()

	bin := buildBinary(b, "inference-sidecar-onnx", true)
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{BinaryPath: bin, RuntimeConfig: cfg, SocketPath: filepath.Join(shortDir(b), "bench.sock")})
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	if err := sup.RegisterModel(ctx, "mlp/", files, string(mlpBatchJSON("mlp/", mlpInput(1)))); err != nil {
		b.Fatal(err)
	}
	c := sup.Client()

	// The floor: an empty gRPC round trip (health check) over the same socket.
	b.Run("socket-health-rtt", func(b *testing.B) {
		benchlat.Loop(b, func() error { return c.WaitHealthy(ctx) })
	})
	for _, rows := range []int{1, 64} {
		x := mlpInput(rows)
		in := []tensor.Tensor{tensor.New("x", []int64{int64(rows), 8}, x)}
		entries := []batch.Entry{{ModelPath: "mlp/", Tensors: in}}
		js := mlpBatchJSON("mlp/", x)

		b.Run(fmt.Sprintf("bare/batch=%d", rows), func(b *testing.B) {
			benchlat.Loop(b, func() error { _, err := bare.Predict(ctx, in); return err })
		})
		b.Run(fmt.Sprintf("socket-typed/batch=%d", rows), func(b *testing.B) {
			benchlat.Loop(b, func() error { return entryErr(c.Predict(ctx, entries)) })
		})
		b.Run(fmt.Sprintf("socket-json/batch=%d", rows), func(b *testing.B) {
			benchlat.Loop(b, func() error { _, err := c.PredictJSON(ctx, js); return err })
		})
		b.Run(fmt.Sprintf("socket-typed-parallel/batch=%d", rows), func(b *testing.B) {
			var l benchlat.Recorder
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var res []batch.Result
					err := l.TimeErr(func() (err error) { res, err = c.Predict(ctx, entries); return err })
					if err != nil || res[0].Err != nil {
						b.Error(err, res)
						return
					}
				}
			})
			l.Report(b)
		})
	}
}

// entryErr is the call's error or, failing that, its first entry's.
func entryErr(res []batch.Result, err error) error {
	if err == nil && len(res) > 0 {
		err = res[0].Err
	}
	return err
}
