package modelstore

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
)

// TestContentDriftWarnsOnce: a serving model whose bucket objects are
// overwritten without a config change keeps serving what it loaded, and the
// watcher warns once for that content (not at every check), counts it, and
// registers nothing; content rewritten with the same bytes warns nothing.
func TestContentDriftWarnsOnce(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			var logs testhelp.SyncBuffer
			e := newEnv(t, be, func(o *WatcherOptions) {
				o.DriftCheckPeriod = time.Nanosecond // every poll
				o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			files := runtimes.Files{"model.pt": randomBytes(t, 3000)}
			sum := e.putModel("models/m/", files)
			e.putConfig(cfgEntry{path: "models/m/", checksum: sum})
			e.mustSync()
			e.expectCalls("register models/m/")
			warnings := func() int { return strings.Count(logs.String(), "bucket content changed without a config change") }

			// The same bytes written again: a new listing, the same checksum.
			e.clock.Advance(time.Second)
			e.putModel("models/m/", files)
			e.mustSync()
			e.mustSync()
			if n := warnings(); n != 0 {
				t.Fatalf("%d drift warnings for the same bytes rewritten:\n%s", n, logs.String())
			}

			// Other bytes, no config change.
			e.clock.Advance(time.Second)
			other := runtimes.Files{"model.pt": randomBytes(t, 3001)}
			e.putModel("models/m/", other)
			for range 3 {
				e.clock.Advance(time.Second)
				e.mustSync()
			}
			e.expectCalls() // nothing registered: it serves what it loaded
			if n := warnings(); n != 1 {
				t.Fatalf("%d drift warnings, want 1 (once per content):\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), "serving_checksum="+sum) {
				t.Errorf("the warning does not name the serving checksum:\n%s", logs.String())
			}
			if v := e.counter("inferbid_modelstore_content_drift_total"); v != 1 {
				t.Errorf("inferbid_modelstore_content_drift_total = %v, want 1", v)
			}
			// Yet another content: warned again.
			e.putModel("models/m/", runtimes.Files{"model.pt": randomBytes(t, 3002)})
			e.clock.Advance(time.Second)
			e.mustSync()
			if n := warnings(); n != 2 {
				t.Fatalf("%d drift warnings after a second change, want 2", n)
			}
		})
	}
}

// TestUnnamedRejections: an entry whose model_path is misspelt names no
// path, so Status cannot list it; UnnamedRejections says why it was
// rejected (for readiness), and forgets it once the config is fixed.
func TestUnnamedRejections(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[{"modelpath":"m/","checksum":"`+strings.Repeat("0", 64)+`"}]}`))
	_ = e.sync()
	got := e.w.UnnamedRejections()
	if len(got) != 1 || !strings.Contains(got[0], "modelpath") || len(e.w.Status()) != 0 {
		t.Fatalf("UnnamedRejections %q, Status %v; want the misspelt field named, no status", got, e.w.Status())
	}
	sum := e.putModel("m/", runtimes.Files{"model.pt": randomBytes(t, 100)})
	e.clock.Advance(time.Second)
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	e.mustSync()
	if got := e.w.UnnamedRejections(); len(got) != 0 {
		t.Errorf("after the fix: %q", got)
	}
}
