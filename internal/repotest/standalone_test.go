package repotest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// ciEntryPoint is the one file allowed to know what lies beside the
// repository: the CI entry point, which points the tests at the reference
// models there.
const ciEntryPoint = ".ci/run"

// outsidePointers are the strings that point outside the repository. They
// are built by concatenation so that this file does not contain them.
var outsidePointers = []string{
	".." + "/shared", // the folder beside the repository
	"DESIGN" + ".md", // the design contract that docs/architecture.md replaced
}

// TestRepositoryStandsAlone fails when a tracked file other than the CI
// entry point points outside the repository: the repository must build,
// test and explain itself alone (tests reach outside test data only
// through variables such as INFERBID_REFERENCE_MODELS).
func TestRepositoryStandsAlone(t *testing.T) {
	files := trackedFiles(t)
	checked := 0
	for _, name := range files {
		if name == ciEntryPoint || isFuzzCorpus(name) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(testhelp.ModuleRoot(t), filepath.FromSlash(name)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if errors.Is(err, syscall.EISDIR) {
			continue // a submodule
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if isBinary(data) {
			continue
		}
		checked++
		for _, p := range outsidePointers {
			if line, ok := lineWith(data, p); ok {
				t.Errorf("%s:%d names %q, which is outside the repository (only %s may): %s",
					name, line.number, p, ciEntryPoint, strings.TrimSpace(line.text))
			}
		}
	}
	if checked == 0 {
		t.Fatalf("no text file checked among %d tracked files", len(files))
	}
}

// trackedFiles lists the files git tracks, as slash paths relative to the
// module root. The test skips where git is missing or the module is not a
// git work tree (a module cache, an unpacked archive).
func trackedFiles(t *testing.T) []string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git not found: %v", err)
	}
	cmd := exec.Command(git, "ls-files", "-z", "--cached")
	cmd.Dir = testhelp.ModuleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files in %s failed (not a git work tree?): %v: %s", cmd.Dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var files []string
	for name := range strings.SplitSeq(string(out), "\x00") {
		if name != "" {
			files = append(files, name)
		}
	}
	if len(files) == 0 {
		t.Skipf("git ls-files in %s lists no files", cmd.Dir)
	}
	return files
}

// isFuzzCorpus reports files of a Go fuzz corpus: generated inputs whose
// bytes may hold anything.
func isFuzzCorpus(name string) bool {
	return strings.HasPrefix(name, "testdata/fuzz/") || strings.Contains(name, "/testdata/fuzz/")
}

// isBinary applies git's own test: a NUL byte in the first 8000 bytes.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

type line struct {
	number int
	text   string
}

// lineWith returns the first line of data that contains s.
func lineWith(data []byte, s string) (line, bool) {
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return line{}, false
	}
	start := bytes.LastIndexByte(data[:i], '\n') + 1
	end := bytes.IndexByte(data[i:], '\n')
	if end < 0 {
		end = len(data)
	} else {
		end += i
	}
	return line{number: bytes.Count(data[:i], []byte{'\n'}) + 1, text: string(data[start:end])}, true
}

// TestNoCompiledBinaries fails when a tracked file is a compiled program
// (ELF, or a Mach-O or PE header): binaries are built by make, never
// committed. Two were, at the root (a plain `go build ./cmd/...` writes
// them there); .gitignore now names those paths too.
func TestNoCompiledBinaries(t *testing.T) {
	magics := [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}, {'M', 'Z'}}
	for _, name := range trackedFiles(t) {
		f, err := os.Open(filepath.Join(testhelp.ModuleRoot(t), filepath.FromSlash(name)))
		if err != nil {
			continue // deleted in the work tree, or a submodule
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		for _, m := range magics {
			if n >= len(m) && bytes.Equal(head[:len(m)], m) && !strings.HasSuffix(name, ".wasm") {
				t.Errorf("%s is a compiled program: build it with make (into bin/), do not commit it", name)
			}
		}
	}
}

// maxTrackedSize is the largest file the repository may track outside a
// testdata directory: generated data and models that big are built by make
// (make models, make wasm), not committed.
const maxTrackedSize = 5 << 20

// TestNoLargeFiles fails when a tracked file outside testdata/ is larger
// than maxTrackedSize: large outputs (a compiled program, a model, a
// tarball) belong in bin/ or .cache/, which .gitignore names.
func TestNoLargeFiles(t *testing.T) {
	big, checked := largeFiles(testhelp.ModuleRoot(t), trackedFiles(t), maxTrackedSize)
	for _, b := range big {
		t.Errorf("%s is %.1f MB, over the %d MB limit for tracked files outside testdata/: generate it with make, do not commit it",
			b.name, float64(b.size)/(1<<20), maxTrackedSize>>20)
	}
	if checked == 0 {
		t.Fatal("no tracked file outside testdata/ was checked")
	}
}

// TestLargeFilesCheck runs the check of TestNoLargeFiles on a made-up tree:
// a sparse file over the limit is named, one in testdata/ and one at the
// limit are not.
func TestLargeFilesCheck(t *testing.T) {
	root := t.TempDir()
	sizes := map[string]int64{
		"inferctl":                 maxTrackedSize + 1,
		"pkg/model.bin":            maxTrackedSize,
		"pkg/testdata/big.onnx":    3 * maxTrackedSize,
		"testdata/fuzz/FuzzX/seed": maxTrackedSize + 1,
		"docs/architecture.md":     10,
	}
	var names []string
	for name, size := range sizes {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	names = append(names, "deleted/in/worktree")
	big, checked := largeFiles(root, names, maxTrackedSize)
	if len(big) != 1 || big[0].name != "inferctl" || big[0].size != maxTrackedSize+1 {
		t.Errorf("largeFiles = %+v, want only inferctl at %d bytes", big, maxTrackedSize+1)
	}
	if checked != 3 {
		t.Errorf("checked %d files, want 3 (those outside testdata/ that exist)", checked)
	}
}

type sizedFile struct {
	name string
	size int64
}

// largeFiles returns the regular files among names (slash paths under
// root) outside testdata directories that are larger than limit, and how
// many files it checked.
func largeFiles(root string, names []string, limit int64) (big []sizedFile, checked int) {
	for _, name := range names {
		if inTestdata(name) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, a symlink or a submodule
		}
		checked++
		if fi.Size() > limit {
			big = append(big, sizedFile{name, fi.Size()})
		}
	}
	return big, checked
}

// inTestdata reports whether the slash path name lies in a testdata
// directory, which the go tool ignores and tests read.
func inTestdata(name string) bool {
	return strings.HasPrefix(name, "testdata/") || strings.Contains(name, "/testdata/")
}
