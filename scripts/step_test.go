package scripts_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func step(t *testing.T, ctx context.Context, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "./step.sh", args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("step.sh: %v\n%s", err, out.String())
		return "", 0
	}
}

// TestStepReportsDoneAndFailure: a step prints what it does, the command's
// own output, and how long it took (naming the step without its estimate
// in parentheses); a failing step keeps its exit status.
func TestStepReportsDoneAndFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, code := step(t, ctx, nil, "doing a thing (seconds)", "sh", "-c", "echo the-output")
	if code != 0 || !regexp.MustCompile(`^==> doing a thing \(seconds\) \.\.\.\nthe-output\n==> doing a thing: done in [0-9.]+s\n$`).MatchString(out) {
		t.Errorf("exit status %d, output:\n%s", code, out)
	}
	out, code = step(t, ctx, nil, "failing thing", "sh", "-c", "exit 7")
	if code != 7 || !regexp.MustCompile(`==> failing thing: FAILED after [0-9.]+s, exit status 7\n$`).MatchString(out) {
		t.Errorf("exit status %d, output:\n%s", code, out)
	}
	if _, code = step(t, ctx, nil, "only a description"); code != 2 {
		t.Errorf("no command: exit status %d, want 2", code)
	}
}

// TestStepHeartbeat: a step that is still running after the interval says
// so. The command waits until the heartbeat line is in the output (no
// timing assumed; the deadline only guards against a hang).
func TestStepHeartbeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := filepath.Join(t.TempDir(), "out")
	// step.sh's output goes to a file the command can read.
	cmd := exec.CommandContext(ctx, "./step.sh", "waiting for my heartbeat (a second)",
		"sh", "-c", `until grep -q "still at it" "$0"; do sleep 0.1; done`, log)
	cmd.Env = append(os.Environ(), "INFERBID_STEP_HEARTBEAT=1")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		t.Fatalf("step.sh: %v", err)
	}
	data, _ := os.ReadFile(log)
	if !regexp.MustCompile(`\n    \.\.\. still at it after [0-9.]+s: waiting for my heartbeat\n`).Match(data) ||
		!strings.Contains(string(data), "==> waiting for my heartbeat: done in ") {
		t.Fatalf("output:\n%s", data)
	}
}
