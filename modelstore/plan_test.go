package modelstore

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/runtimes"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sumB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func entry(path, sum string, grace time.Duration) ModelEntry {
	return ModelEntry{Path: path, Checksum: sum, EvictionGrace: grace}
}

func loaded(e ModelEntry, evictAt time.Time) Loaded {
	return Loaded{Entry: e, Checksum: e.Checksum, EvictAt: evictAt}
}

// render writes a plan as "kind path[@offset]" lines, offsets from t0.
func render(p SyncPlan) string {
	var parts []string
	for _, a := range p.Actions {
		s := a.Kind.String() + " " + a.Path
		if a.Kind == ActStartGrace {
			s += "@" + a.At.Sub(t0).String()
		}
		if a.Kind == ActLoad || a.Kind == ActUpdate {
			s += " " + a.Entry.Checksum[:min(1, len(a.Entry.Checksum))]
		}
		parts = append(parts, s)
	}
	if !p.NextWake.IsZero() {
		parts = append(parts, "wake@"+p.NextWake.Sub(t0).String())
	}
	return strings.Join(parts, "; ")
}

func TestPlan(t *testing.T) {
	grace := 30 * time.Second
	for _, tc := range []struct {
		name  string
		state map[string]Loaded
		cfg   []ModelEntry
		bad   []EntryError  // rejected entries
		now   time.Duration // after t0
		want  string
	}{
		{name: "nothing", want: ""},
		{name: "new models load",
			cfg:  []ModelEntry{entry("b/", sumB, 0), entry("a.pt", sumA, 0)},
			want: "load a.pt a; load b/ b"},
		{name: "unchanged does nothing",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), time.Time{})},
			cfg:   []ModelEntry{entry("a/", sumA, grace)},
			want:  ""},
		{name: "delisted without grace deletes at once",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, 0), time.Time{})},
			want:  "delete a/"},
		{name: "delisted with grace starts the grace",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), time.Time{})},
			now:   time.Second,
			want:  "start-grace a/@31s; wake@31s"},
		{name: "grace running keeps serving",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(31*time.Second))},
			now:   30 * time.Second,
			want:  "wake@31s"},
		{name: "grace ended deletes",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(31*time.Second))},
			now:   31 * time.Second,
			want:  "delete a/"},
		{name: "re-added during grace is kept",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(31*time.Second))},
			cfg:   []ModelEntry{entry("a/", sumA, grace)},
			now:   40 * time.Second, // even after the grace: listed again means wanted
			want:  "cancel-grace a/"},
		{name: "checksum change without grace updates at once",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, 0), time.Time{})},
			cfg:   []ModelEntry{entry("a/", sumB, grace)},
			want:  "update a/ b"},
		{name: "checksum change starts the old entry's grace",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), time.Time{})},
			cfg:   []ModelEntry{entry("a/", sumB, 0)},
			want:  "start-grace a/@30s; wake@30s"},
		{name: "update waits for the grace",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(30*time.Second))},
			cfg:   []ModelEntry{entry("a/", sumB, 0)},
			now:   29 * time.Second,
			want:  "wake@30s"},
		{name: "update after the grace",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(30*time.Second))},
			cfg:   []ModelEntry{entry("a/", sumB, 0)},
			now:   30 * time.Second,
			want:  "update a/ b"},
		{name: "update reverted during grace is kept",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(30*time.Second))},
			cfg:   []ModelEntry{entry("a/", sumA, grace)},
			now:   10 * time.Second,
			want:  "cancel-grace a/"},
		{name: "delisted then relisted with new content after grace updates",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(30*time.Second))},
			cfg:   []ModelEntry{entry("a/", sumB, 0)},
			now:   31 * time.Second,
			want:  "update a/ b"},
		{name: "no checksum listed never counts as changed",
			state: map[string]Loaded{"a/": {Entry: entry("a/", "", 0), Checksum: sumA}},
			cfg:   []ModelEntry{entry("a/", "", 0)},
			want:  ""},
		{name: "sequence settings change is a refresh, not a reload",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, 0), time.Time{})},
			cfg:   []ModelEntry{withSequences(entry("a/", sumA, 0), 3)},
			want:  "refresh a/"},
		{name: "equal sequence settings do nothing",
			state: map[string]Loaded{"a/": loaded(withSequences(entry("a/", sumA, 0), 3), time.Time{})},
			cfg:   []ModelEntry{withSequences(entry("a/", sumA, 0), 3)},
			want:  ""},
		{name: "another limit is a refresh",
			state: map[string]Loaded{"a/": loaded(withSequences(entry("a/", sumA, 0), 3), time.Time{})},
			cfg:   []ModelEntry{withSequences(entry("a/", sumA, 0), 4)},
			want:  "refresh a/"},
		{name: "external_variables change reloads the same content at once (the sidecar reads the stores its registration names)",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), time.Time{})},
			cfg:   []ModelEntry{withExternal(entry("a/", sumA, grace), "redis-cluster://h:1")},
			want:  "update a/ a"},
		{name: "re-added during grace with other external_variables reloads (cancelling the grace alone would record stores the model does not read)",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(31*time.Second))},
			cfg:   []ModelEntry{withExternal(entry("a/", sumA, grace), "redis-cluster://h:1")},
			now:   10 * time.Second,
			want:  "update a/ a"},
		{name: "another store reloads too",
			state: map[string]Loaded{"a/": loaded(withExternal(entry("a/", sumA, 0), "redis-cluster://h:1"), time.Time{})},
			cfg:   []ModelEntry{withExternal(entry("a/", sumA, 0), "redis-cluster://h:2")},
			want:  "update a/ a"},
		{name: "equal external_variables do nothing",
			state: map[string]Loaded{"a/": loaded(withExternal(entry("a/", sumA, 0), "redis-cluster://h:1"), time.Time{})},
			cfg:   []ModelEntry{withExternal(entry("a/", sumA, 0), "redis-cluster://h:1")},
			want:  ""},
		{name: "metadata refresh without reload",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, 0), time.Time{})},
			cfg:   []ModelEntry{entry("a/", sumA, grace)},
			want:  "refresh a/"},
		{name: "earliest wake wins and actions sort by path",
			state: map[string]Loaded{
				"x/": loaded(entry("x/", sumA, grace), t0.Add(20*time.Second)),
				"y/": loaded(entry("y/", sumA, grace), time.Time{}),
				"z/": loaded(entry("z/", sumA, 0), time.Time{}),
			},
			cfg:  []ModelEntry{entry("w/", sumB, 0)},
			now:  5 * time.Second,
			want: "load w/ b; start-grace y/@35s; delete z/; wake@20s"},
		{name: "a rejected entry holds the model it names",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, 0), time.Time{})},
			bad:   []EntryError{{Path: "a/"}},
			want:  ""},
		{name: "a held model's grace neither ends nor wakes",
			state: map[string]Loaded{"a/": loaded(entry("a/", sumA, grace), t0.Add(time.Second))},
			bad:   []EntryError{{Path: "a/"}},
			now:   time.Minute,
			want:  ""},
		{name: "a rejected entry for a model not loaded loads nothing",
			cfg:  []ModelEntry{entry("b/", sumB, 0)},
			bad:  []EntryError{{Path: "a/"}},
			want: "load b/ b"},
		{name: "a rejected entry naming no model holds retirements, not loads or updates",
			state: map[string]Loaded{
				"a/": loaded(entry("a/", sumA, 0), time.Time{}),
				"b/": loaded(entry("b/", sumA, 0), time.Time{}),
				"x/": loaded(entry("x/", sumA, grace), t0.Add(time.Second)),
			},
			cfg:  []ModelEntry{entry("b/", sumB, 0), entry("w/", sumB, 0)},
			bad:  []EntryError{{Path: ""}},
			now:  time.Minute,
			want: "update b/ b; load w/ b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := render(Plan(tc.state, Config{Models: tc.cfg, Invalid: tc.bad}, t0.Add(tc.now)))
			if got != tc.want {
				t.Errorf("plan = %q\n        want %q", got, tc.want)
			}
		})
	}
}

// TestPlanIsPure: planning twice gives the same plan and leaves the state as
// it was.
func TestPlanIsPure(t *testing.T) {
	state := map[string]Loaded{"a/": loaded(entry("a/", sumA, time.Second), time.Time{})}
	cfg := Config{Models: []ModelEntry{entry("b/", sumB, 0)}}
	p1, p2 := Plan(state, cfg, t0), Plan(state, cfg, t0)
	if fmt.Sprint(p1) != fmt.Sprint(p2) {
		t.Errorf("plans differ: %v vs %v", p1, p2)
	}
	if !state["a/"].EvictAt.IsZero() || len(state) != 1 {
		t.Errorf("Plan changed its input: %+v", state)
	}
}

func BenchmarkPlan(b *testing.B) {
	state := map[string]Loaded{}
	var cfg Config
	for i := range 1000 {
		p := fmt.Sprintf("model_%d/", i)
		state[p] = loaded(entry(p, sumA, time.Minute), time.Time{})
		cfg.Models = append(cfg.Models, entry(p, sumA, time.Minute))
	}
	for b.Loop() {
		Plan(state, cfg, t0)
	}
}

// TestPlanProperties checks the rules on random states and configs: one
// action per path; a listed path with its serving checksum is never deleted
// or reloaded; nothing is deleted or replaced before its grace ends; every
// listed path ends up loaded or planned.
func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sums := []string{"", sumA, sumB}
	paths := []string{"a/", "b/", "c.pt", "d/"}
	for iter := range 20000 {
		state := map[string]Loaded{}
		var cfg Config
		for _, p := range paths {
			if r.IntN(2) == 0 {
				m := Loaded{Entry: entry(p, sums[r.IntN(3)], time.Duration(r.IntN(3))*10*time.Second), Checksum: sums[1+r.IntN(2)]}
				if r.IntN(2) == 0 {
					m.EvictAt = t0.Add(time.Duration(r.IntN(40)-20) * time.Second)
				}
				state[p] = m
			}
			switch r.IntN(5) {
			case 0, 1:
				cfg.Models = append(cfg.Models, entry(p, sums[r.IntN(3)], time.Duration(r.IntN(3))*10*time.Second))
			case 2:
				cfg.Invalid = append(cfg.Invalid, EntryError{Path: p})
			}
		}
		holdRetirements := r.IntN(8) == 0
		if holdRetirements {
			cfg.Invalid = append(cfg.Invalid, EntryError{})
		}
		held := map[string]bool{}
		for _, ie := range cfg.Invalid {
			held[ie.Path] = true
		}
		plan := Plan(state, cfg, t0)
		listed := map[string]ModelEntry{}
		for _, e := range cfg.Models {
			listed[e.Path] = e
		}
		seen := map[string]bool{}
		for _, a := range plan.Actions {
			fail := func(why string) { t.Fatalf("iter %d: %s: %v\nstate %+v\ncfg %+v", iter, why, a, state, cfg) }
			if seen[a.Path] {
				fail("two actions for one path")
			}
			seen[a.Path] = true
			m, loaded := state[a.Path]
			e, isListed := listed[a.Path]
			if held[a.Path] {
				fail("action on a path a rejected entry names")
			}
			if holdRetirements && !isListed {
				fail("retirement while a rejected entry names no path")
			}
			same := isListed && (e.Checksum == "" || e.Checksum == m.Checksum) && e.ExternalVariables == m.Entry.ExternalVariables
			switch a.Kind {
			case ActLoad:
				if loaded || !isListed {
					fail("load of a loaded or unlisted path")
				}
			case ActDelete, ActUpdate:
				if !loaded || same {
					fail("delete/update of a path that is wanted as it serves")
				}
				if !m.EvictAt.IsZero() && t0.Before(m.EvictAt) {
					fail("delete/update before the grace ends")
				}
				if m.EvictAt.IsZero() && m.Entry.EvictionGrace > 0 {
					fail("delete/update without a grace period first")
				}
				if (a.Kind == ActUpdate) != isListed {
					fail("update of an unlisted path or delete of a listed one")
				}
			case ActStartGrace:
				if !loaded || same || !m.EvictAt.IsZero() || !a.At.Equal(t0.Add(m.Entry.EvictionGrace)) {
					fail("bad grace start")
				}
			case ActCancelGrace:
				if !same || m.EvictAt.IsZero() {
					fail("bad grace cancel")
				}
			}
		}
		for p := range listed {
			if _, ok := state[p]; !ok && !seen[p] {
				t.Fatalf("iter %d: listed path %s neither loaded nor planned", iter, p)
			}
		}
	}
}

// withExternal gives e one external variable served from url.
func withExternal(e ModelEntry, url string) ModelEntry {
	e.ExternalVariables = ExternalVariables(`{"emb":"` + url + `"}`)
	return e
}

// withSequences gives e stateful settings with the limit max (a fresh
// value each call, so equal settings never share pointers).
func withSequences(e ModelEntry, max uint32) ModelEntry {
	e.Sequences = &runtimes.SequenceSettings{Stateful: true, MaxSequenceNumber: &max}
	return e
}
