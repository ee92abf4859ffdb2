package modelstore

import (
	"context"
	"sync"
	"time"
)

// drift watches, for each serving model, whether its bucket content still
// is what it was loaded from. A model's objects can change without a
// config change (an upload over the same prefix): the running servers keep
// the content they loaded, but a restart or a new replica would load the
// new content, or fail its checksum, and serve something else. Each
// content change is checked once: its listing (keys, sizes, versions) is
// compared with the one recorded at load; a different listing is
// downloaded and hashed, and when its checksum differs from the serving
// one a warning is logged, once per content.
type drift struct {
	mu sync.Mutex
	// loaded is the listing digest of each model's serving content, as
	// recorded at load; checked the last listing digest looked at (its
	// content was hashed or its listing failed), to hash each content once.
	loaded, checked map[string]string
	last            time.Time
}

// noteLoaded records the listing a model's serving content came from.
func (d *drift) noteLoaded(path, listing string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loaded == nil {
		d.loaded, d.checked = map[string]string{}, map[string]string{}
	}
	d.loaded[path] = listing
	delete(d.checked, path)
}

// due reports whether a drift check is due, and marks it done.
func (d *drift) due(now time.Time, every time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if every < 0 || (!d.last.IsZero() && now.Sub(d.last) < every) {
		return false
	}
	d.last = now
	return true
}

// checkDrift lists each serving model that is listed with the content it
// serves (not draining, not just loaded) and warns once per content when
// its bucket content's checksum no longer is the serving checksum.
func (w *Watcher) checkDrift(ctx context.Context, cfg Config, plan SyncPlan) {
	if !w.drift.due(w.now(), w.opts.DriftCheckPeriod) {
		return
	}
	touched := map[string]bool{}
	for _, a := range plan.Actions {
		touched[a.Path] = true
	}
	entries := make(map[string]ModelEntry, len(cfg.Models))
	for _, e := range cfg.Models {
		entries[e.Path] = e
	}
	for path, m := range w.Models() {
		if touched[path] || !m.EvictAt.IsZero() || ctx.Err() != nil {
			continue
		}
		e, listed := entries[path]
		if !listed {
			continue
		}
		w.drift.mu.Lock()
		loaded, known := w.drift.loaded[path]
		checked := w.drift.checked[path]
		w.drift.mu.Unlock()
		if !known {
			continue // registered before this watcher recorded listings
		}
		dctx, cancel := context.WithTimeout(ctx, w.opts.OpTimeout)
		objs, err := w.listModel(dctx, e)
		if err != nil {
			cancel()
			if checked != "error: "+err.Error() {
				w.log.Warn("a serving model's bucket objects cannot be listed: it keeps serving what it loaded, but a restart or a new replica would fail to load it",
					"model_path", path, "serving_checksum", m.Checksum, "err", err)
				w.drift.mu.Lock()
				w.drift.checked[path] = "error: " + err.Error()
				w.drift.mu.Unlock()
			}
			continue
		}
		listing := listingDigest(objs)
		if listing == loaded || listing == checked {
			cancel()
			continue
		}
		unchecked := e
		unchecked.Checksum = ""
		d, err := w.download(dctx, unchecked, objs)
		cancel()
		if err != nil {
			w.log.Debug("drift check: download failed; tried again at the next check", "model_path", path, "err", err)
			continue
		}
		sum := d.checksum
		d.cleanup()
		w.drift.mu.Lock()
		if sum == m.Checksum {
			w.drift.loaded[path] = listing // the same bytes, rewritten
		} else {
			w.drift.checked[path] = listing
		}
		w.drift.mu.Unlock()
		if sum != m.Checksum {
			w.metrics.drifted.Inc()
			w.log.Warn("a serving model's bucket content changed without a config change: this server serves what it loaded, but a restart or a new replica would load other content or fail its checksum; list the new checksum in the config, or restore the objects",
				"model_path", path, "serving_checksum", m.Checksum, "listed_checksum", e.Checksum, "bucket_checksum", sum)
		}
	}
}
