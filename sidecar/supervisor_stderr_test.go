package sidecar_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/inferbid/inferbid/sidecar"
)

// TestSupervisorStartErrorCarriesStderr: a sidecar that fails at start
// (here a script) gives a start error with the last lines of its stderr,
// bounded, so that "exit status 2" comes with its cause.
func TestSupervisorStartErrorCarriesStderr(t *testing.T) {
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	write := func(name, script string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}

	start := func(script string) string {
		t.Helper()
		_, err := sidecar.StartSupervisor(context.Background(), sidecar.SupervisorOptions{BinaryPath: write("exits.sh", script), Logger: quiet, StartTimeout: time.Minute})
		if err == nil {
			t.Fatal("a sidecar that exits 2 started")
		}
		msg := err.Error()
		if !strings.Contains(msg, "exit status 2") || !strings.Contains(msg, `fatal: --runtime_config: unknown field "bogus"`) {
			t.Errorf("start error lacks the exit status or the cause: %s", msg)
		}
		return msg
	}
	const cause = `echo "fatal: --runtime_config: unknown field \"bogus\"" >&2; exit 2`

	// 30 numbered lines, then the cause: the last 20 lines are kept.
	msg := start(`i=1; while [ $i -le 30 ]; do echo "noise line $i" >&2; i=$((i+1)); done` + "\n" + cause)
	if strings.Contains(msg, "noise line 11\n") || !strings.Contains(msg, "noise line 12\nnoise line 13") {
		t.Errorf("start error does not hold the last 20 lines: %s", msg)
	}
	// A line of 10 KB ending in invalid UTF-8, then the cause: at most
	// 4 KiB are kept, as valid UTF-8.
	msg = start("head -c 10000 /dev/zero | tr '\\0' x >&2; printf '\\377\\n' >&2\n" + cause)
	if len(msg) > 5<<10 || !utf8.ValidString(msg) {
		t.Errorf("start error is %d bytes (valid UTF-8: %v), want at most ~4 KiB of stderr and valid UTF-8", len(msg), utf8.ValidString(msg))
	}

	// One that never becomes healthy: the start timeout's error carries
	// its stderr too.
	hangs := write("hangs.sh", "echo 'waiting for a license server' >&2\nexec sleep 600\n")
	_, err := sidecar.StartSupervisor(context.Background(), sidecar.SupervisorOptions{BinaryPath: hangs, Logger: quiet, StartTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "waiting for a license server") {
		t.Errorf("start timeout error: %v, want the sidecar's stderr", err)
	}

	// One that cannot be executed at all says so.
	bad := filepath.Join(dir, "not-a-binary")
	if err := os.WriteFile(bad, []byte("\x7fELF garbage"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = sidecar.StartSupervisor(context.Background(), sidecar.SupervisorOptions{BinaryPath: bad, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("start %q", bad)) {
		t.Errorf("unexecutable binary: %v", err)
	}
}
