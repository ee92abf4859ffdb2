package testhelp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestModuleRootHoldsThisModule(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(ModuleRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "module github.com/inferbid/inferbid\n") {
		t.Fatalf("go.mod at the module root is not inferbid's:\n%.200s", mod)
	}
	if got := ReadFile(t, "internal/testhelp/doc.go"); !strings.Contains(string(got), "package testhelp") {
		t.Fatalf("ReadFile(internal/testhelp/doc.go) = %.80q", got)
	}
}

func TestSocketPathFitsSunPath(t *testing.T) {
	t.Run(strings.Repeat("a_very_long_subtest_name_", 6), func(t *testing.T) {
		p := SocketPath(t, "s.sock")
		if len(p) > 100 {
			t.Fatalf("socket path of %d bytes: %s", len(p), p)
		}
		st, err := os.Stat(filepath.Dir(p))
		if err != nil || !st.IsDir() || st.Mode().Perm()&0o077 != 0 {
			t.Fatalf("socket directory %s: %v %v, want a private directory", filepath.Dir(p), st, err)
		}
	})
}

// TestBuildBinaryOnce builds inferctl without cgo, runs it, and checks a
// second call answers the same binary without building again.
func TestBuildBinaryOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/inferctl")
	}
	bin := BuildBinary(t, "cmd/inferctl", false)
	if filepath.Base(bin) != "inferctl" {
		t.Fatalf("binary %s does not keep its package's name", bin)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	if !strings.Contains(string(out), "inferctl") {
		t.Fatalf("inferctl -h printed %q", out)
	}
	again := BuildBinary(t, "cmd/inferctl", false)
	st2, err := os.Stat(again)
	if again != bin || err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("second BuildBinary: %s (%v), want the first build %s untouched", again, err, bin)
	}
	// Other flags (here only the link step differs) are another build, beside the first.
	stripped := BuildBinary(t, "cmd/inferctl", false, "-ldflags=-s")
	if stripped == bin || filepath.Base(stripped) != "inferctl" {
		t.Fatalf("BuildBinary with -ldflags=-s = %s, want a second inferctl beside %s", stripped, bin)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the first build is gone after the second: %v", err)
	}
}

func TestRequireNativeFailsWhenRequired(t *testing.T) {
	t.Setenv(EnvRequireNative, "1")
	ft := &fakeTB{TB: t}
	func() {
		defer func() { recover() }() // fakeTB.Fatalf panics to stop, as FailNow would
		RequireNative(ft, "libx", os.ErrNotExist)
	}()
	if !ft.failed || ft.skipped {
		t.Fatalf("with %s=1: failed %v, skipped %v; want a failure", EnvRequireNative, ft.failed, ft.skipped)
	}
	t.Setenv(EnvRequireNative, "")
	ft = &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		RequireNative(ft, "libx", os.ErrNotExist)
	}()
	if ft.failed || !ft.skipped {
		t.Fatalf("without %s: failed %v, skipped %v; want a skip", EnvRequireNative, ft.failed, ft.skipped)
	}
	RequireNative(t, "libx", nil) // present: nothing happens
}

type fakeTB struct {
	testing.TB
	failed, skipped bool
	message         string // of the last Fatalf or Skipf
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.message = fmt.Sprintf(format, args...)
	panic("fatal")
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = true
	f.message = fmt.Sprintf(format, args...)
	panic("skip")
}

// refOutcome calls LookupReferenceModels and ReferenceModels through a fake
// TB with the variable set to value ("" = unset) and reports what happened.
// The skip-or-fail switch INFERBID_REQUIRE_REFERENCE is off (CI runs these
// tests with it on).
func refOutcome(t *testing.T, value string) (dir string, ok, failed, skipped bool) {
	t.Helper()
	t.Setenv(EnvRequireReference, "")
	t.Setenv(EnvReferenceModels, value)
	ft := &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		dir, ok = LookupReferenceModels(ft)
	}()
	if ft.skipped {
		t.Fatalf("LookupReferenceModels with %s=%q skipped; it never skips", EnvReferenceModels, value)
	}
	lookupFailed := ft.failed
	ft = &fakeTB{TB: t}
	var got string
	func() {
		defer func() { recover() }()
		got = ReferenceModels(ft)
	}()
	if ft.failed != lookupFailed {
		t.Fatalf("with %s=%q: ReferenceModels failed %v, LookupReferenceModels failed %v", EnvReferenceModels, value, ft.failed, lookupFailed)
	}
	if !ft.failed && !ft.skipped && got != dir {
		t.Fatalf("with %s=%q: ReferenceModels = %q, LookupReferenceModels = %q", EnvReferenceModels, value, got, dir)
	}
	return dir, ok, ft.failed, ft.skipped
}

func TestReferenceModelsUnsetSkips(t *testing.T) {
	dir, ok, failed, skipped := refOutcome(t, "")
	if dir != "" || ok || failed || !skipped {
		t.Fatalf("unset: dir %q ok %v failed %v skipped %v; want a skip (and ok=false from the lookup)", dir, ok, failed, skipped)
	}
	// The skip message starts with the tag make test counts, and names
	// the variable to set.
	ft := &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		ReferenceModels(ft)
	}()
	if !strings.HasPrefix(ft.message, ReferenceSkipTag) || !strings.Contains(ft.message, EnvReferenceModels) {
		t.Fatalf("skip message %q: want it to start with %q and name %s", ft.message, ReferenceSkipTag, EnvReferenceModels)
	}
}

// TestReferenceModelsRequired: with INFERBID_REQUIRE_REFERENCE=1 (CI), an
// unset variable fails both helpers instead of skipping or answering !ok;
// a set one works as without the switch.
func TestReferenceModelsRequired(t *testing.T) {
	t.Setenv(EnvRequireReference, "1")
	t.Setenv(EnvReferenceModels, "")
	for name, call := range map[string]func(testing.TB){
		"ReferenceModels":       func(tb testing.TB) { ReferenceModels(tb) },
		"LookupReferenceModels": func(tb testing.TB) { LookupReferenceModels(tb) },
	} {
		ft := &fakeTB{TB: t}
		func() {
			defer func() { recover() }()
			call(ft)
		}()
		if !ft.failed || ft.skipped || !strings.Contains(ft.message, EnvRequireReference+"=1") {
			t.Errorf("%s with %s=1 and %s unset: failed %v skipped %v (%q); want a failure naming the switch",
				name, EnvRequireReference, EnvReferenceModels, ft.failed, ft.skipped, ft.message)
		}
	}
	want := t.TempDir()
	t.Setenv(EnvReferenceModels, want)
	if dir, ok := LookupReferenceModels(t); dir != want || !ok {
		t.Fatalf("required and set to %s: LookupReferenceModels = %q, %v", want, dir, ok)
	}
	if dir := ReferenceModels(t); dir != want {
		t.Fatalf("required and set to %s: ReferenceModels = %q", want, dir)
	}
}

func TestReferenceModelsSetToDirectory(t *testing.T) {
	want := t.TempDir()
	dir, ok, failed, skipped := refOutcome(t, want)
	if dir != want || !ok || failed || skipped {
		t.Fatalf("set to %s: dir %q ok %v failed %v skipped %v", want, dir, ok, failed, skipped)
	}
	// A relative value is taken from the module root.
	dir, ok, failed, skipped = refOutcome(t, "internal/testhelp")
	if want := filepath.Join(ModuleRoot(t), "internal", "testhelp"); dir != want || !ok || failed || skipped {
		t.Fatalf("relative: dir %q ok %v failed %v skipped %v; want %s", dir, ok, failed, skipped, want)
	}
}

// A set variable that names no readable directory is a misconfigured run:
// it fails instead of skipping.
func TestReferenceModelsMisconfiguredFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"missing":       filepath.Join(t.TempDir(), "absent"),
		"not-directory": file,
	}
	if os.Geteuid() != 0 { // root reads any directory
		locked := filepath.Join(t.TempDir(), "locked")
		if err := os.Mkdir(locked, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(locked, 0o700) })
		cases["unreadable"] = locked
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			_, ok, failed, skipped := refOutcome(t, value)
			if ok || !failed || skipped {
				t.Fatalf("%s=%q: ok %v failed %v skipped %v; want a failure", EnvReferenceModels, value, ok, failed, skipped)
			}
		})
	}
}
