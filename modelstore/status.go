package modelstore

import (
	"maps"
	"slices"
	"time"
)

// ModelState is where a model the watcher handles stands.
type ModelState string

// The states Watcher.Status reports.
const (
	// ModelLoading: listed, not serving yet; its download or registration
	// is under way or about to start.
	ModelLoading ModelState = "loading"
	// ModelServing: registered from the config entry that lists it.
	ModelServing ModelState = "serving"
	// ModelFailed: listed, not serving, and its last attempt failed
	// (LastError says why: a checksum mismatch, a failed download, load
	// or warm-up) or its config entry is rejected.
	ModelFailed ModelState = "failed"
	// ModelDraining: delisted, or listed with another checksum, and still
	// serving until its eviction grace period ends (EvictAt); then it is
	// deleted, or replaced by the listed content.
	ModelDraining ModelState = "draining"
)

// ModelStatus is what the watcher knows of one model.
type ModelStatus struct {
	Path  string
	State ModelState
	// Checksum is the serving content's, as computed; "" when nothing the
	// watcher registered serves.
	Checksum string
	// ListedChecksum is what the config lists ("" when it lists none, or
	// the model is delisted).
	ListedChecksum string
	// LoadedAt is when the serving content was registered.
	LoadedAt time.Time
	// EvictAt is when a draining model's grace period ends.
	EvictAt time.Time
	// LastError is the last failure of this model (its load, update or
	// deletion, or its rejected config entry); it is cleared when the
	// model loads, or the config no longer asks for what failed. A serving
	// model has one when an update of it failed: the old content serves.
	LastError string
	// LastErrorAt is when LastError happened; Failures counts the failed
	// attempts in a row.
	LastErrorAt time.Time
	Failures    int
	// ExternalVariables are the serving content's variables served from a
	// store (its entry's external_variables: variable -> store URL).
	ExternalVariables map[string]string
}

// modelError is the last failure of a model.
type modelError struct {
	msg   string
	at    time.Time
	count int
}

// statusBook is what Status reads besides the state: the models listed by
// the last config read, rejected entries, loads under way and last
// failures. The watcher's stateMu guards it.
type statusBook struct {
	listed   map[string]string // path -> listed checksum
	rejected map[string]string // path -> why its entry is rejected
	// unnamed are the errors of rejected entries that name no model path.
	unnamed []string
	loading map[string]bool
	errs    map[string]modelError
}

func newStatusBook() statusBook {
	return statusBook{listed: map[string]string{}, rejected: map[string]string{}, loading: map[string]bool{}, errs: map[string]modelError{}}
}

// noteConfig records the models cfg lists and the paths its rejected
// entries name.
func (w *Watcher) noteConfig(cfg Config) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	// New maps, not cleared ones: a map keeps the buckets of its largest
	// size, so a large config's would stay after a small one replaced it.
	w.book.listed = make(map[string]string, len(cfg.Models))
	for _, e := range cfg.Models {
		w.book.listed[e.Path] = e.Checksum
	}
	w.book.rejected = make(map[string]string)
	w.book.unnamed = nil
	for _, ie := range cfg.Invalid {
		if ie.Path != "" {
			w.book.rejected[ie.Path] = ie.Err.Error()
		} else {
			w.book.unnamed = append(w.book.unnamed, ie.Err.Error())
		}
	}
}

// UnnamedRejections are the errors of the config's rejected entries that
// name no model path (a missing or misspelt model_path field), which
// Status cannot list by path.
func (w *Watcher) UnnamedRejections() []string {
	w.stateMu.RLock()
	defer w.stateMu.RUnlock()
	return slices.Clone(w.book.unnamed)
}

func (w *Watcher) noteLoading(path string, on bool) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	if on {
		w.book.loading[path] = true
	} else {
		delete(w.book.loading, path)
	}
}

func (w *Watcher) noteFailure(path string, err error) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	e := w.book.errs[path]
	w.book.errs[path] = modelError{msg: err.Error(), at: w.now(), count: e.count + 1}
}

// forgetFailures drops the last failures of paths not in keep.
func (w *Watcher) forgetFailures(keep map[string]bool) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	before := len(w.book.errs)
	for p := range w.book.errs {
		if !keep[p] {
			delete(w.book.errs, p)
		}
	}
	w.book.errs = shrunk(w.book.errs, before)
}

// shrunk returns m, or a copy of it when it lost most of the before
// entries it held: a Go map never gives back its buckets.
func shrunk[K comparable, V any](m map[K]V, before int) map[K]V {
	if before > 1024 && len(m) < before/4 {
		return maps.Clone(m)
	}
	return m
}

// Status describes every model the watcher serves, loads, has failed to
// load, or drains, sorted by path. It never waits for a poll.
func (w *Watcher) Status() []ModelStatus {
	w.stateMu.RLock()
	defer w.stateMu.RUnlock()
	paths := maps.Clone(w.book.loading)
	for p := range w.state {
		paths[p] = true
	}
	for p := range w.book.listed {
		paths[p] = true
	}
	for p := range w.book.rejected {
		paths[p] = true
	}
	for p := range w.book.errs {
		paths[p] = true
	}
	out := make([]ModelStatus, 0, len(paths))
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		st := ModelStatus{Path: p, ListedChecksum: w.book.listed[p]}
		e, failed := w.book.errs[p]
		if failed {
			st.LastError, st.LastErrorAt, st.Failures = e.msg, e.at, e.count
		} else if why, ok := w.book.rejected[p]; ok {
			st.LastError, failed = why, true
		}
		if m, ok := w.state[p]; ok {
			st.State, st.Checksum, st.LoadedAt = ModelServing, m.Checksum, m.LoadedAt
			st.ExternalVariables = m.Entry.ExternalVariables.Map()
			if !m.EvictAt.IsZero() {
				st.State, st.EvictAt = ModelDraining, m.EvictAt
			}
		} else if failed && !w.book.loading[p] {
			st.State = ModelFailed
		} else {
			st.State = ModelLoading
		}
		out = append(out, st)
	}
	return out
}

func (w *Watcher) forgetFailure(path string) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	delete(w.book.errs, path)
}
