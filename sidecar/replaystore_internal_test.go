package sidecar

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
)

func newTestStore(t *testing.T) *replayStore {
	t.Helper()
	st, err := newReplayStore(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func writeSource(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPutFilesLinksDownloads: a file whose SHA-256 the caller gives (a
// verified download) is hard-linked into the store, not copied, wherever a
// link can be made (the download and the store on one filesystem, the
// default: both under $TMPDIR); one without is copied and hashed. It fails
// if putFiles copies where it could link.
func TestPutFilesLinksDownloads(t *testing.T) {
	st := newTestStore(t)
	src := t.TempDir()
	if err := os.Link(writeSource(t, src, "probe", nil), filepath.Join(st.dir, "probe")); err != nil {
		t.Skipf("no hard links from %s to %s: %v", src, st.dir, err)
	}
	weights := []byte(strings.Repeat("weights ", 1000))
	graph := []byte("graph")
	files := runtimes.DiskFiles{
		"variables/variables.data-00000-of-00001": writeSource(t, src, "0", weights),
		"saved_model.pb": writeSource(t, src, "1", graph),
	}
	sums := map[string][sha256.Size]byte{"variables/variables.data-00000-of-00001": sha256.Sum256(weights)}
	m, err := st.putFiles("m/", files, sums)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.files) != 2 {
		t.Fatalf("%d stored files, want 2", len(m.files))
	}
	for _, f := range m.files {
		a, errA := os.Stat(files[f.name])
		b, errB := os.Stat(f.blob)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		_, given := sums[f.name]
		if os.SameFile(a, b) != given || f.linked != given {
			t.Errorf("%s: stored as a link %v (linked %v), want %v (a link exactly when its SHA-256 is given)", f.name, os.SameFile(a, b), f.linked, given)
		}
		if b.Mode().Perm() != 0o400 {
			t.Errorf("%s: mode %v, want 0400 (sealed: nothing writes a stored file again)", f.blob, b.Mode().Perm())
		}
	}
	if m.files[0].name != "saved_model.pb" || m.files[0].sum != sha256.Sum256(graph) || m.files[0].size != int64(len(graph)) {
		t.Errorf("the copied file's record: %+v, want its SHA-256 and size", m.files[0])
	}
	if m.files[1].sum != sums["variables/variables.data-00000-of-00001"] || m.files[1].size != int64(len(weights)) {
		t.Errorf("the linked file's record: %+v, want the given SHA-256 and its size", m.files[1])
	}
	// The caller's names go; the store keeps the file.
	os.RemoveAll(src)
	if err := m.verify(); err != nil {
		t.Errorf("verify after the download's names were removed: %v", err)
	}
	hs, err := m.headers(st.dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hs {
		if filepath.Join(st.dir, filepath.FromSlash(h.GetLocalPath())) != m.files[i].blob || string(h.GetSha256()) != string(m.files[i].sum[:]) || h.GetSize() != m.files[i].size {
			t.Errorf("header %d = %v, want the stored file %s relative to %s with its size and SHA-256", i, h, m.files[i].blob, st.dir)
		}
	}
}

// TestLinkOrCopyAcrossFilesystems: where no link can be made (the source
// on another filesystem, here /dev/shm when it is one), the file is
// copied whole.
func TestLinkOrCopyAcrossFilesystems(t *testing.T) {
	st := newTestStore(t)
	shm, err := os.MkdirTemp("/dev/shm", "inferbid-test-*")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(shm)
	data := []byte(strings.Repeat("x", 100000))
	src := writeSource(t, shm, "f", data)
	if os.Link(src, filepath.Join(st.dir, "probe")) == nil {
		t.Skip("/dev/shm and the test's temp dir are one filesystem")
	}
	sf, err := linkOrCopy(st.dir, "0", src, sha256.Sum256(data))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(sf.blob)
	if err != nil || string(got) != string(data) || sf.size != int64(len(data)) {
		t.Errorf("the copy: %d bytes (%v), record %+v; want the %d bytes of the source", len(got), err, sf, len(data))
	}
}

// TestVerifyCatchesChanges: a stored file changed on disk (same size, one
// byte; or cut short) fails verify, naming the file and the SHA-256 or the
// size, so a replay never brings back other bytes than the ones that
// served.
func TestVerifyCatchesChanges(t *testing.T) {
	st := newTestStore(t)
	data := []byte(strings.Repeat("weights ", 1000))
	src := writeSource(t, t.TempDir(), "model.onnx", data)
	m, err := st.putFiles("m/", runtimes.DiskFiles{"model.onnx": src}, map[string][sha256.Size]byte{"model.onnx": sha256.Sum256(data)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.verify(); err != nil {
		t.Fatalf("verify of an intact file: %v", err)
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 1
	if err := os.WriteFile(m.files[0].blob, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.verify(); err == nil || !strings.Contains(err.Error(), "SHA-256") || !strings.Contains(err.Error(), "model.onnx") {
		t.Errorf("verify of a changed file: %v, want a SHA-256 mismatch naming model.onnx", err)
	}
	if err := os.WriteFile(m.files[0].blob, data[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.verify(); err == nil || !strings.Contains(err.Error(), "10 bytes") {
		t.Errorf("verify of a truncated file: %v, want its size", err)
	}
}

// TestPutFilesLinksTheOpenedFile: the store links the file it opened and
// measured, not whatever the path names: a path that is a symlink puts
// the file it points to in the store (link(2) of the path would store the
// symlink itself, which seal would follow and the sidecar resolve
// relative to its own directory).
func TestPutFilesLinksTheOpenedFile(t *testing.T) {
	st := newTestStore(t)
	src := t.TempDir()
	weights := []byte("weights")
	target := writeSource(t, src, "target", weights)
	if err := os.Link(target, filepath.Join(st.dir, "probe")); err != nil {
		t.Skipf("no hard links from %s to %s: %v", src, st.dir, err)
	}
	link := filepath.Join(src, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	m, err := st.putFiles("m/", runtimes.DiskFiles{"w": link}, map[string][sha256.Size]byte{"w": sha256.Sum256(weights)})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(m.files[0].blob)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("stored %s: %v (%v), want a regular file", m.files[0].blob, fi.Mode(), err)
	}
	a, _ := os.Stat(target)
	if !os.SameFile(a, fi) {
		t.Errorf("stored %s is not the symlink's target %s", m.files[0].blob, target)
	}
}
