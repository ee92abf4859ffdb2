package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/modelstore/storetest"
)

// metricSeries returns the value of one exposition line, e.g.
// `inferbid_modelstore_models_available` or
// `inferbid_modelstore_deletions_total{outcome="success"}`; -1 when absent.
func metricSeries(t *testing.T, url, series string) float64 {
	t.Helper()
	_, body := get(t, url+"/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", series, line)
			}
			return v
		}
	}
	return -1
}

// waitMetric waits until the series reaches at least min.
func waitMetric(t *testing.T, url, series string, min float64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v := metricSeries(t, url, series)
		if v >= min {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want >= %v", series, v, min)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bidFor runs generateBid for one model with churnModule and returns its
// output or its error type.
func bidFor(t *testing.T, url, model string) (y []float64, errorType string) {
	t.Helper()
	code, body := post(t, url+"/v1/generateBids", `{"interest_groups":[{"name":"g","model":"`+model+`"}]}`)
	var r bidsResponse
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil || len(r.Bids) != 1 || r.Bids[0].Error != "" {
		t.Fatalf("generateBids for %s: %d %s", model, code, body)
	}
	var bid struct {
		Y         []float64 `json:"y"`
		ErrorType string    `json:"error_type"`
	}
	if err := json.Unmarshal(r.Bids[0].Bid, &bid); err != nil {
		t.Fatalf("bid for %s: %s", model, r.Bids[0].Bid)
	}
	return bid.Y, bid.ErrorType
}

// TestReadyWithABrokenModel: one model of the config has content that does
// not match its checksum. The server is ready anyway, the good model
// serves, the broken one is absent, counted and retried every poll, and it
// loads once the bucket holds the content the config lists.
func TestReadyWithABrokenModel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	sidecarBin := buildForTest(t, "cmd/inference-sidecar-tensorflow")
	ctx := context.Background()
	bucketURL := "file://" + t.TempDir()
	good, listed, corrupt := affine{a: 2, c: 1}, affine{a: 3, c: -1}, affine{a: 4, c: 0}
	goodFiles, listedFiles := good.files(t), listed.files(t)
	if err := storetest.WriteFiles(ctx, bucketURL, "good/", goodFiles); err != nil {
		t.Fatal(err)
	}
	if err := storetest.WriteFiles(ctx, bucketURL, "bad/", corrupt.files(t)); err != nil {
		t.Fatal(err)
	}
	if err := storetest.WriteConfig(ctx, bucketURL, "model_config.json",
		storetest.ConfigEntry{ModelPath: "good/", Checksum: modelfiles.Checksum(goodFiles), WarmUpJSON: churnRequest("good/")},
		storetest.ConfigEntry{ModelPath: "bad/", Checksum: modelfiles.Checksum(listedFiles), WarmUpJSON: churnRequest("bad/")},
	); err != nil {
		t.Fatal(err)
	}
	udf := filepath.Join(t.TempDir(), "churn.js")
	if err := os.WriteFile(udf, []byte(churnModule), 0o644); err != nil {
		t.Fatal(err)
	}
	// Returns once /readyz answers 200 (fails after its deadline otherwise).
	s := startBiddingServer(t, server, []string{"--udf_code_path", udf}, []string{
		"INFERENCE_SIDECAR_BINARY_PATH=" + sidecarBin,
		"INFERENCE_MODEL_BUCKET_NAME=" + bucketURL,
		"INFERENCE_MODEL_CONFIG_PATH=model_config.json",
		"INFERENCE_MODEL_FETCH_PERIOD_MS=100",
	})

	if _, body := get(t, s.url+"/v1/models"); !strings.Contains(body, `"model_paths":["good/"]`) {
		t.Errorf("/v1/models = %s, want only good/", body)
	}
	// /v1/models says why bad/ is missing; good/ serves with its checksum.
	if code, body := get(t, s.url+"/v1/models/bad/"); code != 200 || !strings.Contains(body, `"state":"failed"`) || !strings.Contains(body, "checksum mismatch") {
		t.Errorf("/v1/models/bad/ = %d %s, want failed with the checksum mismatch", code, body)
	}
	if code, body := get(t, s.url+"/v1/models/good/"); code != 200 || !strings.Contains(body, `"state":"serving"`) || !strings.Contains(body, modelfiles.Checksum(goodFiles)) {
		t.Errorf("/v1/models/good/ = %d %s, want serving with its checksum", code, body)
	}
	if y, et := bidFor(t, s.url, "good/"); et != "" || !slices.Equal(y, good.want()) {
		t.Errorf("good/: y=%v error_type=%q, want %v", y, et, good.want())
	}
	if y, et := bidFor(t, s.url, "bad/"); et != "MODEL_NOT_FOUND" {
		t.Errorf("bad/: y=%v error_type=%q, want MODEL_NOT_FOUND", y, et)
	}
	// Counted, and retried by the watcher after the first sync.
	waitMetric(t, s.url, `inferbid_modelstore_fetches_total{kind="model",result="checksum_mismatch"}`, 2)
	waitMetric(t, s.url, `inferbid_modelstore_registrations_total{kind="load",outcome="failure"}`, 2)
	if v := metricSeries(t, s.url, "inferbid_modelstore_models_available"); v != 1 {
		t.Errorf("inferbid_modelstore_models_available = %v, want 1", v)
	}
	if code, body := get(t, s.url+"/readyz"); code != 200 {
		t.Errorf("/readyz while bad/ is retried: %d %s", code, body)
	}
	if !strings.Contains(s.log(), "checksum mismatch") || !strings.Contains(s.log(), "bad/") {
		t.Error("the log does not say why bad/ was not loaded")
	}

	// The bucket gets the content the config lists: the next retry loads it.
	if err := storetest.DeletePrefix(ctx, bucketURL, "bad/"); err != nil {
		t.Fatal(err)
	}
	if err := storetest.WriteFiles(ctx, bucketURL, "bad/", listedFiles); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, s.url, "inferbid_modelstore_models_available", 2)
	if y, et := bidFor(t, s.url, "bad/"); et != "" || !slices.Equal(y, listed.want()) {
		t.Errorf("bad/ after the fix: y=%v error_type=%q, want %v", y, et, listed.want())
	}
	s.stop(t)
}

// TestNotReadyUntilConfigRead: while the config cannot be read the server is
// not ready and says why; it becomes ready once the config appears.
func TestNotReadyUntilConfigRead(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	sidecarBin := buildForTest(t, "cmd/inference-sidecar-tensorflow")
	ctx := context.Background()
	bucketURL := "file://" + t.TempDir()
	files := affine{a: 2, c: 1}.files(t)
	if err := storetest.WriteFiles(ctx, bucketURL, "m/", files); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	// Until /readyz reports the missing config, no config is written; then
	// it is, and startBiddingServer below sees the server become ready.
	seen := make(chan string, 1)
	go func() {
		defer close(seen)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if code, body, err := tryGet("http://" + addr + "/readyz"); err == nil && code == 503 && strings.Contains(body, "model_config.json") {
				seen <- body
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Written even after giving up, so the server start below ends.
		storetest.WriteConfig(ctx, bucketURL, "model_config.json",
			storetest.ConfigEntry{ModelPath: "m/", Checksum: modelfiles.Checksum(files)})
	}()
	s := startBiddingServer(t, server, []string{"--listen", addr}, []string{
		"INFERENCE_SIDECAR_BINARY_PATH=" + sidecarBin,
		"INFERENCE_MODEL_BUCKET_NAME=" + bucketURL,
		"INFERENCE_MODEL_CONFIG_PATH=model_config.json",
		"INFERENCE_MODEL_FETCH_PERIOD_MS=100",
	})
	body, ok := <-seen
	if !ok {
		t.Fatal("/readyz never answered 503 naming the missing config")
	}
	t.Logf("before the config existed, /readyz said: %s", strings.TrimSpace(body))
	if _, body := get(t, s.url+"/v1/models"); !strings.Contains(body, `"model_paths":["m/"]`) {
		t.Errorf("/v1/models = %s", body)
	}
	s.stop(t)
}

// tryGet is get without failing the test (for use off the test goroutine).
func tryGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestOnlyFailingModelsNotReady is the "done when", on the real
// binaries: a config whose only model fails its checksum leaves /readyz at
// 503 naming it (the first sync is over: every model was tried), and the
// server becomes ready once the bucket holds the listed content.
func TestOnlyFailingModelsNotReady(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	sidecarBin := buildForTest(t, "cmd/inference-sidecar-tensorflow")
	ctx := context.Background()
	bucketURL := "file://" + t.TempDir()
	listed, corrupt := affine{a: 3, c: -1}, affine{a: 4, c: 0}
	listedFiles := listed.files(t)
	if err := storetest.WriteFiles(ctx, bucketURL, "myctr/", corrupt.files(t)); err != nil {
		t.Fatal(err)
	}
	if err := storetest.WriteConfig(ctx, bucketURL, "model_config.json",
		storetest.ConfigEntry{ModelPath: "myctr/", Checksum: modelfiles.Checksum(listedFiles)}); err != nil {
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
		"INFERENCE_MODEL_FETCH_PERIOD_MS=100",
	})
	var body string
	waitFor(t, "/readyz to answer 503 naming myctr/ after the first sync", func() bool {
		var code int
		code, body = get(t, s.url+"/readyz")
		return code == 503 && strings.Contains(body, `\"myctr/\"`) && strings.Contains(body, "checksum mismatch")
	})
	t.Logf("/readyz: %s", strings.TrimSpace(body))
	if code, body := get(t, s.url+"/v2/models/myctr"); code != 503 || !strings.Contains(body, "failed to load") {
		t.Errorf("/v2/models/myctr = %d %s, want 503 with the load error", code, body)
	}
	if err := storetest.DeletePrefix(ctx, bucketURL, "myctr/"); err != nil {
		t.Fatal(err)
	}
	if err := storetest.WriteFiles(ctx, bucketURL, "myctr/", listedFiles); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t)
	s.stop(t)
}
