package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/cli"
)

// TestRunExitCodes: what run returns before it serves, as cli.Main exits
// with it: 2 for a bad command line or environment, 1 for other failures.
func TestRunExitCodes(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		args     []string
		env      string // KEY=VALUE
		code     int
		fragment string
	}{
		{[]string{"-h"}, "", 0, ""},
		{[]string{"-bogus"}, "", 2, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, "", 2, "unexpected arguments"},
		{[]string{"--inference_model_fetch_period_ms", "-1"}, "", 2, "inference_model_fetch_period_ms"},
		{[]string{"--inference_model_bucket_name", "file:///x"}, "", 2, "no --inference_sidecar_binary_path"},
		{nil, "INFERENCE_SIDECAR_RLIMIT_MB=lots", 2, "environment variable INFERENCE_SIDECAR_RLIMIT_MB"},
		{[]string{"--log_level", "loud"}, "", 1, "--log_level"},
		{[]string{"--listen", "127.0.0.1:99999"}, "", 1, "--listen"},
		{[]string{"--listen", "127.0.0.1:0", "--kserve_listen", "127.0.0.1:99999"}, "", 1, "--kserve_listen"},
		{[]string{"--listen", "127.0.0.1:0", "--kserve_grpc_listen", "127.0.0.1:99999"}, "", 1, "--kserve_grpc_listen"},
		{[]string{"--write_timeout", "1s"}, "", 2, "--write_timeout"},
		{[]string{"--inference_sidecar_binary_path", "/bin/true", "--inference_model_config_path", "c.json", "--inference_model_bucket_name", "file://tmp/models"}, "", 2, "file:///tmp/models (absolute)"},
		{[]string{"--inference_sidecar_binary_path", "/bin/true", "--inference_model_config_path", "c.json"}, "INFERENCE_MODEL_BUCKET_NAME=/srv/models", 2, "no scheme: a local directory is file:///srv/models"},
		{[]string{"--readiness_policy", "most"}, "", 2, "any, all or none"},
	} {
		clear(env)
		if k, v, ok := strings.Cut(c.env, "="); ok {
			env[k] = v
		}
		var stderr bytes.Buffer
		err := run(context.Background(), c.args, nil, &stderr, &stderr, getenv)
		var ue *cli.UsageError
		if code := cli.ExitCode(err); code != c.code || (err != nil && !strings.Contains(err.Error(), c.fragment)) {
			t.Errorf("run(%q, %s): %v (exit %d); want exit %d mentioning %q", c.args, c.env, err, code, c.code, c.fragment)
		} else if c.code == 2 && (!errors.As(err, &ue) || cli.IsReported(err)) {
			t.Errorf("run(%q, %s): %#v, want an unreported *cli.UsageError (cli.Main prints it)", c.args, c.env, err)
		}
	}
}

// TestDurationSettings: every duration flag and INFERENCE_* variable takes
// a Go duration or plain milliseconds.
func TestDurationSettings(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string // KEY=VALUE
		get  func(config) time.Duration
		want time.Duration
	}{
		{nil, "", func(c config) time.Duration { return c.ModelFetchPeriod }, time.Minute},
		{nil, "INFERENCE_MODEL_FETCH_PERIOD_MS=5s", func(c config) time.Duration { return c.ModelFetchPeriod }, 5 * time.Second},
		{nil, "INFERENCE_MODEL_FETCH_PERIOD_MS=5000", func(c config) time.Duration { return c.ModelFetchPeriod }, 5 * time.Second},
		{[]string{"--inference_model_fetch_period_ms", "250ms"}, "INFERENCE_MODEL_FETCH_PERIOD_MS=5s", func(c config) time.Duration { return c.ModelFetchPeriod }, 250 * time.Millisecond},
		{[]string{"--inference_model_fetch_period_ms=1500"}, "", func(c config) time.Duration { return c.ModelFetchPeriod }, 1500 * time.Millisecond},
		{nil, "INFERENCE_SIDECAR_SPIN_WAIT=20µs", func(c config) time.Duration { return c.SidecarSpinWait }, 20 * time.Microsecond},
		{nil, "INFERENCE_SIDECAR_SPIN_WAIT=-1", func(c config) time.Duration { return c.SidecarSpinWait }, -time.Millisecond},
		{[]string{"--request_timeout", "2500"}, "", func(c config) time.Duration { return c.RequestTimeout }, 2500 * time.Millisecond},
		{[]string{"--js_call_timeout", "1s"}, "", func(c config) time.Duration { return c.JSCallTimeout }, time.Second},
		{[]string{"--drain_period", "0"}, "", func(c config) time.Duration { return c.DrainPeriod }, 0},
		{[]string{"--idle_timeout", "90000"}, "", func(c config) time.Duration { return c.IdleTimeout }, 90 * time.Second},
	} {
		env := map[string]string{}
		if k, v, ok := strings.Cut(c.env, "="); ok {
			env[k] = v
		}
		cfg, err := parseConfig(c.args, func(k string) string { return env[k] }, io.Discard)
		if err != nil || c.get(cfg) != c.want {
			t.Errorf("parseConfig(%q, %s): %v, %v; want %v", c.args, c.env, c.get(cfg), err, c.want)
		}
	}
	for _, c := range []struct {
		args     []string
		env      string
		fragment string
	}{
		{nil, "INFERENCE_MODEL_FETCH_PERIOD_MS=soon", `environment variable INFERENCE_MODEL_FETCH_PERIOD_MS="soon": "soon" is neither a duration`},
		{[]string{"--inference_model_fetch_period_ms", "5 s"}, "", `invalid value "5 s" for flag -inference_model_fetch_period_ms`},
		{[]string{"--inference_model_fetch_period_ms", "-5s"}, "", "--inference_model_fetch_period_ms must be >= 0, got -5s"},
	} {
		env := map[string]string{}
		if k, v, ok := strings.Cut(c.env, "="); ok {
			env[k] = v
		}
		var stderr bytes.Buffer
		_, err := parseConfig(c.args, func(k string) string { return env[k] }, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.fragment) {
			t.Errorf("parseConfig(%q, %s): %v; want an error mentioning %q", c.args, c.env, err, c.fragment)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	// --version wins over a configuration that would not start.
	err := run(context.Background(), []string{"--inference_model_bucket_name", "file:///x", "--version"}, nil, &stdout, &stderr,
		func(string) string { return "" })
	if err != nil || !strings.HasPrefix(stdout.String(), "bidding-server ") || !strings.Contains(stdout.String(), "commit ") || stderr.Len() != 0 {
		t.Errorf("--version: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}

// TestFlagDefaultsStated: the help of every flag says its default.
func TestFlagDefaultsStated(t *testing.T) {
	var c config
	var raw flagText
	fs := newFlagSet(&c, &raw, io.Discard)
	if missing := cli.UndocumentedDefaults(fs); len(missing) > 0 {
		t.Errorf("the help of %q does not state the default", missing)
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "-inference_model_fetch_period_ms duration\n    \tbucket poll period; 0 = the default (a Go duration like 5s, or milliseconds) (default 1m0s)") {
		t.Errorf("the fetch period's help does not state its 60 s default:\n%s", help.String())
	}
}
