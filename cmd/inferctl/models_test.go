package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/modelstore/storetest"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// tableRow finds the row of path in a models table and returns its
// columns (the inputs and outputs columns hold spaces: the caller checks
// those with Contains on the whole line).
func tableRow(t *testing.T, out, path string) (cols []string, line string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "MODEL_PATH") {
		t.Fatalf("no table header in\n%s", out)
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] == path {
			return f, l
		}
	}
	t.Fatalf("no row for %s in\n%s", path, out)
	return nil, ""
}

// TestModelsTableFromSidecar: `inferctl --socket S models` on a sidecar
// (served on a real socket, pure-Go TensorFlow) with the example pCTR
// model registered prints its row: serving, its checksum, when it loaded,
// and its inputs and outputs by the names requests use.
func TestModelsTableFromSidecar(t *testing.T) {
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	c := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt}, sidecar.ClientOptions{})
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.RegisterModel(ctx, "pctr/v1/", files, ""); err != nil {
		t.Fatal(err)
	}
	sum := modelfiles.Checksum(files)
	out, errOut, code := inferctl(t, "--socket", c.SocketPath(), "models")
	if code != 0 || errOut != "" {
		t.Fatalf("models: exit %d, stderr %q", code, errOut)
	}
	t.Logf("inferctl models:\n%s", out)
	cols, line := tableRow(t, out, "pctr/v1/")
	if cols[1] != "serving" || cols[2] != sum[:12] {
		t.Errorf("row %q: want serving, checksum %s", line, sum[:12])
	}
	if _, err := time.Parse(time.RFC3339, cols[3]); err != nil {
		t.Errorf("row %q: loaded_at %q: %v", line, cols[3], err)
	}
	for _, spec := range []string{"ad_id:INT64[-1,1]", "publisher_id:INT64[-1,1]", "dense:FLOAT[-1,6]", "pctr:FLOAT[-1,1]"} {
		if !strings.Contains(line, spec) {
			t.Errorf("row %q lacks %s", line, spec)
		}
	}

	// --json MODEL_PATH: that model, with the full checksum and the
	// TensorFlow tensor names.
	out, errOut, code = inferctl(t, "--socket", c.SocketPath(), "models", "--json", "pctr/v1/")
	var m modelStatus
	if err := json.Unmarshal([]byte(out), &m); code != 0 || err != nil || m.Checksum != sum || len(m.Inputs) != 3 || len(m.Outputs) != 1 {
		t.Errorf("models --json pctr/v1/: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	// An unknown path is MODEL_NOT_FOUND (exit 1).
	if out, errOut, code = inferctl(t, "--socket", c.SocketPath(), "models", "nope/"); code != 1 || out != "" || !strings.HasPrefix(errOut, "inferctl models: MODEL_NOT_FOUND: ") || !strings.Contains(errOut, "nope/") {
		t.Errorf("models nope/: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

var listenRE = regexp.MustCompile(`bidding-server listening.* addr=(\S+)`)

// TestModelsTableFromBiddingServer: `inferctl models --server URL` on a
// real bidding-server (with a real TensorFlow sidecar) whose file://
// bucket lists pctr/v1/ and bad/, the latter with a wrong checksum: the
// table shows pctr/v1/ serving and bad/ failed, with the checksum error.
func TestModelsTableFromBiddingServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	bin := t.TempDir()
	for _, pkg := range []string{"bidding-server", "inference-sidecar-tensorflow"} {
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/"+pkg)
		cmd.Dir = testhelp.ModuleRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pctr, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := tfsave.AffineModel(tfsave.Options{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	bucket := "file://" + t.TempDir()
	for prefix, files := range map[string]runtimes.Files{"pctr/v1/": pctr, "bad/": bad} {
		if err := storetest.WriteFiles(ctx, bucket, prefix, files); err != nil {
			t.Fatal(err)
		}
	}
	if err := storetest.WriteConfig(ctx, bucket, "model_config.json",
		storetest.ConfigEntry{ModelPath: "pctr/v1/", Checksum: modelfiles.Checksum(pctr)},
		storetest.ConfigEntry{ModelPath: "bad/", Checksum: strings.Repeat("0", 64)},
	); err != nil {
		t.Fatal(err)
	}

	srv := exec.CommandContext(ctx, filepath.Join(bin, "bidding-server"), "--listen", "127.0.0.1:0", "--drain_period", "0")
	srv.Env = append(os.Environ(),
		"INFERENCE_SIDECAR_BINARY_PATH="+filepath.Join(bin, "inference-sidecar-tensorflow"),
		"INFERENCE_MODEL_BUCKET_NAME="+bucket,
		"INFERENCE_MODEL_CONFIG_PATH=model_config.json")
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	addr := make(chan string, 1)
	log := &testhelp.SyncBuffer{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.Write([]byte(sc.Text() + "\n"))
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case <-ctx.Done():
		t.Fatalf("bidding-server did not listen\n%s", log)
	}
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bidding-server not ready\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
	}

	out, errOut, code := inferctl(t, "models", "--server", url)
	if code != 0 || errOut != "" {
		t.Fatalf("models --server: exit %d, stderr %q\n%s", code, errOut, log)
	}
	t.Logf("inferctl models --server:\n%s", out)
	if cols, line := tableRow(t, out, "pctr/v1/"); cols[1] != "serving" || cols[2] != modelfiles.Checksum(pctr)[:12] || !strings.Contains(line, "dense:FLOAT[-1,6]") {
		t.Errorf("pctr/v1/ row %q\n%s", line, out)
	}
	if cols, line := tableRow(t, out, "bad/"); cols[1] != "failed" || cols[2] != "-" {
		t.Errorf("bad/ row %q\n%s", line, out)
	}
	if !regexp.MustCompile(`(?m)^bad/: last error \(\d+ in a row, last at \S+\): .*checksum mismatch.*` + modelfiles.Checksum(bad)).MatchString(out) {
		t.Errorf("no line giving bad/'s checksum error in\n%s", out)
	}
	// One model by its path; an unknown one is MODEL_NOT_FOUND.
	out, _, code = inferctl(t, "models", "--server", url, "--json", "pctr/v1/")
	var m modelStatus
	if err := json.Unmarshal([]byte(out), &m); code != 0 || err != nil || m.ModelPath != "pctr/v1/" || m.State != "serving" {
		t.Errorf("models --server URL --json pctr/v1/: exit %d, %v\n%s", code, err, out)
	}
	if _, errOut, code = inferctl(t, "models", "--server", url, "pctr/v9/"); code != 1 || !strings.HasPrefix(errOut, "inferctl models: MODEL_NOT_FOUND: ") {
		t.Errorf("models pctr/v9/: exit %d, stderr %q", code, errOut)
	}

	// predict --server: the batch runs through the server's sidecar, as
	// runInference; a misspelt input is that entry's error, naming the
	// signature key, and the exit status is 1.
	good := `{"model_path":"pctr/v1/","tensors":[{"tensor_name":"ad_id","data_type":"INT64","tensor_shape":[1,1],"tensor_content":["12"]},` +
		`{"tensor_name":"publisher_id","data_type":"INT64","tensor_shape":[1,1],"tensor_content":["7"]},` +
		`{"tensor_name":"dense","data_type":"FLOAT","tensor_shape":[1,6],"tensor_content":["0.9","0.1","0.4","0","0.7","0.3"]}]}`
	misspelt := strings.Replace(good, `"ad_id"`, `"adid"`, 1)
	batchFile := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(batchFile, []byte(`{"request":[`+good+`,`+misspelt+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = inferctl(t, "predict", "--server", url, batchFile)
	t.Logf("inferctl predict --server: exit %d\n%s%s", code, out, errOut)
	var pr struct {
		Response []struct {
			ModelPath string `json:"model_path"`
			Tensors   []struct {
				Content []float64 `json:"tensor_content"`
			} `json:"tensors"`
			Error *struct {
				Type        string `json:"error_type"`
				Description string `json:"description"`
			} `json:"error"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil || len(pr.Response) != 2 || len(pr.Response[0].Tensors) != 1 || len(pr.Response[0].Tensors[0].Content) != 1 || pr.Response[1].Error == nil {
		t.Fatalf("predict --server answer %v:\n%s", err, out)
	}
	if y := pr.Response[0].Tensors[0].Content[0]; y <= 0 || y >= 1 {
		t.Errorf("pCTR %v, want a probability", y)
	}
	if e := pr.Response[1].Error; e.Type != "INPUT_PARSING" || !strings.Contains(e.Description, `did you mean "ad_id" (serving_default_ad_id:0)?`) {
		t.Errorf("misspelt entry's error %+v, want INPUT_PARSING suggesting ad_id", e)
	}
	if code != 1 || !strings.Contains(errOut, "INPUT_PARSING") {
		t.Errorf("predict --server with a failed entry: exit %d, stderr %q; want 1 and the entry's error", code, errOut)
	}
	// A batch that cannot run: runInference's batch error, typed.
	if err := os.WriteFile(batchFile, []byte(`{"request":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code = inferctl(t, "predict", "--server", url, batchFile); code != 1 || !strings.Contains(errOut, "INPUT_PARSING") || !strings.Contains(out, `"error_type":"INPUT_PARSING"`) {
		t.Errorf("predict --server of a malformed batch: exit %d\n%s%s", code, out, errOut)
	}
}
