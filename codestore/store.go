package codestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/modelstore"
)

// DefaultMaxBytes caps a module with its Wasm helper.
const DefaultMaxBytes = 16 << 20

// Loader is what serves the code: a jsworker.Host.
type Loader interface {
	// SetModules swaps a new set of versions in, live.
	SetModules(ctx context.Context, mods []jsworker.Module, def string) error
}

// Options configure a Store; the zero value of each field means its
// default.
type Options struct {
	Config FetchConfig
	// Validate loads candidate versions somewhere they cannot harm the
	// server (jsworker.Validate: a fresh worker process) and returns the
	// error of each that does not load. Required.
	Validate func(ctx context.Context, mods []jsworker.Module) map[string]error
	// MaxBytes caps a version (module and Wasm helper); 0 =
	// DefaultMaxBytes.
	MaxBytes int64
	// HTTPClient fetches in URL mode; nil = a client with the config's
	// timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Metrics registers the store's collectors; nil = none.
	Metrics prometheus.Registerer
	Now     func() time.Time
}

// State of a version in Status.
const (
	StateDefault = "default" // serving, and what requests without code_version run
	StateServing = "serving"
	StateFailed  = "failed" // never loaded; not served
)

// VersionStatus is one version as GET /v1/code shows it.
type VersionStatus struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	// WasmHelperSize is the size of its Wasm helper, if it has one.
	WasmHelperSize int64     `json:"wasm_helper_size,omitempty"`
	State          string    `json:"state"`
	LoadedAt       time.Time `json:"loaded_at,omitzero"`
	// LastError is why its latest content (FailedSHA256) does not serve:
	// a fetch error, or its load error (a syntax error gives the line and
	// column); the content above, if any, keeps serving.
	LastError    string    `json:"last_error,omitempty"`
	LastErrorAt  time.Time `json:"last_error_at,omitzero"`
	FailedSHA256 string    `json:"failed_sha256,omitempty"`
}

// Store keeps a Loader's code versions in step with a bucket, a URL or a
// file.
type Store struct {
	opts     Options
	src      source
	log      *slog.Logger
	now      func() time.Time
	validate func(ctx context.Context, mods []jsworker.Module) map[string]error
	m        *metrics

	syncMu sync.Mutex // one sync at a time
	// passed holds, by name, the content that passed validation but does
	// not serve yet (the default is missing, or the swap failed): a later
	// poll swaps it in without starting a validating worker again.
	// Guarded by syncMu.
	passed map[string]string

	mu      sync.Mutex
	loader  Loader
	serving map[string]served // what the loader serves (or will, before Attach)
	def     string
	// failed remembers, by name, the latest content that failed and why,
	// so that it is neither validated nor logged again on each poll.
	failed map[string]failure
	// fetchErr is the last error of the whole source, and noDefault that
	// of a missing default, each logged once per message.
	fetchErr  string
	noDefault string
}

type served struct {
	v        Version
	loadedAt time.Time
}

type failure struct {
	sha string // "" = a fetch error
	err error
	at  time.Time
}

// New checks opts and opens the source (a bucket is opened, not listed:
// an unreachable bucket fails the first SyncOnce).
func New(ctx context.Context, opts Options) (*Store, error) {
	if opts.Validate == nil {
		return nil, errors.New("codestore: Options.Validate is required")
	}
	if opts.MaxBytes < 0 {
		return nil, errors.New("codestore: negative MaxBytes")
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Config.Period == 0 {
		opts.Config.Period = DefaultPeriod
	}
	if opts.Config.Timeout == 0 {
		opts.Config.Timeout = DefaultTimeout
	}
	s := &Store{opts: opts, log: opts.Logger, now: opts.Now, validate: opts.Validate, serving: map[string]served{}, failed: map[string]failure{}, passed: map[string]string{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	c := opts.Config
	switch c.Mode {
	case ModeLocal:
		// bidding-server reads a LOCAL module once at start
		// (--udf_code_path); there is nothing to poll.
		return nil, errors.New("codestore: fetchMode LOCAL is --udf_code_path, read once at start; a Store polls BUCKET or URL")
	case ModeBucket:
		b, err := modelstore.OpenBucket(ctx, c.Bucket)
		if err != nil {
			return nil, fmt.Errorf("codestore: protectedAuctionBiddingJsBucket: %w", err)
		}
		s.src = &bucketSource{bucket: b, maxBytes: opts.MaxBytes, cache: map[string]cachedObject{}}
		s.def = c.DefaultBlob
		s.log = s.log.With("component", "codestore", "bucket", c.Bucket)
	case ModeURL:
		client := opts.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: c.Timeout}
		}
		s.src = &urlSource{client: client, jsURL: c.JSURL, wasmURL: c.WasmURL, maxBytes: opts.MaxBytes}
		s.def = c.JSURL
		s.log = s.log.With("component", "codestore", "url", c.JSURL)
	default:
		return nil, fmt.Errorf("codestore: fetch mode %v", c.Mode)
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		s.src.close()
		return nil, fmt.Errorf("codestore: register metrics: %w", err)
	}
	s.m = m
	return s, nil
}

// Close closes the source.
func (s *Store) Close() error { return s.src.close() }

// Modules returns the versions to serve and the default, for starting the
// Loader; ok is false until a sync has found a default that loads.
func (s *Store) Modules() (mods []jsworker.Module, def string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.serving[s.def]; !ok {
		return nil, s.def, false
	}
	return modules(s.serving), s.def, true
}

func modules(set map[string]served) []jsworker.Module {
	mods := make([]jsworker.Module, 0, len(set))
	for _, name := range slices.Sorted(maps.Keys(set)) {
		mods = append(mods, jsworker.Module{Name: name, Source: set[name].v.Source, WasmHelper: set[name].v.Wasm})
	}
	return mods
}

// Attach hands the store the Loader started with Modules: later syncs swap
// their changes into it.
func (s *Store) Attach(l Loader) {
	s.mu.Lock()
	s.loader = l
	s.mu.Unlock()
}

// Default is the default version's name.
func (s *Store) Default() string { return s.def }

// SyncOnce polls the source once, validates what changed, and swaps the
// result in. The previous set keeps serving when the source cannot be read,
// a version fails to load (its previous content, if any, keeps serving) or
// the default is missing. The error says what went wrong; each failure is
// logged once per content.
func (s *Store) SyncOnce(ctx context.Context) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, s.opts.Config.Timeout)
	p, err := s.src.poll(pctx)
	cancel()
	if err != nil {
		s.m.fetchFailures.Inc()
		s.mu.Lock()
		if msg := err.Error(); msg != s.fetchErr {
			s.fetchErr = msg
			s.log.Error("codestore: cannot fetch the bidding code; what serves stays", "err", err)
		}
		s.mu.Unlock()
		return fmt.Errorf("codestore: fetch: %w", err)
	}
	now := s.now()
	s.mu.Lock()
	if s.fetchErr != "" {
		s.log.Info("codestore: the bidding code can be fetched again")
		s.fetchErr = ""
	}
	serving := maps.Clone(s.serving)
	failed := maps.Clone(s.failed)
	loader := s.loader
	s.mu.Unlock()

	var errs []error
	for name, ferr := range p.errs {
		s.m.fetchFailures.Inc()
		if f, ok := failed[name]; !ok || f.sha != "" || f.err.Error() != ferr.Error() {
			s.log.Error("codestore: version not fetched; its previous content, if any, keeps serving", "version", name, "err", ferr)
			failed[name] = failure{err: ferr, at: now}
		}
		errs = append(errs, fmt.Errorf("version %q: %w", name, ferr))
	}
	// Validate what changed, unless that very content failed before.
	var candidates []jsworker.Module
	for _, name := range slices.Sorted(maps.Keys(p.versions)) {
		v := p.versions[name]
		if cur, ok := serving[name]; ok && cur.v.SHA256 == v.SHA256 {
			delete(failed, name)
			continue
		}
		if f, ok := failed[name]; ok && f.sha == v.SHA256 {
			errs = append(errs, fmt.Errorf("version %q: %w", name, f.err))
			continue
		}
		if s.passed[name] == v.SHA256 {
			continue
		}
		candidates = append(candidates, jsworker.Module{Name: name, Source: v.Source, WasmHelper: v.Wasm})
	}
	bad := map[string]error{}
	if len(candidates) > 0 {
		bad = s.validate(ctx, candidates)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, m := range candidates {
			if bad[m.Name] == nil {
				s.passed[m.Name] = p.versions[m.Name].SHA256
			}
		}
	}
	next := map[string]served{}
	for name, v := range p.versions {
		cur, had := serving[name]
		switch {
		case had && cur.v.SHA256 == v.SHA256:
			next[name] = cur
		case bad[name] != nil:
			s.m.loadFailures.Inc()
			s.log.Error("codestore: version does not load; its previous content, if any, keeps serving", "version", name, "sha256", v.SHA256, "err", bad[name])
			failed[name] = failure{sha: v.SHA256, err: bad[name], at: now}
			errs = append(errs, fmt.Errorf("version %q: %w", name, bad[name]))
			if had {
				next[name] = cur
			}
		case failed[name].sha == v.SHA256 && failed[name].err != nil:
			if had {
				next[name] = cur
			}
		default:
			delete(failed, name)
			next[name] = served{v: v, loadedAt: now}
		}
	}
	// A version that could not be fetched keeps its previous content.
	for name := range p.errs {
		if cur, ok := serving[name]; ok {
			next[name] = cur
		}
	}
	for name := range failed {
		if _, listed := p.versions[name]; !listed && p.errs[name] == nil {
			delete(failed, name) // deleted from the source
		}
	}
	if _, ok := next[s.def]; !ok {
		err := fmt.Errorf("%w: %q is missing or has never loaded; nothing changes", errNoDefault, s.def)
		s.mu.Lock()
		s.failed = failed
		if msg := err.Error(); msg != s.noDefault {
			s.noDefault = msg
			s.log.Error(msg+" (the previous set keeps serving)", "default", s.def)
		}
		s.mu.Unlock()
		return errors.Join(append(errs, err)...)
	}
	s.mu.Lock()
	s.noDefault = ""
	s.mu.Unlock()
	if sameSet(serving, next) {
		s.mu.Lock()
		s.failed = failed
		s.mu.Unlock()
		return errors.Join(errs...)
	}
	if loader != nil {
		if err := loader.SetModules(ctx, modules(next), s.def); err != nil {
			s.m.loadFailures.Inc()
			s.log.Error("codestore: the new code set was not swapped in; the previous one keeps serving", "err", err)
			s.mu.Lock()
			s.failed = failed
			s.mu.Unlock()
			return errors.Join(append(errs, fmt.Errorf("swap: %w", err))...)
		}
		s.m.swaps.Inc()
	}
	s.mu.Lock()
	s.serving, s.failed = next, failed
	s.mu.Unlock()
	clear(s.passed) // serving now
	s.m.versions.Set(float64(len(next)))
	s.log.Info("codestore: code versions now serving", "versions", len(next), "default", s.def, "default_sha256", next[s.def].v.SHA256)
	return errors.Join(errs...)
}

func sameSet(a, b map[string]served) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w.v.SHA256 != v.v.SHA256 {
			return false
		}
	}
	return true
}

// Run polls every period (with a tenth of jitter) until ctx ends.
func (s *Store) Run(ctx context.Context) error {
	for {
		d := s.opts.Config.Period
		d -= time.Duration(rand.Int64N(int64(d/10) + 1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		_ = s.SyncOnce(ctx) // logged and counted
	}
}

// Status lists every version known: serving ones and failed ones, sorted
// by name.
func (s *Store) Status() []VersionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := map[string]bool{}
	for n := range s.serving {
		names[n] = true
	}
	for n := range s.failed {
		names[n] = true
	}
	out := make([]VersionStatus, 0, len(names))
	for _, n := range slices.Sorted(maps.Keys(names)) {
		st := VersionStatus{Name: n, State: StateFailed}
		if cur, ok := s.serving[n]; ok {
			st.SHA256, st.Size, st.WasmHelperSize, st.LoadedAt = cur.v.SHA256, cur.v.Size, int64(len(cur.v.Wasm)), cur.loadedAt
			st.State = StateServing
			if n == s.def {
				st.State = StateDefault
			}
		}
		if f, ok := s.failed[n]; ok {
			st.LastError, st.LastErrorAt, st.FailedSHA256 = f.err.Error(), f.at, f.sha
		}
		out = append(out, st)
	}
	return out
}

type metrics struct {
	versions      prometheus.Gauge
	fetchFailures prometheus.Counter
	loadFailures  prometheus.Counter
	swaps         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		versions:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "inferbid_code_versions_loaded", Help: "Bidding code versions serving."}),
		fetchFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "inferbid_code_fetch_failures_total", Help: "Failed fetches of the bidding code source or of one version."}),
		loadFailures:  prometheus.NewCounter(prometheus.CounterOpts{Name: "inferbid_code_load_failures_total", Help: "Bidding code versions (contents) that did not load, and swaps that failed."}),
		swaps:         prometheus.NewCounter(prometheus.CounterOpts{Name: "inferbid_code_swaps_total", Help: "Sets of bidding code versions swapped in live."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.versions, m.fetchFailures, m.loadFailures, m.swaps} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
