//go:build cgo

package sidecar_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/sidecar"
)

// sidecarProc is a real inference-sidecar-onnx process.
type sidecarProc struct {
	cmd    *exec.Cmd
	socket string
	stderr *bytes.Buffer
	done   chan error
}

func startSidecarBinary(t *testing.T, socket string, args ...string) *sidecarProc {
	t.Helper()
	bin := buildBinary(t, "inference-sidecar-onnx", true)
	p := &sidecarProc{socket: socket, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"--socket", socket}, args...)...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	c, err := sidecar.NewClient(socket, sidecar.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("sidecar binary not healthy: %v\nstderr:\n%s", err, p.stderr)
	}
	return p
}

// inferctl runs the inferctl binary and returns stdout, stderr and the exit code.
func inferctl(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	bin := buildBinary(t, "inferctl", false)
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
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

func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, code := inferctl(t, stdin, args...)
	if code != 0 {
		t.Fatalf("inferctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func wantExit(t *testing.T, want int, fragment string, stdin string, args ...string) string {
	t.Helper()
	out, errOut, code := inferctl(t, stdin, args...)
	if code != want || !strings.Contains(errOut, fragment) {
		t.Errorf("inferctl %s: exit %d, stderr %q; want exit %d mentioning %q", strings.Join(args, " "), code, errOut, want, fragment)
	}
	return out
}

// affineOutputs parses a one-entry response JSON into its float outputs.
func affineOutputs(t *testing.T, out string) ([]float64, error) {
	t.Helper()
	res, err := batch.ParseResponse([]byte(strings.TrimSpace(out)))
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		t.Fatalf("%d results: %s", len(res), out)
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	switch d := res[0].Tensors[0].Data.(type) {
	case []float64:
		return d, nil
	case []float32:
		w := make([]float64, len(d))
		for i, v := range d {
			w[i] = float64(v)
		}
		return w, nil
	}
	t.Fatalf("output is %s: %s", res[0].Tensors[0].DType(), out)
	return nil, nil
}

func checkAffine(t *testing.T, what string, x []float32, y []float64, a, b float64) {
	t.Helper()
	if len(y) != len(x) {
		t.Fatalf("%s: %d outputs for %d inputs", what, len(y), len(x))
	}
	for i := range x {
		want := a*float64(x[i]) + b
		if math.Abs(y[i]-want) > 1e-5*(1+math.Abs(want)) {
			t.Fatalf("%s: y[%d] = %v, want %v (x = %v)", what, i, y[i], want, x)
		}
	}
}

func TestEndToEndInferctl(t *testing.T) {
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	dir := shortDir(t)
	socket := filepath.Join(dir, "run", "sidecar.sock")
	p := startSidecarBinary(t, socket)

	fi, err := os.Lstat(socket)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if fi, _ := os.Stat(filepath.Dir(socket)); fi.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode %v, want 0700", fi.Mode().Perm())
	}

	model := filepath.Join(onnxTestdata, "affine_v1.onnx")
	x := []float32{0.5, -1, 2, 3, 0, -0.25}
	warm := filepath.Join(dir, "warm.json")
	os.WriteFile(warm, []byte(affineBatch("aff/", x[:3])), 0o600)
	out := mustRun(t, "", "--socket", socket, "register", "--model-path", "aff/", "--warmup", warm, model)
	if !strings.Contains(out, "aff/") {
		t.Errorf("register printed %q", out)
	}
	out = mustRun(t, "", "--socket", socket, "models")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "MODEL_PATH") ||
		!strings.HasPrefix(lines[1], "aff/ ") || !strings.Contains(lines[1], " serving ") || !strings.Contains(lines[1], "x:FLOAT") {
		t.Errorf("models printed\n%s\nwant a table with aff/ serving, its input x:FLOAT", out)
	}

	req := filepath.Join(dir, "req.json")
	os.WriteFile(req, []byte(affineBatch("aff/", x)), 0o600)
	y, err := affineOutputs(t, mustRun(t, "", "--socket", socket, "predict", req))
	if err != nil {
		t.Fatal(err)
	}
	checkAffine(t, "predict FILE", x, y, 2, 1)
	y, err = affineOutputs(t, mustRun(t, affineBatch("aff/", x), "--socket", socket, "predict"))
	if err != nil {
		t.Fatal(err)
	}
	checkAffine(t, "predict stdin", x, y, 2, 1)

	// Re-register v2 under the same path: the swap shows in predictions.
	mustRun(t, "", "--socket", socket, "register", "--model-path", "aff/", filepath.Join(onnxTestdata, "affine_v2.onnx"))
	y, err = affineOutputs(t, mustRun(t, "", "--socket", socket, "predict", req))
	if err != nil {
		t.Fatal(err)
	}
	checkAffine(t, "predict after re-register", x, y, 3, -1)

	// Failures: a warm-up that names an unknown input, a missing file, a
	// corrupt model; each exits 1 naming the error type and the model.
	bad := filepath.Join(dir, "badwarm.json")
	os.WriteFile(bad, []byte(strings.Replace(affineBatch("aff/", x[:3]), `"x"`, `"nope"`, 1)), 0o600)
	wantExit(t, 1, "INPUT_PARSING", "", "--socket", socket, "register", "--model-path", "aff/", "--warmup", bad, model)
	wantExit(t, 1, "no-such-model.onnx", "", "--socket", socket, "register", "--model-path", "m/", filepath.Join(dir, "no-such-model.onnx"))
	corrupt := filepath.Join(dir, "corrupt.onnx")
	os.WriteFile(corrupt, []byte("definitely not protobuf"), 0o600)
	wantExit(t, 1, "MODEL_EXECUTION", "", "--socket", socket, "register", "--model-path", "bad/", corrupt)
	y, err = affineOutputs(t, mustRun(t, "", "--socket", socket, "predict", req))
	if err != nil {
		t.Fatal(err)
	}
	checkAffine(t, "predict after failed registrations", x, y, 3, -1)

	// Bad batch JSON prints the INPUT_PARSING batch error, as runInference
	// answers it, and exits 1.
	out = wantExit(t, 1, "INPUT_PARSING: the batch on stdin is not valid JSON", `{"request":`, "--socket", socket, "predict")
	if _, err := affineOutputs(t, out); inferr.TypeOf(err) != inferr.InputParsing {
		t.Errorf("predict of bad JSON printed %q (%v), want an INPUT_PARSING batch error", out, err)
	}

	mustRun(t, "", "--socket", socket, "delete", "--model-path", "aff/")
	wantExit(t, 1, "MODEL_NOT_FOUND", "", "--socket", socket, "delete", "--model-path", "aff/")
	// A failed entry is in the answer, and the exit code is 1 (0 with
	// --allow-entry-errors).
	wantExit(t, 1, "MODEL_NOT_FOUND: 1 of 1 entries failed", "", "--socket", socket, "predict", req)
	if _, err := affineOutputs(t, mustRun(t, "", "--socket", socket, "predict", "--allow-entry-errors", req)); inferr.TypeOf(err) != inferr.ModelNotFound {
		t.Errorf("predict after delete: %v, want MODEL_NOT_FOUND", err)
	}
	if out := mustRun(t, "", "--socket", socket, "models"); !strings.HasPrefix(out, "MODEL_PATH") || strings.Count(out, "\n") != 1 {
		t.Errorf("models after delete printed %q, want the table header alone", out)
	}

	// Usage errors exit 2.
	wantExit(t, 2, "unknown command", "", "--socket", socket, "frobnicate")
	wantExit(t, 2, "--model-path", "", "--socket", socket, "register", model)
	wantExit(t, 2, "--socket", "", "models")

	// SIGTERM stops the sidecar cleanly and removes its socket; then
	// inferctl gets GRPC errors (and predict still prints the batch error).
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("sidecar exit after SIGTERM: %v\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not stop after SIGTERM")
	}
	p.done <- nil // for the cleanup
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind after SIGTERM: %v", err)
	}
	out = wantExit(t, 1, "GRPC", "", "--socket", socket, "predict", req)
	if _, err := affineOutputs(t, out); inferr.TypeOf(err) != inferr.GRPC {
		t.Errorf("predict to a stopped sidecar printed %q, want a GRPC batch error", out)
	}
	wantExit(t, 1, "GRPC", "", "--socket", socket, "models")
}

func TestInferctlChecksum(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "m", "variables"), 0o755)
	files := map[string]string{"m/saved_model.pb": "graph bytes", "m/variables/variables.index": "index", "m/variables/variables.data-00000-of-00001": "data"}
	for p, c := range files {
		os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644)
	}
	// The seed's pipeline: sha256 of each file, sorted by path, the hex
	// digests concatenated, sha256 of that.
	var concat string
	for _, p := range []string{"m/saved_model.pb", "m/variables/variables.data-00000-of-00001", "m/variables/variables.index"} {
		h := sha256.Sum256([]byte(files[p]))
		concat += hex.EncodeToString(h[:])
	}
	want := sha256.Sum256([]byte(concat))
	out := mustRun(t, "", "checksum", filepath.Join(dir, "m"))
	if strings.TrimSpace(out) != hex.EncodeToString(want[:]) {
		t.Errorf("checksum of a dir = %q, want %x", out, want)
	}
	one := sha256.Sum256([]byte("graph bytes"))
	wantOne := sha256.Sum256([]byte(hex.EncodeToString(one[:])))
	if out := mustRun(t, "", "checksum", filepath.Join(dir, "m", "saved_model.pb")); strings.TrimSpace(out) != hex.EncodeToString(wantOne[:]) {
		t.Errorf("checksum of a file = %q, want %x", out, wantOne)
	}
	wantExit(t, 1, "nope", "", "checksum", filepath.Join(dir, "nope"))
	wantExit(t, 2, "one LOCAL_FILE_OR_DIR", "", "checksum")
}

func TestSidecarBinaryBadStarts(t *testing.T) {
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	bin := buildBinary(t, "inference-sidecar-onnx", true)
	dir := shortDir(t)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err := cmd.Run()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return errOut.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return errOut.String(), 0
	}
	for _, c := range []struct {
		args     []string
		fragment string
	}{
		{[]string{"--socket", filepath.Join(dir, "a.sock"), "--runtime_config", `{"num_threads":2}`}, "num_threads"},
		{[]string{"--socket", filepath.Join(dir, "a.sock"), "--runtime_config", `{"module_name":"pytorch"}`}, "pytorch"},
		{[]string{"--socket", filepath.Join(dir, "a.sock"), "--runtime_config", `{"num_intraop_threads":-2}`}, "num_intraop_threads"},
		{[]string{"--socket", filepath.Join(dir, "a.sock"), "--runtime_config", `{"dynamic_batching":{"default":{"max_batch_size":1,"max_delay_us":5}}}`}, "dynamic_batching.default.max_batch_size is 1"},
		{[]string{}, "--socket"},
		{[]string{"--socket", filepath.Join(dir, "a.sock"), "extra"}, "extra"},
	} {
		errOut, code := run(c.args...)
		if code != 2 || !strings.Contains(errOut, c.fragment) {
			t.Errorf("sidecar %q: exit %d, stderr %q; want exit 2 naming %q", c.args, code, errOut, c.fragment)
		}
	}
	// A regular file where the socket should be is never replaced.
	regular := filepath.Join(dir, "file.sock")
	os.WriteFile(regular, []byte("x"), 0o600)
	if errOut, code := run("--socket", regular); code != 1 || !strings.Contains(errOut, "not a socket") {
		t.Errorf("sidecar over a regular file: exit %d, %q", code, errOut)
	}
	// A stale socket left by a killed sidecar is replaced.
	socket := filepath.Join(dir, "stale.sock")
	p := startSidecarBinary(t, socket)
	p.cmd.Process.Kill()
	<-p.done
	p.done <- nil
	if _, err := os.Lstat(socket); err != nil {
		t.Fatalf("kill -9 left no stale socket to test with: %v", err)
	}
	startSidecarBinary(t, socket)
	// ... but a live one is not.
	if errOut, code := run("--socket", socket); code != 1 || !strings.Contains(errOut, "live server") {
		t.Errorf("second sidecar on a live socket: exit %d, %q", code, errOut)
	}
}

func TestSidecarBinaryOversizedModel(t *testing.T) {
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	socket := filepath.Join(shortDir(t), "s.sock")
	startSidecarBinary(t, socket, "--max_model_bytes", "100")
	model := filepath.Join(onnxTestdata, "affine_v1.onnx") // ~200 bytes
	wantExit(t, 1, "INPUT_PARSING", "", "--socket", socket, "register", "--model-path", "big/", model)
	if out := mustRun(t, "", "--socket", socket, "models"); !strings.HasPrefix(out, "MODEL_PATH") || strings.Count(out, "\n") != 1 {
		t.Errorf("models after an oversized registration: %q, want the table header alone", out)
	}
}

// The runtime config's cpuset pins every thread of the sidecar, and
// INFERENCE_SIDECAR_RLIMIT_MB caps its address space (the sidecar applies
// it itself, without the supervisor's prlimit).
func TestSidecarBinaryCpusetAndRlimitEnv(t *testing.T) {
	lib := requireONNX(t)
	t.Setenv("INFERBID_ONNXRUNTIME_LIB", lib)
	t.Setenv(sidecar.RlimitEnv, "4096")
	p := startSidecarBinary(t, filepath.Join(shortDir(t), "s.sock"), "--runtime_config", `{"cpuset":[0],"num_intraop_threads":1}`)
	pid := p.cmd.Process.Pid
	limits, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "limits"))
	if err != nil {
		t.Fatal(err)
	}
	if line := grepLine(string(limits), "Max address space"); !strings.Contains(line, fmt.Sprint(int64(4096)<<20)) {
		t.Errorf("limits line %q, want %d bytes", line, int64(4096)<<20)
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", fmt.Sprint(pid), "task"))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		status, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "task", task.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		if line := grepLine(string(status), "Cpus_allowed_list:"); strings.TrimSpace(strings.TrimPrefix(line, "Cpus_allowed_list:")) != "0" {
			t.Errorf("thread %s: %q, want CPU 0 only", task.Name(), line)
		}
	}
	// Bad values are refused at start.
	bin := buildBinary(t, "inference-sidecar-onnx", true)
	cmd := exec.Command(bin, "--socket", filepath.Join(shortDir(t), "x.sock"))
	cmd.Env = append(os.Environ(), sidecar.RlimitEnv+"=lots")
	out, err := cmd.CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), sidecar.RlimitEnv) {
		t.Errorf("%s=lots: %v, %s; want exit 2 naming the variable", sidecar.RlimitEnv, err, out)
	}
}
