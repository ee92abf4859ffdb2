package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule writes a module with one passing and one failing package.
func writeModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":           "module example.com/m\n\ngo 1.22\n",
		"ok/ok_test.go":    "package ok\nimport \"testing\"\nfunc TestOK(t *testing.T) {}\n",
		"bad/bad_test.go":  "package bad\nimport \"testing\"\nfunc TestBad(t *testing.T) { t.Error(\"bad-message\") }\n",
		"skips/sk_test.go": "package skips\nimport \"testing\"\nfunc TestRef(t *testing.T) { t.Skip(\"reference models not configured: x\") }\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	t.Setenv("GOFLAGS", "")
	t.Setenv("GOWORK", "off")
	return dir
}

// TestRunKeepsExitStatus: every command runs, the totals cover them all,
// and the exit status is the first non-zero one.
func TestRunKeepsExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	writeModule(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"-heartbeat", "-1s", "--",
		"sh", "-c", "echo to-stderr >&2; exit 3", "--",
		"go", "test", "-json", "-count=1", "./ok", "./bad", "./skips"}, &stdout, &stderr)
	if code != 3 {
		t.Errorf("exit status %d, want the first command's 3", code)
	}
	out := stdout.String()
	for _, want := range []string{
		"==> sh -c echo to-stderr >&2; exit 3\n",
		"==> go test -json -count=1 ./ok ./bad ./skips\n",
		"ok  \texample.com/m/ok\t", "bad-message", "FAIL\texample.com/m/bad",
		"!!! 1 check against real TensorFlow/PyTorch reference models SKIPPED",
		"==> FAIL: 1 passed, 1 failed, 1 skipped (tests and subtests) in 3 packages (2 ok, 1 failed, 0 without tests), ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "to-stderr") {
		t.Errorf("a command's stderr did not pass through: %q", stderr.String())
	}

	stdout.Reset()
	if code := run([]string{"--", "go", "test", "-json", "-count=1", "./ok"}, &stdout, &stderr); code != 0 {
		t.Errorf("passing run: exit status %d, want 0:\n%s", code, stdout.String())
	}
	if strings.Contains(stdout.String(), "!!!") || !strings.Contains(stdout.String(), "==> PASS: 1 passed, 0 failed, 0 skipped") {
		t.Errorf("passing run printed:\n%s", stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"--", "go", "test", "-json", "-count=1", "./bad"}, &stdout, &stderr); code != 1 {
		t.Errorf("failing go test: exit status %d, want 1", code)
	}
}

func TestRunBadCommandLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "no command") {
		t.Errorf("no command: exit status %d, stderr %q; want 2 and a message", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"--", filepath.Join(t.TempDir(), "absent")}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "absent") {
		t.Errorf("missing program: exit status %d, stderr %q; want 1 naming it", code, stderr.String())
	}
}

func TestSplitCommands(t *testing.T) {
	got := splitCommands([]string{"--", "a", "b", "--", "--", "c"})
	if len(got) != 2 || strings.Join(got[0], " ") != "a b" || strings.Join(got[1], " ") != "c" {
		t.Fatalf("splitCommands = %q", got)
	}
}

// TestReadLinesLong: a line longer than the read buffer arrives whole.
func TestReadLinesLong(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	lines := make(chan []byte)
	go readLines(strings.NewReader("a\n"+long+"\nlast"), lines)
	var got []string
	for l := range lines {
		got = append(got, string(l))
	}
	if len(got) != 3 || got[0] != "a\n" || got[1] != long+"\n" || got[2] != "last" {
		t.Fatalf("lines: %d, lengths %d", len(got), len(strings.Join(got, "")))
	}
}
