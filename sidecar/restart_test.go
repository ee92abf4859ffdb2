package sidecar_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// TestFastLaneSidecarKilledMidTraffic: the sidecar (this test binary
// re-executed, under the real supervisor) is SIGKILLed under fast-lane
// traffic. The calls in flight fail with GRPC errors at once (no hang: they
// are not sent again, they may be what killed it); calls during the
// restart wait for the replay (TestSupervisorKillWithoutFailedRequests
// tests that they do); after the restart, calls succeed on new connections
// of the same client.
func TestFastLaneSidecarKilledMidTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills sidecar processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childSidecarEnv, "1") // inherited by the child only; TestMain already ran
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath: exe,
		SocketPath: testhelp.SocketPath(t, "s.sock"),
		MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
		StopGrace:  2 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	for path, spec := range map[string]string{"slow/": "2 1 30s", "fast/": "2 1"} {
		if err := sup.RegisterModel(ctx, path, runtimes.Files{"affine": []byte(spec)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	c := sup.Client()
	entry := func(path string) []batch.Entry {
		return []batch.Entry{{ModelPath: path, Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})}}}
	}

	// Calls in flight on the slow model, and steady traffic on the fast one.
	const slowCalls, fastCallers = 4, 4
	slowErrs := make(chan error, slowCalls)
	for range slowCalls {
		go func() {
			_, err := c.Predict(ctx, entry("slow/"))
			slowErrs <- err
		}()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var okBefore, okAfter, grpcErrs atomic.Int64
	var restarted atomic.Bool
	for range fastCallers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				res, err := c.Predict(ctx, entry("fast/"))
				if err == nil {
					err = res[0].Err
				}
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("a call took %v", d)
				}
				switch {
				case err == nil && restarted.Load():
					okAfter.Add(1)
				case err == nil:
					okBefore.Add(1)
				case inferr.TypeOf(err) == inferr.GRPC:
					grpcErrs.Add(1)
					time.Sleep(time.Millisecond)
				case inferr.TypeOf(err) == inferr.ModelNotFound:
					time.Sleep(time.Millisecond)
				default:
					t.Errorf("unexpected %s error: %v", inferr.TypeOf(err), err)
					return
				}
			}
		})
	}
	for okBefore.Load() < 100 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the slow calls reach the model
	pid := sup.Pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for range slowCalls {
		select {
		case err := <-slowErrs:
			if inferr.TypeOf(err) != inferr.GRPC {
				t.Errorf("a call in flight at the kill: %v, want a GRPC error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call in flight at the kill hung")
		}
	}
	if d := time.Since(killed); d > 5*time.Second {
		t.Errorf("the calls in flight took %v to fail", d)
	}
	for sup.Restarts() < 1 {
		if time.Since(killed) > time.Minute {
			t.Fatal("the sidecar was not restarted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	restarted.Store(true)
	for okAfter.Load() < 100 {
		if time.Since(killed) > time.Minute {
			t.Fatalf("only %d calls succeeded after the restart", okAfter.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if sup.Pid() == pid {
		t.Error("same pid after the restart")
	}
	t.Logf("calls: %d before the kill, %d GRPC errors, %d after the restart", okBefore.Load(), grpcErrs.Load(), okAfter.Load())
}

// testLog sends a component's logs to t.Log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
