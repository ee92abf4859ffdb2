package modelstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"
)

// attempt identifies what a load or update tried: the config entry and the
// bucket objects as listed. Equal attempts would download the same bytes
// and fail the same way, so a failed one is not repeated until its back-off
// ends.
type attempt struct {
	entry ModelEntry
	// objects digests the listing (key, size, modification time, MD5,
	// ETag of each object); "" when the listing itself failed, which is
	// cheap to repeat and so is never held back.
	objects string
}

// same reports whether two attempts would download the same bytes and
// register them the same way: entries equal with their sequence settings
// compared by value (each config read parses them into a new pointer).
func (a attempt) same(b attempt) bool {
	ea, eb := a.entry, b.entry
	ea.Sequences, eb.Sequences = nil, nil
	return a.objects == b.objects && ea == eb && sameSequences(a.entry.Sequences, b.entry.Sequences)
}

// listingDigest identifies a model's objects as the bucket lists them.
func listingDigest(objs []objectRef) string {
	h := sha256.New()
	for _, o := range objs {
		fmt.Fprintf(h, "%q %d %d %x %q\n", o.key, o.size, o.modTime.UnixNano(), o.md5, o.etag)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// failure is what the watcher remembers of a model whose last attempt
// failed.
type failure struct {
	attempt attempt
	err     error
	count   int           // failed attempts in a row of this same attempt
	backoff time.Duration // the wait after the last failure
	retryAt time.Time     // when the same attempt may run again
}

// backedOffError is the result of a load or update held back: the last
// failure, with how often and until when.
type backedOffError struct {
	err     error
	count   int
	retryAt time.Time
}

func (e *backedOffError) Error() string {
	return fmt.Sprintf("%v (failed %d times in a row; not downloaded again before %s unless its config entry or bucket objects change)",
		e.err, e.count, e.retryAt.UTC().Format(time.RFC3339))
}
func (e *backedOffError) Unwrap() error { return e.err }

// failures tracks failed models by path. Loads run in parallel, hence the
// lock.
type failures struct {
	mu      sync.Mutex
	m       map[string]*failure
	initial time.Duration // the first back-off
	max     time.Duration
	slack   time.Duration // polls come up to this much early (jitter)
}

// heldBack returns the error to report instead of repeating at at now, or
// nil when it is due: a different attempt, or the back-off has ended.
func (f *failures) heldBack(path string, at attempt, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.m[path]
	if last == nil || at.objects == "" || !last.attempt.same(at) || !now.Add(f.slack).Before(last.retryAt) {
		return nil
	}
	return &backedOffError{err: last.err, count: last.count, retryAt: last.retryAt}
}

// failed records a failed attempt and returns how long until it may be
// repeated and how many times in a row it failed.
func (f *failures) failed(path string, at attempt, err error, now time.Time) (time.Duration, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.m[path]
	if last == nil || !last.attempt.same(at) {
		last = &failure{attempt: at, backoff: f.initial}
		f.m[path] = last
	} else {
		last.backoff = min(2*last.backoff, f.max)
	}
	last.count++
	last.err = err
	last.retryAt = now.Add(last.backoff)
	return last.backoff, last.count
}

// succeeded forgets path's failures and returns how many attempts in a row
// had failed.
func (f *failures) succeeded(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	if last := f.m[path]; last != nil {
		n = last.count
	}
	delete(f.m, path)
	return n
}

// keep forgets the failures of paths not in listed and returns how many
// remain.
func (f *failures) keep(listed map[string]bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	before := len(f.m)
	for p := range f.m {
		if !listed[p] {
			delete(f.m, p)
		}
	}
	f.m = shrunk(f.m, before)
	return len(f.m)
}

// problemLog keeps repeated failures from flooding the log: the first
// occurrence of a problem (or a new message for it) is logged at ERROR
// with the error; the recovery is logged once at INFO. Repeats of the
// config's own problem are logged as a WARN with the count once its
// interval has passed, the interval doubling from the retry back-off up to
// its cap. Repeats of a problem of one entry (a model, a rejected entry, a
// deletion) are logged at DEBUG only, so that the log grows with the
// config's distinct failures, never with polls times entries: summarize
// logs one WARN for all of them, at the same doubling intervals.
type problemLog struct {
	mu      sync.Mutex
	log     *slog.Logger
	m       map[string]*problem // by key: "config", "model PATH", ...
	initial time.Duration
	max     time.Duration
	// peak is the most problems held since the map was last rebuilt: Go
	// maps do not shrink, so one that held a large config's failures is
	// copied once it holds far fewer.
	peak int
	// the summary of repeated entry problems
	sumInterval time.Duration
	sumNext     time.Time
}

// perEntry reports whether key is the problem of one config entry.
func perEntry(key string) bool { return key != "config" }

type problem struct {
	text     string // the error's message
	count    int
	since    time.Time
	interval time.Duration
	nextLog  time.Time
}

// report logs err for key as described on problemLog. msg says what
// failed and what happens now; attrs name the subject.
func (l *problemLog) report(key string, now time.Time, msg string, err error, attrs ...any) {
	l.reportAs(key, err.Error(), now, msg, err, attrs...)
}

// reportAs is report with the problem's identity given: a problem is
// logged at ERROR again only when its identity changes (for a model: its
// config entry and the error).
func (l *problemLog) reportAs(key, ident string, now time.Time, msg string, err error, attrs ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.m[key]
	if p == nil || p.text != ident {
		l.m[key] = &problem{text: ident, count: 1, since: now, interval: l.initial, nextLog: now.Add(l.initial)}
		l.peak = max(l.peak, len(l.m))
		l.log.Error(msg, append(attrs, "err", err)...)
		return
	}
	p.count++
	if perEntry(key) {
		if l.log.Enabled(context.Background(), slog.LevelDebug) {
			l.log.Debug(msg+" (again)", append(attrs, "times", p.count, "failing_since", p.since, "err", err)...)
		}
		return
	}
	if now.Before(p.nextLog) {
		return
	}
	l.log.Warn(msg+" (still failing, "+strconv.Itoa(p.count)+" times)",
		append(attrs, "times", p.count, "failing_since", p.since, "err", err)...)
	p.interval = min(2*p.interval, l.max)
	p.nextLog = now.Add(p.interval)
}

// resolve ends key's problem, logging msg at INFO when there was one;
// it returns how many times the problem occurred.
func (l *problemLog) resolve(key, msg string, attrs ...any) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.m[key]
	if p == nil {
		return 0
	}
	delete(l.m, key)
	if l.peak > 1024 && len(l.m) < l.peak/4 {
		l.m = maps.Clone(l.m) // release the buckets of the peak
		l.peak = len(l.m)
	}
	if msg != "" {
		l.log.Info(msg, append(attrs, "failed_times", p.count, "failing_since", p.since)...)
	}
	return p.count
}

// summarize logs, once its interval has passed (doubling from the retry
// back-off up to its cap), one WARN counting the entry problems that
// repeated since they were logged at ERROR; with none, the interval
// starts again.
func (l *problemLog) summarize(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, oldest := 0, now
	for k, p := range l.m {
		if perEntry(k) && p.count > 1 {
			n++
			if p.since.Before(oldest) {
				oldest = p.since
			}
		}
	}
	if n == 0 {
		l.sumInterval, l.sumNext = 0, time.Time{}
		return
	}
	if l.sumInterval == 0 {
		l.sumInterval, l.sumNext = l.initial, now.Add(l.initial)
		return
	}
	if now.Before(l.sumNext) {
		return
	}
	l.log.Warn("model config entries still failing (each was logged at ERROR when it first failed; repeats are at DEBUG)",
		"entries", n, "failing_since", oldest)
	l.sumInterval = min(2*l.sumInterval, l.max)
	l.sumNext = now.Add(l.sumInterval)
}

// keys returns the problem keys that start with prefix.
func (l *problemLog) keys(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.m {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			out = append(out, k)
		}
	}
	return out
}
