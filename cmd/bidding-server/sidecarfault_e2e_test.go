package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/modelstore/storetest"
)

// tryBid runs churnModule's generateBid for model: its output, or the
// per-entry error type, or a failure (status, transport, module error).
func tryBid(url, model string) (y []float64, errorType, failure string) {
	code, body, err := tryPost(url+"/v1/generateBids", `{"interest_groups":[{"name":"g","model":"`+model+`"}]}`)
	if err != nil || code != 200 {
		return nil, "", fmt.Sprintf("%d %s %v", code, body, err)
	}
	var r bidsResponse
	if json.Unmarshal([]byte(body), &r) != nil || len(r.Bids) != 1 {
		return nil, "", body
	}
	if r.Bids[0].Error != "" {
		return nil, "", r.Bids[0].Error
	}
	var bid struct {
		Y           []float64 `json:"y"`
		ErrorType   string    `json:"error_type"`
		Description string    `json:"description"`
	}
	if err := json.Unmarshal(r.Bids[0].Bid, &bid); err != nil {
		return nil, "", string(r.Bids[0].Bid)
	}
	if bid.ErrorType != "" {
		return nil, bid.ErrorType, bid.Description
	}
	return bid.Y, "", ""
}

// TestSidecarStoppedIsReplaced: the sidecar is stopped with SIGSTOP (it
// lives but answers nothing). /healthz stays 200 (it is about the host),
// /readyz says 503 and why, bids fail with GRPC within the liveness bound
// (the JS call deadline is 30s: none waits for it; a worker's call sent to
// the stopped sidecar waits for the kill, later ones fail at once), the
// sidecar is killed and restarted within the liveness bound, counted in
// /metrics, and bids succeed again.
func TestSidecarStoppedIsReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	sidecarBin := buildForTest(t, "cmd/inference-sidecar-tensorflow")
	m := affine{a: 2, c: 1}
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range m.files(t) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	udf := filepath.Join(t.TempDir(), "churn.js")
	if err := os.WriteFile(udf, []byte(churnModule), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startBiddingServer(t, server, []string{
		"--udf_code_path", udf,
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_model_local_paths", "m/=" + dir,
		"--inference_sidecar_liveness_timeout", "2s",
		"--js_call_timeout", "30s",
		"--request_timeout", "60s",
	}, nil)
	if y, et, f := tryBid(s.url, "m/"); f != "" || et != "" || !slices.Equal(y, m.want()) {
		t.Fatalf("before the stop: y=%v error_type=%q failure=%q", y, et, f)
	}
	kids := sidecarPIDs(s.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("sidecar children: %v", kids)
	}
	old := kids[0]
	if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(old, syscall.SIGCONT)
	var grpcErrors, others int
	var readyz []string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if code, body, err := tryGet(s.url + "/healthz"); err != nil || code != 200 {
			t.Errorf("/healthz while the sidecar is stopped: %d %s %v", code, body, err)
		}
		if code, body, err := tryGet(s.url + "/readyz"); err == nil && code == 503 {
			readyz = append(readyz, strings.TrimSpace(body))
		}
		y, et, f := tryBid(s.url, "m/")
		if f == "" && et == "" && slices.Equal(y, m.want()) {
			if k := sidecarPIDs(s.cmd.Process.Pid); len(k) == 1 && k[0] != old {
				break
			}
		}
		switch {
		case et == "GRPC":
			grpcErrors++
			if strings.Contains(f, "deadline") {
				t.Errorf("a bid waited for its deadline: %s", f)
			}
		case et != "" || f != "":
			others++
			t.Errorf("during the stop: error_type %q: %s", et, f)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stopped sidecar was not replaced (%d GRPC errors)", grpcErrors)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitMetric(t, s.url, "inferbid_sidecar_unresponsive_total", 1)
	waitMetric(t, s.url, "inferbid_sidecar_restarts_total", 1)
	if v := metricSeries(t, s.url, "inferbid_sidecar_unresponsive_total"); v != 1 {
		t.Errorf("inferbid_sidecar_unresponsive_total = %v, want 1", v)
	}
	t.Logf("%d bids failed with GRPC while the sidecar was stopped; /readyz said e.g. %q", grpcErrors, firstOf2(readyz))
	if grpcErrors == 0 {
		t.Error("no bid failed while the sidecar was stopped")
	}
	if !slices.ContainsFunc(readyz, func(b string) bool { return strings.Contains(b, "liveness probe") }) {
		t.Errorf("/readyz never said the sidecar missed its liveness probe: %q", firstOf2(readyz))
	}
	if err := syscall.Kill(old, 0); err == nil {
		t.Errorf("the stopped sidecar %d is still there", old)
	}
	s.stop(t)
}

// TestSidecarKilledDuringFirstLoad: the sidecar is killed with SIGKILL while
// it loads the models of the first bucket sync (models generated here,
// padded so that their load takes a moment). /readyz says 200 only once
// every model serves: no bid sent after it answered 200 gets
// MODEL_NOT_FOUND.
func TestSidecarKilledDuringFirstLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	sidecarBin := buildForTest(t, "cmd/inference-sidecar-tensorflow")
	ctx := context.Background()
	bucketURL := "file://" + t.TempDir()
	models := map[string]affine{
		"m1/": {a: 2, c: 1, padding: 64 << 20},
		"m2/": {a: 3, c: -1, padding: 64 << 20},
		"m3/": {a: 4, c: 0, padding: 64 << 20},
	}
	var entries []storetest.ConfigEntry
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range models {
			if !yield(p) {
				return
			}
		}
	}) {
		files := models[path].files(t)
		if err := storetest.WriteFiles(ctx, bucketURL, path, files); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, storetest.ConfigEntry{ModelPath: path, Checksum: modelfiles.Checksum(files), WarmUpJSON: churnRequest(path)})
	}
	if err := storetest.WriteConfig(ctx, bucketURL, "model_config.json", entries...); err != nil {
		t.Fatal(err)
	}
	udf := filepath.Join(t.TempDir(), "churn.js")
	if err := os.WriteFile(udf, []byte(churnModule), 0o644); err != nil {
		t.Fatal(err)
	}
	s := launchBiddingServer(t, server, []string{"--udf_code_path", udf}, []string{
		"INFERENCE_SIDECAR_BINARY_PATH=" + sidecarBin,
		"INFERENCE_MODEL_BUCKET_NAME=" + bucketURL,
		"INFERENCE_MODEL_CONFIG_PATH=model_config.json",
		"INFERENCE_MODEL_FETCH_PERIOD_MS=60000", // only the first sync and the retries of failures
	})
	// Kill the sidecar once the first model is registered: the next one
	// is then being fetched or sent to it.
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(s.log(), `msg="model registered" component=modelstore`) {
		if code, _, _ := tryGet(s.url + "/readyz"); code == 200 {
			t.Fatal("ready before a model was registered: the test did not catch the first load")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no model registered\n%s", s.log())
		}
		time.Sleep(time.Millisecond)
	}
	kids := sidecarPIDs(s.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("sidecar children: %v", kids)
	}
	if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t)
	var bids int
	for range 3 {
		for path, m := range models {
			y, et, f := tryBid(s.url, path)
			bids++
			if et != "" || f != "" || !slices.Equal(y, m.want()) {
				t.Errorf("%s after /readyz said 200: y=%v error_type=%q %s", path, y, et, f)
			}
		}
	}
	t.Logf("%d bids after /readyz said 200, all served", bids)
	if v := metricSeries(t, s.url, "inferbid_sidecar_restarts_total"); v < 1 {
		t.Errorf("inferbid_sidecar_restarts_total = %v, want >= 1", v)
	}
	if !strings.Contains(s.log(), "the replay after its restart registers the model") {
		t.Log("no registration was taken over by the replay (the kill came between registrations)")
	}
	s.stop(t)
}
