package modelstore

import (
	"strings"
	"testing"
	"time"
)

func statusByPath(w *Watcher) map[string]ModelStatus {
	out := map[string]ModelStatus{}
	for _, st := range w.Status() {
		out[st.Path] = st
	}
	return out
}

// TestStatus follows two models through the states Status reports: one
// serves then drains, the other fails its checksum, then loads once the
// config lists the right one.
func TestStatus(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	if got := e.w.Status(); len(got) != 0 {
		t.Fatalf("Status before any poll = %+v, want none", got)
	}
	goodSum := e.putModel("good/", tfModel(t, "good"))
	badSum := e.putModel("bad/", tfModel(t, "bad"))
	wrong := strings.Repeat("0", 64)
	e.putConfig(cfgEntry{path: "good/", checksum: goodSum, graceMs: 5000}, cfgEntry{path: "bad/", checksum: wrong})
	if err := e.sync(); err == nil {
		t.Fatal("SyncOnce succeeded with a wrong checksum")
	}
	st := statusByPath(e.w)
	if len(st) != 2 {
		t.Fatalf("Status = %+v, want good/ and bad/", st)
	}
	if g := st["good/"]; g.State != ModelServing || g.Checksum != goodSum || g.ListedChecksum != goodSum || !g.LoadedAt.Equal(t0) || g.LastError != "" {
		t.Errorf("good/ = %+v, want serving with its checksum, loaded at %v", g, t0)
	}
	b := st["bad/"]
	if b.State != ModelFailed || b.Checksum != "" || b.ListedChecksum != wrong || b.Failures != 1 || !b.LastErrorAt.Equal(t0) ||
		!strings.Contains(b.LastError, "checksum mismatch") || !strings.Contains(b.LastError, badSum) {
		t.Errorf("bad/ = %+v, want failed with the checksum mismatch naming %s", b, badSum)
	}

	// good/ delisted: it drains through its grace period; bad/ fixed.
	e.clock.Advance(time.Second)
	e.putConfig(cfgEntry{path: "bad/", checksum: badSum})
	e.mustSync()
	st = statusByPath(e.w)
	if g := st["good/"]; g.State != ModelDraining || !g.EvictAt.Equal(t0.Add(6*time.Second)) || g.Checksum != goodSum || g.ListedChecksum != "" {
		t.Errorf("delisted good/ = %+v, want draining until %v", g, t0.Add(6*time.Second))
	}
	if b := st["bad/"]; b.State != ModelServing || b.Checksum != badSum || b.LastError != "" || b.Failures != 0 {
		t.Errorf("fixed bad/ = %+v, want serving without an error", b)
	}

	// After the grace period good/ is gone.
	e.clock.Advance(10 * time.Second)
	e.mustSync()
	if st = statusByPath(e.w); len(st) != 1 || st["bad/"].State != ModelServing {
		t.Errorf("after the grace period: %+v, want bad/ serving alone", st)
	}
}

// TestStatusRejectedEntry: a model named by a rejected config entry is
// failed with the entry's error.
func TestStatusRejectedEntry(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[{"model_path":"m/","checksum":"not hex"}]}`))
	if err := e.sync(); err == nil {
		t.Fatal("SyncOnce accepted a malformed checksum")
	}
	st := statusByPath(e.w)
	if m := st["m/"]; len(st) != 1 || m.State != ModelFailed || !strings.Contains(m.LastError, "checksum") {
		t.Errorf("Status = %+v, want m/ failed naming its checksum field", st)
	}
}
