package modelfiles

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
)

// seedPipeline is the checksum command of the B&A inference docs, verbatim.
func TestMain(m *testing.M) { testhelp.Main(m) }

const seedPipeline = `find "$1" -type f -exec sha256sum {} \; | sort -k 2 | awk '{print $1}' | tr -d '\n' | sha256sum | awk '{print $1}'`

// pipelineChecksum runs the seed's shell pipeline on path. LC_ALL=C makes
// sort order bytes, as Go does (in other locales sort collates and may order
// names with punctuation differently).
func pipelineChecksum(t testing.TB, path string) string {
	t.Helper()
	for _, tool := range []string{"bash", "find", "sha256sum", "sort", "awk", "tr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the seed pipeline needs %s: %v", tool, err)
		}
	}
	cmd := exec.Command("bash", "-c", seedPipeline, "pipeline", path)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("seed pipeline on %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

func writeTree(t testing.TB, dir string, files runtimes.Files) {
	t.Helper()
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// savedModelLike is a TF SavedModel-shaped tree with names chosen to make
// path order differ from hash order and to exercise sort edge cases
// ("a.b" < "a/b" bytewise, names with spaces, upper case, an empty file).
func savedModelLike(t testing.TB) runtimes.Files {
	return runtimes.Files{
		"saved_model.pb": randomBytes(t, 3000),
		"variables/variables.data-00000-of-00001": randomBytes(t, 70000),
		"variables/variables.index":               randomBytes(t, 150),
		"assets/vocab.txt":                        []byte("a\nb\n"),
		"a.b":                                     randomBytes(t, 10),
		"a/b":                                     randomBytes(t, 11),
		"B upper case":                            randomBytes(t, 12),
		"with space/file one":                     randomBytes(t, 13),
		"empty":                                   nil,
		"fingerprint.pb":                          randomBytes(t, 56),
	}
}

func TestChecksumMatchesSeedPipelineOnDirectory(t *testing.T) {
	dir := t.TempDir()
	files := savedModelLike(t)
	writeTree(t, dir, files)
	want := pipelineChecksum(t, dir)
	if got := Checksum(files); got != want {
		t.Errorf("Checksum = %s, seed pipeline = %s", got, want)
	}
	got, err := ChecksumPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("ChecksumPath = %s, seed pipeline = %s", got, want)
	}
	// The pipeline's result does not depend on how the directory is named
	// (find prefixes every path with it); neither may ours.
	if got2, err := ChecksumPath(dir + "/"); err != nil || got2 != want {
		t.Errorf("ChecksumPath(dir/) = %s, %v; want %s", got2, err, want)
	}
	read, err := ReadLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != len(files) {
		t.Fatalf("ReadLocal read %d files, want %d", len(read), len(files))
	}
	for rel, b := range files {
		if !bytes.Equal(read[rel], b) {
			t.Errorf("ReadLocal[%q] differs from the file written", rel)
		}
	}
}

func TestChecksumMatchesSeedPipelineOnSingleFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.pt")
	content := randomBytes(t, 4096)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	want := pipelineChecksum(t, p)
	got, err := ChecksumPath(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("ChecksumPath(file) = %s, seed pipeline = %s", got, want)
	}
	files, err := ReadLocal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || !bytes.Equal(files["model.pt"], content) {
		t.Fatalf("ReadLocal(file) = %d entries, want one named model.pt with the content", len(files))
	}
	if got := Checksum(files); got != want {
		t.Errorf("Checksum(ReadLocal(file)) = %s, seed pipeline = %s", got, want)
	}
}

func TestChecksumDetectsAnyChange(t *testing.T) {
	files := runtimes.Files{"x": []byte("1"), "y": []byte("2")}
	base := Checksum(files)
	for name, changed := range map[string]runtimes.Files{
		"content":   {"x": []byte("1"), "y": []byte("3")},
		"rename":    {"x": []byte("1"), "z": []byte("2")},
		"swap":      {"x": []byte("2"), "y": []byte("1")},
		"extra":     {"x": []byte("1"), "y": []byte("2"), "w": nil},
		"removed":   {"x": []byte("1")},
		"moved dir": {"d/x": []byte("1"), "y": []byte("2")},
	} {
		// "rename" and "moved dir" keep the path order, so the seed's
		// checksum (which hashes contents only, not names) cannot tell;
		// the others must differ.
		same := Checksum(changed) == base
		if name == "rename" || name == "moved dir" {
			if !same {
				t.Errorf("%s: the seed's checksum ignores names, ours changed", name)
			}
			continue
		}
		if same {
			t.Errorf("%s: checksum did not change", name)
		}
	}
}

func TestChecksumPathErrors(t *testing.T) {
	if _, err := ChecksumPath(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ChecksumPath(missing) succeeded")
	}
	if _, err := ChecksumPath(t.TempDir()); err == nil {
		t.Error("ChecksumPath(empty dir) succeeded")
	}
	if _, err := ReadLocal(t.TempDir()); err == nil {
		t.Error("ReadLocal(empty dir) succeeded")
	}
}

func TestChecksumSkipsSymlinksLikeFind(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, runtimes.Files{"m/a": []byte("a"), "other": []byte("o")})
	if err := os.Symlink(filepath.Join(dir, "other"), filepath.Join(dir, "m", "link")); err != nil {
		t.Skip(err)
	}
	want := pipelineChecksum(t, filepath.Join(dir, "m"))
	got, err := ChecksumPath(filepath.Join(dir, "m"))
	if err != nil || got != want {
		t.Errorf("ChecksumPath with a symlink = %s, %v; seed pipeline = %s", got, err, want)
	}
}

func BenchmarkChecksum(b *testing.B) {
	files := runtimes.Files{"variables/variables.data-00000-of-00001": make([]byte, 16<<20), "saved_model.pb": make([]byte, 1<<20)}
	b.SetBytes(files.Size())
	for b.Loop() {
		Checksum(files)
	}
}

// TestInferctlChecksumMatchesSeedPipeline builds the inferctl binary and
// checks that `inferctl checksum` prints what the seed's pipeline prints,
// for a directory and for a single file (issue 5, item 5).
func TestInferctlChecksumMatchesSeedPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/inferctl")
	}
	bin := testhelp.BuildBinary(t, "cmd/inferctl", false)
	dir := t.TempDir()
	writeTree(t, dir, savedModelLike(t))
	single := filepath.Join(dir, "variables", "variables.index")
	for _, p := range []string{dir, single} {
		out, err := exec.Command(bin, "checksum", p).Output()
		if err != nil {
			t.Fatalf("inferctl checksum %s: %v", p, err)
		}
		if got, want := strings.TrimSpace(string(out)), pipelineChecksum(t, p); got != want {
			t.Errorf("inferctl checksum %s = %s, seed pipeline = %s", p, got, want)
		}
	}
}

// TestChecksumPathTee: the tee sees each file's bytes, whole, under its
// local path, and the checksum is ChecksumPath's.
func TestChecksumPathTee(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"a": []byte("first file"), "sub/b": bytes.Repeat([]byte{7}, 100000)}
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]*bytes.Buffer{}
	got, err := ChecksumPathTee(dir, func(local string) io.Writer {
		seen[local] = &bytes.Buffer{}
		return seen[local]
	})
	if err != nil {
		t.Fatal(err)
	}
	if want, err := ChecksumPath(dir); err != nil || got != want {
		t.Fatalf("ChecksumPathTee = %s, ChecksumPath = %s (%v)", got, want, err)
	}
	for rel, b := range files {
		if w := seen[filepath.Join(dir, filepath.FromSlash(rel))]; w == nil || !bytes.Equal(w.Bytes(), b) {
			t.Errorf("tee of %s: not given its bytes", rel)
		}
	}
	if len(seen) != len(files) {
		t.Errorf("tee called for %d files, want %d", len(seen), len(files))
	}
}
