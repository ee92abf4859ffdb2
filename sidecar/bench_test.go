//go:build cgo

package sidecar_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/sidecar"
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

func mlpBatchJSON(path string, x []float32) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[%d,8],"tensor_content":[`, path, len(x)/8)
	for i, v := range x {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", fmt.Sprint(v))
	}
	b.WriteString("]}]}]}")
	return []byte(b.String())
}

// latencies times each call and reports p50/p99 (µs) and calls/s.
type latencies struct{ d []time.Duration }

func (l *latencies) time(fn func()) {
	start := time.Now()
	fn()
	l.d = append(l.d, time.Since(start))
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	var total time.Duration
	for _, d := range l.d {
		total += d
	}
	q := func(p float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(p*float64(len(l.d))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(len(l.d))/total.Seconds(), "calls/s")
}

// BenchmarkPredictMLP compares, for the benchmark MLP at batch 1 and 64:
// the bare ONNX Runtime call in this process; and Predict over the Unix
// socket to a real inference-sidecar-onnx process, on the typed path and
// on the JSON path (JSON encode on the host excluded, sidecar-side parse
// and render included).
func BenchmarkPredictMLP(b *testing.B) {
	lib := requireONNX(b)
	b.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	mlp, err := os.ReadFile(filepath.Join(onnxTestdata, "mlp.onnx"))
	if err != nil {
		b.Fatal(err)
	}
	files := runtimes.Files{"mlp.onnx": mlp}
	ctx := context.Background()
	cfg := `{"num_intraop_threads":1,"num_interop_threads":1}`

	rtCfg, _ := sidecar.ParseRuntimeConfig(cfg)
	rt, err := runtimes.Open(onnx.Name, rtCfg)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	bare, err := rt.Load(ctx, "mlp/", files)
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()

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
		var l latencies
		for b.Loop() {
			l.time(func() {
				if err := c.WaitHealthy(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
		l.report(b)
	})
	for _, rows := range []int{1, 64} {
		x := mlpInput(rows)
		in := []runtimes.Tensor{runtimes.NewTensor("x", []int64{int64(rows), 8}, x)}
		entries := []batch.Entry{{ModelPath: "mlp/", Tensors: in}}
		js := mlpBatchJSON("mlp/", x)

		b.Run(fmt.Sprintf("bare/batch=%d", rows), func(b *testing.B) {
			var l latencies
			for b.Loop() {
				l.time(func() {
					if _, err := bare.Predict(ctx, in); err != nil {
						b.Fatal(err)
					}
				})
			}
			l.report(b)
		})
		b.Run(fmt.Sprintf("socket-typed/batch=%d", rows), func(b *testing.B) {
			var l latencies
			for b.Loop() {
				l.time(func() {
					res, err := c.Predict(ctx, entries)
					if err != nil || res[0].Err != nil {
						b.Fatal(err, res)
					}
				})
			}
			l.report(b)
		})
		b.Run(fmt.Sprintf("socket-json/batch=%d", rows), func(b *testing.B) {
			var l latencies
			for b.Loop() {
				l.time(func() {
					if _, err := c.PredictJSON(ctx, js); err != nil {
						b.Fatal(err)
					}
				})
			}
			l.report(b)
		})
		b.Run(fmt.Sprintf("socket-typed-parallel/batch=%d", rows), func(b *testing.B) {
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if res, err := c.Predict(ctx, entries); err != nil || res[0].Err != nil {
						b.Error(err, res)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
