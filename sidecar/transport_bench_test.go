//go:build cgo

package sidecar_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/fastlane"
	"github.com/inferbid/inferbid/tensor"
)

// echoBytes is the raw echo's message size: about a one-row MLP request
// frame (header, model path, tensor name, shape and 8 floats).
const echoBytes = 96

// BenchmarkTransports compares, at 1 and 8 concurrent callers, p50/p99
// latency and calls/s (benchlat) of:
//
//   - echo: a raw Unix-socket echo of echoBytes between this process and a
//     child process (this test binary re-executed as an echo server), one
//     connection per caller: the floor any socket protocol pays;
//   - fastlane-noop: the one-row MLP request over the fast lane to that
//     child, whose handler answers at once: the transport alone (framing,
//     protobuf both ways, the server's connection handling);
//   - fastlane-empty: an empty typed batch over the fast lane to the real
//     sidecar (its Predict with nothing to run);
//   - fastlane: Client.Predict of the one-row MLP over the fast lane, and
//     fastlane-deadline the same with a 1s ctx deadline (what jsbridge
//     sends: the deadline travels in the frame);
//   - grpc: the same over gRPC (TransportGRPC);
//   - bare: the MLP called in this process (no socket).
//
// The sidecar is a real inference-sidecar-onnx process with one intra-op
// thread, under the supervisor. On a small shared machine the
// cross-process numbers move with the machine's load (idle CPUs wake up
// slowly): compare rows of one run.
func BenchmarkTransports(b *testing.B) {
	files, bare, cfg := loadBenchMLP(b)
	ctx := context.Background()

	dir := shortDir(b)
	echoSocket := startEchoChild(b, filepath.Join(dir, "echo.sock"))
	bin := buildBinary(b, "inference-sidecar-onnx", true)
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{BinaryPath: bin, RuntimeConfig: cfg, SocketPath: filepath.Join(dir, "bench.sock")})
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	if err := sup.RegisterModel(ctx, "mlp/", files, string(mlpBatchJSON("mlp/", mlpInput(1)))); err != nil {
		b.Fatal(err)
	}
	fast := sup.Client()
	slow, err := sidecar.NewClient(sup.SocketPath(), sidecar.ClientOptions{Transport: sidecar.TransportGRPC})
	if err != nil {
		b.Fatal(err)
	}
	defer slow.Close()
	lane := fastlane.NewClient(sup.SocketPath(), fastlane.ClientOptions{})
	defer lane.Close()
	empty := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{}}}
	noop := fastlane.NewClient(echoSocket+".fl", fastlane.ClientOptions{})
	defer noop.Close()
	mlpReq := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{Requests: []*inferencepb.ModelRequest{
		{ModelPath: "mlp/", Tensors: []*inferencepb.Tensor{{Name: "x", DataType: inferencepb.DataType_FLOAT, Shape: []int64{1, 8}, FloatData: mlpInput(1)}}}}}}}

	in := []tensor.Tensor{tensor.New("x", []int64{1, 8}, mlpInput(1))}
	entries := []batch.Entry{{ModelPath: "mlp/", Tensors: in}}
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("echo/callers=%d", callers), func(b *testing.B) {
			conns := make([]net.Conn, callers)
			for i := range conns {
				c, err := net.Dial("unix", echoSocket)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			runCallers(b, callers, func(i int) func() error {
				msg, got := make([]byte, echoBytes), make([]byte, echoBytes)
				return func() error {
					if _, err := conns[i].Write(msg); err != nil {
						return err
					}
					_, err := io.ReadFull(conns[i], got)
					return err
				}
			})
		})
		b.Run(fmt.Sprintf("fastlane-noop/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, func(int) func() error {
				return func() error { _, err := noop.Predict(ctx, mlpReq); return err }
			})
		})
		b.Run(fmt.Sprintf("fastlane-empty/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, func(int) func() error {
				return func() error { _, err := lane.Predict(ctx, empty); return err }
			})
		})
		b.Run(fmt.Sprintf("fastlane/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, func(int) func() error {
				return func() error { return entryErr(fast.Predict(ctx, entries)) }
			})
		})
		b.Run(fmt.Sprintf("fastlane-deadline/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, func(int) func() error {
				return func() error {
					ctx, cancel := context.WithTimeout(ctx, time.Second)
					defer cancel()
					return entryErr(fast.Predict(ctx, entries))
				}
			})
		})
		b.Run(fmt.Sprintf("grpc/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, func(int) func() error {
				return func() error { return entryErr(slow.Predict(ctx, entries)) }
			})
		})
		b.Run(fmt.Sprintf("bare/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, func(int) func() error {
				return func() error { _, err := bare.Predict(ctx, in); return err }
			})
		})
	}
}

// runCallers runs b.N calls spread over n goroutines (each gets its own
// call from newCall(i)) and reports their latency and the throughput of all
// together.
func runCallers(b *testing.B, n int, newCall func(i int) func() error) {
	calls := make([]func() error, n)
	for i := range calls {
		calls[i] = newCall(i)
	}
	for _, call := range calls { // warm: connections, pools
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	var r benchlat.Recorder
	var wg sync.WaitGroup
	b.ResetTimer()
	for i, call := range calls {
		share := b.N / n
		if i < b.N%n {
			share++
		}
		wg.Go(func() {
			for range share {
				if err := r.TimeErr(call); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	r.Report(b)
}

// startEchoChild runs this test binary as an echo server on socket (see
// TestMain) and waits until it accepts.
func startEchoChild(b *testing.B, socket string) string {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), echoSocketEnv+"="+socket)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
			return socket
		}
		if time.Now().After(deadline) {
			b.Fatalf("echo child not listening on %s: %v", socket, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
