package sidecar_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/sidecar"
)

// startFailing starts a supervisor on a script that writes stderr and
// exits 2, with the host logging through h; it returns the start error.
func startFailing(t *testing.T, script string, h slog.Handler) error {
	t.Helper()
	p := filepath.Join(t.TempDir(), "child.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := sidecar.StartSupervisor(context.Background(), sidecar.SupervisorOptions{BinaryPath: p, Logger: slog.New(h), StartTimeout: time.Minute})
	if err == nil {
		t.Fatal("a child that exits 2 started")
	}
	return err
}

// records parses the host's JSON log into one map per line.
func records(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("host log line is not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out
}

// TestSupervisorForwardsStructuredLines: a child's JSON log line arrives in
// the host's log as one record with the child's level, message, time and
// attributes (groups too), plus source=sidecar and pid; a plain line is
// forwarded as text; the child is asked for JSON through LogFormatEnv.
func TestSupervisorForwardsStructuredLines(t *testing.T) {
	var log testhelp.SyncBuffer
	err := startFailing(t, `
echo '{"time":"2026-01-02T03:04:05.123456789Z","level":"WARN","msg":"model slow","model_path":"pctr/v1/","took_ms":12.5,"n":3,"ok":true,"req":{"id":"a","dims":[1,6]}}' >&2
echo "{\"level\":\"DEBUG\",\"msg\":\"format\",\"format\":\"$`+sidecar.LogFormatEnv+`\"}" >&2
echo 'panic: plain text, not JSON' >&2
echo '{"level":"ERROR","msg":"sidecar failed","err":"--runtime_config: unknown field \"bogus\"","exit_code":2}' >&2`,
		slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))

	var fromChild []map[string]any
	for _, r := range records(t, log.String()) {
		if r["source"] == "sidecar" {
			fromChild = append(fromChild, r)
		}
	}
	if len(fromChild) != 4 {
		t.Fatalf("%d records from the child, want 4 (one per line):\n%s", len(fromChild), log.String())
	}
	slow := fromChild[0]
	req, _ := slow["req"].(map[string]any)
	if slow["time"] != "2026-01-02T03:04:05.123456789Z" || slow["level"] != "WARN" || slow["msg"] != "model slow" ||
		slow["model_path"] != "pctr/v1/" || slow["took_ms"] != 12.5 || slow["n"] != 3.0 || slow["ok"] != true ||
		req == nil || req["id"] != "a" || len(req["dims"].([]any)) != 2 {
		t.Errorf("the structured line arrived as %v", slow)
	}
	if pid, ok := slow["pid"].(float64); !ok || pid <= 0 {
		t.Errorf("pid %v", slow["pid"])
	}
	if _, nested := slow["line"]; nested {
		t.Errorf("the line is wrapped in another record: %v", slow)
	}
	if f := fromChild[1]; f["level"] != "DEBUG" || f["format"] != "json" {
		t.Errorf("the child was not asked for JSON (%s=%v)", sidecar.LogFormatEnv, f["format"])
	}
	if p := fromChild[2]; p["msg"] != "panic: plain text, not JSON" || p["level"] != "WARN" || p["stream"] != "stderr" || p["pid"] != slow["pid"] {
		t.Errorf("the plain line arrived as %v", p)
	}
	if e := fromChild[3]; e["level"] != "ERROR" || e["err"] != `--runtime_config: unknown field "bogus"` || e["exit_code"] != 2.0 {
		t.Errorf("the fatal line arrived as %v", e)
	}

	// The start error names the cause first, then the tail rendered as
	// text without the child's timestamps.
	msg := err.Error()
	if !strings.Contains(msg, `exit status 2; the sidecar's error: sidecar failed: --runtime_config: unknown field "bogus"; stderr:`) ||
		!strings.Contains(msg, `level=WARN msg="model slow" model_path=pctr/v1/ took_ms=12.5 n=3 ok=true req.id=a req.dims="[1 6]"`) ||
		strings.Contains(msg, "2026-01-02") {
		t.Errorf("start error: %s", msg)
	}
}

// TestSupervisorTextLogHasOneTimestampPerLine: with a logfmt host log,
// every child line is one host line with one time= and no nesting.
func TestSupervisorTextLogHasOneTimestampPerLine(t *testing.T) {
	var log testhelp.SyncBuffer
	startFailing(t, `echo '{"time":"2026-01-02T03:04:05Z","level":"INFO","msg":"serving","socket":"/run/s.sock"}' >&2`,
		slog.NewTextHandler(&log, nil))
	var got string
	for line := range strings.SplitSeq(log.String(), "\n") {
		if strings.Contains(line, "source=sidecar") {
			if got != "" {
				t.Fatalf("two host lines for one child line:\n%s", log.String())
			}
			got = line
		}
	}
	if !strings.HasPrefix(got, `time=2026-01-02T03:04:05.000Z level=INFO msg=serving `) || !strings.Contains(got, " source=sidecar pid=") ||
		!strings.HasSuffix(got, " socket=/run/s.sock") || strings.Count(got, "time=") != 1 {
		t.Errorf("host line %q, want the child's record with one timestamp", got)
	}
}

// TestSupervisorRealSidecarBadConfig: the TensorFlow sidecar binary with a
// bad runtime config fails to start with the cause in the error, and its
// ERROR record in the host's log.
func TestSupervisorRealSidecarBadConfig(t *testing.T) {
	bin := buildBinary(t, "inference-sidecar-tensorflow", false)
	var log testhelp.SyncBuffer
	_, err := sidecar.StartSupervisor(context.Background(), sidecar.SupervisorOptions{
		BinaryPath:    bin,
		RuntimeConfig: `{"num_threads":2}`,
		SocketPath:    filepath.Join(shortDir(t), "s.sock"),
		Logger:        slog.New(slog.NewJSONHandler(&log, nil)),
		StartTimeout:  time.Minute,
	})
	if err == nil || !strings.Contains(err.Error(), "exit status 2; the sidecar's error: sidecar failed: --runtime_config: ") || !strings.Contains(err.Error(), "num_threads") {
		t.Errorf("start error: %v", err)
	}
	found := false
	for _, r := range records(t, log.String()) {
		if r["source"] == "sidecar" && r["level"] == "ERROR" && r["msg"] == "sidecar failed" && strings.Contains(r["err"].(string), "num_threads") {
			found = true
		}
	}
	if !found {
		t.Errorf("no ERROR record from the sidecar in the host's log:\n%s", log.String())
	}
}
