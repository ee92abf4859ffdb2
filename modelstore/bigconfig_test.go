package modelstore

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestLargeConfigOfMissingModels: a config of 3,000 entries whose models
// are all missing, polled six times a period apart: each entry's failure
// is logged once at ERROR, whatever the polls; the repeats make at most a
// few summary WARNs, never one line per entry. A changed entry (new
// checksum) is a new failure, logged once more. Once the config lists one
// model again, the failures are forgotten.
func TestLargeConfigOfMissingModels(t *testing.T) {
	const n = 3000
	logs := &logCounter{}
	e := newEnv(t, backends()[0], func(o *WatcherOptions) { o.Logger = slog.New(logs) })
	entries := make([]cfgEntry, n)
	for i := range entries {
		entries[i] = cfgEntry{path: fmt.Sprintf("missing/%05d/", i), checksum: strings.Repeat("a", 64)}
	}
	e.putConfig(entries...)
	for range 6 {
		if err := e.sync(); err == nil || errors.Is(err, ErrConfig) {
			t.Fatalf("SyncOnce = %v, want the models' failures", err)
		}
		e.clock.Advance(DefaultPeriod)
	}
	if got := logs.take(slog.LevelError, "model load failed"); len(got) != n {
		t.Errorf("%d ERROR records for %d missing models over 6 polls, want one each", len(got), n)
	}
	summaries := logs.take(slog.LevelWarn, "model config entries still failing")
	if len(summaries) == 0 || len(summaries) > 3 {
		t.Errorf("%d summary WARNs over 6 polls, want 1 to 3", len(summaries))
	} else if got := attrOf(summaries[0], "entries").Int64(); got != n {
		t.Errorf("the summary counts %d entries, want %d", got, n)
	}
	if rest := logs.all(slog.LevelWarn); len(rest) != 0 {
		t.Errorf("%d other WARN or ERROR records, e.g. %q", len(rest), rest[0])
	}
	if got := e.counter("inferbid_modelstore_models_failing"); got != n {
		t.Errorf("models_failing = %v, want %d", got, n)
	}

	// One entry changes its content: that is a new failure, logged once.
	entries[7].checksum = strings.Repeat("b", 64)
	e.putConfig(entries...)
	e.sync()
	e.clock.Advance(DefaultPeriod)
	e.sync()
	if got := logs.take(slog.LevelError, "model load failed"); len(got) != 1 || attrOf(got[0], "model_path").String() != "missing/00007/" {
		t.Errorf("after one entry changed: %d ERROR records, want 1 for missing/00007/", len(got))
	}

	// The config shrinks to one model: every failure is forgotten, and
	// the watcher's books are sized for the new config.
	ok := e.putModel("ok/", tfModel(t, "ok"))
	e.putConfig(cfgEntry{path: "ok/", checksum: ok})
	e.mustSync()
	if got := e.counter("inferbid_modelstore_models_failing"); got != 0 {
		t.Errorf("models_failing = %v after the config shrank, want 0", got)
	}
	e.w.stateMu.RLock()
	books := len(e.w.book.errs) + len(e.w.book.listed)
	e.w.stateMu.RUnlock()
	e.w.problems.mu.Lock()
	problems := len(e.w.problems.m)
	e.w.problems.mu.Unlock()
	if books != 1 || problems != 0 {
		t.Errorf("after the config shrank: %d book entries (want 1: ok/ listed), %d problems (want 0)", books, problems)
	}
}

// TestConfigEntryCap: a config with more entries than MaxEntries is
// rejected whole, with an error naming the cap; nothing it lists is
// attempted, and what served keeps serving. At the cap it is taken.
func TestConfigEntryCap(t *testing.T) {
	e := newEnv(t, backends()[0], func(o *WatcherOptions) { o.MaxEntries = 5 })
	ok := e.putModel("ok/", tfModel(t, "ok"))
	entries := []cfgEntry{{path: "ok/", checksum: ok}}
	for i := range 4 {
		entries = append(entries, cfgEntry{path: fmt.Sprintf("m%d/", i), checksum: strings.Repeat("a", 64)})
	}
	e.putConfig(entries...)
	if err := e.sync(); err == nil || errors.Is(err, ErrConfig) {
		t.Fatalf("5 entries under a cap of 5: SyncOnce = %v, want the missing models' failures only", err)
	}
	e.expectCalls("register ok/")
	entries = append(entries, cfgEntry{path: "m9/", checksum: strings.Repeat("a", 64)})
	e.putConfig(entries...)
	err := e.sync()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "more than 5 entries") {
		t.Fatalf("6 entries under a cap of 5: SyncOnce = %v, want the config rejected naming the cap", err)
	}
	e.expectCalls()
	if _, ok := e.w.Models()["ok/"]; !ok {
		t.Error("ok/ no longer served after the config over the cap")
	}
	if _, err := ParseConfigMax([]byte(`{"model_metadata":[{"model_path":"a/"},{"model_path":"b/"}]}`), 1); err == nil || !strings.Contains(err.Error(), "more than 1 entries") {
		t.Errorf("ParseConfigMax over the cap = %v", err)
	}
}
