//go:build cgo

package sidecar_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/sidecar"
)

// startONNXSupervisor supervises the real ONNX sidecar binary with affine
// "a/" (affine_v1.onnx: y = 2x+1) registered.
func startONNXSupervisor(t *testing.T, opts sidecar.SupervisorOptions) *sidecar.Supervisor {
	t.Helper()
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	opts.BinaryPath = buildBinary(t, "inference-sidecar-onnx", true)
	opts.RuntimeConfig = `{"num_intraop_threads":1}`
	opts.SocketPath = filepath.Join(shortDir(t), "sup.sock")
	opts.Logger = slog.New(slog.NewTextHandler(tLogWriter{t}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	if err := sup.RegisterModel(ctx, "a/", onnxFixture(t, "affine_v1.onnx"), ""); err != nil {
		t.Fatal(err)
	}
	return sup
}

// callOutcome sends one call with a deadline of a minute (far beyond any
// bound under test) and reports its error, and whether it ran into that
// deadline: a call that fails fast never does.
func callOutcome(sup *sidecar.Supervisor) (err error, deadline bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x := []float32{1, -2, 0.5}
	y, err := predictAffine(ctx, sup.Client(), "a/", x)
	if err == nil && !isAffine(x, y, 2, 1) {
		err = errors.New("a/ answered a wrong value")
	}
	return err, ctx.Err() != nil
}

// A sidecar stopped with SIGSTOP answers nothing: the supervisor's probe
// sees it, calls fail at once with a GRPC error that says why (rather than
// each waiting its deadline), readiness says why, the sidecar is killed
// and restarted, and serving resumes. On both transports.
func TestSupervisorReplacesStoppedSidecar(t *testing.T) {
	for _, tr := range []sidecar.Transport{sidecar.TransportFastLane, sidecar.TransportGRPC} {
		t.Run(tr.String(), func(t *testing.T) {
			var unresponsive atomic.Int64
			sup := startONNXSupervisor(t, sidecar.SupervisorOptions{
				Transport:        tr,
				LivenessTimeout:  2 * time.Second,
				LivenessInterval: 200 * time.Millisecond,
				MinBackoff:       50 * time.Millisecond,
				OnUnresponsive:   func() { unresponsive.Add(1) },
			})
			if err, _ := callOutcome(sup); err != nil {
				t.Fatalf("before the stop: %v", err)
			}
			old := sup.Pid()
			if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(old, syscall.SIGCONT) // in case it is still there
			var failedFast, hitDeadline int
			var reasons []string
			giveUp := time.Now().Add(2 * time.Minute)
			for {
				err, deadline := callOutcome(sup)
				if err == nil && sup.Pid() != old {
					break
				}
				if err != nil {
					if deadline {
						hitDeadline++
					}
					if inferr.TypeOf(err) != inferr.GRPC {
						t.Fatalf("during the stop: %s error %v, want GRPC", inferr.TypeOf(err), err)
					}
					if strings.Contains(err.Error(), "sidecar unavailable") {
						failedFast++
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				if err := sup.WaitHealthy(ctx); err != nil && strings.Contains(err.Error(), "liveness probe") {
					reasons = append(reasons, err.Error())
				}
				cancel()
				if time.Now().After(giveUp) {
					t.Fatalf("not replaced: pid %d (stopped %d), last error %v", sup.Pid(), old, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if hitDeadline > 0 {
				t.Errorf("%d calls waited their whole deadline", hitDeadline)
			}
			if failedFast == 0 {
				t.Error("no call failed at once with \"sidecar unavailable\" while the sidecar was stopped")
			}
			if len(reasons) == 0 {
				t.Error("readiness never said the sidecar missed its liveness probe")
			} else {
				t.Logf("readiness said: %s", reasons[0])
			}
			if sup.Unresponsive() != 1 || unresponsive.Load() != 1 {
				t.Errorf("Unresponsive %d, OnUnresponsive calls %d; want 1", sup.Unresponsive(), unresponsive.Load())
			}
			if err := syscall.Kill(old, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("the stopped sidecar pid %d is still there: %v", old, err)
			}
		})
	}
}

// A sidecar killed as soon as it starts, again and again, is restarted
// with back-off; meanwhile calls fail at once with a GRPC error naming the
// crash loop (none waits its deadline), and once the kills stop it serves
// again.
func TestSupervisorCrashLoopFailsFast(t *testing.T) {
	sup := startONNXSupervisor(t, sidecar.SupervisorOptions{
		MinBackoff: 100 * time.Millisecond,
		MaxBackoff: 800 * time.Millisecond,
	})
	stop := make(chan struct{})
	killerDone := make(chan struct{})
	var kills atomic.Int64
	go func() {
		defer close(killerDone)
		last := 0
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if pid := sup.Pid(); pid != 0 && pid != last {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					kills.Add(1)
				}
				last = pid
			}
		}
	}()
	var crashLoop, hitDeadline int
	var reason string
	for kills.Load() < 6 || crashLoop < 3 {
		err, deadline := callOutcome(sup)
		if deadline {
			hitDeadline++
		}
		if err != nil && strings.Contains(err.Error(), "crash loop") {
			if inferr.TypeOf(err) != inferr.GRPC {
				t.Errorf("crash loop error of type %s: %v", inferr.TypeOf(err), err)
			}
			crashLoop++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if err := sup.WaitHealthy(ctx); err != nil && strings.Contains(err.Error(), "crash loop") {
			reason = err.Error()
		}
		cancel()
		if kills.Load() > 200 {
			t.Fatalf("%d kills and %d crash-loop errors", kills.Load(), crashLoop)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	<-killerDone
	stopped := time.Now()
	t.Logf("%d kills; %d calls failed at once naming the crash loop; readiness said %q", kills.Load(), crashLoop, reason)
	if reason == "" {
		t.Error("readiness never named the crash loop")
	}
	for {
		err, deadline := callOutcome(sup)
		if deadline {
			hitDeadline++
		}
		if err == nil {
			break
		}
		if time.Since(stopped) > 2*time.Minute {
			t.Fatalf("no recovery after the kills stopped: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("serving again %s after the last kill (max back-off 800ms)", time.Since(stopped).Round(time.Millisecond))
	if hitDeadline > 0 {
		t.Errorf("%d calls waited their whole deadline", hitDeadline)
	}
}
