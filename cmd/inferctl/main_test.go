package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
)

// inferctl runs run in process and returns stdout, stderr and the exit code
// cli.Main would exit with. run reports every error itself, so what it
// writes is all inferctl's output.
func inferctl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr strings.Builder
	err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	if err != nil && !cli.IsReported(err) && cli.ExitCode(err) != 0 {
		t.Errorf("inferctl %q: error %v not reported", args, err)
	}
	return stdout.String(), stderr.String(), cli.ExitCode(err)
}

func TestCommandLineErrors(t *testing.T) {
	t.Setenv("INFERENCE_SIDECAR_SOCKET", "")
	sock := testhelp.SocketPath(t, "none.sock")
	for _, c := range []struct {
		args   []string
		code   int
		stderr string // prefix of stderr
		usage  bool   // stderr ends with the usage text
	}{
		{nil, 2, fullUsage(), false},
		{[]string{"-h"}, 0, fullUsage(), false},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus\n" + fullUsage(), true},
		{[]string{"frobnicate"}, 2, "inferctl: unknown command \"frobnicate\"\n", true},
		{[]string{"models"}, 2, "inferctl: models needs --socket PATH (a sidecar) or --server URL (a bidding-server)\n", true},
		{[]string{"--socket", sock, "models", "a/", "b/"}, 2, "inferctl: models takes at most one MODEL_PATH, got a/ b/\n", true},
		{[]string{"--socket", sock, "register", "x"}, 2, "inferctl: register needs --model-path P\n", true},
		{[]string{"--socket", sock, "register", "x", "--model-path"}, 2, "flag needs an argument: -model-path\nusage: inferctl register", false},
		{[]string{"--socket", sock, "register", "-h"}, 0, "usage: inferctl register --model-path P", false},
		{[]string{"--socket", sock, "register", "-bogus"}, 2, "flag provided but not defined: -bogus\nusage: inferctl register", false},
		{[]string{"register", "x", "--model-path", "m/"}, 2, "inferctl: register needs --socket PATH\n", true},
		{[]string{"--socket", sock, "predict", "--timeout", "soon"}, 2, `invalid value "soon" for flag -timeout: "soon" is neither a duration`, false},
		{[]string{"--socket", sock, "delete", "--model-path", "m/", "x"}, 2, "inferctl: delete takes no arguments besides --model-path\n", true},
		{[]string{"--socket", sock, "predict", "a", "b"}, 2, "inferctl: predict takes at most one FILE\n", true},
		{[]string{"checksum"}, 2, "inferctl: checksum takes one LOCAL_FILE_OR_DIR\n", true},
		{[]string{"--socket", sock, "models"}, 1, "inferctl models: GRPC: ", false},
		{[]string{"checksum", "/nope"}, 1, "inferctl checksum: MODEL_NOT_FOUND: no model file or directory at /nope: file does not exist\n", false},
		{[]string{"--socket", sock, "predict", "/nope.json"}, 1, "inferctl predict: INPUT_PARSING: batch file /nope.json: open /nope.json: no such file or directory\n", false},
		{[]string{"--socket", sock, "register", "--model-path", "m/", "/nope"}, 1, "inferctl register: MODEL_NOT_FOUND: no model file or directory at /nope: ", false},
		{[]string{"--socket", sock, "register", "--model-path", "m/", "--warmup", "/nope.json", "/nope"}, 1, "inferctl register: INPUT_PARSING: --warmup /nope.json: open /nope.json: ", false},
	} {
		out, errOut, code := inferctl(t, c.args...)
		if code != c.code || !strings.HasPrefix(errOut, c.stderr) || c.usage != strings.HasSuffix(errOut, "\n"+fullUsage()) || (out != "" && c.args[len(c.args)-1] != "/nope.json") {
			t.Errorf("inferctl %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, stderr starting %q (usage after it: %v)",
				c.args, code, out, errOut, c.code, c.stderr, c.usage)
		}
	}
}

func TestChecksumCommand(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := modelfiles.ChecksumPath(f)
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := inferctl(t, "checksum", f); code != 0 || errOut != "" || out != want+"\n" {
		t.Errorf("checksum: exit %d, stdout %q, stderr %q; want %s", code, out, errOut, want)
	}
}

// fullUsage is what a usage error prints after its message: the commands
// and the global flags with their defaults (not a bare "global flags:").
func fullUsage() string {
	var b strings.Builder
	printUsage(&b)
	if !strings.Contains(b.String(), "global flags:\n  -socket string") || !strings.Contains(b.String(), "-timeout duration") {
		panic("the usage text does not list the global flags: " + b.String())
	}
	return b.String()
}
