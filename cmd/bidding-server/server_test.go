package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/sidecar"
)

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "pctr_v3")
	os.MkdirAll(modelDir, 0o755)
	modelFile := filepath.Join(dir, "mlp.onnx")
	os.WriteFile(modelFile, []byte("x"), 0o644)

	env := map[string]string{
		"INFERENCE_SIDECAR_BINARY_PATH":   "/env/sidecar",
		"INFERENCE_MODEL_BUCKET_NAME":     "file:///env/bucket",
		"INFERENCE_MODEL_CONFIG_PATH":     "env.json",
		"INFERENCE_MODEL_FETCH_PERIOD_MS": "1500",
		"INFERENCE_SIDECAR_RLIMIT_MB":     "512",
		"INFERENCE_SIDECAR_TRANSPORT":     "grpc",
		"INFERENCE_SIDECAR_SPIN_WAIT":     "-1ns",
		"INFERENCE_MODEL_LOCAL_PATHS":     modelDir + "," + modelFile + ",custom/path/=" + modelDir,
	}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig([]string{"--inference_model_bucket_name", "file:///flag/bucket", "--listen", "127.0.0.1:0"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.ModelBucketName != "file:///flag/bucket" {
		t.Errorf("bucket %q: the flag must win over the environment", c.ModelBucketName)
	}
	if c.SidecarBinaryPath != "/env/sidecar" || c.ModelConfigPath != "env.json" || c.ModelFetchPeriod != 1500*time.Millisecond || c.SidecarRlimitMB != 512 || c.SidecarTransport != sidecar.TransportGRPC || c.SidecarSpinWait != -time.Nanosecond {
		t.Errorf("environment not applied: %+v", c)
	}
	if c.DrainPeriod != 5*time.Second || c.MaxConnections != 10000 || c.WriteTimeout != c.ReadTimeout+c.RequestTimeout+10*time.Second {
		t.Errorf("listener defaults: drain %v, max connections %d, write timeout %v", c.DrainPeriod, c.MaxConnections, c.WriteTimeout)
	}
	want := []localModel{{"pctr_v3/", modelDir}, {"mlp.onnx", modelFile}, {"custom/path/", modelDir}}
	if fmt.Sprint(c.LocalModels) != fmt.Sprint(want) {
		t.Errorf("local models %v, want %v", c.LocalModels, want)
	}

	for name, args := range map[string][]string{
		"bad period":           {"--inference_sidecar_binary_path", "x", "--inference_model_fetch_period_ms", "-1"},
		"bucket, no config":    {"--inference_sidecar_binary_path", "x", "--inference_model_bucket_name", "file:///b"},
		"models, no binary":    {"--inference_model_local_paths", modelFile},
		"missing local":        {"--inference_sidecar_binary_path", "x", "--inference_model_local_paths", filepath.Join(dir, "nope")},
		"stray argument":       {"extra"},
		"unknown transport":    {"--inference_sidecar_transport", "http"},
		"spin wait, no number": {"--inference_sidecar_spin_wait", "fast"},
		"negative budget":      {"--js_heap_budget_mb", "-1"},
		"negative share":       {"--js_request_concurrency", "-2"},
		"negative drain":       {"--drain_period", "-1s"},
		"negative cap":         {"--max_connections", "-1"},
		"no header timeout":    {"--read_header_timeout", "0"},
		"short write":          {"--write_timeout", "5s", "--request_timeout", "10s"},
	} {
		if _, err := parseConfig(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("%s: accepted %q", name, args)
		}
	}
	if _, err := parseConfig(nil, func(k string) string {
		if k == "INFERENCE_MODEL_FETCH_PERIOD_MS" {
			return "soon"
		}
		return ""
	}, io.Discard); err == nil || !strings.Contains(err.Error(), "INFERENCE_MODEL_FETCH_PERIOD_MS") {
		t.Errorf("a bad environment value: %v", err)
	}
}

const serverScript = `
function generateBid(ig, auction, perBuyer, trusted, browser) {
  if (ig.name === "thrower") throw new Error("no bid for " + ig.name);
  if (ig.name === "looper") for (;;) {}
  if (ig.name === "huge") return "x".repeat(5000);
  return {bid: ig.value * (perBuyer ? perBuyer.mult : 1), auction: auction === undefined ? "none" : auction.id};
}
`

func newTestServer(t *testing.T) (*httptest.Server, *server) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool, err := jsbridge.New("server.js", serverScript, jsbridge.Options{Size: 2, CallTimeout: 100 * time.Millisecond, Logger: logger, Hooks: m.hooks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	s := &server{pool: pool, metrics: m, gatherer: reg, logger: logger, maxBody: 2048, maxGroups: 5, maxBidBytes: 4096, requestTimeout: 10 * time.Second}
	s.setSyncResult(nil)
	ts := httptest.NewServer(s.handler())
	t.Cleanup(ts.Close)
	return ts, s
}

func post(t testing.TB, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestGenerateBids(t *testing.T) {
	ts, _ := newTestServer(t)
	code, body := post(t, ts.URL+"/v1/generateBids", `{"interest_groups":[
		{"name":"a","value":2},{"name":"thrower"},{"name":"looper"},{"name":"b","value":5},{"name":"huge"}],
		"auction_signals":{"id":"auc-1"},"per_buyer_signals":{"mult":10}}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var got struct {
		Bids []struct {
			IG    string          `json:"interest_group"`
			Bid   json.RawMessage `json:"bid"`
			Error string          `json:"error"`
		} `json:"bids"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Bids) != 5 {
		t.Fatalf("bids %s", body)
	}
	wantIG := []string{"a", "thrower", "looper", "b", "huge"}
	for i, b := range got.Bids {
		if b.IG != wantIG[i] {
			t.Errorf("bid %d for %q, want %q (request order)", i, b.IG, wantIG[i])
		}
	}
	if string(got.Bids[0].Bid) != `{"bid":20,"auction":"auc-1"}` || string(got.Bids[3].Bid) != `{"bid":50,"auction":"auc-1"}` {
		t.Errorf("bids: %s", body)
	}
	if got.Bids[1].Bid != nil || !strings.Contains(got.Bids[1].Error, "no bid for thrower") {
		t.Errorf("thrower: %+v", got.Bids[1])
	}
	if !strings.Contains(got.Bids[2].Error, "deadline") {
		t.Errorf("looper: %+v", got.Bids[2])
	}
	if got.Bids[4].Bid != nil || !strings.Contains(got.Bids[4].Error, "limit is 4096") {
		t.Errorf("huge: %+v", got.Bids[4])
	}
	// Absent signals are undefined in JS.
	_, body = post(t, ts.URL+"/v1/generateBids", `{"interest_groups":[{"name":"a","value":1}]}`)
	if !strings.Contains(body, `"auction":"none"`) {
		t.Errorf("absent auction_signals: %s", body)
	}
}

func TestGenerateBidsBadRequests(t *testing.T) {
	ts, _ := newTestServer(t)
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{nope`, 400, "not a generateBids JSON object"},
		{`[]`, 400, "not a generateBids JSON object"},
		{`{}`, 400, "interest_groups"},
		{`{"interest_groups":[]}`, 400, "interest_groups"},
		{`{"interest_groups":[1]}`, 400, "interest_groups[0] is not an object"},
		{`{"interest_groups":[null]}`, 400, "interest_groups[0] is not an object"},
		{`{"interest_groups":[{"nom":"x"}]}`, 400, `interest_groups[0] has no string "name"`},
		{`{"interest_groups":[{"name":1},{"name":"x"}]}`, 400, "interest_groups[0]"},
		{`{"interest_groups":[{"name":"1"},{"name":"2"},{"name":"3"},{"name":"4"},{"name":"5"},{"name":"6"}]}`, 400, "limit is 5"},
		{`{"interest_groups":[{"name":"` + strings.Repeat("x", 3000) + `"}]}`, 413, "larger than 2048 bytes"},
	} {
		code, body := post(t, ts.URL+"/v1/generateBids", c.body)
		var e struct{ Error string }
		if json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
			t.Errorf("%.60s: the error body is not {\"error\":...}: %s", c.body, body)
		}
		if code != c.code || !strings.Contains(e.Error, c.want) {
			t.Errorf("%.60s: %d %s, want %d with %q", c.body, code, body, c.code, c.want)
		}
	}
	resp, err := http.Get(ts.URL + "/v1/generateBids")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET generateBids: %d", resp.StatusCode)
	}
}

func TestHealthReadyModelsMetrics(t *testing.T) {
	ts, s := newTestServer(t)
	if code, _ := get(t, ts.URL+"/healthz"); code != 200 {
		t.Errorf("healthz %d", code)
	}
	if code, body := get(t, ts.URL+"/readyz"); code != 200 {
		t.Errorf("readyz %d %s", code, body)
	}
	s.synced.Store(false)
	s.setSyncResult(fmt.Errorf("bucket unreachable"))
	if code, body := get(t, ts.URL+"/readyz"); code != 503 || !strings.Contains(body, "bucket unreachable") {
		t.Errorf("readyz before the first sync: %d %s", code, body)
	}
	if code, body := get(t, ts.URL+"/v1/models"); code != 200 || !strings.Contains(body, `"inference_enabled":false`) {
		t.Errorf("models without a sidecar: %d %s", code, body)
	}
	post(t, ts.URL+"/v1/generateBids", `{"interest_groups":[{"name":"a","value":1},{"name":"thrower"}]}`)
	code, body := get(t, ts.URL+"/metrics")
	if code != 200 {
		t.Fatalf("metrics %d", code)
	}
	for _, want := range []string{
		`inferbid_js_calls_total{func="generateBid",outcome="ok"} 1`,
		`inferbid_js_calls_total{func="generateBid",outcome="exception"} 1`,
		`inferbid_http_requests_total{code="200",handler="generateBids"} 1`,
		"inferbid_sidecar_restarts_total 0",
		"inferbid_inference_requests_total 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestMetricsHooksInference(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	h := m.hooks()
	h.OnInference(&jsbridge.InferenceEvent{Duration: time.Millisecond, RequestBytes: 100, ResponseBytes: 50, Entries: []jsbridge.EntryEvent{
		{ModelPath: "pctr/v2/", BatchSize: 3},
		{ModelPath: "typo/", BatchSize: 1, Err: errNotFound},
	}})
	var buf bytes.Buffer
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		fmt.Fprintln(&buf, mf.String())
	}
	out := buf.String()
	for _, want := range []string{"pctr/v2/", unknownModelLabel, "MODEL_NOT_FOUND"} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(out, "typo/") {
		t.Error("an unregistered model path became a label")
	}
}

var errNotFound = inferr.Errorf(inferr.ModelNotFound, "model %q not found", "typo/")

// FuzzGenerateBidsBody: any body gets 200, 400 or 413 with a JSON answer,
// never a panic or a hang.
func FuzzGenerateBidsBody(f *testing.F) {
	for _, s := range []string{
		`{"interest_groups":[{"name":"a","value":2}],"auction_signals":{"id":"x"}}`,
		`{"interest_groups":[{"name":"thrower"},{"name":"b","value":1}]}`,
		`{"interest_groups":[1,null,{"name":2}]}`,
		`{nope`, `[]`, `null`, ``,
	} {
		f.Add(s)
	}
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool, err := jsbridge.New("server.js", serverScript, jsbridge.Options{Size: 2, CallTimeout: 50 * time.Millisecond, Logger: logger, Hooks: m.hooks()})
	if err != nil {
		f.Fatal(err)
	}
	defer pool.Close()
	s := &server{pool: pool, metrics: m, gatherer: reg, logger: logger, maxBody: 4096, maxGroups: 5, maxBidBytes: 4096, requestTimeout: time.Second}
	h := s.handler()
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/generateBids", strings.NewReader(body)))
		switch w.Code {
		case 200, 400, 413:
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("invalid JSON answer %q for %q", w.Body.String(), body)
		}
	})
}

// TestStartingAndDraining: while start-up runs, /healthz is 200 and the
// API and /readyz answer 503 saying what is starting; while draining,
// /readyz is 503 "draining" and requests are still served.
func TestStartingAndDraining(t *testing.T) {
	ts, s := newTestServer(t)
	s.setStarting("the inference sidecar is starting")
	if code, body := get(t, ts.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz while starting: %d %s", code, body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/readyz", ""}, {"GET", "/v1/models", ""}, {"POST", "/v1/generateBids", `{"interest_groups":[{"name":"a","value":1}]}`},
	} {
		var code int
		var body string
		if c.method == "GET" {
			code, body = get(t, ts.URL+c.path)
		} else {
			code, body = post(t, ts.URL+c.path, c.body)
		}
		if code != 503 || !strings.Contains(body, "the inference sidecar is starting") {
			t.Errorf("%s %s while starting: %d %s", c.method, c.path, code, body)
		}
	}
	// The v2 API's server-ready is /readyz's verdict.
	if err := s.readyErr(context.Background()); err == nil || !strings.Contains(err.Error(), "the inference sidecar is starting") {
		t.Errorf("readyErr while starting: %v", err)
	}
	s.started()
	if code, body := get(t, ts.URL+"/readyz"); code != 200 {
		t.Errorf("/readyz once started: %d %s", code, body)
	}
	if err := s.readyErr(context.Background()); err != nil {
		t.Errorf("readyErr once started: %v", err)
	}
	s.draining.Store(true)
	if code, body := get(t, ts.URL+"/readyz"); code != 503 || !strings.Contains(body, `"status":"draining"`) {
		t.Errorf("/readyz while draining: %d %s", code, body)
	}
	if err := s.readyErr(context.Background()); err == nil || !strings.Contains(err.Error(), "draining") {
		t.Errorf("readyErr while draining: %v", err)
	}
	if code, body := post(t, ts.URL+"/v1/generateBids", `{"interest_groups":[{"name":"a","value":1}]}`); code != 200 {
		t.Errorf("generateBids while draining: %d %s", code, body)
	}
}
