package sidecar_test

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// bigTFModel is a SavedModel y = x·W with W a [1024,32768] FLOAT variable:
// 128 MiB of checkpoint.
func bigTFModel(t *testing.T) runtimes.Files {
	t.Helper()
	const in, out = 1024, 32768
	b := tfsave.NewBuilderWith(tfsave.Options{FunctionCall: true})
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, in})
	w := make([]float32, in*out)
	for i := range w {
		w[i] = float32(i%97) / 97
	}
	k := b.Variable("dense/kernel", tensor.New("", []int64{in, out}, w))
	y := b.OpNamed("y", "MatMul", []string{x, k.Value}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// measureModelMemory starts the sidecar binary bin, registers files and
// reports the growth of the process's resident memory relative to the
// files' size once the registration's own memory has gone back to the OS.
// It fails when the growth is over limit times the file size.
func measureModelMemory(t *testing.T, bin string, files runtimes.Files, limit float64) {
	t.Helper()
	socket := testhelp.SocketPath(t, "s.sock")
	cmd := exec.Command(bin, "--socket", socket)
	var stderr testhelp.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c, err := sidecar.NewClient(socket, sidecar.ClientOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("sidecar: %v; stderr: %s", err, stderr.String())
	}
	pid := cmd.Process.Pid
	base := procStatus(t, pid, "VmRSS")
	size := files.Size()
	if err := c.RegisterModel(ctx, "big/", files, ""); err != nil {
		t.Fatal(err)
	}
	peak := procStatus(t, pid, "VmHWM")
	var held int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		held = procStatus(t, pid, "VmRSS") - base
		if float64(held) <= limit*float64(size) || time.Now().After(deadline) {
			break
		}
	}
	ratio := float64(held) / float64(size)
	t.Logf("model files %d MiB: sidecar RSS %d MiB before, peak %d MiB during the registration, +%d MiB after it: %.2fx the file size",
		size>>20, base>>20, peak>>20, held>>20, ratio)
	if ratio > limit {
		t.Errorf("the sidecar holds %.2fx the model's file size after loading it (limit %.1fx)", ratio, limit)
	}
}

// TestSidecarModelMemoryTensorFlow: a 128 MiB TensorFlow model in a real
// inference-sidecar-tensorflow process. go test -v -run ModelMemory ./sidecar/
func TestSidecarModelMemoryTensorFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("registers a 128 MiB model")
	}
	measureModelMemory(t, buildBinary(t, "inference-sidecar-tensorflow", false), bigTFModel(t), 1.5)
}
