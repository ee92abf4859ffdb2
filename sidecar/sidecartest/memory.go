package sidecartest

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ModelMemory starts the sidecar binary bin on a fresh socket, registers
// files and reports the growth of the process's resident memory relative
// to the files' size, once the registration's own memory has gone back to
// the OS (it waits up to 30 s for the growth to fall to limit times the
// size). It fails the test when the growth stays over limit. It measures
// twice, each in a sidecar of its own: with the files streamed (a Client's
// registration) and with the files given by path (FileHeader.local_path,
// what the sidecar Supervisor does: the sidecar links the file and the
// runtime reads it from disk).
func ModelMemory(t *testing.T, bin string, files runtimes.Files, limit float64) {
	t.Helper()
	modelMemory(t, bin, files, limit, false)
	modelMemory(t, bin, files, limit, true)
}

func modelMemory(t *testing.T, bin string, files runtimes.Files, limit float64, byPath bool) {
	t.Helper()
	socket := testhelp.SocketPath(t, "s.sock")
	local := t.TempDir()
	args := []string{"--socket", socket}
	how := "streamed"
	if byPath {
		args = append(args, "--local_files_dir", local)
		how = "by path"
	}
	cmd := exec.Command(bin, args...)
	var stderr testhelp.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
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
	var header *inferencepb.RegisterModelHeader
	if byPath {
		// Written before the baseline: the files are the supervisor's.
		header = &inferencepb.RegisterModelHeader{ModelPath: "big/"}
		for i, name := range slices.Sorted(maps.Keys(files)) {
			rel := strconv.Itoa(i)
			// 0400: the replay store seals its files so (what lets the
			// TensorFlow runtime map a linked file in place).
			if err := os.WriteFile(filepath.Join(local, rel), files[name], 0o400); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(files[name])
			header.Files = append(header.Files, &inferencepb.FileHeader{Path: name, Size: int64(len(files[name])), LocalPath: rel, Sha256: sum[:]})
		}
	}
	pid := cmd.Process.Pid
	base := testhelp.ProcStatus(t, pid, "VmRSS")
	size := files.Size()
	if byPath {
		err = registerByPath(ctx, socket, header)
	} else {
		err = c.RegisterModel(ctx, "big/", files, "")
	}
	if err != nil {
		t.Fatalf("register (%s): %v; stderr: %s", how, err, stderr.String())
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
	anon, file := testhelp.ProcStatus(t, pid, "RssAnon"), testhelp.ProcStatus(t, pid, "RssFile")
	t.Logf("model files %d MiB, %s: sidecar RSS %d MiB before, peak %d MiB during the registration (+%.2fx the file size), +%d MiB after it: %.2fx the file size (now %d MiB anonymous, %d MiB file-backed)",
		size>>20, how, base>>20, peak>>20, float64(peak-base)/float64(size), held>>20, ratio, anon>>20, file>>20)
	if ratio > limit {
		t.Errorf("%s: the sidecar holds %.2fx the model's file size after loading it (limit %.1fx)", how, ratio, limit)
	}
}

// registerByPath sends a registration whose files are all given by path:
// the header alone.
func registerByPath(ctx context.Context, socket string, header *inferencepb.RegisterModelHeader) error {
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	st, err := inferencepb.NewInferenceServiceClient(conn).RegisterModelStream(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&inferencepb.RegisterModelChunk{Part: &inferencepb.RegisterModelChunk_Header{Header: header}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = st.CloseAndRecv()
	return err
}
