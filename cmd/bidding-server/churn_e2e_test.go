package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/modelstore/storetest"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
)

// The churn test runs generateBid traffic against the real binaries while
// the bucket's config adds a model, updates one in place and removes one,
// then checks every answer against the timeline of config writes.

// raceEnabled reports whether this test binary was built with -race; the
// binaries under test are then built with -race too, so a data race in the
// server or the sidecar under churn shows in their logs.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// buildForTest builds a pure-Go binary, with -race when the test runs with
// -race (the race runtime needs cgo; the code itself imports no C).
func buildForTest(t *testing.T, pkg string) string {
	t.Helper()
	if raceEnabled() {
		return testhelp.BuildBinary(t, pkg, true, "-race")
	}
	return testhelp.BuildBinary(t, pkg, false)
}

// affine is a tfsave.AffineModel: y = a*x + c on a FLOAT [1,3] input.
type affine struct {
	a, c    float32
	padding int // bytes of an unused asset file
}

var churnInput = []float32{1, 2, 3}

func (m affine) files(t *testing.T) runtimes.Files {
	t.Helper()
	f, err := tfsave.AffineModel(tfsave.Options{}, m.a, m.c)
	if err != nil {
		t.Fatal(err)
	}
	if m.padding > 0 {
		// An asset the graph never reads: it makes the model's transfer to
		// the sidecar, and so any window a swap might open, last longer.
		pad := make([]byte, m.padding)
		for i := range pad {
			pad[i] = byte(i*7 + int(m.a*13))
		}
		f["assets/padding.bin"] = pad
	}
	return f
}

// want computes the answer independently of the runtime: float32
// arithmetic (each step rounded, as TF's Mul then AddV2), widened to
// float64 as the response JSON prints it.
func (m affine) want() []float64 {
	out := make([]float64, len(churnInput))
	for i, x := range churnInput {
		out[i] = float64(float32(float32(m.a*x) + m.c))
	}
	return out
}

// churnRequest is what the module sends for a model, also its warm-up.
func churnRequest(path string) string {
	return fmt.Sprintf(`{"request":[{"model_path":%q,"tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":[1,2,3]}]}]}`, path)
}

// churnModule runs the model named by the interest group and returns its
// output, or the error type the batch response carries.
const churnModule = `
function generateBid(ig) {
  var out = JSON.parse(runInference(JSON.stringify({request: [{model_path: ig.model,
      tensors: [{tensor_name: "x", data_type: "FLOAT", tensor_shape: [1, 3], tensor_content: [1, 2, 3]}]}]})));
  var r = out.response[0];
  if (r.error) return {error_type: r.error.error_type, description: r.error.description};
  return {y: r.tensors[0].tensor_content};
}
`

// observation is one interest group's answer in one generateBids request:
// start is before the request was sent, end after its answer was read.
type observation struct {
	model      string
	start, end time.Time
	label      string // the expected answer it equals ("v1", "v2", ...), or ""
	errorType  string // the per-entry error type, or ""
	failure    string // anything else: transport, status, module error, unexpected values
}

// churnTimeline is when each config version was written (taken just before
// the write, so the server cannot have acted on it earlier).
type churnTimeline struct {
	added, updated, removed time.Time
	updGrace, delGrace      time.Duration
}

// checkChurn returns every answer that breaks the rules, given the models'
// roles: keep is listed throughout; add is added at tl.added; upd is listed
// throughout and updated in place at tl.updated (answers "v1" then "v2");
// del is delisted at tl.removed.
func checkChurn(obs []observation, tl churnTimeline, keep, add, upd, del string) (violations []string, stats map[string]int) {
	stats = map[string]int{}
	bad := func(o observation, format string, args ...any) {
		violations = append(violations, fmt.Sprintf("%s [%s..%s after start]: %s", o.model,
			o.start.Sub(obs[0].start).Round(time.Millisecond), o.end.Sub(obs[0].start).Round(time.Millisecond),
			fmt.Sprintf(format, args...)))
	}
	notFound := func(o observation) bool { return o.errorType == "MODEL_NOT_FOUND" }
	// first answer of a kind, by when it was received
	firstEnd := func(model string, match func(observation) bool) (time.Time, bool) {
		var first time.Time
		for _, o := range obs {
			if o.model == model && match(o) && (first.IsZero() || o.end.Before(first)) {
				first = o.end
			}
		}
		return first, !first.IsZero()
	}
	addServed, addOK := firstEnd(add, func(o observation) bool { return o.label != "" })
	v2Seen, v2OK := firstEnd(upd, func(o observation) bool { return o.label == "v2" })
	delGone, delOK := firstEnd(del, notFound)
	for _, o := range obs {
		key := o.model + ":" + o.label + o.errorType
		if o.failure != "" {
			key = o.model + ":failure"
		}
		stats[key]++
		switch {
		case o.failure != "":
			bad(o, "%s", o.failure)
			continue
		case o.errorType != "" && !notFound(o):
			bad(o, "error type %s", o.errorType)
			continue
		}
		switch o.model {
		case keep:
			if notFound(o) {
				bad(o, "MODEL_NOT_FOUND while listed in every config")
			}
		case add:
			if !notFound(o) && o.end.Before(tl.added) {
				bad(o, "served before the config listed it")
			}
			// Before it is first seen serving, the model may still be
			// loading (one poll plus download, load and warm-up); after,
			// it must never be missing again.
			if notFound(o) && addOK && o.start.After(addServed) {
				bad(o, "MODEL_NOT_FOUND after it was seen serving, while listed")
			}
		case upd:
			switch {
			case notFound(o):
				bad(o, "MODEL_NOT_FOUND while listed in every config (in-place update)")
			case o.label == "v2" && o.end.Before(tl.updated.Add(tl.updGrace)):
				bad(o, "new content served before the old one's %v grace period ended", tl.updGrace)
			case o.label == "v1" && v2OK && o.start.After(v2Seen):
				bad(o, "old content served after the new one was seen")
			}
		case del:
			switch {
			case notFound(o) && o.end.Before(tl.removed.Add(tl.delGrace)):
				bad(o, "MODEL_NOT_FOUND before its %v eviction grace period ended", tl.delGrace)
			case !notFound(o) && delOK && o.start.After(delGone):
				bad(o, "served again after it was seen removed")
			}
		}
	}
	if !addOK {
		violations = append(violations, add+": never served after it was added")
	}
	if stats[upd+":v1"] == 0 || !v2OK {
		violations = append(violations, fmt.Sprintf("%s: want answers of both contents, got v1=%d v2=%d", upd, stats[upd+":v1"], stats[upd+":v2"]))
	}
	if !delOK {
		violations = append(violations, del+": never MODEL_NOT_FOUND after its removal")
	}
	return violations, stats
}

// TestModelChurnUnderTraffic: generateBid traffic from several goroutines
// while a model is added, one is updated in place and one removed, each
// with an eviction grace period. No answer may be MODEL_NOT_FOUND for a
// model the config lists or whose grace has not ended, the updated model
// switches from its old answers to its new ones once, the removed one ends
// up MODEL_NOT_FOUND, and nothing fails any other way.
func TestModelChurnUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	const (
		period    = 100 * time.Millisecond
		updGrace  = time.Second
		delGrace  = time.Second
		workers   = 6
		maxCalls  = 20000 // bound on requests, whatever the speed
		stepWait  = time.Minute
		keepPath  = "keep/"
		addPath   = "new/"
		updPath   = "upd/"
		delPath   = "del/"
		configKey = "model_config.json"
	)
	models := map[string]map[string]affine{
		keepPath: {"keep": {0.5, 4, 0}},
		addPath:  {"new": {1.5, 0.25, 0}},
		updPath:  {"v1": {2, 1, 16 << 20}, "v2": {3, -1, 16 << 20}},
		delPath:  {"del": {-1, 10, 0}},
	}
	server := buildForTest(t, "cmd/bidding-server")
	sidecarBin := buildForTest(t, "cmd/inference-sidecar-tensorflow")

	ctx := context.Background()
	bucketDir := t.TempDir()
	bucketURL := "file://" + bucketDir
	put := func(path string, m affine) string {
		t.Helper()
		files := m.files(t)
		if err := storetest.DeletePrefix(ctx, bucketURL, path); err != nil {
			t.Fatal(err)
		}
		if err := storetest.WriteFiles(ctx, bucketURL, path, files); err != nil {
			t.Fatal(err)
		}
		return modelfiles.Checksum(files)
	}
	entry := func(path, sum string, graceMs int) storetest.ConfigEntry {
		return storetest.ConfigEntry{ModelPath: path, Checksum: sum, WarmUpJSON: churnRequest(path), EvictionGraceMs: graceMs}
	}
	writeConfig := func(entries ...storetest.ConfigEntry) time.Time {
		t.Helper()
		at := time.Now()
		if err := storetest.WriteConfig(ctx, bucketURL, configKey, entries...); err != nil {
			t.Fatal(err)
		}
		return at
	}
	keepE := entry(keepPath, put(keepPath, models[keepPath]["keep"]), 0)
	updV1 := entry(updPath, put(updPath, models[updPath]["v1"]), int(updGrace/time.Millisecond))
	delE := entry(delPath, put(delPath, models[delPath]["del"]), int(delGrace/time.Millisecond))
	writeConfig(keepE, updV1, delE)

	udf := filepath.Join(t.TempDir(), "churn.js")
	if err := os.WriteFile(udf, []byte(churnModule), 0o644); err != nil {
		t.Fatal(err)
	}
	// Generous deadlines: this test is about correctness under churn, and a
	// loaded 2-core machine must not turn slowness into failures.
	s := startBiddingServer(t, server, []string{"--udf_code_path", udf, "--js_pool_size", "4",
		"--js_call_timeout", "30s", "--request_timeout", "60s"}, []string{
		"INFERENCE_SIDECAR_BINARY_PATH=" + sidecarBin,
		"INFERENCE_MODEL_BUCKET_NAME=" + bucketURL,
		"INFERENCE_MODEL_CONFIG_PATH=" + configKey,
		fmt.Sprintf("INFERENCE_MODEL_FETCH_PERIOD_MS=%d", period/time.Millisecond),
	})
	if _, body := get(t, s.url+"/v1/models"); !strings.Contains(body, `"model_paths":["del/","keep/","upd/"]`) {
		t.Fatalf("ready, but /v1/models is %s", body)
	}

	// Traffic: every request asks each model, the updated one several times
	// (its swap is the narrowest window to catch).
	groupModels := []string{keepPath, addPath, updPath, updPath, updPath, delPath}
	var groups []string
	for i, p := range groupModels {
		groups = append(groups, fmt.Sprintf(`{"name":"%s#%d","model":%q}`, p, i, p))
	}
	body := `{"interest_groups":[` + strings.Join(groups, ",") + `]}`
	client := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var (
		stop               atomic.Bool
		calls              atomic.Int64
		addServed, sawV2   atomic.Bool
		delGone            atomic.Bool
		mu                 sync.Mutex
		obs                []observation
		wg                 sync.WaitGroup
		removedConfigWrite atomic.Bool
	)
	classify := func(model string, bid json.RawMessage) (label, errType, failure string) {
		var r struct {
			Y           []float64 `json:"y"`
			ErrorType   string    `json:"error_type"`
			Description string    `json:"description"`
		}
		if err := json.Unmarshal(bid, &r); err != nil {
			return "", "", fmt.Sprintf("bid %s: %v", bid, err)
		}
		if r.ErrorType != "" {
			if r.ErrorType != "MODEL_NOT_FOUND" {
				return "", r.ErrorType, r.ErrorType + ": " + r.Description
			}
			return "", r.ErrorType, ""
		}
		for name, m := range models[model] {
			if slices.Equal(r.Y, m.want()) {
				return name, "", ""
			}
		}
		return "", "", fmt.Sprintf("y = %v matches no content of %s", r.Y, model)
	}
	request := func() []observation {
		start := time.Now()
		fail := func(msg string) []observation {
			var out []observation
			for _, p := range groupModels {
				out = append(out, observation{model: p, start: start, end: time.Now(), failure: msg})
			}
			time.Sleep(10 * time.Millisecond) // a dead server must not spin the loop
			return out
		}
		resp, err := client.Post(s.url+"/v1/generateBids", "application/json", strings.NewReader(body))
		if err != nil {
			return fail(err.Error())
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return fail(fmt.Sprintf("status %d: %s %v", resp.StatusCode, data, err))
		}
		end := time.Now()
		var r bidsResponse
		if err := json.Unmarshal(data, &r); err != nil || len(r.Bids) != len(groupModels) {
			return fail(fmt.Sprintf("answer %s: %v", data, err))
		}
		var out []observation
		for i, b := range r.Bids {
			o := observation{model: groupModels[i], start: start, end: end}
			if b.Error != "" {
				o.failure = "group error: " + b.Error
			} else {
				o.label, o.errorType, o.failure = classify(o.model, b.Bid)
			}
			out = append(out, o)
		}
		return out
	}
	for range workers {
		wg.Go(func() {
			for !stop.Load() && calls.Add(1) <= maxCalls {
				got := request()
				for _, o := range got {
					switch {
					case o.model == addPath && o.label != "":
						addServed.Store(true)
					case o.model == updPath && o.label == "v2":
						sawV2.Store(true)
					case o.model == delPath && o.errorType == "MODEL_NOT_FOUND" && removedConfigWrite.Load():
						delGone.Store(true)
					}
				}
				mu.Lock()
				obs = append(obs, got...)
				mu.Unlock()
			}
		})
	}
	stopTraffic := func() {
		stop.Store(true)
		wg.Wait()
	}
	defer stopTraffic()
	// waitFor paces the steps by progress, not by sleeps: a condition, then
	// some more requests so traffic overlaps each step.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(stepWait)
		for !cond() {
			if time.Now().After(deadline) || calls.Load() > maxCalls {
				stopTraffic()
				t.Fatalf("waiting for %s: gave up after %d requests", what, calls.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
		target := calls.Load() + 3*workers
		for calls.Load() < target && calls.Load() <= maxCalls && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("traffic", func() bool { return true })

	tl := churnTimeline{updGrace: updGrace, delGrace: delGrace}
	// Add a model.
	addE := entry(addPath, put(addPath, models[addPath]["new"]), 0)
	tl.added = writeConfig(keepE, updV1, delE, addE)
	waitFor(addPath+" serving", addServed.Load)
	// Update one in place: new content at the same path, a new checksum.
	updV2 := entry(updPath, put(updPath, models[updPath]["v2"]), int(updGrace/time.Millisecond))
	tl.updated = writeConfig(keepE, updV2, delE, addE)
	waitFor(updPath+" answering with its new content", sawV2.Load)
	// Remove one.
	removedConfigWrite.Store(true)
	tl.removed = writeConfig(keepE, updV2, addE)
	waitFor(delPath+" gone", delGone.Load)
	stopTraffic()

	mu.Lock()
	slices.SortFunc(obs, func(a, b observation) int { return a.start.Compare(b.start) })
	violations, stats := checkChurn(obs, tl, keepPath, addPath, updPath, delPath)
	mu.Unlock()
	t.Logf("%d requests, %d answers: %v", calls.Load(), len(obs), stats)
	if first, ok := firstOf(obs, func(o observation) bool { return o.model == addPath && o.label != "" }); ok {
		t.Logf("%s: first answer %v after its config was written (poll period %v)", addPath, first.end.Sub(tl.added).Round(time.Millisecond), period)
	}
	if first, ok := firstOf(obs, func(o observation) bool { return o.model == updPath && o.label == "v2" }); ok {
		t.Logf("%s: first new answer %v after its config was written (grace %v)", updPath, first.end.Sub(tl.updated).Round(time.Millisecond), updGrace)
	}
	if first, ok := firstOf(obs, func(o observation) bool { return o.model == delPath && o.errorType != "" }); ok {
		t.Logf("%s: first MODEL_NOT_FOUND %v after its config was written (grace %v)", delPath, first.end.Sub(tl.removed).Round(time.Millisecond), delGrace)
	}
	if len(violations) > 0 {
		const show = 15
		t.Errorf("%d answers break the rules; the first %d:\n%s", len(violations), min(show, len(violations)),
			strings.Join(violations[:min(show, len(violations))], "\n"))
	}

	if _, body := get(t, s.url+"/v1/models"); !strings.Contains(body, `"model_paths":["keep/","new/","upd/"]`) {
		t.Errorf("/v1/models after the churn: %s", body)
	}
	_, metrics := get(t, s.url+"/metrics")
	for _, want := range []string{
		`inferbid_modelstore_registrations_total{kind="load",outcome="success"} 4`,
		`inferbid_modelstore_registrations_total{kind="update",outcome="success"} 1`,
		`inferbid_modelstore_deletions_total{outcome="success"} 1`,
		`inferbid_modelstore_models_available 3`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	s.stop(t)
	if strings.Contains(s.log(), "DATA RACE") {
		t.Error("the race detector reported a data race in bidding-server or the sidecar (see the log)")
	}
}

func firstOf(obs []observation, match func(observation) bool) (observation, bool) {
	var first observation
	found := false
	for _, o := range obs {
		if match(o) && (!found || o.end.Before(first.end)) {
			first, found = o, true
		}
	}
	return first, found
}

// TestCheckChurnCatches feeds checkChurn a timeline that keeps every rule,
// then one broken answer at a time.
func TestCheckChurnCatches(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tl := churnTimeline{added: at(100), updated: at(200), removed: at(300), updGrace: 50 * time.Millisecond, delGrace: 50 * time.Millisecond}
	ok := func(model string, startMs int, label string) observation {
		return observation{model: model, start: at(startMs), end: at(startMs + 5), label: label}
	}
	nf := func(model string, startMs int) observation {
		return observation{model: model, start: at(startMs), end: at(startMs + 5), errorType: "MODEL_NOT_FOUND"}
	}
	valid := []observation{
		ok("k", 0, "keep"), nf("a", 0), ok("u", 0, "v1"), ok("d", 0, "del"),
		nf("a", 101), ok("a", 110, "new"), ok("a", 150, "new"),
		ok("u", 210, "v1"), ok("u", 260, "v2"), ok("u", 270, "v2"),
		ok("d", 310, "del"), nf("d", 360), nf("d", 370), ok("k", 380, "keep"),
	}
	check := func(obs []observation) []string {
		v, _ := checkChurn(obs, tl, "k", "a", "u", "d")
		return v
	}
	if v := check(valid); len(v) > 0 {
		t.Fatalf("valid timeline rejected: %v", v)
	}
	for name, extra := range map[string]observation{
		"listed model not found":       nf("k", 50),
		"new model gone after serving": nf("a", 120),
		"new model before listed":      {model: "a", start: at(10), end: at(20), label: "new"},
		"update not found":             nf("u", 230),
		"update before its grace":      ok("u", 220, "v2"),
		"old content after new":        ok("u", 280, "v1"),
		"removed before its grace":     nf("d", 320),
		"removed model back":           ok("d", 380, "del"),
		"other error type":             {model: "k", start: at(30), end: at(35), errorType: "GRPC"},
		"transport failure":            {model: "k", start: at(30), end: at(35), failure: "connection refused"},
	} {
		obs := append(slices.Clone(valid), extra)
		slices.SortFunc(obs, func(a, b observation) int { return a.start.Compare(b.start) })
		if v := check(obs); len(v) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
	for name, drop := range map[string]func(observation) bool{
		"new model never served":   func(o observation) bool { return o.model == "a" && o.label != "" },
		"update never seen":        func(o observation) bool { return o.label == "v2" },
		"removed model never gone": func(o observation) bool { return o.model == "d" && o.errorType != "" },
	} {
		if v := check(slices.DeleteFunc(slices.Clone(valid), drop)); len(v) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}
