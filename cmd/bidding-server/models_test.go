package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// newModelsServer is the HTTP API over a real sidecar (pure-Go TensorFlow,
// served on a Unix socket) fed by a real watcher of a file:// bucket that
// lists pctr/v1/ with its checksum and bad/ with a wrong one, after the
// first sync.
func newModelsServer(t *testing.T) (url string, pctrSum, badSum string) {
	t.Helper()
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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
	pctrSum, badSum = modelfiles.Checksum(pctr), modelfiles.Checksum(bad)
	if err := storetest.WriteConfig(ctx, bucket, "model_config.json",
		storetest.ConfigEntry{ModelPath: "pctr/v1/", Checksum: pctrSum},
		storetest.ConfigEntry{ModelPath: "bad/", Checksum: strings.Repeat("0", 64)},
	); err != nil {
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
	if err := w.SyncOnce(ctx); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("first sync: %v, want the checksum mismatch of bad/", err)
	}
	m := newMetrics(reg)
	pool, err := jsbridge.New("server.js", serverScript, jsbridge.Options{Size: 1, Logger: logger, Hooks: m.hooks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	s := &server{pool: pool, metrics: m, gatherer: reg, logger: logger, models: client, health: client}
	s.watcher.Store(w)
	s.setSyncResult(nil)
	ts := httptest.NewServer(s.handler())
	t.Cleanup(ts.Close)
	return ts.URL, pctrSum, badSum
}

// TestModelsEndpoints: GET /v1/models lists the serving model with its
// signature and the one that failed its checksum with the error (while
// /readyz says 200), keeps model_paths, and GET /v1/models/{path} answers
// one model, or 404 with a JSON error.
func TestModelsEndpoints(t *testing.T) {
	url, pctrSum, badSum := newModelsServer(t)
	if code, body := get(t, url+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	code, body := get(t, url+"/v1/models")
	t.Logf("GET /v1/models: %s", body)
	var list struct {
		ModelPaths []string      `json:"model_paths"`
		Models     []modelStatus `json:"models"`
		Enabled    bool          `json:"inference_enabled"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("/v1/models = %d %s (%v)", code, body, err)
	}
	if !slices.Equal(list.ModelPaths, []string{"pctr/v1/"}) || !list.Enabled || len(list.Models) != 2 {
		t.Fatalf("/v1/models = %s, want model_paths [pctr/v1/] and two models", body)
	}
	bad, pctr := list.Models[0], list.Models[1]
	if bad.ModelPath != "bad/" || bad.State != "failed" || bad.Failures != 1 || bad.LastErrorAt == "" || bad.Inputs != nil ||
		!strings.Contains(bad.LastError, "checksum mismatch") || !strings.Contains(bad.LastError, badSum) || bad.ListedChecksum != strings.Repeat("0", 64) {
		t.Errorf("bad/ = %+v, want failed with the checksum mismatch naming %s", bad, badSum)
	}
	if pctr.ModelPath != "pctr/v1/" || pctr.State != "serving" || pctr.Checksum != pctrSum || pctr.ListedChecksum != "" || pctr.LastError != "" {
		t.Errorf("pctr/v1/ = %+v, want serving with checksum %s", pctr, pctrSum)
	}
	if at, err := time.Parse(time.RFC3339, pctr.LoadedAt); err != nil || time.Since(at) > time.Hour || time.Since(at) < -time.Hour {
		t.Errorf("pctr/v1/ loaded_at %q (%v), want the registration's time", pctr.LoadedAt, err)
	}
	wantIn := []sidecar.StatusTensorSpec{
		{Name: "serving_default_ad_id:0", Aliases: []string{"ad_id"}, DType: "INT64", Shape: []int64{-1, 1}},
		{Name: "serving_default_dense:0", Aliases: []string{"dense"}, DType: "FLOAT", Shape: []int64{-1, tfsave.PCTRDense}},
		{Name: "serving_default_publisher_id:0", Aliases: []string{"publisher_id"}, DType: "INT64", Shape: []int64{-1, 1}},
	}
	in := slices.Clone(pctr.Inputs)
	slices.SortFunc(in, func(a, b sidecar.StatusTensorSpec) int { return strings.Compare(a.Name, b.Name) })
	if !slices.EqualFunc(in, wantIn, func(a, b sidecar.StatusTensorSpec) bool {
		return a.Name == b.Name && slices.Equal(a.Aliases, b.Aliases) && a.DType == b.DType && slices.Equal(a.Shape, b.Shape)
	}) {
		t.Errorf("pctr/v1/ inputs %+v, want %+v", pctr.Inputs, wantIn)
	}
	if len(pctr.Outputs) != 1 || pctr.Outputs[0].DType != "FLOAT" || !slices.Equal(pctr.Outputs[0].Shape, []int64{-1, 1}) {
		t.Errorf("pctr/v1/ outputs %+v, want one FLOAT [-1,1]", pctr.Outputs)
	}

	// One model, by a path with slashes.
	code, body = get(t, url+"/v1/models/pctr/v1/")
	var one modelStatus
	if err := json.Unmarshal([]byte(body), &one); code != 200 || err != nil || one.ModelPath != "pctr/v1/" || one.Checksum != pctrSum || len(one.Inputs) != 3 {
		t.Errorf("/v1/models/pctr/v1/ = %d %s (%v)", code, body, err)
	}
	code, body = get(t, url+"/v1/models/bad/")
	if err := json.Unmarshal([]byte(body), &one); code != 200 || err != nil || one.State != "failed" || !strings.Contains(one.LastError, "checksum mismatch") {
		t.Errorf("/v1/models/bad/ = %d %s (%v)", code, body, err)
	}
	for _, path := range []string{"/v1/models/pctr/v9/", "/v1/models/pctr/v1", "/v1/models/"} {
		code, body = get(t, url+path)
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(body), &e); code != 404 || err != nil || e.Error == "" {
			t.Errorf("%s = %d %s, want 404 with a JSON error", path, code, body)
		}
	}
	_, body = get(t, url+"/v1/models/pctr/v9/")
	var e struct{ Error string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || !strings.Contains(e.Error, `"pctr/v9/"`) {
		t.Errorf("404 body %s does not name the path", body)
	}
	// Without the trailing slash: the 404 says the path that is known (a
	// failed model's too); one that is not known gets no hint.
	for path, hint := range map[string]string{"pctr/v1": "GET /v1/models/pctr/v1/", "bad": "GET /v1/models/bad/", "pctr/v9": ""} {
		_, body = get(t, url+"/v1/models/"+path)
		if got := strings.Contains(body, "GET /v1/models/"); got != (hint != "") || !strings.Contains(body, hint) {
			t.Errorf("/v1/models/%s = %s, want the hint %q", path, body, hint)
		}
	}
}

// TestMergeModelStatus: the states that come from joining the sidecar's
// view with the model sync's.
func TestMergeModelStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	infos := []sidecar.ModelInfo{
		{Path: "drain/", State: sidecar.ModelServing, Checksum: "d1", LoadedAt: t0},
		{Path: "local/", State: sidecar.ModelServing, Checksum: "l1", LoadedAt: t0},
		{Path: "upd/", State: sidecar.ModelServing, Checksum: "u1", LoadedAt: t0},
		{Path: "replaying/", State: sidecar.ModelLoading},
	}
	synced := []modelstore.ModelStatus{
		{Path: "drain/", State: modelstore.ModelDraining, Checksum: "d1", EvictAt: t0.Add(time.Minute)},
		{Path: "gone/", State: modelstore.ModelServing, Checksum: "g1", ListedChecksum: "g1", LoadedAt: t0},
		{Path: "upd/", State: modelstore.ModelServing, Checksum: "u1", ListedChecksum: "u2", LastError: "checksum mismatch", Failures: 2, LastErrorAt: t0,
			ExternalVariables: map[string]string{"emb": "redis-cluster://127.0.0.1:7000"}},
		{Path: "replaying/", State: modelstore.ModelServing, Checksum: "r1", ListedChecksum: "r1"},
		{Path: "new/", State: modelstore.ModelLoading, ListedChecksum: "n1"},
	}
	got := map[string]modelStatus{}
	for _, m := range mergeModelStatus(infos, synced) {
		got[m.ModelPath] = m
	}
	for path, want := range map[string]modelStatus{
		"drain/":     {State: "draining", Checksum: "d1", LoadedAt: "2026-01-02T03:04:05.000Z", EvictAt: "2026-01-02T03:05:05.000Z"},
		"local/":     {State: "serving", Checksum: "l1", LoadedAt: "2026-01-02T03:04:05.000Z"},
		"upd/":       {State: "serving", Checksum: "u1", ListedChecksum: "u2", LoadedAt: "2026-01-02T03:04:05.000Z", LastError: "checksum mismatch", LastErrorAt: "2026-01-02T03:04:05.000Z", Failures: 2},
		"gone/":      {State: "failed", Checksum: "g1", LastError: notInSidecar},
		"replaying/": {State: "loading", Checksum: "r1"},
		"new/":       {State: "loading", ListedChecksum: "n1"},
	} {
		want.ModelPath = path
		if g := got[path]; g.ModelPath != want.ModelPath || g.State != want.State || g.Checksum != want.Checksum || g.ListedChecksum != want.ListedChecksum ||
			g.LoadedAt != want.LoadedAt || g.EvictAt != want.EvictAt || g.LastError != want.LastError || g.LastErrorAt != want.LastErrorAt || g.Failures != want.Failures {
			t.Errorf("%s: got %+v\nwant %+v", path, g, want)
		}
	}
	if len(got) != 6 {
		t.Errorf("merged %d models, want 6", len(got))
	}
	// The model sync's external_variables are listed with the model.
	if ev := got["upd/"].ExternalVariables; len(ev) != 1 || ev["emb"] != "redis-cluster://127.0.0.1:7000" {
		t.Errorf("upd/ external_variables = %v, want emb from redis-cluster://127.0.0.1:7000", ev)
	}
	if ev := got["local/"].ExternalVariables; ev != nil {
		t.Errorf("local/ external_variables = %v, want none", ev)
	}
}
