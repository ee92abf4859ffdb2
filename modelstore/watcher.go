package modelstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// buckets
	_ "gocloud.dev/blob/gcsblob"  // gs:// buckets (STORAGE_EMULATOR_HOST for emulators)
	_ "gocloud.dev/blob/s3blob"   // s3:// buckets (AWS SDK v2)

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
)

// Registrar is what the watcher drives (the sidecar Supervisor satisfies it).
type Registrar interface {
	RegisterModel(ctx context.Context, modelPath string, files runtimes.Files, warmUpJSON string) error
	DeleteModel(ctx context.Context, modelPath string) error
}

// SequenceRegistrar is a Registrar that can carry an entry's sequence
// settings with the model (the sidecar Supervisor and Client are). An
// entry with settings fails, naming them, under a Registrar that is not.
type SequenceRegistrar interface {
	RegisterModelWithSequences(ctx context.Context, modelPath string, files runtimes.Files, warmUpJSON string, seq *runtimes.SequenceSettings) error
}

// DiskRegistrar is a Registrar that takes a model as files on local disk
// (the sidecar Supervisor is): the watcher hands it the downloaded files
// instead of reading them into memory, so that the host's memory does not
// grow with the model's size. The files stay in place until it returns; seq
// may be nil (no sequence settings).
type DiskRegistrar interface {
	RegisterModelFiles(ctx context.Context, modelPath string, files runtimes.DiskFiles, warmUpJSON string, seq *runtimes.SequenceSettings) error
}

// DigestRegistrar is a DiskRegistrar that also takes each downloaded
// file's SHA-256, which the watcher computed as it wrote the file and
// verified (the entry's checksum, when it lists one, is made of them), and
// may keep the files themselves (the sidecar Supervisor hard-links them
// into its replay store): the watcher only removes its own names for them
// after it returns, and never writes them again. The model's bytes are
// then not read or hashed again on their way to the runtime.
type DigestRegistrar interface {
	DiskRegistrar
	RegisterDownloadedFiles(ctx context.Context, modelPath string, files runtimes.DiskFiles, sums map[string][sha256.Size]byte, warmUpJSON string, seq *runtimes.SequenceSettings) error
}

// WatcherOptions configure a Watcher; zero fields mean defaults.
type WatcherOptions struct {
	// BucketURL is a gocloud.dev/blob URL: file:///dir, s3://bucket?...,
	// gs://bucket (required).
	BucketURL string
	// ConfigPath is the key of the model_metadata config object (required).
	ConfigPath string
	// Period between polls (±10% jitter); 0 = DefaultPeriod.
	Period time.Duration
	// Registrar receives registrations and deletions (required).
	Registrar Registrar
	// MaxModelBytes caps the total size of one model; 0 =
	// runtimes.DefaultMaxModelBytes.
	MaxModelBytes int64
	// Parallelism bounds concurrent model downloads; 0 = DefaultParallelism.
	Parallelism int
	// Logger; nil = slog.Default().
	Logger *slog.Logger
	// Metrics receives the watcher's collectors; nil = none.
	Metrics prometheus.Registerer
	// DriftCheckPeriod is how often the serving models' bucket objects are
	// listed to find content changed without a config change (hashed, and
	// warned about once per content, when the listing changed); 0 = every
	// 10 polls (10 minutes with the default Period), negative = never.
	DriftCheckPeriod time.Duration
	// TempDir holds downloads until they are verified; "" = os.TempDir().
	TempDir string
	// OpTimeout bounds each model's download, its registration (load and
	// warm-up in the sidecar) and each deletion, so a hung sidecar or bucket cannot stall polling forever;
	// 0 = DefaultOpTimeout.
	OpTimeout time.Duration
	// RetryBackoff is how long a model whose load or update failed waits
	// before it is downloaded again while its config entry and bucket
	// objects stay the same (a change is attempted at the next poll). It
	// doubles with each failure in a row, up to MaxRetryBackoff. It is also
	// the first interval at which a repeated identical failure is logged
	// again. Retries run at polls, so one shorter than Period waits for the
	// next poll. 0 = Period.
	RetryBackoff time.Duration
	// MaxRetryBackoff caps RetryBackoff's doubling; 0 =
	// DefaultMaxRetryBackoff. A RetryBackoff above it is cut to it.
	MaxRetryBackoff time.Duration
	// MaxEntries caps the config's model_metadata entries; a config with
	// more is rejected whole (ParseConfigMax). 0 = DefaultMaxEntries.
	MaxEntries int
	// Now is the clock; nil = time.Now (tests step a fake clock through
	// grace periods).
	Now func() time.Time
}

// Defaults for WatcherOptions.
const (
	DefaultPeriod      = 60 * time.Second
	DefaultParallelism = 4
	DefaultOpTimeout   = 10 * time.Minute
	// DefaultMaxRetryBackoff: a model failing for good is downloaded about
	// once an hour, and its failure logged as often.
	DefaultMaxRetryBackoff = time.Hour
)

// Watcher polls a bucket's model config and keeps the Registrar in step.
type Watcher struct {
	opts    WatcherOptions
	bucket  *blob.Bucket
	scheme  string
	root    *fileRoot // file:// buckets only: reads stay inside it
	log     *slog.Logger
	metrics *metrics
	// passMu: one download at a time writes and hashes a chunk (copyHashed).
	passMu        sync.Mutex
	now           func() time.Time
	maxModelBytes int64
	parallelism   int
	// registerSem lets one model at a time be read into memory and sent,
	// so host memory stays near one model however many download at once.
	registerSem chan struct{}
	failures    *failures   // models whose last attempt failed, for back-off
	problems    *problemLog // deduplicates the log of repeated failures

	syncMu sync.Mutex // one poll at a time; guards the fields below
	// last good config and how its object was identified
	haveConfig    bool
	config        Config
	configHash    [sha256.Size]byte
	configVersion string
	nextWake      time.Time
	// the last config content that failed to parse, so that it is not
	// parsed (nor its error logged) again on every poll
	badConfigHash [sha256.Size]byte
	badConfigErr  error
	// largestConfig is the most entries a config held since memory was
	// last given back.
	largestConfig int

	stateMu sync.RWMutex
	state   map[string]Loaded
	held    map[string]bool // paths taken out of the sync (Hold)
	book    statusBook      // for Status
	// drift finds serving content changed in the bucket without a config
	// change.
	drift drift
}

// NewWatcher checks opts and opens the bucket. It does not poll: call
// SyncOnce or Run.
func NewWatcher(opts WatcherOptions) (*Watcher, error) {
	if opts.BucketURL == "" {
		return nil, errors.New("modelstore: WatcherOptions.BucketURL is required")
	}
	if opts.ConfigPath == "" {
		return nil, errors.New("modelstore: WatcherOptions.ConfigPath is required")
	}
	if opts.Registrar == nil {
		return nil, errors.New("modelstore: WatcherOptions.Registrar is required")
	}
	if opts.Period < 0 || opts.MaxModelBytes < 0 || opts.Parallelism < 0 || opts.OpTimeout < 0 ||
		opts.RetryBackoff < 0 || opts.MaxRetryBackoff < 0 {
		return nil, errors.New("modelstore: negative Period, MaxModelBytes, Parallelism, OpTimeout, RetryBackoff or MaxRetryBackoff")
	}
	w := &Watcher{
		opts:          opts,
		log:           opts.Logger,
		now:           opts.Now,
		maxModelBytes: opts.MaxModelBytes,
		parallelism:   opts.Parallelism,
		registerSem:   make(chan struct{}, 1),
		state:         map[string]Loaded{},
		book:          newStatusBook(),
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.log = w.log.With("component", "modelstore", "bucket", opts.BucketURL)
	if w.now == nil {
		w.now = time.Now
	}
	if w.opts.Period == 0 {
		w.opts.Period = DefaultPeriod
	}
	if w.maxModelBytes == 0 {
		w.maxModelBytes = runtimes.DefaultMaxModelBytes
	}
	if w.parallelism == 0 {
		w.parallelism = DefaultParallelism
	}
	if w.opts.DriftCheckPeriod == 0 {
		w.opts.DriftCheckPeriod = 10 * w.opts.Period
	}
	if w.opts.OpTimeout == 0 {
		w.opts.OpTimeout = DefaultOpTimeout
	}
	if w.opts.MaxRetryBackoff == 0 {
		w.opts.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	if w.opts.RetryBackoff == 0 {
		w.opts.RetryBackoff = w.opts.Period
	}
	w.opts.RetryBackoff = min(w.opts.RetryBackoff, w.opts.MaxRetryBackoff)
	// Polls come up to a tenth of the period early (jitter): a retry due
	// then is not put off by a whole period.
	w.failures = &failures{m: map[string]*failure{}, initial: w.opts.RetryBackoff, max: w.opts.MaxRetryBackoff, slack: w.opts.Period / 10}
	w.problems = &problemLog{log: w.log, m: map[string]*problem{}, initial: w.opts.RetryBackoff, max: w.opts.MaxRetryBackoff}
	var err error
	if w.metrics, err = newMetrics(opts.Metrics, w.now); err != nil {
		return nil, fmt.Errorf("modelstore: register metrics: %w", err)
	}
	if w.bucket, w.scheme, w.root, err = openBucket(context.Background(), opts.BucketURL); err != nil {
		return nil, fmt.Errorf("modelstore: %w", err)
	}
	return w, nil
}

// Close closes the bucket. Models stay registered.
func (w *Watcher) Close() error { return w.bucket.Close() }

// Models returns what the watcher has registered, by path.
func (w *Watcher) Models() map[string]Loaded {
	w.stateMu.RLock()
	defer w.stateMu.RUnlock()
	out := make(map[string]Loaded, len(w.state))
	for k, v := range w.state {
		out[k] = v
	}
	return out
}

// ErrConfig is matched (errors.Is) by a SyncOnce error that includes a
// failure to read or parse the model config; rejected entries, download,
// checksum, load and deletion failures do not match it. A first poll that
// fails this way attempted nothing: no config is known yet.
var ErrConfig = errors.New("modelstore: model config not read")

// ErrConfigEntry is matched by a SyncOnce error that includes entries of
// the config that were rejected (the other entries were applied; the models
// rejected entries name stay as they were).
var ErrConfigEntry = errors.New("modelstore: model config entry rejected")

// marked marks err for errors.Is(err, mark), keeping the message, the
// metric reason and the inferr type of err as they are.
type marked struct{ err, mark error }

func (e marked) Error() string   { return e.err.Error() }
func (e marked) Unwrap() []error { return []error{e.err, e.mark} }

// SyncOnce runs one poll: read the config (skipped when the object is
// unchanged), plan, and execute the plan. The error joins every failure of
// the poll, and the last failure of each model held back by its retry
// back-off; each is also logged (repeats deduplicated) and counted. When
// the config cannot be read or parsed the last good config still drives due
// actions (grace periods ending, retries), so nothing the bad config says
// takes effect. A config failure matches ErrConfig, rejected entries match
// ErrConfigEntry; when SyncOnce returns an error that does not match
// ErrConfig, the config was read and every model it lists was attempted
// (at this poll, or at an earlier one for a model held back).
func (w *Watcher) SyncOnce(ctx context.Context) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	var errs []error
	cfg, err := w.loadConfig(ctx)
	if err != nil {
		err = marked{err, ErrConfig}
		errs = append(errs, err)
		if !w.haveConfig {
			return err
		}
		cfg = w.config
	} else {
		w.noteConfig(cfg)
	}
	// A config much smaller than the last: once this poll has dropped
	// what the large one held, its memory goes back to the system.
	if n := len(w.config.Models) + len(w.config.Invalid); err == nil && w.largestConfig > 1024 && n < w.largestConfig/4 {
		defer debug.FreeOSMemory()
		w.largestConfig = n
	} else {
		w.largestConfig = max(w.largestConfig, n)
	}
	if err := w.reportInvalidEntries(cfg); err != nil {
		errs = append(errs, err)
	}
	plan := Plan(w.Models(), w.withoutHeld(cfg), w.now())
	errs = append(errs, w.apply(ctx, plan)...)
	w.forgetSettled(plan)
	w.checkDrift(ctx, cfg, plan)
	w.nextWake = plan.NextWake
	w.metrics.available.Set(float64(len(w.Models())))
	w.problems.summarize(w.now())
	if len(errs) == 0 {
		w.metrics.goodSync(w.now())
	}
	return errors.Join(errs...)
}

// reportInvalidEntries logs the config's rejected entries (each once, then
// as described on problemLog) and returns them as one error.
func (w *Watcher) reportInvalidEntries(cfg Config) error {
	w.metrics.badEntries.Set(float64(len(cfg.Invalid)))
	now := w.now()
	current := map[string]bool{}
	for i, ie := range cfg.Invalid {
		if i == maxEntryErrorsShown {
			current["entry more"] = true
			w.problems.report("entry more", now, "model config entries rejected", configErr("%d more entries rejected", len(cfg.Invalid)-i),
				"config_path", w.opts.ConfigPath)
			break
		}
		// by position and path: two rejected entries may name one path
		key := "entry " + strconv.Itoa(ie.Index) + " " + ie.Path
		what := "model config entry rejected; the model it names stays as it was"
		if ie.Path == "" {
			what = "model config entry rejected; it names no model, so no model is retired while it stays"
		}
		current[key] = true
		w.problems.report(key, now, what, ie.Err, "config_path", w.opts.ConfigPath, "entry", ie.Index, "model_path", ie.Path)
	}
	for _, key := range w.problems.keys("entry ") {
		if !current[key] {
			w.problems.resolve(key, "model config entry no longer rejected", "config_path", w.opts.ConfigPath)
		}
	}
	if err := cfg.Err(); err != nil {
		return marked{err, ErrConfigEntry}
	}
	return nil
}

// forgetSettled drops the failures of loads, updates and deletions the
// plan no longer calls for: a model delisted, reverted to the content that
// serves, or named by a rejected entry (it starts afresh once the entry is
// fixed). A failed action leaves the state as it was, so one still wanted
// is in every plan.
func (w *Watcher) forgetSettled(plan SyncPlan) {
	pending := map[string]bool{}  // loads and updates
	deleting := map[string]bool{} // deletions
	for _, a := range plan.Actions {
		switch a.Kind {
		case ActLoad, ActUpdate:
			pending[a.Path] = true
		case ActDelete:
			deleting[a.Path] = true
		}
	}
	w.metrics.failing.Set(float64(w.failures.keep(pending)))
	w.forgetFailures(func() map[string]bool {
		keep := maps.Clone(pending)
		maps.Copy(keep, deleting)
		return keep
	}())
	for _, key := range w.problems.keys("model ") {
		if !pending[strings.TrimPrefix(key, "model ")] {
			w.problems.resolve(key, "")
		}
	}
	for _, key := range w.problems.keys("delete ") {
		if !deleting[strings.TrimPrefix(key, "delete ")] {
			w.problems.resolve(key, "")
		}
	}
}

// loadConfig returns the current config, reading and parsing the object
// only when it changed.
func (w *Watcher) loadConfig(ctx context.Context) (Config, error) {
	known := ""
	if w.haveConfig {
		known = w.configVersion
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.OpTimeout)
	defer cancel()
	data, version, err := w.readConfigObject(ctx, known)
	if err != nil {
		w.metrics.fetches.WithLabelValues("config", reasonOf(err)).Inc()
		w.problems.report("config", w.now(), "model config fetch failed; nothing changes", err,
			"config_path", w.opts.ConfigPath, "reason", reasonOf(err))
		return Config{}, err
	}
	if data == nil { // same version as the last good config
		w.metrics.fetches.WithLabelValues("config", resultUnchanged).Inc()
		w.problems.resolve("config", "model config read again", "config_path", w.opts.ConfigPath)
		return w.config, nil
	}
	hash := sha256.Sum256(data)
	if w.haveConfig && hash == w.configHash {
		w.configVersion = version
		w.metrics.fetches.WithLabelValues("config", resultUnchanged).Inc()
		w.problems.resolve("config", "model config read again", "config_path", w.opts.ConfigPath)
		return w.config, nil
	}
	var cfg Config
	if w.badConfigErr != nil && hash == w.badConfigHash {
		err = w.badConfigErr // the same bad content: not parsed again
	} else if cfg, err = ParseConfigMax(data, w.opts.MaxEntries); err != nil {
		err = &fetchError{reason: reasonParse, err: fmt.Errorf("%s: %w", w.opts.ConfigPath, err)}
		w.badConfigHash, w.badConfigErr = hash, err
	}
	if err != nil {
		w.metrics.fetches.WithLabelValues("config", reasonParse).Inc()
		w.problems.report("config", w.now(), "model config rejected; nothing changes", err,
			"config_path", w.opts.ConfigPath, "reason", reasonParse)
		return Config{}, err
	}
	w.badConfigErr = nil
	w.metrics.fetches.WithLabelValues("config", resultSuccess).Inc()
	w.problems.resolve("config", "model config read again", "config_path", w.opts.ConfigPath)
	w.log.Info("model config changed", "config_path", w.opts.ConfigPath, "models", len(cfg.Models), "rejected_entries", len(cfg.Invalid))
	w.haveConfig, w.config, w.configHash, w.configVersion = true, cfg, hash, version
	return cfg, nil
}

func (w *Watcher) setState(path string, f func(m Loaded, ok bool) (Loaded, bool)) {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	m, ok := w.state[path]
	if m, keep := f(m, ok); keep {
		w.state[path] = m
	} else {
		delete(w.state, path)
	}
}

func (w *Watcher) apply(ctx context.Context, plan SyncPlan) []error {
	var errs []error
	var loads []Action
	for _, a := range plan.Actions {
		switch a.Kind {
		case ActStartGrace:
			w.setState(a.Path, func(m Loaded, ok bool) (Loaded, bool) { m.EvictAt = a.At; return m, ok })
			w.log.Info("model eviction grace period starts; it keeps serving", "model_path", a.Path, "until", a.At)
		case ActCancelGrace:
			w.setState(a.Path, func(m Loaded, ok bool) (Loaded, bool) {
				m.EvictAt = time.Time{}
				m.Entry = a.Entry
				return m, ok
			})
			w.log.Info("model listed again with its serving checksum; kept", "model_path", a.Path)
		case ActRefresh:
			w.setState(a.Path, func(m Loaded, ok bool) (Loaded, bool) { m.Entry = a.Entry; return m, ok })
		case ActDelete:
			if err := w.delete(ctx, a.Path); err != nil {
				errs = append(errs, err)
			}
		case ActLoad, ActUpdate:
			loads = append(loads, a)
		}
	}
	return append(errs, w.loadAll(ctx, loads)...)
}

func (w *Watcher) delete(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.OpTimeout)
	defer cancel()
	err := w.opts.Registrar.DeleteModel(ctx, path)
	if err != nil && !isNotFound(err) {
		w.metrics.deletions.WithLabelValues("failure").Inc()
		err = fmt.Errorf("delete model %q: %w", path, err)
		w.noteFailure(path, err)
		w.problems.report("delete "+path, w.now(), "model deletion failed; it keeps serving, retrying next poll", err, "model_path", path)
		return err
	}
	w.metrics.deletions.WithLabelValues("success").Inc()
	w.metrics.regSeconds.DeleteLabelValues(path)
	w.setState(path, func(Loaded, bool) (Loaded, bool) { return Loaded{}, false })
	w.forgetFailure(path)
	w.log.Info("model deleted", "model_path", path, "failed_times", w.problems.resolve("delete "+path, ""))
	return nil
}

// loadAll runs loads and updates with bounded parallelism.
func (w *Watcher) loadAll(ctx context.Context, loads []Action) []error {
	if len(loads) == 0 {
		return nil
	}
	errs := make([]error, len(loads))
	sem := make(chan struct{}, w.parallelism)
	var wg sync.WaitGroup
	for i, a := range loads {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = w.load(ctx, a)
		}()
	}
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	return failed
}

// load lists, downloads, verifies and registers a model, unless the same
// attempt (config entry and objects as listed) failed before and its retry
// back-off runs: then nothing is downloaded and the last error returns.
func (w *Watcher) load(ctx context.Context, a Action) error {
	kind := a.Kind.String()
	e := a.Entry
	w.noteLoading(e.Path, true)
	defer w.noteLoading(e.Path, false)
	var at attempt
	fail := func(err error) error {
		w.metrics.registrations.WithLabelValues(kind, "failure").Inc()
		if ctx.Err() != nil {
			return err // shutting down: not the model's failure
		}
		w.noteFailure(e.Path, err)
		msg := "model load failed; nothing changes"
		if a.Kind == ActUpdate {
			msg = "model update failed; the old content keeps serving"
		}
		attrs := []any{"model_path", e.Path, "kind", kind, "reason", reasonOf(err)}
		if sidecarUnavailable(err) {
			// Not the model's failure: a back-off grown during a sidecar
			// outage would keep the model away for up to an hour after
			// the sidecar is back. Tried again at the next poll.
			w.problems.reportAs("model "+e.Path, e.Checksum+" "+err.Error(), w.now(), msg, err, attrs...)
			return err
		}
		backoff, _ := w.failures.failed(e.Path, at, err, w.now())
		if at.objects != "" {
			attrs = append(attrs, "retry_after", backoff) // unless the entry or objects change
		}
		w.problems.reportAs("model "+e.Path, e.Checksum+" "+err.Error(), w.now(), msg, err, attrs...)
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, w.opts.OpTimeout)
	objs, err := w.listModel(dctx, e)
	if err != nil {
		cancel()
		w.metrics.fetches.WithLabelValues("model", reasonOf(err)).Inc()
		return fail(err)
	}
	at = attempt{entry: e, objects: listingDigest(objs)}
	if err := w.failures.heldBack(e.Path, at, w.now()); err != nil {
		cancel()
		w.metrics.deferred.Inc()
		return err
	}
	d, err := w.download(dctx, e, objs)
	cancel()
	if err != nil {
		w.metrics.fetches.WithLabelValues("model", reasonOf(err)).Inc()
		return fail(err)
	}
	defer d.cleanup()
	w.metrics.fetches.WithLabelValues("model", resultSuccess).Inc()

	select {
	case w.registerSem <- struct{}{}:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	rctx, cancel := context.WithTimeout(ctx, w.opts.OpTimeout)
	start := time.Now()
	err = w.register(rctx, e, d)
	elapsed := time.Since(start)
	cancel()
	<-w.registerSem
	if err != nil {
		return fail(&fetchError{reason: reasonRegister, err: fmt.Errorf("register model %q: %w", e.Path, err)})
	}
	w.metrics.registrations.WithLabelValues(kind, "success").Inc()
	w.metrics.regSeconds.WithLabelValues(e.Path).Set(elapsed.Seconds())
	w.metrics.regHistogram.Observe(elapsed.Seconds())
	w.setState(e.Path, func(Loaded, bool) (Loaded, bool) {
		return Loaded{Entry: e, Checksum: d.checksum, LoadedAt: w.now()}, true
	})
	w.drift.noteLoaded(e.Path, at.objects)
	w.forgetFailure(e.Path)
	w.failures.succeeded(e.Path)
	w.log.Info("model registered", "model_path", e.Path, "kind", kind, "bytes", d.size, "files", len(d.files),
		"checksum", d.checksum, "registration_seconds", elapsed.Seconds(), "failed_times", w.problems.resolve("model "+e.Path, ""))
	return nil
}

// Run polls until ctx ends, every Period with ±10% jitter, and also when a
// grace period ends. It returns nil when ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	for {
		// Each failure was logged where it happened, repeats deduplicated.
		if err := w.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			w.log.Debug("model sync incomplete", "err", err)
		}
		wait := jitter(w.opts.Period)
		w.syncMu.Lock()
		next := w.nextWake
		w.syncMu.Unlock()
		if !next.IsZero() {
			if d := next.Sub(w.now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// jitter spreads polls of many servers over ±10% of the period.
func jitter(d time.Duration) time.Duration {
	span := int64(d) / 5
	if span <= 0 {
		return d
	}
	return d - time.Duration(span/2) + time.Duration(rand.Int64N(span))
}

// sidecarUnavailable reports whether a registration failed because the
// sidecar could not be reached or did not answer in time, rather than
// because of the model.
func sidecarUnavailable(err error) bool {
	return inferr.TypeOf(err) == inferr.GRPC || errors.Is(err, context.DeadlineExceeded)
}

// register sends the entry's model, with its sequence settings when it has
// them: as the downloaded files themselves, with their SHA-256 digests, to
// a DigestRegistrar, or without to a DiskRegistrar (the model never passes
// through this process's memory), read into memory otherwise.
func (w *Watcher) register(ctx context.Context, e ModelEntry, d *downloaded) error {
	if e.ExternalVariables != "" {
		// The registrar sends them with the model (sidecar.Client,
		// Supervisor: in the registration; the supervisor replays them).
		ctx = runtimes.WithLoadOptions(ctx, runtimes.LoadOptions{ExternalVariables: e.ExternalVariables.Map()})
	}
	switch r := w.opts.Registrar.(type) {
	case DigestRegistrar:
		files, sums := d.onDisk()
		return r.RegisterDownloadedFiles(ctx, e.Path, files, sums, e.WarmUpJSON, e.Sequences)
	case DiskRegistrar:
		files, _ := d.onDisk()
		return r.RegisterModelFiles(ctx, e.Path, files, e.WarmUpJSON, e.Sequences)
	}
	files, err := d.read()
	if err != nil {
		return err
	}
	if e.Sequences == nil {
		return w.opts.Registrar.RegisterModel(ctx, e.Path, files, e.WarmUpJSON)
	}
	sr, ok := w.opts.Registrar.(SequenceRegistrar)
	if !ok {
		return inferr.Errorf(inferr.InputParsing, "the entry sets stateful-model settings, but the registrar (%T) cannot carry them", w.opts.Registrar)
	}
	return sr.RegisterModelWithSequences(ctx, e.Path, files, e.WarmUpJSON, e.Sequences)
}
