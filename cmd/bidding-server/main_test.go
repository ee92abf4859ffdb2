package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

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
		{[]string{"--write_timeout", "1s"}, "", 2, "--write_timeout"},
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
