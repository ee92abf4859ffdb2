package modelstore

import (
	"context"
	"maps"
	"slices"
)

// Hold takes a model path out of the sync, for the model repository
// extension's unload: a model the watcher serves at path is deleted now
// (no grace period), and while the path is held the config's entry for it
// is ignored, so no poll registers it again. Release ends the hold.
func (w *Watcher) Hold(ctx context.Context, path string) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.stateMu.Lock()
	if w.held == nil {
		w.held = map[string]bool{}
	}
	w.held[path] = true
	_, serving := w.state[path]
	w.stateMu.Unlock()
	if !serving {
		return nil
	}
	return w.delete(ctx, path)
}

// Release ends the hold on path: the next SyncOnce (or poll) loads it
// again if the config lists it.
func (w *Watcher) Release(path string) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	delete(w.held, path)
}

// Held reports whether path is held.
func (w *Watcher) Held(path string) bool {
	w.stateMu.RLock()
	defer w.stateMu.RUnlock()
	return w.held[path]
}

// Listed returns the model paths the last config read lists, held ones
// included, sorted. It never waits for a poll.
func (w *Watcher) Listed() []string {
	w.stateMu.RLock()
	defer w.stateMu.RUnlock()
	return slices.Sorted(maps.Keys(w.book.listed))
}

// withoutHeld is cfg without the entries of held paths.
func (w *Watcher) withoutHeld(cfg Config) Config {
	w.stateMu.RLock()
	defer w.stateMu.RUnlock()
	if len(w.held) == 0 {
		return cfg
	}
	out := cfg
	out.Models = nil
	for _, e := range cfg.Models {
		if !w.held[e.Path] {
			out.Models = append(out.Models, e)
		}
	}
	return out
}
