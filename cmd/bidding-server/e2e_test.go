package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// The end-to-end tests build bidding-server and a real sidecar binary into
// a temp dir, start them as an operator would, and drive the HTTP API.

func TestMain(m *testing.M) { testhelp.Main(m) }

type runningServer struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error
}

func (s *runningServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

var listenRE = regexp.MustCompile(`bidding-server listening.* addr=(\S+)`)

// startBiddingServer runs the binary and waits until /readyz answers 200.
func startBiddingServer(t testing.TB, bin string, args, env []string) *runningServer {
	t.Helper()
	s := launchBiddingServer(t, bin, args, env)
	s.waitReady(t)
	return s
}

// launchBiddingServer runs the binary and returns once it listens.
func launchBiddingServer(t testing.TB, bin string, args, env []string) *runningServer {
	t.Helper()
	// No drain period unless a test asks for one (a later flag wins): it
	// would only add its wait to every stop.
	s := &runningServer{cmd: exec.Command(bin, append([]string{"--listen", "127.0.0.1:0", "--drain_period", "0"}, args...)...), done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), env...)
	// A test binary that is killed (a timeout, a closed pipe) runs no
	// cleanup: the server must not outlive it (its sidecar and JS workers
	// go with it).
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		s.done <- s.cmd.Wait()
	}()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("bidding-server log:\n%s", s.log())
		}
	})
	select {
	case a := <-addr:
		s.url = "http://" + a
	case err := <-s.done:
		t.Fatalf("bidding-server exited: %v\n%s", err, s.log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("bidding-server did not listen\n%s", s.log())
	}
	return s
}

// waitReady waits until /readyz answers 200.
func (s *runningServer) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, body := get(t, s.url+"/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %d %s\n%s", code, body, s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and expects a clean exit.
func (s *runningServer) stop(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("bidding-server exit after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("bidding-server did not stop after SIGTERM")
	}
}

// sidecarPIDs lists the children of pid that are not its JS workers (the
// same executable): the sidecar.
func sidecarPIDs(pid int) []int {
	self, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	var out []int
	for _, k := range childPIDs(pid) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", k)); exe != self {
			out = append(out, k)
		}
	}
	return out
}

// childPIDs lists the children of pid (from every thread's children file).
func childPIDs(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	_, body := get(t, url+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return -1
}

type bidsResponse struct {
	Bids []struct {
		IG    string          `json:"interest_group"`
		Bid   json.RawMessage `json:"bid"`
		Error string          `json:"error"`
	} `json:"bids"`
}

// TestEndToEndTensorFlow is the demo as a test: the embedded example module,
// the sample bucket synced from a file:// URL, the TensorFlow sidecar; then
// the sidecar is killed and bidding recovers.
func TestEndToEndTensorFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	root := testhelp.ModuleRoot(t)
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	s := startBiddingServer(t, server, []string{
		"--inference_model_bucket_name", "file://" + filepath.Join(root, "examples/bucket"),
		"--inference_model_config_path", "model_config.json",
	}, []string{"INFERENCE_SIDECAR_BINARY_PATH=" + sidecarBin}) // the env var path

	_, body := get(t, s.url+"/v1/models")
	if !strings.Contains(body, `"model_paths":["pctr/v1/","pctr/v2/","pcvr/v1/"]`) {
		t.Fatalf("/v1/models: %s", body)
	}
	request, err := os.ReadFile(filepath.Join(root, "examples/bidding/request.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkBids := func() {
		t.Helper()
		code, body := post(t, s.url+"/v1/generateBids", string(request))
		if code != 200 {
			t.Fatalf("generateBids: %d %s", code, body)
		}
		var r bidsResponse
		if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Bids) != 3 {
			t.Fatalf("generateBids: %s", body)
		}
		for i, want := range []string{"running-shoes", "coffee", "travel"} {
			b := r.Bids[i]
			var bid struct {
				Bid, Pctr, Pcvr, Value float64
				ModelPaths             []string `json:"model_paths"`
			}
			if b.IG != want || b.Error != "" || json.Unmarshal(b.Bid, &bid) != nil {
				t.Fatalf("bid %d: %+v", i, b)
			}
			if bid.Pctr <= 0 || bid.Pctr >= 1 || bid.Pcvr <= 0 || bid.Pcvr >= 1 ||
				math.Abs(bid.Bid-bid.Value*bid.Pctr*bid.Pcvr) > 1e-12 || fmt.Sprint(bid.ModelPaths) != "[pctr/v2/ pcvr/v1/]" {
				t.Errorf("bid %d: %s", i, b.Bid)
			}
		}
	}
	checkBids()
	if v := metricValue(t, s.url, "inferbid_inference_requests_total"); v != 3 {
		t.Errorf("inferbid_inference_requests_total = %v, want 3 (one batch per interest group)", v)
	}

	kids := sidecarPIDs(s.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("sidecar children: %v", kids)
	}
	syscall.Kill(kids[0], syscall.SIGKILL)
	deadline := time.Now().Add(time.Minute)
	for metricValue(t, s.url, "inferbid_sidecar_restarts_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no sidecar restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkBids() // models were replayed
	s.stop(t)
}

// TestEndToEndONNX: a module of its own, a model registered from a local
// path, the ONNX sidecar (cgo, ONNX Runtime from scripts/install-onnxruntime.sh).
func TestEndToEndONNX(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	root := testhelp.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "lib/onnxruntime/libonnxruntime.so.1")); err != nil {
		if os.Getenv("INFERBID_REQUIRE_NATIVE") != "" {
			t.Fatal("ONNX Runtime not installed and INFERBID_REQUIRE_NATIVE is set: run scripts/install-onnxruntime.sh")
		}
		t.Skip("ONNX Runtime not installed (scripts/install-onnxruntime.sh)")
	}
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-onnx", true)
	udf := filepath.Join(t.TempDir(), "mlp_bid.js")
	os.WriteFile(udf, []byte(`
function generateBid(ig) {
  var x = [];
  for (var b = 0; b < ig.rows; b++) for (var i = 0; i < 8; i++) x.push(((b * 8 + i) % 10) / 10);
  var batch = {request: [{model_path: "mlp/", tensors: [{tensor_name: "x", data_type: "FLOAT", tensor_shape: [ig.rows, 8], tensor_content: x}]}]};
  var r = JSON.parse(ig.object ? runInference(batch) : runInference(JSON.stringify(batch))).response[0];
  if (r.error) throw new Error(r.error.error_type + ": " + r.error.description);
  return {paths: JSON.parse(getModelPaths()), y: r.tensors[0].tensor_content};
}`), 0o644)
	s := startBiddingServer(t, server, []string{
		"--udf_code_path", udf,
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_model_local_paths", "mlp/=" + filepath.Join(root, "runtimes/onnx/testdata/mlp.onnx"),
	}, nil)
	code, body := post(t, s.url+"/v1/generateBids", `{"interest_groups":[{"name":"one","rows":1},{"name":"many","rows":64,"object":true},{"name":"zero","rows":0}]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var r bidsResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Bids) != 3 {
		t.Fatalf("%s", body)
	}
	for i, rows := range []int{1, 64} {
		var got struct {
			Paths []string
			Y     []float64
		}
		if r.Bids[i].Error != "" || json.Unmarshal(r.Bids[i].Bid, &got) != nil || len(got.Y) != rows || fmt.Sprint(got.Paths) != "[mlp/]" {
			t.Fatalf("bid %d: %+v", i, r.Bids[i])
		}
		for b := range rows {
			x := make([]float32, 8)
			for i := range x {
				x[i] = float32((b*8+i)%10) / 10
			}
			if want := referenceMLP(x); math.Abs(got.Y[b]-want) > 1e-5 {
				t.Errorf("rows=%d: y[%d] = %v, want %v", rows, b, got.Y[b], want)
			}
		}
	}
	// A zero-row batch is a per-entry INPUT_PARSING error, thrown by the
	// module: a per-group error, not a failed request.
	if !strings.Contains(r.Bids[2].Error, "INPUT_PARSING") {
		t.Errorf("zero rows: %+v", r.Bids[2])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`inferbid_inference_model_requests_total{model_path="mlp/"} 2`, `inferbid_inference_model_batch_size_count{model_path="mlp/"} 2`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	s.stop(t)
}

// referenceMLP is the team's benchmark MLP in float64 arithmetic.
func referenceMLP(x []float32) float64 {
	var acc float64
	for j := range 16 {
		h := float64(float32(0.1 * math.Cos(float64(j))))
		for i := range 8 {
			h += float64(x[i]) * float64(float32(0.5*math.Sin(float64(i*16+j))))
		}
		acc += math.Max(h, 0) * float64(float32(0.5*math.Sin(float64(100+j))))
	}
	return 1 / (1 + math.Exp(-(acc + 0.05)))
}
