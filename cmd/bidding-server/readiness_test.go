package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/modelstore"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/modelstore/storetest"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

func TestModelReadiness(t *testing.T) {
	serving := modelstore.ModelStatus{Path: "good/", State: modelstore.ModelServing}
	failed := modelstore.ModelStatus{Path: "bad/", State: modelstore.ModelFailed, LastError: "checksum mismatch"}
	loading := modelstore.ModelStatus{Path: "new/", State: modelstore.ModelLoading}
	retried := modelstore.ModelStatus{Path: "bad/", State: modelstore.ModelLoading, LastError: "checksum mismatch"}
	for _, tc := range []struct {
		policy      readinessPolicy
		local       int
		models      []modelstore.ModelStatus
		ready       bool
		wantInProbs []string
		wantFailed  int
	}{
		{policy: policyAny, ready: true},
		{policy: "", models: []modelstore.ModelStatus{failed}, wantInProbs: []string{`"bad/": checksum mismatch`, "any"}, wantFailed: 1},
		{policy: policyAny, models: []modelstore.ModelStatus{failed}, wantInProbs: []string{`"bad/": checksum mismatch`}, wantFailed: 1},
		{policy: policyAny, models: []modelstore.ModelStatus{failed, serving}, ready: true, wantFailed: 1},
		{policy: policyAny, local: 1, models: []modelstore.ModelStatus{failed}, ready: true, wantFailed: 1},
		{policy: policyAny, models: []modelstore.ModelStatus{loading}, wantInProbs: []string{`"new/": loading`}},
		{policy: policyAny, models: []modelstore.ModelStatus{retried}, wantInProbs: []string{`"bad/": checksum mismatch (retrying)`}, wantFailed: 1},
		{policy: policyAll, models: []modelstore.ModelStatus{failed, serving}, wantInProbs: []string{"1 of 2", `"bad/"`}, wantFailed: 1},
		{policy: policyAll, models: []modelstore.ModelStatus{serving, loading}, wantInProbs: []string{`"new/": loading`}},
		{policy: policyAll, models: []modelstore.ModelStatus{serving}, ready: true},
		{policy: policyNone, models: []modelstore.ModelStatus{failed}, ready: true, wantFailed: 1},
	} {
		probs, f := modelReadiness(tc.policy, tc.local, tc.models, nil)
		if (len(probs) == 0) != tc.ready || len(f) != tc.wantFailed {
			t.Errorf("%q local=%d %v: problems %q failed %q, want ready=%v and %d failed", tc.policy, tc.local, tc.models, probs, f, tc.ready, tc.wantFailed)
		}
		for _, w := range tc.wantInProbs {
			if !strings.Contains(strings.Join(probs, "\n"), w) {
				t.Errorf("%q %v: problems %q do not mention %q", tc.policy, tc.models, probs, w)
			}
		}
	}
	// A config whose only entry names no model_path (a misspelt field).
	if probs, f := modelReadiness(policyAny, 0, nil, []string{`model_metadata[0]: unknown field "modelpath"`}); len(probs) != 1 || len(f) != 1 || !strings.Contains(probs[0], "modelpath") {
		t.Errorf("an unnamed rejected entry: problems %q failed %q, want not ready naming it", probs, f)
	}
	if _, err := parseReadinessPolicy("some"); err == nil || !strings.Contains(err.Error(), "any, all or none") {
		t.Errorf("parseReadinessPolicy(some) = %v", err)
	}
}

// onlyFailingServer is the HTTP API (with /v2) over a real sidecar and a
// real watcher of a file:// bucket whose config lists only bad/, with
// content that does not match its checksum; and the v2 gRPC service with
// the health service on a real TCP port.
func onlyFailingServer(t *testing.T, policy readinessPolicy) (url string, health healthpb.HealthClient) {
	t.Helper()
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bad, err := tfsave.AffineModel(tfsave.Options{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	bucket := "file://" + t.TempDir()
	if err := storetest.WriteFiles(ctx, bucket, "bad/", bad); err != nil {
		t.Fatal(err)
	}
	if modelfiles.Checksum(bad) == strings.Repeat("0", 64) {
		t.Fatal("checksum collision")
	}
	if err := storetest.WriteConfig(ctx, bucket, "model_config.json",
		storetest.ConfigEntry{ModelPath: "bad/", Checksum: strings.Repeat("0", 64)}); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	w, err := modelstore.NewWatcher(modelstore.WatcherOptions{BucketURL: bucket, ConfigPath: "model_config.json",
		Registrar: client, Logger: logger, Metrics: reg, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := w.SyncOnce(ctx); err == nil {
		t.Fatal("first sync: no error, want bad/'s checksum mismatch")
	}
	m := newMetrics(reg)
	pool, err := jsbridge.New("server.js", serverScript, jsbridge.Options{Size: 1, Logger: logger, Hooks: m.hooks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	s := &server{pool: pool, metrics: m, gatherer: reg, logger: logger, models: client, health: client, readinessPolicy: policy}
	s.watcher.Store(w)
	s.setSyncResult(nil)
	s.v2 = newKServe(config{RequestTimeout: 5 * time.Second}, s, m)
	s.v2.SetBackend(client)
	ts := httptest.NewServer(s.handler())
	t.Cleanup(ts.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.v2.NewGRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ts.URL, healthpb.NewHealthClient(conn)
}

// TestNotReadyWithOnlyFailingModels: a config whose only model fails its
// checksum leaves /readyz at 503 naming it (the "done when"), the
// v2 server ready and the gRPC health service agree, and the model's load
// error is in /v1/models/{path}, v2 model metadata and model ready rather
// than "not known". With --readiness_policy none the server is ready and
// /readyz still names the failure.
func TestNotReadyWithOnlyFailingModels(t *testing.T) {
	url, health := onlyFailingServer(t, policyAny)
	code, body := get(t, url+"/readyz")
	if code != 503 || !strings.Contains(body, `\"bad/\"`) || !strings.Contains(body, "checksum mismatch") {
		t.Errorf("/readyz = %d %s, want 503 naming bad/ and its checksum mismatch", code, body)
	}
	if code, body := get(t, url+"/v2/health/ready"); code != 400 {
		t.Errorf("/v2/health/ready = %d %s, want 400", code, body)
	}
	for _, svc := range []string{"", "inference.GRPCInferenceService"} {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("gRPC health %q: %v %v, want NOT_SERVING", svc, resp, err)
		}
	}
	if _, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "nope"}); err == nil {
		t.Error("gRPC health of an unknown service: no error")
	}
	if code, body := get(t, url+"/v1/models/bad/"); code != 200 || !strings.Contains(body, `"state":"failed"`) || !strings.Contains(body, "checksum mismatch") {
		t.Errorf("/v1/models/bad/ = %d %s", code, body)
	}
	if code, body := get(t, url+"/v2/models/bad"); code != 503 || !strings.Contains(body, "failed to load") || !strings.Contains(body, "checksum mismatch") {
		t.Errorf("/v2/models/bad = %d %s, want 503 with the load error", code, body)
	}
	if code, body := get(t, url+"/v2/models/bad/ready"); code != 400 || !strings.Contains(body, "checksum mismatch") {
		t.Errorf("/v2/models/bad/ready = %d %s, want 400 with the load error", code, body)
	}
	if code, body := get(t, url+"/v2/models/other"); code != 404 || !strings.Contains(body, "not known") {
		t.Errorf("/v2/models/other = %d %s, want 404 not known", code, body)
	}

	url, health = onlyFailingServer(t, policyNone)
	code, body = get(t, url+"/readyz")
	var r struct {
		Status string   `json:"status"`
		Failed []string `json:"failed_models"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil || r.Status != "ready" || len(r.Failed) != 1 || !strings.HasPrefix(r.Failed[0], `"bad/"`) {
		t.Errorf("/readyz with policy none = %d %s, want 200 naming bad/ in failed_models", code, body)
	}
	resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health with policy none: %v %v, want SERVING", resp, err)
	}
}
