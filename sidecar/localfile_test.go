package sidecar

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

func localFile(path string, size int64, local string, sum []byte) *inferencepb.FileHeader {
	return &inferencepb.FileHeader{Path: path, Size: size, LocalPath: local, Sha256: sum}
}

// TestRegisterByLocalPath: a registration may name files under the
// server's LocalFilesDir instead of streaming them (the supervisor's
// replay store); they load as streamed ones do, mixed with streamed
// ones, and the model's checksum is made of the digests the header gives.
// Paths outside the directory, symlinks out of it, sizes other than the
// declared one, missing digests and a server without the directory are
// refused with INPUT_PARSING, naming the file; nothing is loaded then, and
// nothing is left in TempDir.
func TestRegisterByLocalPath(t *testing.T) {
	local, received, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(dir, name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(local, "7/0", "2 1")
	write(outside, "secret", "9 9")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(local, "escape")); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("2 1"))
	ts := startServer(t, ServerOptions{TempDir: received, LocalFilesDir: local})
	cases := []struct {
		name      string
		msgs      []*inferencepb.RegisterModelChunk
		fragments []string
	}{
		{"dot-dot", []*inferencepb.RegisterModelChunk{header("m/", localFile("affine", 3, "../"+filepath.Base(outside)+"/secret", sum[:]))}, []string{`"affine"`, "secret"}},
		{"absolute", []*inferencepb.RegisterModelChunk{header("m/", localFile("affine", 3, filepath.Join(outside, "secret"), sum[:]))}, []string{`"affine"`, "secret"}},
		{"symlink out", []*inferencepb.RegisterModelChunk{header("m/", localFile("affine", 3, "escape", sum[:]))}, []string{`"affine"`, "escape"}},
		{"missing", []*inferencepb.RegisterModelChunk{header("m/", localFile("affine", 3, "7/1", sum[:]))}, []string{`"affine"`, "7/1"}},
		{"a directory", []*inferencepb.RegisterModelChunk{header("m/", localFile("affine", 3, "7", sum[:]))}, []string{`"affine"`, "not a regular file"}},
		{"other size", []*inferencepb.RegisterModelChunk{header("m/", localFile("affine", 4, "7/0", sum[:]))}, []string{`"affine"`, "3 bytes", "declares 4"}},
		{"no digest", []*inferencepb.RegisterModelChunk{header("m/", localFile("affine", 3, "7/0", nil))}, []string{`"affine"`, "sha256"}},
		{"digest without path", []*inferencepb.RegisterModelChunk{header("m/", localFile("affine", 3, "", sum[:])), data("2 1")}, []string{`"affine"`, "sha256"}},
	}
	for _, c := range cases {
		errType(t, c.name, streamRaw(t, ts, c.msgs...), inferr.InputParsing, c.fragments...)
	}
	if n := ts.backend.Loads.Load(); n != 0 {
		t.Errorf("refused registrations loaded %d models", n)
	}
	// A local file between two streamed ones.
	err := streamRaw(t, ts, header("m/", file("a", 2), localFile("affine", 3, "7/0", sum[:]), file("z", 1)), data("ab"), data("c"))
	if err != nil {
		t.Fatalf("a registration by local path failed: %v", err)
	}
	out, err := ts.client.Predict(context.Background(), []batch.Entry{{ModelPath: "m/", Tensors: x3(1, 2, 3)}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("predict: %v %v", err, out)
	}
	if got, _ := out[0].Tensors[0].Data.([]float32); len(got) != 3 || got[0] != 3 || got[2] != 7 {
		t.Errorf("y = %v, want 2x+1 (the local file's model)", got)
	}
	a, z := sha256.Sum256([]byte("ab")), sha256.Sum256([]byte("c"))
	want := modelfiles.ChecksumOfHexDigests([]string{hex.EncodeToString(a[:]), hex.EncodeToString(sum[:]), hex.EncodeToString(z[:])})
	if infos, err := ts.client.Models(context.Background(), "m/"); err != nil || infos[0].Checksum != want {
		t.Errorf("checksum %v (%v), want %s, made of the header's digest for the local file", infos, err, want)
	}
	if b, err := os.ReadFile(filepath.Join(local, "7/0")); err != nil || string(b) != "2 1" {
		t.Errorf("the local file after the registration: %q, %v; want it untouched", b, err)
	}
	if left, err := os.ReadDir(received); err != nil || len(left) != 0 {
		t.Errorf("registrations left %v in TempDir (%v)", left, err)
	}
	// Without LocalFilesDir, a file by path is refused.
	ts2 := startServer(t, ServerOptions{TempDir: received})
	errType(t, "no LocalFilesDir", streamRaw(t, ts2, header("m/", localFile("affine", 3, "7/0", sum[:]))), inferr.InputParsing, "local_files_dir")
}

// TestTakeLocalFileLinks: the sidecar's copy of a local file is a hard
// link to it (the same inode: nothing read or written) where the two
// directories are on one filesystem. It fails if takeLocalFile copies
// where it could link.
func TestTakeLocalFileLinks(t *testing.T) {
	local, dst := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "f")
	if err := os.WriteFile(src, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(src, filepath.Join(dst, "probe")); err != nil {
		t.Skipf("no hard links in %s: %v", dst, err)
	}
	sum := sha256.Sum256([]byte("weights"))
	out := filepath.Join(dst, "0")
	if err := takeLocalFile(local, localFile("m", 7, "f", sum[:]), out); err != nil {
		t.Fatal(err)
	}
	a, errA := os.Stat(src)
	b, errB := os.Stat(out)
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("%s is not a hard link to %s (%v, %v)", out, src, errA, errB)
	}
}

// TestCopyLocalFile: the fallback where no link can be made copies the
// whole file (through copy_file_range) and checks its size.
func TestCopyLocalFile(t *testing.T) {
	dir := t.TempDir()
	content := make([]byte, 3<<20+5)
	for i := range content {
		content[i] = byte(i * 7)
	}
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := copyLocalFile(f, filepath.Join(dir, "dst"), int64(len(content))); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "dst"))
	if err != nil || sha256.Sum256(got) != sha256.Sum256(content) {
		t.Errorf("the copy differs (%d bytes of %d, %v)", len(got), len(content), err)
	}
	f2, _ := os.Open(src)
	defer f2.Close()
	if err := copyLocalFile(f2, filepath.Join(dir, "dst2"), int64(len(content))+1); err == nil {
		t.Error("a copy shorter than the declared size passed")
	}
}

// TestTakeLocalFileFIFO: a local_path naming a FIFO (or a device) is
// refused as not a regular file at once; opening it for reading must not
// wait for a writer that never comes.
func TestTakeLocalFileFIFO(t *testing.T) {
	local, dst := t.TempDir(), t.TempDir()
	fifo := filepath.Join(local, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- takeLocalFile(local, localFile("m", 3, "fifo", make([]byte, sha256.Size)), filepath.Join(dst, "0"))
	}()
	select {
	case err := <-done:
		if inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO: %v, want INPUT_PARSING, not a regular file", err)
		}
	case <-time.After(20 * time.Second):
		// Release the blocked open before failing.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("takeLocalFile hangs on a FIFO (it waits for a writer)")
	}
}
