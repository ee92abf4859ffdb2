package testhelp

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// EnvRequireNative names the variable that turns RequireNative's skip into a
// failure when it is "1".
const EnvRequireNative = "INFERBID_REQUIRE_NATIVE"

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// ModuleRoot is the directory of the go.mod above the working directory
// (go test runs each package in its own directory).
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = fmt.Errorf("no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	if rootErr != nil {
		tb.Fatalf("testhelp: module root: %v", rootErr)
	}
	return root
}

// ReadFile reads a file by its slash path relative to the module root
// (e.g. "runtimes/onnx/testdata/mlp.onnx").
func ReadFile(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(ModuleRoot(tb), filepath.FromSlash(rel)))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// RequireNative is called with the error of looking for a native library
// (what names the library and how to install it): with no error it does
// nothing; otherwise it skips the test, or fails it when
// INFERBID_REQUIRE_NATIVE=1 (make test).
func RequireNative(tb testing.TB, what string, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if os.Getenv(EnvRequireNative) == "1" {
		tb.Fatalf("%s=1 and %s is missing: %v", EnvRequireNative, what, err)
	}
	tb.Skipf("%s is missing: %v", what, err)
}

// SocketPath returns the path of a socket named name in a fresh private
// directory, removed when the test ends. t.TempDir's paths grow with the
// test's name and can pass sun_path's 108 bytes; a short one under the
// system temp dir is used then.
func SocketPath(tb testing.TB, name string) string {
	tb.Helper()
	dir := tb.TempDir()
	if len(filepath.Join(dir, name)) > 100 {
		return filepath.Join(ShortDir(tb), name)
	}
	// Private, as a sidecar's own socket directory is.
	if err := os.Chmod(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// ShortDir returns a fresh private directory with a short path (under the
// system temp dir), removed when the test ends: for socket paths.
func ShortDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "ib")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type build struct {
	once sync.Once
	path string
	err  error
}

var (
	builds   sync.Map // build config -> *build
	nBuilds  atomic.Int64
	binMu    sync.Mutex
	binDir   string
	binDirOK bool
)

// BuildBinary go-builds the module's package pkg (a slash path relative to
// the module root, e.g. "cmd/inferctl") with cgo on or off and any extra
// go build flags ("-tags", "pytorch"; "-race"), once per test process and
// configuration, and returns the binary's path. The binary keeps its
// package's name (usage text shows it). The binaries live in a temporary
// directory that RemoveBinaries deletes: a package that builds binaries
// calls it from TestMain after m.Run (or uses Main).
func BuildBinary(tb testing.TB, pkg string, cgo bool, flags ...string) string {
	tb.Helper()
	key := fmt.Sprintf("%s cgo=%v %q", pkg, cgo, flags)
	v, _ := builds.LoadOrStore(key, &build{})
	b := v.(*build)
	b.once.Do(func() {
		dir, err := binaryDir()
		if err != nil {
			b.err = err
			return
		}
		// One directory per configuration, so that two builds of one
		// package do not overwrite each other.
		sub := filepath.Join(dir, fmt.Sprint(nBuilds.Add(1)))
		if err := os.Mkdir(sub, 0o700); err != nil {
			b.err = err
			return
		}
		out := filepath.Join(sub, filepath.Base(pkg))
		args := append(append([]string{"build"}, flags...), "-o", out, "./"+pkg)
		cmd := exec.Command("go", args...)
		cmd.Dir = ModuleRoot(tb)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+map[bool]string{true: "1", false: "0"}[cgo])
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
			return
		}
		b.path = out
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

func binaryDir() (string, error) {
	binMu.Lock()
	defer binMu.Unlock()
	if !binDirOK {
		dir, err := os.MkdirTemp("", "inferbid-test-bin-")
		if err != nil {
			return "", err
		}
		binDir, binDirOK = dir, true
	}
	return binDir, nil
}

// RemoveBinaries deletes what BuildBinary built. Later BuildBinary calls
// fail (their cached paths are gone), so call it only after m.Run.
func RemoveBinaries() {
	binMu.Lock()
	defer binMu.Unlock()
	if binDirOK {
		os.RemoveAll(binDir)
	}
}

// Main runs the tests, removes the built binaries and exits: a TestMain
// for packages that need nothing else.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBinaries()
	os.Exit(code)
}

// SyncBuffer is a bytes.Buffer safe for concurrent Write and String: a log
// destination that a test reads while the code under test still writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ProcStatus reads a memory field of /proc/<pid>/status (VmRSS, VmHWM) in
// bytes; the test skips where there is no /proc.
func ProcStatus(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("/proc/%d/status %s: %v", pid, field, err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}
