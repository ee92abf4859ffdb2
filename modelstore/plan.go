package modelstore

import (
	"sort"
	"time"

	"github.com/inferbid/inferbid/runtimes"
)

// Loaded is what the watcher knows about a model it registered.
type Loaded struct {
	// Entry is the config entry the serving content was loaded from (its
	// grace period and warm-up are refreshed while the checksum is unchanged).
	Entry ModelEntry
	// Checksum is the checksum of the serving content, as computed.
	Checksum string
	// LoadedAt is when the serving content was registered (zero in
	// states Plan is given by callers that do not track it).
	LoadedAt time.Time
	// EvictAt is zero while the model is wanted as it is. Otherwise the model
	// is delisted or its checksum changed, and its grace ends at EvictAt:
	// then it is deleted, or replaced by the content the config lists.
	EvictAt time.Time
}

// ActionKind says what an Action does.
type ActionKind int

const (
	// ActLoad downloads, verifies and registers a model that is not loaded.
	ActLoad ActionKind = iota + 1
	// ActUpdate downloads, verifies and registers new content at a path
	// (or the same content with new external_variables)
	// that is serving; the sidecar swaps it in atomically.
	ActUpdate
	// ActDelete deletes a delisted model whose grace has ended.
	ActDelete
	// ActStartGrace starts a model's grace period (state only): it keeps
	// serving until At.
	ActStartGrace
	// ActCancelGrace stops a grace period: the config lists the model again
	// with the checksum that is serving (state only).
	ActCancelGrace
	// ActRefresh records a listed model's new grace period, warm-up
	// request or sequence settings; its content is unchanged (state only).
	ActRefresh
)

func (k ActionKind) String() string {
	switch k {
	case ActLoad:
		return "load"
	case ActUpdate:
		return "update"
	case ActDelete:
		return "delete"
	case ActStartGrace:
		return "start-grace"
	case ActCancelGrace:
		return "cancel-grace"
	case ActRefresh:
		return "refresh"
	}
	return "unknown"
}

// Action is one step of a SyncPlan.
type Action struct {
	Kind ActionKind
	Path string
	// Entry is the config entry to load (ActLoad, ActUpdate) or record
	// (ActRefresh).
	Entry ModelEntry
	// At is when a grace period started by ActStartGrace ends.
	At time.Time
}

// SyncPlan is what one poll must do.
type SyncPlan struct {
	// Actions, sorted by path (one action per path at most).
	Actions []Action
	// NextWake is the earliest end of a grace period still running after
	// the plan is applied; zero when none runs.
	NextWake time.Time
}

// Plan computes what a poll must do from the models the watcher has loaded,
// the config and the time. It is pure: the watcher executes the plan.
//
// Rules (the seed's, with what it gets wrong fixed):
//   - A listed path that is not loaded is loaded.
//   - A loaded path no longer listed keeps serving for its eviction grace
//     period and is then deleted (at once when the grace is zero).
//   - A loaded path listed with a different checksum is an in-place update:
//     the old content serves until its grace ends, then the new content is
//     registered at the same path (no MODEL_NOT_FOUND window: the sidecar
//     swaps atomically, where the seed deletes first).
//   - A loaded path listed with the same content but other
//     external_variables is registered again at once (an update without a
//     grace period, also one that ends a grace: the model reads only the
//     stores its registration names).
//   - A path listed again with the serving checksum during its grace period
//     is kept (the seed deletes it anyway when the timer fires).
//   - An entry without a checksum never counts as changed: there is nothing
//     to compare (as in the seed).
//   - A path a rejected entry names (Config.Invalid) is held: it stays as it
//     was, with no load, update, grace start or end, or deletion, until the
//     entry is fixed or removed. While a rejected entry names no path (its
//     model_path is missing or unreadable) no loaded model is retired, since
//     it could be any of them; loads and updates of valid entries go on.
//
// A failed load or update leaves the state as it was, so the next Plan
// yields the same action again: that is the retry (the watcher may hold it
// back while it backs off).
func Plan(state map[string]Loaded, cfg Config, now time.Time) SyncPlan {
	var plan SyncPlan
	wake := func(t time.Time) {
		if plan.NextWake.IsZero() || t.Before(plan.NextWake) {
			plan.NextWake = t
		}
	}
	listed := make(map[string]ModelEntry, len(cfg.Models))
	for _, e := range cfg.Models {
		listed[e.Path] = e
	}
	held := make(map[string]bool, len(cfg.Invalid))
	holdRetirements := false
	for _, ie := range cfg.Invalid {
		if ie.Path == "" {
			holdRetirements = true
		}
		held[ie.Path] = true
	}
	for path, m := range state {
		e, ok := listed[path]
		if held[path] || (!ok && holdRetirements) {
			continue
		}
		changed := ok && e.Checksum != "" && e.Checksum != m.Checksum
		// A model reads its external variables from the stores its
		// registration named: new stores reach it only by registering it
		// again (the same content), at once; recorded alone (a refresh,
		// or a grace cancelled by a relisting), the model would go on
		// reading the old store.
		restore := ok && !changed && e.ExternalVariables != m.Entry.ExternalVariables
		switch {
		case restore:
			plan.Actions = append(plan.Actions, Action{Kind: ActUpdate, Path: path, Entry: e})
		case ok && !changed:
			if !m.EvictAt.IsZero() {
				plan.Actions = append(plan.Actions, Action{Kind: ActCancelGrace, Path: path, Entry: e})
			} else if e.EvictionGrace != m.Entry.EvictionGrace || e.WarmUpJSON != m.Entry.WarmUpJSON || !sameSequences(e.Sequences, m.Entry.Sequences) {
				plan.Actions = append(plan.Actions, Action{Kind: ActRefresh, Path: path, Entry: e})
			}
		case m.EvictAt.IsZero() && m.Entry.EvictionGrace > 0:
			at := now.Add(m.Entry.EvictionGrace)
			plan.Actions = append(plan.Actions, Action{Kind: ActStartGrace, Path: path, At: at})
			wake(at)
		case !m.EvictAt.IsZero() && now.Before(m.EvictAt):
			wake(m.EvictAt) // grace running: the old content serves
		case changed:
			plan.Actions = append(plan.Actions, Action{Kind: ActUpdate, Path: path, Entry: e})
		default:
			plan.Actions = append(plan.Actions, Action{Kind: ActDelete, Path: path})
		}
	}
	for _, e := range cfg.Models {
		if _, loaded := state[e.Path]; !loaded {
			plan.Actions = append(plan.Actions, Action{Kind: ActLoad, Path: e.Path, Entry: e})
		}
	}
	sort.Slice(plan.Actions, func(i, j int) bool { return plan.Actions[i].Path < plan.Actions[j].Path })
	return plan
}

// sameSequences reports whether two entries' sequence settings are equal.
// A change alone is recorded like a warm-up change: it applies at the
// model's next registration (new content), not to the serving model.
func sameSequences(a, b *runtimes.SequenceSettings) bool {
	if a == nil || b == nil {
		return a == b
	}
	eq := func(x, y *bool) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Stateful == b.Stateful && eq(a.IdleSequenceCleanup, b.IdleSequenceCleanup) &&
		eq(a.LowLatencyTransformation, b.LowLatencyTransformation) &&
		(a.MaxSequenceNumber == nil) == (b.MaxSequenceNumber == nil) &&
		(a.MaxSequenceNumber == nil || *a.MaxSequenceNumber == *b.MaxSequenceNumber)
}
