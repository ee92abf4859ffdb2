package modelstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
)

// downloads is how many model downloads the watcher started (whatever
// their result) and how many bytes it read from the bucket for models.
func (e *env) downloads() (n, bytes float64) {
	e.t.Helper()
	mfs, err := e.prom.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "inferbid_modelstore_fetches_total":
			for _, m := range mf.GetMetric() {
				model, listing := false, false
				for _, lp := range m.GetLabel() {
					model = model || lp.GetName() == "kind" && lp.GetValue() == "model"
					// failures found by the listing download nothing
					listing = listing || lp.GetName() == "result" &&
						(lp.GetValue() == reasonNotFound || lp.GetValue() == reasonEmpty || lp.GetValue() == reasonList)
				}
				if model && !listing {
					n += m.GetCounter().GetValue()
				}
			}
		case "inferbid_modelstore_download_bytes_total":
			bytes = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return n, bytes
}

// expectDownloads checks the downloads since the start of the test.
func (e *env) expectDownloads(want float64, why string) {
	e.t.Helper()
	if n, _ := e.downloads(); n != want {
		e.t.Fatalf("%s: %v downloads, want %v", why, n, want)
	}
}

// testBackoff: a model whose content does not match its checksum is not
// downloaded again on every poll, only when its back-off ends, and at once
// when its bucket objects or its config entry change.
func testBackoff(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	listed := tfModel(t, "listed")
	want := e.putModel("other/", listed) // the checksum the config lists
	e.putModel("m/", tfModel(t, "corrupt"))
	e.putConfig(cfgEntry{path: "m/", checksum: want})
	for i := range 6 {
		err := e.sync()
		if err == nil || !strings.Contains(err.Error(), "checksum mismatch") || errors.Is(err, ErrConfig) {
			t.Fatalf("poll %d: SyncOnce = %v, want the checksum mismatch", i, err)
		}
		if i > 0 && !strings.Contains(err.Error(), "not downloaded again before") {
			t.Fatalf("poll %d: SyncOnce = %v, want it to say the model is held back", i, err)
		}
	}
	e.expectDownloads(1, "six polls within the back-off")
	_, bytes := e.downloads()
	if got := e.counter("inferbid_modelstore_retries_deferred_total"); got != 5 {
		t.Errorf("retries_deferred = %v, want 5", got)
	}
	if got := e.counter("inferbid_modelstore_models_failing"); got != 1 {
		t.Errorf("models_failing = %v, want 1", got)
	}
	// The back-off starts at the period and doubles: retries after 1, then
	// 2, then 4 periods.
	for i, wait := range []int{1, 2, 4} {
		e.clock.Advance(time.Duration(wait-1) * DefaultPeriod)
		if wait > 1 {
			e.sync()
			e.expectDownloads(float64(i+1), "one period before the back-off ends")
		}
		e.clock.Advance(DefaultPeriod)
		e.sync()
		e.expectDownloads(float64(i+2), "when the back-off ends")
	}
	if _, b := e.downloads(); b != 4*bytes {
		t.Errorf("downloaded %v bytes, want 4 x %v", b, bytes)
	}
	// New objects under the prefix, still not the listed content: tried at
	// once (and held back again after).
	e.putModel("m/", tfModel(t, "corrupt-2"))
	e.sync()
	e.expectDownloads(5, "after the objects changed")
	e.sync()
	e.expectDownloads(5, "after the changed objects failed")
	// The listed content lands: loaded at the next poll.
	e.putModel("m/", listed)
	e.mustSync()
	e.expectCalls("register m/")
	e.expectDownloads(6, "after the listed content landed")
	if got := e.counter("inferbid_modelstore_models_failing"); got != 0 {
		t.Errorf("models_failing = %v after the load, want 0", got)
	}
	if got := e.counter("inferbid_modelstore_registrations_total", "kind", "load", "outcome", "failure"); got != 5 {
		t.Errorf("registrations{load,failure} = %v, want 5 (attempts, not polls)", got)
	}
}

// TestFailedLoadIsRetriedWhenItsEntryChanges: a load that failed in the
// sidecar is held back, and tried at once when its config entry changes.
func TestFailedLoadIsRetriedWhenItsEntryChanges(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	e.reg.mu.Lock()
	e.reg.failNext["m/"] = inferr.Errorf(inferr.ModelExecution, "cannot load")
	e.reg.mu.Unlock()
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	for range 3 {
		if err := e.sync(); inferr.TypeOf(err) != inferr.ModelExecution {
			t.Fatalf("SyncOnce = %v, want the sidecar's MODEL_EXECUTION", err)
		}
	}
	e.expectCalls("register m/")
	e.expectDownloads(1, "three polls")
	e.reg.mu.Lock()
	delete(e.reg.failNext, "m/")
	e.reg.mu.Unlock()
	e.putConfig(cfgEntry{path: "m/", checksum: sum, graceMs: 5}) // any change of the entry
	e.mustSync()
	e.expectCalls("register m/")
}

// TestRetryBackoffDoublesUpToItsCap: with RetryBackoff 10s and
// MaxRetryBackoff 40s the same failing attempt runs after 10, 20, 40, 40 s.
func TestRetryBackoffDoublesUpToItsCap(t *testing.T) {
	e := newEnv(t, backends()[0], func(o *WatcherOptions) {
		o.Period = 10 * time.Second
		o.RetryBackoff = 10 * time.Second
		o.MaxRetryBackoff = 40 * time.Second
	})
	e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: strings.Repeat("0", 64)})
	e.sync()
	for i, wait := range []time.Duration{10, 20, 40, 40} {
		e.clock.Advance((wait - 2) * time.Second) // polls come up to 1 s (a tenth of the period) early
		e.sync()
		e.expectDownloads(float64(i+1), "2 s before the back-off ends")
		e.clock.Advance(2 * time.Second)
		e.sync()
		e.expectDownloads(float64(i+2), "when the back-off ends")
	}
}

// TestRejectedEntryHoldsItsModel: one malformed entry fails that entry
// only. The model it names stays as it was, neither replaced nor deleted;
// the valid entries beside it apply; while an entry names no model, no
// model is retired.
func TestRejectedEntryHoldsItsModel(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	a := e.putModel("a/", tfModel(t, "a"))
	b := e.putModel("b/", tfModel(t, "b"))
	c := e.putModel("c/", tfModel(t, "c"))
	e.putConfig(cfgEntry{path: "a/", checksum: a}, cfgEntry{path: "b/", checksum: b})
	e.mustSync()
	e.expectCalls("register a/", "register b/")

	// a/ is listed with new content and a malformed grace period, b/ is
	// delisted, c/ is new.
	a2 := e.putModel("a2/", tfModel(t, "a2"))
	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[
		{"model_path":"a/","checksum":"`+a2+`","eviction_grace_period_in_ms":"soon"},
		{"model_path":"c/","checksum":"`+c+`"}]}`))
	err := e.sync()
	if !errors.Is(err, ErrConfigEntry) || errors.Is(err, ErrConfig) || inferr.TypeOf(err) != inferr.InputParsing ||
		!strings.Contains(err.Error(), `model_metadata[0] ("a/"): eviction_grace_period_in_ms`) {
		t.Fatalf("SyncOnce = %v, want ErrConfigEntry (not ErrConfig) naming a/'s field", err)
	}
	e.expectCalls("delete b/", "register c/")
	if e.reg.servingChecksum("a/") != a || e.w.Models()["a/"].Checksum != a {
		t.Error("a/ changed under its rejected entry")
	}
	if got := e.counter("inferbid_modelstore_config_invalid_entries"); got != 1 {
		t.Errorf("config_invalid_entries = %v, want 1", got)
	}
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", resultSuccess); got != 2 {
		t.Errorf("fetches{config,success} = %v, want 2", got)
	}
	e.clock.Advance(time.Hour) // nothing is pending: no grace ends, nothing is retried
	if err := e.sync(); !errors.Is(err, ErrConfigEntry) {
		t.Fatalf("SyncOnce = %v, want the rejected entry again", err)
	}
	e.expectCalls()

	// An entry that names no model (model_path misspelt): nothing is
	// retired, not even a/ and c/, which no entry lists now.
	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[{"modelpath":"c/"},{"model_path":"b/","checksum":"`+b+`"}]}`))
	if err := e.sync(); !errors.Is(err, ErrConfigEntry) || !strings.Contains(err.Error(), `unknown field "modelpath"`) {
		t.Fatalf("SyncOnce = %v, want the entry rejected", err)
	}
	e.expectCalls("register b/")
	// Fixed: what the config no longer lists is retired.
	e.putConfig(cfgEntry{path: "b/", checksum: b})
	e.mustSync()
	e.expectCalls("delete a/", "delete c/")
	if got := e.counter("inferbid_modelstore_config_invalid_entries"); got != 0 {
		t.Errorf("config_invalid_entries = %v, want 0", got)
	}
}

// logCounter is a slog.Handler that counts records by level and message.
type logCounter struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCounter) WithGroup(string) slog.Handler      { return h }

// take returns and forgets the records at level or above whose message
// contains text.
func (h *logCounter) take(level slog.Level, text string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out, rest []slog.Record
	for _, r := range h.records {
		if r.Level >= level && strings.Contains(r.Message, text) {
			out = append(out, r)
		} else {
			rest = append(rest, r)
		}
	}
	h.records = rest
	return out
}

func (h *logCounter) all(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Level >= level {
			out = append(out, r.Level.String()+" "+r.Message)
		}
	}
	return out
}

func attrOf(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// TestRepeatedFailuresAreLoggedOnce: over 20 polls a period apart, a model
// that keeps failing, a rejected entry and a config that is not JSON are
// each logged once at ERROR, and their recovery once at INFO; the watcher's
// loop adds nothing per poll. Then, at doubling intervals (after 1, 3, 7
// and 15 periods), the config's failure is logged as a "still failing" WARN
// with a count, and the entries' as one summary WARN counting the entries
// still failing (never one line per entry).
func TestRepeatedFailuresAreLoggedOnce(t *testing.T) {
	logs := &logCounter{}
	e := newEnv(t, backends()[0], func(o *WatcherOptions) { o.Logger = slog.New(logs) })
	ok := e.putModel("ok/", tfModel(t, "ok"))
	e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: strings.Repeat("0", 64)})
	poll20 := func() {
		for range 20 {
			e.sync()
			e.clock.Advance(DefaultPeriod)
		}
	}
	check := func(what, text string) {
		t.Helper()
		if got := logs.take(slog.LevelError, text); len(got) != 1 {
			t.Errorf("%s: %d ERROR records %q, want 1", what, len(got), text)
		}
		entry := text != "model config rejected"
		if entry {
			if got := logs.take(slog.LevelWarn, text); len(got) != 0 {
				t.Errorf("%s: %d WARN records of the entry itself, want none", what, len(got))
			}
			text = "model config entries still failing"
		}
		warns := logs.take(slog.LevelWarn, text)
		var times []int64
		for _, r := range warns {
			if !strings.Contains(r.Message, "still failing") {
				t.Errorf("%s: WARN %q", what, r.Message)
			}
			if entry {
				if n := attrOf(r, "entries").Int64(); n != 1 {
					t.Errorf("%s: summary counts %d entries, want 1", what, n)
				}
				times = append(times, 0)
				continue
			}
			times = append(times, attrOf(r, "times").Int64())
		}
		if len(times) != 4 {
			t.Errorf("%s: %d WARN records (times %v), want 4", what, len(times), times)
		}
		if rest := logs.all(slog.LevelWarn); len(rest) != 0 {
			t.Errorf("%s: other records: %q", what, rest)
		}
	}
	poll20()
	check("failing model", "model load failed")
	sum := e.putModel("m/", tfModel(t, "y"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum}, cfgEntry{path: "ok/", checksum: ok})
	e.mustSync()
	if got := logs.take(slog.LevelInfo, "model registered"); len(got) != 2 {
		t.Errorf("recovery: %d INFO records, want 2", len(got))
	} else if n := attrOf(got[0], "failed_times").Int64() + attrOf(got[1], "failed_times").Int64(); n != 5 {
		t.Errorf("recovery: failed_times = %d, want 5 (attempts, not polls)", n)
	}
	logs.take(slog.LevelInfo, "")

	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[`))
	poll20()
	check("config not JSON", "model config rejected")
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", reasonParse); got != 20 {
		t.Errorf("fetches{config,parse_error} = %v, want 20 (read every poll)", got)
	}
	e.putConfig(cfgEntry{path: "m/", checksum: sum}, cfgEntry{path: "ok/", checksum: ok})
	e.mustSync()
	if got := logs.take(slog.LevelInfo, "model config read again"); len(got) != 1 || attrOf(got[0], "failed_times").Int64() != 20 {
		t.Errorf("config recovery: %d INFO records, want 1 with failed_times=20", len(got))
	}
	logs.take(slog.LevelInfo, "")

	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[{"model_path":"m/","checksum":"nope"},{"model_path":"ok/","checksum":"`+ok+`"}]}`))
	poll20()
	check("rejected entry", "model config entry rejected")
	e.putConfig(cfgEntry{path: "m/", checksum: sum}, cfgEntry{path: "ok/", checksum: ok})
	e.mustSync()
	if got := logs.take(slog.LevelInfo, "model config entry no longer rejected"); len(got) != 1 {
		t.Errorf("entry recovery: %d INFO records, want 1", len(got))
	}
	e.expectCalls("register m/", "register ok/") // the checksum failures never reached the registrar
}

// TestRevertedUpdateIsNoLongerFailing: an update that failed and is then
// taken back (the config lists the serving content again) is no longer
// counted as failing, nor retried.
func TestRevertedUpdateIsNoLongerFailing(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	v1 := e.putModel("m/", tfModel(t, "v1"))
	e.putConfig(cfgEntry{path: "m/", checksum: v1})
	e.mustSync()
	e.expectCalls("register m/")
	e.putConfig(cfgEntry{path: "m/", checksum: strings.Repeat("0", 64)})
	if err := e.sync(); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("SyncOnce = %v, want the update's checksum mismatch", err)
	}
	if got := e.counter("inferbid_modelstore_models_failing"); got != 1 {
		t.Errorf("models_failing = %v, want 1", got)
	}
	e.putConfig(cfgEntry{path: "m/", checksum: v1})
	e.mustSync()
	e.clock.Advance(time.Hour)
	e.mustSync()
	e.expectCalls()
	if got := e.counter("inferbid_modelstore_models_failing"); got != 0 {
		t.Errorf("models_failing = %v after the revert, want 0", got)
	}
}

// TestListingIdentifiesObjectVersions: the listing of a directory model
// carries the store's version of each object (S3 ETag, GCS generation), so
// a rewrite is seen even where the MD5 or modification time would not
// tell.
func TestListingIdentifiesObjectVersions(t *testing.T) {
	for _, be := range backends()[1:] {
		t.Run(be.name, func(t *testing.T) {
			e := newEnv(t, be, nil)
			e.put("m/model.pt", []byte("v1"))
			objs, err := e.w.listModel(e.ctx, ModelEntry{Path: "m/"})
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 1 || objs[0].etag == "" {
				t.Fatalf("listing %+v, want one object with a version", objs)
			}
			e.put("m/model.pt", []byte("v1")) // same bytes, new version
			again, err := e.w.listModel(e.ctx, ModelEntry{Path: "m/"})
			if err != nil {
				t.Fatal(err)
			}
			if be.name == "gcs" && again[0].etag == objs[0].etag {
				t.Errorf("GCS generation unchanged by a rewrite: %q", again[0].etag)
			}
		})
	}
}

// TestUnreachableSidecarDoesNotBackOff: a registration that failed because
// the sidecar could not be reached is not the model's failure: the next
// poll tries again, however many polls failed so.
func TestUnreachableSidecarDoesNotBackOff(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	e.reg.mu.Lock()
	e.reg.failNext["m/"] = inferr.Errorf(inferr.GRPC, "sidecar unavailable")
	e.reg.mu.Unlock()
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	for range 3 {
		if err := e.sync(); inferr.TypeOf(err) != inferr.GRPC {
			t.Fatalf("SyncOnce = %v, want the GRPC error", err)
		}
	}
	e.expectDownloads(3, "three polls with the sidecar unreachable")
	e.reg.mu.Lock()
	delete(e.reg.failNext, "m/")
	e.reg.mu.Unlock()
	e.mustSync()
	e.expectDownloads(4, "the sidecar back")
}

// A failing stateful model stays backed off across config reads: each read
// parses its sequence settings into a new pointer, and attempts compare
// them by value (a pointer comparison made every read a new attempt,
// downloaded again at once). Other settings still make a new attempt.
func TestBackoffComparesSequenceSettingsByValue(t *testing.T) {
	f := &failures{m: map[string]*failure{}, initial: 10 * time.Second, max: time.Minute}
	at := func(maxSeq uint32) attempt {
		return attempt{entry: withSequences(entry("m/", strings.Repeat("a", 64), 0), maxSeq), objects: "listing"}
	}
	now := time.Unix(1000, 0)
	f.failed("m/", at(3), errors.New("cannot load"), now)
	if err := f.heldBack("m/", at(3), now.Add(time.Second)); err == nil {
		t.Error("the same attempt, its sequence settings parsed again: not held back")
	}
	if err := f.heldBack("m/", at(4), now.Add(time.Second)); err != nil {
		t.Errorf("other sequence settings: held back (%v), want a new attempt", err)
	}
}
