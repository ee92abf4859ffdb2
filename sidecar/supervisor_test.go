//go:build cgo

package sidecar_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// testLogger sends a component's logs to t.Log (visible with -v or on failure).
type tLogWriter struct{ t *testing.T }

func (w tLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func affineEntry(path string, x []float32) []batch.Entry {
	return []batch.Entry{{ModelPath: path, Tensors: []tensor.Tensor{tensor.New("x", []int64{int64(len(x) / 3), 3}, x)}}}
}

func predictAffine(ctx context.Context, c *sidecar.Client, path string, x []float32) ([]float32, error) {
	res, err := c.Predict(ctx, affineEntry(path, x))
	if err != nil {
		return nil, err
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return res[0].Tensors[0].Data.([]float32), nil
}

func isAffine(x, y []float32, a, b float32) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if d := y[i] - (a*x[i] + b); d > 1e-5 || d < -1e-5 {
			return false
		}
	}
	return true
}

func TestSupervisorRestartReplaysModels(t *testing.T) {
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	bin := buildBinary(t, "inference-sidecar-onnx", true)
	var restarted atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath:    bin,
		RuntimeConfig: `{"num_intraop_threads":1}`,
		SocketPath:    filepath.Join(shortDir(t), "sup.sock"),
		RlimitMB:      8192,
		MinBackoff:    50 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(tLogWriter{t}, nil)),
		OnRestart:     func() { restarted.Add(1) },
		// Passed to the sidecar as --fast_lane_spin_wait (which it must
		// accept) and used by the client: polling off on both ends.
		FastLaneSpinWait: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	c := sup.Client()

	// The address-space limit reached the child.
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", sup.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	wantLimit := fmt.Sprint(int64(8192) << 20)
	if line := grepLine(string(limits), "Max address space"); !strings.Contains(line, wantLimit) {
		t.Errorf("child limits %q, want %s bytes", line, wantLimit)
	}

	// Registered: a (v1, then v2: the latest files replay), b (then
	// deleted: not replayed), c (v1).
	v1, v2 := onnxFixture(t, "affine_v1.onnx"), onnxFixture(t, "affine_v2.onnx")
	warm := affineBatch("a/", []float32{1, 2, 3})
	for _, r := range []struct {
		path  string
		files runtimes.Files
	}{{"a/", v1}, {"b/", v1}, {"c/", v1}, {"a/", v2}} {
		if err := sup.RegisterModel(ctx, r.path, r.files, warm); err != nil {
			t.Fatalf("register %s: %v", r.path, err)
		}
	}
	if err := sup.DeleteModel(ctx, "b/"); err != nil {
		t.Fatal(err)
	}
	// A failed registration is not recorded (and reports its type).
	if err := sup.RegisterModel(ctx, "bad/", runtimes.Files{"m.onnx": []byte("junk")}, ""); inferr.TypeOf(err) != inferr.ModelExecution {
		t.Errorf("registering junk = %v, want MODEL_EXECUTION", err)
	}

	x := []float32{1, -2, 0.5}
	if y, err := predictAffine(ctx, c, "a/", x); err != nil || !isAffine(x, y, 3, -1) {
		t.Fatalf("before the kill: a/ = %v, %v", y, err)
	}

	oldPid := sup.Pid()
	if err := syscall.Kill(oldPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Calls wait for the replay (or, in the instant before the supervisor
	// sees the death, fail with GRPC) until the sidecar is back with its
	// models; then they work on the same client.
	sawGRPC := false
	deadline := time.Now().Add(90 * time.Second)
	for {
		y, err := predictAffine(ctx, c, "a/", x)
		if err == nil && restarted.Load() > 0 {
			if !isAffine(x, y, 3, -1) {
				t.Fatalf("after restart: a/ = %v, want the latest registration (v2)", y)
			}
			break
		}
		if err != nil {
			switch inferr.TypeOf(err) {
			case inferr.GRPC:
				sawGRPC = true
			case inferr.ModelNotFound:
			default:
				t.Fatalf("during restart: unexpected %s error: %v", inferr.TypeOf(err), err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar did not come back: last error %v, restarts %d", err, sup.Restarts())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !sawGRPC {
		t.Log("no call landed while the sidecar was down (restart was quick)")
	}
	if sup.Pid() == oldPid || sup.Restarts() != 1 || restarted.Load() != 1 {
		t.Errorf("pid %d (old %d), Restarts %d, OnRestart calls %d; want a new pid and 1 restart", sup.Pid(), oldPid, sup.Restarts(), restarted.Load())
	}
	paths, err := c.ModelPaths(ctx)
	if err != nil || strings.Join(paths, ",") != "a/,c/" {
		t.Errorf("models after replay = %q, %v; want [a/ c/]", paths, err)
	}
	// Both serve again, each with the checksum of the files it replayed
	// and its signature as the ONNX runtime read it.
	infos, err := c.Models(ctx, "")
	if err != nil || len(infos) != 2 {
		t.Fatalf("Models after replay = %+v, %v; want a/ and c/", infos, err)
	}
	for i, want := range []runtimes.Files{v2, v1} {
		in := infos[i].Signature.Inputs
		if infos[i].State != sidecar.ModelServing || infos[i].Checksum != modelfiles.Checksum(want) ||
			len(in) != 1 || in[0].Name != "x" || in[0].DType != tensor.Float || len(infos[i].Signature.Outputs) != 1 {
			t.Errorf("Models after replay: %+v, want serving with checksum %s and one FLOAT input x", infos[i], modelfiles.Checksum(want))
		}
	}
	if y, err := predictAffine(ctx, c, "c/", x); err != nil || !isAffine(x, y, 2, 1) {
		t.Errorf("after restart: c/ = %v, %v; want v1", y, err)
	}

	// Close stops the child and removes the socket.
	pid := sup.Pid()
	if err := sup.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("sidecar pid %d still alive after Close", pid)
	}
	if _, err := os.Lstat(sup.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("socket still there after Close: %v", err)
	}
}

func grepLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func TestSupervisorStartFailures(t *testing.T) {
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	bin := buildBinary(t, "inference-sidecar-onnx", true)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	_, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{BinaryPath: filepath.Join(t.TempDir(), "missing"), Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing binary: %v", err)
	}
	// A sidecar that exits at once (bad runtime config) fails the start
	// quickly with its exit status, not after the start timeout.
	start := time.Now()
	_, err = sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{BinaryPath: bin, RuntimeConfig: `{"bogus":1}`, Logger: quiet, StartTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("bad runtime config: %v, want the child's exit status 2", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a child that exited at once took %v to report", d)
	}
	// The default socket is in a private temp dir that Close removes.
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{BinaryPath: bin, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(sup.SocketPath())
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("default socket dir %s: %v %v, want 0700", dir, fi.Mode().Perm(), err)
	}
	sup.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Close left the private socket dir: %v", err)
	}
}

// A sidecar that keeps failing to start is retried with a growing,
// capped back-off; once it can start again the supervisor recovers and
// replays the models.
func TestSupervisorBackoffAndRecovery(t *testing.T) {
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	real := buildBinary(t, "inference-sidecar-onnx", true)
	dir := shortDir(t)
	attempts, broken := filepath.Join(dir, "attempts"), filepath.Join(dir, "broken")
	wrapper := filepath.Join(dir, "sidecar.sh")
	script := fmt.Sprintf("#!/bin/sh\ndate +%%s%%N >> %q\nif [ -e %q ]; then echo 'broken on purpose' >&2; exit 3; fi\nexec %q \"$@\"\n", attempts, broken, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	const minB, maxB = 50 * time.Millisecond, 400 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath: wrapper, SocketPath: filepath.Join(dir, "s.sock"),
		MinBackoff: minB, MaxBackoff: maxB,
		Logger: slog.New(slog.NewTextHandler(tLogWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	if err := sup.RegisterModel(ctx, "a/", onnxFixture(t, "affine_v1.onnx"), ""); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(broken, nil, 0o600)
	syscall.Kill(sup.Pid(), syscall.SIGKILL)
	const failures = 6
	for countLines(attempts) < 1+failures {
		if ctx.Err() != nil {
			t.Fatalf("only %d start attempts", countLines(attempts))
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.Remove(broken)
	for sup.Restarts() < 1 {
		if ctx.Err() != nil {
			t.Fatal("the supervisor did not recover once the binary worked again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	x := []float32{1, 2, 3}
	if y, err := predictAffine(ctx, sup.Client(), "a/", x); err != nil || !isAffine(x, y, 2, 1) {
		t.Errorf("after recovery: a/ = %v, %v; want the replayed v1", y, err)
	}
	if sup.Restarts() != 1 {
		t.Errorf("Restarts = %d, want 1 (failed attempts are not restarts)", sup.Restarts())
	}
	// The first restart waits 50ms; the gap before each later attempt is at
	// least the back-off in force: 100, 200, 400, 400, ... ms (lower bounds
	// only: no timing upper bound).
	ts := readStamps(t, attempts)
	want := 2 * minB
	for i := 2; i < len(ts) && i <= failures; i++ {
		if gap := ts[i].Sub(ts[i-1]); gap < want*9/10 {
			t.Errorf("attempt %d came %v after the previous one, want >= %v", i, gap, want)
		}
		want = min(2*want, maxB)
	}
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

func readStamps(t *testing.T, path string) []time.Time {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, l := range strings.Fields(string(b)) {
		var ns int64
		if _, err := fmt.Sscan(l, &ns); err != nil {
			t.Fatalf("bad stamp %q", l)
		}
		out = append(out, time.Unix(0, ns))
	}
	return out
}
