package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// TestSidecarKillWithoutFailedBids: bidding-server with the ONNX sidecar
// and two versions of a model; a client bids 20 times a second with a
// module that picks the newest version from getModelPaths and runs it. The
// sidecar is killed with SIGKILL: no bid fails, and every bid used v2
// (getModelPaths never listed v1 without v2 during the replay).
func TestSidecarKillWithoutFailedBids(t *testing.T) {
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
	udf := filepath.Join(t.TempDir(), "newest.js")
	os.WriteFile(udf, []byte(`
function generateBid(ig) {
  var paths = JSON.parse(getModelPaths()).filter(function (p) { return p.indexOf("pctr/") === 0; }).sort();
  var newest = paths[paths.length - 1];
  var batch = {request: [{model_path: newest, tensors: [{tensor_name: "x", data_type: "FLOAT", tensor_shape: [1, 3], tensor_content: [1, 2, 3]}]}]};
  var r = JSON.parse(runInference(JSON.stringify(batch))).response[0];
  if (r.error) throw new Error(r.error.error_type + ": " + r.error.description);
  return {model: newest, paths: paths, y: r.tensors[0].tensor_content};
}`), 0o644)
	testdata := filepath.Join(root, "runtimes/onnx/testdata")
	s := startBiddingServer(t, server, []string{
		"--udf_code_path", udf,
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_model_local_paths", "pctr/v1/=" + filepath.Join(testdata, "affine_v1.onnx") + ",pctr/v2/=" + filepath.Join(testdata, "affine_v2.onnx"),
	}, nil)

	var total, failed, restarted atomic.Int64
	var mu sync.Mutex
	var firstFailure string
	bid := func() {
		defer total.Add(1)
		fail := func(msg string) {
			failed.Add(1)
			mu.Lock()
			if firstFailure == "" {
				firstFailure = msg
			}
			mu.Unlock()
		}
		code, body, err := tryPost(s.url+"/v1/generateBids", `{"interest_groups":[{"name":"one"}]}`)
		if err != nil || code != 200 {
			fail(fmt.Sprintf("%d %s %v", code, body, err))
			return
		}
		var r bidsResponse
		var got struct {
			Model string
			Paths []string
			Y     []float64
		}
		if json.Unmarshal([]byte(body), &r) != nil || len(r.Bids) != 1 || r.Bids[0].Error != "" || json.Unmarshal(r.Bids[0].Bid, &got) != nil {
			fail(body)
			return
		}
		if got.Model != "pctr/v2/" || fmt.Sprint(got.Y) != "[2 5 8]" || fmt.Sprint(got.Paths) != "[pctr/v1/ pctr/v2/]" {
			fail("not v2 with both versions listed: " + body)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var after atomic.Int64
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				bid()
				if restarted.Load() > 0 {
					after.Add(1)
				}
			})
		}
	})
	for total.Load() < 20 {
		time.Sleep(10 * time.Millisecond)
	}
	kids := sidecarPIDs(s.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("sidecar children: %v", kids)
	}
	syscall.Kill(kids[0], syscall.SIGKILL)
	killed := time.Now()
	var notReady []string
	deadline := time.Now().Add(time.Minute)
	for metricValue(t, s.url, "inferbid_sidecar_restarts_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no sidecar restart")
		}
		if code, body, err := tryGet(s.url + "/readyz"); err == nil && code != 200 {
			notReady = append(notReady, strings.TrimSpace(body))
		}
	}
	restarted.Store(1)
	took := time.Since(killed)
	for after.Load() < 20 {
		if time.Now().After(deadline) {
			t.Fatal("bids did not resume")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("kill to restart and replay seen: %v; bids: %d, failed %d; /readyz said not ready %d times (%q)",
		took.Round(time.Millisecond), total.Load(), failed.Load(), len(notReady), firstOf2(notReady))
	if failed.Load() > 0 {
		t.Errorf("%d of %d bids failed across the kill; first: %s", failed.Load(), total.Load(), firstFailure)
	}
	if code, body := get(t, s.url+"/readyz"); code != 200 {
		t.Errorf("/readyz after the replay: %d %s", code, body)
	}
	s.stop(t)
}

func firstOf2(s []string) []string { return s[:min(len(s), 2)] }

func tryPost(url, body string) (int, string, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
