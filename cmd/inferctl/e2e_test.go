package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/sidecar"
)

func TestMain(m *testing.M) { testhelp.Main(m) }

// runBinary runs bin with args and returns stdout, stderr and the exit code.
func runBinary(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func TestFlagDefaultsStated(t *testing.T) {
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		newGlobals().define(fs)
		if missing := cli.UndocumentedDefaults(fs); len(missing) > 0 {
			t.Errorf("inferctl %s: the help of %q does not state the default", c.name, missing)
		}
	}
}

// TestRegisterAndPredictWithRealSidecar drives a real TensorFlow sidecar
// binary with the inferctl binary: flags after the positional argument
// (global ones too), and predict's exit code when an entry fails.
func TestRegisterAndPredictWithRealSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the sidecar")
	}
	root := testhelp.ModuleRoot(t)
	bin := testhelp.BuildBinary(t, "cmd/inferctl", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	socket := testhelp.SocketPath(t, "tf.sock")
	side := exec.Command(sidecarBin, "--socket", socket)
	var sideErr testhelp.SyncBuffer
	side.Stderr = &sideErr
	if err := side.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		side.Process.Kill()
		side.Wait()
	}()
	c, err := sidecar.NewClient(socket, sidecar.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("sidecar not healthy: %v\n%s", err, sideErr.String())
	}

	model := filepath.Join(root, "examples/bucket/pctr/v1")
	out, errOut, code := runBinary(t, bin, "register", model, "--model-path", "pctr/v1/", "--socket", socket)
	if code != 0 || !strings.HasPrefix(out, "registered pctr/v1/ (") {
		t.Fatalf("register DIR --model-path P --socket S: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	_, errOut, code = runBinary(t, bin, "register", filepath.Join(root, "examples/bucket/nope"), "--model-path", "x/", "--socket", socket)
	if code != 1 || !strings.Contains(errOut, "MODEL_NOT_FOUND: no model file or directory at "+filepath.Join(root, "examples/bucket/nope")) {
		t.Errorf("register of a missing dir: exit %d, stderr %q", code, errOut)
	}

	dir := t.TempDir()
	good := `{"model_path":"pctr/v1/","tensors":[{"tensor_name":"ad_id","data_type":"INT64","tensor_shape":[1,1],"tensor_content":["1"]},{"tensor_name":"publisher_id","data_type":"INT64","tensor_shape":[1,1],"tensor_content":["1"]},{"tensor_name":"dense","data_type":"FLOAT","tensor_shape":[1,6],"tensor_content":["0","0","0","0","0","0"]}]}`
	missing := `{"model_path":"nope/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,1],"tensor_content":["0"]}]}`
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	okFile := write("ok.json", `{"request":[`+good+`]}`)
	mixed := write("mixed.json", `{"request":[`+good+`,`+missing+`]}`)
	badJSON := write("bad.json", `{"request":[`)

	out, errOut, code = runBinary(t, bin, "predict", okFile, "--socket", socket)
	if code != 0 || errOut != "" || !strings.Contains(out, `"model_path":"pctr/v1/"`) || strings.Contains(out, `"error"`) {
		t.Errorf("predict of a good batch: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	out, errOut, code = runBinary(t, bin, "--socket", socket, "predict", mixed)
	if code != 1 || !strings.Contains(out, `"error_type":"MODEL_NOT_FOUND"`) ||
		!strings.HasPrefix(errOut, "inferctl predict: MODEL_NOT_FOUND: 1 of 2 entries failed (--allow-entry-errors to exit 0); the first, entry 1 (nope/): ") {
		t.Errorf("predict with a failing entry: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	out2, errOut, code := runBinary(t, bin, "--socket", socket, "predict", mixed, "--allow-entry-errors")
	if code != 0 || errOut != "" || out2 != out {
		t.Errorf("predict --allow-entry-errors: exit %d\nstdout %q\nstderr %q", code, out2, errOut)
	}
	out, errOut, code = runBinary(t, bin, "--socket", socket, "predict", badJSON)
	if code != 1 || !strings.Contains(out, `"error_type":"INPUT_PARSING"`) || !strings.HasPrefix(errOut, "inferctl predict: INPUT_PARSING: batch file "+badJSON+" is not valid JSON") {
		t.Errorf("predict of bad JSON: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}
