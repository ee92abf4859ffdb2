package testsummary_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/internal/testsummary"
)

// fixture writes a small module whose tests pass, fail, skip (one for want
// of the reference models), panic and fail to build, and returns its
// directory.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/fixture\n\ngo 1.22\n",
		"pass/pass_test.go": `package pass
import "testing"
func TestA(t *testing.T) {}
func TestB(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("skipped", func(t *testing.T) { t.Skip("not today") })
}
func TestRef(t *testing.T) { t.Skipf("` + testhelp.ReferenceSkipTag + `: set the variable") }
func TestLog(t *testing.T) { t.Log("log-shown-only-on-failure") }
`,
		"fail/fail_test.go": `package fail
import "testing"
func TestGood(t *testing.T) { t.Log("good-log-hidden") }
func TestBad(t *testing.T) { t.Error("boom-message") }
func TestSub(t *testing.T) {
	t.Run("good", func(t *testing.T) {})
	t.Run("bad", func(t *testing.T) { t.Fatal("sub-boom") })
}
`,
		"panics/panic_test.go": `package panics
import "testing"
func TestPanic(t *testing.T) { panic("panic-message") }
`,
		"broken/broken_test.go": `package broken
import "testing"
func TestBroken(t *testing.T) { undefinedThing() }
`,
		"notests/notests.go": "package notests\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goTestJSON runs go test -json on the fixture's packages and returns the
// event stream; go test's exit status 1 (tests failed) is expected.
func goTestJSON(t *testing.T, dir string, pkgs ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"test", "-json", "-count=1"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if len(out) == 0 {
		t.Fatalf("go test -json printed nothing: %v\n%s", err, stderr.String())
	}
	return out
}

// TestSummaryOfRealGoTest feeds a real go test -json stream through a
// Summary and checks the counts and the plain go test view.
func TestSummaryOfRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a fixture module")
	}
	stream := goTestJSON(t, fixture(t), "./...")
	var out bytes.Buffer
	s := testsummary.New(testsummary.Options{Out: &out})
	now := time.Now()
	for _, line := range bytes.Split(stream, []byte("\n")) {
		s.Line(line, now)
	}
	s.Finish(now, 90*time.Second)
	got := s.Totals()
	want := testsummary.Totals{
		Passed: 6, Failed: 4, Skipped: 2, ReferenceSkipped: 1,
		PackagesOK: 1, PackagesFailed: 3, PackagesNoTests: 1,
	}
	if got != want {
		t.Errorf("totals %+v, want %+v", got, want)
	}
	text := out.String()
	for _, s := range []string{
		"ok  \texample.com/fixture/pass\t",
		"?   \texample.com/fixture/notests\t[no test files]",
		"--- FAIL: TestBad", "boom-message",
		"--- FAIL: TestSub/bad", "sub-boom",
		"panic-message",
		"undefinedThing", // the compiler's error
		"FAIL\texample.com/fixture/broken",
		"!!! 1 check against real TensorFlow/PyTorch reference models SKIPPED: INFERBID_REFERENCE_MODELS is not set",
		"==> FAIL: 6 passed, 4 failed, 2 skipped (tests and subtests) in 5 packages (1 ok, 3 failed, 1 without tests), 1m30s\n",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
	for _, s := range []string{"log-shown-only-on-failure", "good-log-hidden", "=== RUN", "--- PASS", "not today"} {
		if strings.Contains(text, s) {
			t.Errorf("output holds %q, which plain go test does not print for passing tests:\n%s", s, text)
		}
	}
	if !strings.HasSuffix(text, testsummary.TotalsLine(got, 90*time.Second)+"\n") {
		t.Errorf("the totals are not the last line:\n%s", text)
	}
}

// TestSummaryPassingRun: only ok lines and the totals, no reference line
// when nothing was skipped for it.
func TestSummaryPassingRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a fixture module")
	}
	dir := fixture(t)
	if err := os.Remove(filepath.Join(dir, "pass", "pass_test.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pass", "pass_test.go"), []byte("package pass\nimport \"testing\"\nfunc TestA(t *testing.T) {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s := testsummary.New(testsummary.Options{Out: &out})
	now := time.Now()
	for _, line := range bytes.Split(goTestJSON(t, dir, "./pass", "./notests"), []byte("\n")) {
		s.Line(line, now)
	}
	s.Finish(now, 3*time.Second)
	// The two package lines (in the order the packages end), then the
	// totals.
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(out.String(), "ok  \texample.com/fixture/pass\t") ||
		!strings.Contains(out.String(), "?   \texample.com/fixture/notests\t[no test files]\n") ||
		lines[2] != "==> PASS: 1 passed, 0 failed, 0 skipped (tests and subtests) in 2 packages (1 ok, 0 failed, 1 without tests), 3s" {
		t.Fatalf("output:\n%s", out.String())
	}
}

// TestHeartbeat drives the progress line with made-up times: nothing
// within the interval, "building" before any test binary runs, then the
// running packages (module path trimmed), longest first.
func TestHeartbeat(t *testing.T) {
	var out bytes.Buffer
	s := testsummary.New(testsummary.Options{Out: &out, Heartbeat: time.Minute, ModulePath: "example.com/m"})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Started(t0)
	s.Heartbeat(t0.Add(59*time.Second), 59*time.Second)
	if out.Len() != 0 {
		t.Fatalf("heartbeat within the interval printed %q", out.String())
	}
	s.Heartbeat(t0.Add(61*time.Second), 61*time.Second)
	if got := out.String(); got != "    ... 1m1s so far, 0 packages done; building test binaries\n" {
		t.Fatalf("first heartbeat %q", got)
	}
	out.Reset()
	s.Heartbeat(t0.Add(90*time.Second), 90*time.Second) // 29 s after the last line
	if out.Len() != 0 {
		t.Fatalf("heartbeat 29 s after the last line printed %q", out.String())
	}
	ev := func(at time.Duration, action, pkg, test, output string) {
		s.Event(testsummary.Event{Time: t0.Add(at), Action: action, Package: pkg, Test: test, Output: output}, t0.Add(at))
	}
	ev(100*time.Second, "start", "example.com/m/a", "", "")
	ev(110*time.Second, "start", "example.com/m/b/c", "", "")
	ev(111*time.Second, "output", "example.com/m/b/c", "", "ok  \texample.com/m/b/c\t1.0s\n")
	ev(111*time.Second, "pass", "example.com/m/b/c", "", "")
	ev(120*time.Second, "start", "example.com/m/d", "", "")
	out.Reset()
	s.Heartbeat(t0.Add(172*time.Second), 172*time.Second)
	if got := out.String(); got != "    ... 2m52s so far, 1 packages done; running: a (1m12s), d (52s)\n" {
		t.Fatalf("heartbeat while tests run: %q", got)
	}
	never := testsummary.New(testsummary.Options{Out: &out, Heartbeat: -1})
	never.Started(t0)
	out.Reset()
	never.Heartbeat(t0.Add(time.Hour), time.Hour)
	if out.Len() != 0 {
		t.Fatalf("a negative heartbeat printed %q", out.String())
	}
}

// TestTestOutputBounded: a failing test's output is kept up to the bound,
// the rest counted.
func TestTestOutputBounded(t *testing.T) {
	var out bytes.Buffer
	s := testsummary.New(testsummary.Options{Out: &out, MaxTestOutput: 100})
	now := time.Now()
	for i := 0; i < 50; i++ {
		s.Event(testsummary.Event{Action: "output", Package: "p", Test: "TestBig", Output: "0123456789012345678\n"}, now)
	}
	s.Event(testsummary.Event{Action: "fail", Package: "p", Test: "TestBig"}, now)
	if got := out.String(); strings.Count(got, "0123456789012345678\n") != 5 || !strings.Contains(got, "900 more bytes of output not shown") {
		t.Fatalf("bounded output:\n%s", got)
	}
}

// TestNonJSONLinesPassThrough: lines that are not events are printed as
// they are; an incomplete package (the stream ended early) is a failure.
func TestNonJSONLinesPassThrough(t *testing.T) {
	var out bytes.Buffer
	s := testsummary.New(testsummary.Options{Out: &out})
	now := time.Now()
	s.Line([]byte("go: downloading example.com/x v1.0.0"), now)
	s.Line([]byte(`{"Action":"start","Package":"p"}`), now)
	s.Line([]byte(`{"Action":"run","Package":"p","Test":"TestHang"}`), now)
	s.Line([]byte(`{"Action":"output","Package":"p","Test":"TestHang","Output":"still here\n"}`), now)
	s.Finish(now, time.Second)
	got := out.String()
	for _, want := range []string{"go: downloading example.com/x v1.0.0\n", "still here\n", "INCOMPLETE\tp", "==> FAIL: 0 passed, 0 failed, 0 skipped (tests and subtests) in 1 packages (0 ok, 1 failed, 0 without tests)"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
