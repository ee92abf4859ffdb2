package sidecarmain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/internal/testhelp"
	_ "github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/sidecar"
)

func TestRunBadCommandLines(t *testing.T) {
	t.Setenv("INFERENCE_SIDECAR_RUNTIME_CONFIG", "")
	t.Setenv(sidecar.RlimitEnv, "")
	socket := testhelp.SocketPath(t, "s.sock")
	for _, c := range []struct {
		args     []string
		code     int
		fragment string // in the error, or in stderr for a reported one
	}{
		{[]string{"-h"}, 0, "usage: inference-sidecar-tensorflow --socket PATH"},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{nil, 2, "--socket is required"},
		{[]string{"--socket", socket, "extra"}, 2, "unexpected arguments: extra"},
		{[]string{"--socket", socket, "--log_level", "loud"}, 2, "--log_level"},
		{[]string{"--socket", socket, "--runtime_config", `{"num_threads":2}`}, 2, "num_threads"},
		{[]string{"--socket", socket, "--runtime_config", `{"module_name":"pytorch"}`}, 2, "pytorch"},
	} {
		var stderr bytes.Buffer
		err := Run(context.Background(), "tensorflow", c.args, strings.NewReader(""), &stderr, &stderr)
		where := stderr.String()
		if err != nil && !cli.IsReported(err) && !errors.Is(err, flag.ErrHelp) {
			where = err.Error()
		}
		if code := cli.ExitCode(err); code != c.code || !strings.Contains(where, c.fragment) {
			t.Errorf("Run(%q): %v, exit %d, stderr %q; want exit %d mentioning %q", c.args, err, code, stderr.String(), c.code, c.fragment)
		}
	}
}

func TestRunBadRlimitEnv(t *testing.T) {
	t.Setenv(sidecar.RlimitEnv, "lots")
	err := Run(context.Background(), "tensorflow", []string{"--socket", testhelp.SocketPath(t, "s.sock")}, nil, nil, &bytes.Buffer{})
	if cli.ExitCode(err) != 2 || err == nil || !strings.Contains(err.Error(), sidecar.RlimitEnv) {
		t.Errorf("bad %s: %v (exit %d)", sidecar.RlimitEnv, err, cli.ExitCode(err))
	}
}

// TestRunStopsWhenContextEnds: the end of the context (SIGTERM or SIGINT
// under cli.Main) is a graceful stop, and Run returns nil (exit 0).
func TestRunStopsWhenContextEnds(t *testing.T) {
	t.Setenv("INFERENCE_SIDECAR_RUNTIME_CONFIG", "")
	t.Setenv(sidecar.RlimitEnv, "")
	socket := testhelp.SocketPath(t, "s.sock")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var stderr testhelp.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, "tensorflow", []string{"--socket", socket, "--stop_grace", "5s"}, nil, nil, &stderr)
	}()

	c, err := sidecar.NewClient(socket, sidecar.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wait, waitCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer waitCancel()
	if err := c.WaitHealthy(wait); err != nil {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v before serving; stderr:\n%s", err, stderr.String())
		default:
		}
		t.Fatalf("sidecar not healthy: %v\nstderr:\n%s", err, stderr.String())
	}

	cancel(errors.New("test says stop"))
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after the context ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return after the context ended; stderr:\n%s", stderr.String())
	}
	for _, want := range []string{"stopping", "test says stop", "stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestRunContextEndedDuringStartUp: a signal before the server serves
// (while the runtime loads) is a graceful stop too, whichever of Serve and
// GracefulStop runs first.
func TestRunContextEndedDuringStartUp(t *testing.T) {
	t.Setenv("INFERENCE_SIDECAR_RUNTIME_CONFIG", "")
	t.Setenv(sidecar.RlimitEnv, "")
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stderr testhelp.SyncBuffer
		if err := Run(ctx, "tensorflow", []string{"--socket", testhelp.SocketPath(t, "s.sock")}, nil, nil, &stderr); err != nil {
			t.Fatalf("Run with an ended context: %v\nstderr:\n%s", err, stderr.String())
		}
	}
}

// TestRunLogsFatalErrorAtError: a bad runtime config exits 2 with the cause
// logged at ERROR, as JSON under a supervisor ($INFERENCE_SIDECAR_LOG_FORMAT
// =json) and as logfmt by hand, and nothing else printed after it.
func TestRunLogsFatalErrorAtError(t *testing.T) {
	t.Setenv("INFERENCE_SIDECAR_RUNTIME_CONFIG", "")
	t.Setenv(sidecar.RlimitEnv, "")
	socket := testhelp.SocketPath(t, "s.sock")
	args := []string{"--socket", socket, "--runtime_config", `{"num_threads":2}`}

	t.Setenv(sidecar.LogFormatEnv, "json")
	var stderr bytes.Buffer
	err := Run(context.Background(), "tensorflow", args, nil, io.Discard, &stderr)
	if cli.ExitCode(err) != 2 || !cli.IsReported(err) {
		t.Errorf("bad runtime config: %v (exit %d, reported %v), want exit 2, reported", err, cli.ExitCode(err), cli.IsReported(err))
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	var rec map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil {
		t.Fatalf("stderr is not one JSON line: %q", stderr.String())
	}
	if rec["level"] != "ERROR" || rec["msg"] != "sidecar failed" || !strings.Contains(fmt.Sprint(rec["err"]), `--runtime_config: `) ||
		!strings.Contains(fmt.Sprint(rec["err"]), "num_threads") || rec["exit_code"] != 2.0 {
		t.Errorf("fatal record %v, want level ERROR, msg \"sidecar failed\", the cause in err, exit_code 2", rec)
	}

	t.Setenv(sidecar.LogFormatEnv, "")
	stderr.Reset()
	err = Run(context.Background(), "tensorflow", args, nil, io.Discard, &stderr)
	if cli.ExitCode(err) != 2 || !strings.Contains(stderr.String(), `level=ERROR msg="sidecar failed" err="--runtime_config: `) {
		t.Errorf("by hand: %v, stderr %q", err, stderr.String())
	}
	stderr.Reset()
	err = Run(context.Background(), "tensorflow", append(args, "--log_format", "xml"), nil, io.Discard, &stderr)
	if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), `--log_format "xml": want text or json`) {
		t.Errorf("--log_format xml: %v", err)
	}
}

func TestRunVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	// No --socket: --version needs nothing else.
	err := Run(context.Background(), "onnx", []string{"--version"}, nil, &stdout, &stderr)
	if err != nil || !strings.HasPrefix(stdout.String(), "inference-sidecar-onnx ") || stderr.Len() != 0 {
		t.Errorf("--version: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}

// TestFlagDefaultsStated: the help of every flag says its default, and the
// durations take milliseconds too.
func TestFlagDefaultsStated(t *testing.T) {
	var o options
	fs := newFlagSet("inference-sidecar-x", &o, io.Discard)
	if missing := cli.UndocumentedDefaults(fs); len(missing) > 0 {
		t.Errorf("the help of %q does not state the default", missing)
	}
	if err := fs.Parse([]string{"--stop_grace", "2500", "--fast_lane_spin_wait", "20µs"}); err != nil || o.stopGrace != 2500*time.Millisecond || o.spinWait != 20*time.Microsecond {
		t.Errorf("durations: %v, stop_grace %v, spin wait %v", err, o.stopGrace, o.spinWait)
	}
}

// TestJSONLogDurations: in JSON a duration is written as its text, as in
// logfmt, for the supervisor to forward as it is.
func TestJSONLogDurations(t *testing.T) {
	var b bytes.Buffer
	log, err := newLogger("json", slog.LevelInfo, &b)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("model registered", "load", 1500*time.Microsecond, "group", slog.GroupValue(slog.Duration("inner", time.Second)))
	if !strings.Contains(b.String(), `"load":"1.5ms","group":{"inner":"1s"}`) {
		t.Errorf("JSON log line %s", b.String())
	}
}
