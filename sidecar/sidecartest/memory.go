package sidecartest

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
)

// ModelMemory starts the sidecar binary bin on a fresh socket, registers
// files and reports the growth of the process's resident memory relative
// to the files' size, once the registration's own memory has gone back to
// the OS (it waits up to 30 s for the growth to fall to limit times the
// size). It fails the test when the growth stays over limit.
func ModelMemory(t *testing.T, bin string, files runtimes.Files, limit float64) {
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
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("sidecar %s: %v; stderr: %s", bin, err, stderr.String())
	}
	pid := cmd.Process.Pid
	base := testhelp.ProcStatus(t, pid, "VmRSS")
	size := files.Size()
	if err := c.RegisterModel(ctx, "big/", files, ""); err != nil {
		t.Fatalf("register: %v; stderr: %s", err, stderr.String())
	}
	peak := testhelp.ProcStatus(t, pid, "VmHWM")
	var held int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		held = testhelp.ProcStatus(t, pid, "VmRSS") - base
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
