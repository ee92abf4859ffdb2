//go:build cgo

package sidecar_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
)

// largeONNXEnv names a directory of large ONNX models written by
// scripts/gen-large-onnx.py (big_1.onnx, big_2.onnx, ...: y = (i+1)*x + 1).
const largeONNXEnv = "INFERBID_LARGE_ONNX_DIR"

// BenchmarkReplayAfterKillONNX is BenchmarkReplayAfterKill with the real
// ONNX sidecar and large real models, whose load the replay includes:
//
//	/usr/bin/python3 scripts/gen-large-onnx.py /tmp/big 3 134
//	INFERBID_LARGE_ONNX_DIR=/tmp/big go test -run '^$' -bench ReplayAfterKillONNX -benchtime 1x ./sidecar/
func BenchmarkReplayAfterKillONNX(b *testing.B) {
	dir := os.Getenv(largeONNXEnv)
	if dir == "" {
		b.Skip(largeONNXEnv + " is not set (see the doc comment)")
	}
	lib := requireONNX(b)
	b.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	bin := buildBinary(b, "inference-sidecar-onnx", true)
	paths, err := filepath.Glob(filepath.Join(dir, "big_*.onnx"))
	if err != nil || len(paths) == 0 {
		b.Fatalf("no big_*.onnx in %s: %v", dir, err)
	}
	var log testhelp.SyncBuffer
	onRestart, replayed := onRestartTimes()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath: bin, RuntimeConfig: `{"num_intraop_threads":1}`, MinBackoff: 20 * time.Millisecond,
		OnRestart: onRestart, Logger: slog.New(slog.NewTextHandler(&log, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	var models []replayModel
	var total int64
	start := time.Now()
	for i := range paths {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("big_%d.onnx", i+1)))
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(data))
		m := replayModel{path: fmt.Sprintf("big/v%d/", i+1), a: float32(i + 2), b: 1}
		if err := sup.RegisterModel(ctx, m.path, runtimes.Files{"model.onnx": data}, ""); err != nil {
			b.Fatal(err)
		}
		models = append(models, m)
	}
	b.Logf("registered %d ONNX models, %d MB in all, in %v", len(models), total>>20, time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	for range b.N {
		st := killUnderTraffic(b, sup, replayed, models, 20)
		if st.failed > 0 {
			b.Logf("first failure: %v", st.firstFailure)
		}
		b.Logf("%d ONNX models, %d MB: kill to all models serving %v; %d of %d requests failed; %d sent during the outage waited (max latency %v)",
			len(models), total>>20, st.killToServing.Round(time.Millisecond), st.failed, st.total, st.duringOutage, st.maxLatency.Round(time.Millisecond))
		b.ReportMetric(float64(st.killToServing.Milliseconds()), "ms-kill-to-serving")
		b.ReportMetric(float64(st.failed), "failed")
		b.ReportMetric(float64(st.total), "requests")
	}
}
