package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/tensor"
)

// Options configure a Registry; the zero value of each field but Runtime
// means its default.
type Options struct {
	Runtime *runtimes.Runtime // required
	// Settings are the sidecar's own runtime settings (dynamic batching,
	// sequences, shared state).
	Settings Settings
	// Limits bound the warm-up batches (batch.Parse); zero fields take
	// batch.Limits' defaults, MaxElements the runtime's element cap.
	Limits        batch.Limits
	MaxModelBytes int64 // 0 = runtimes.DefaultMaxModelBytes (2 GiB)
	// MaxMappedModelBytes, when > 0, caps a model's files the runtime
	// serves from a memory mapping (runtimes.Runtime.MapsFile) instead of
	// MaxModelBytes, which then bounds the other files.
	MaxMappedModelBytes int64
	Logger              *slog.Logger // nil = slog.Default()
	// SequenceCleanerInterval is the time between two sweeps of idle
	// sequences of stateful models; 0 = Settings.SequenceCleanerPollWait()
	// (default 5 minutes), < 0 = off. A sequence is idle after one
	// interval without a request.
	SequenceCleanerInterval time.Duration
	// MaxSequencesPerClient is sequence.Options.MaxPerClient of every
	// stateful model (0 = sequence.DefaultMaxPerClient, < 0 = none).
	MaxSequencesPerClient int
}

// Registry maps model paths to loaded models. Readers take a snapshot of an
// immutable map of entries through an atomic pointer (no lock on the
// Predict path); writers copy the map under mu and publish the copy.
type Registry struct {
	rt       *runtimes.Runtime
	settings Settings
	maxBytes int64
	// maxMapped caps the files the runtime maps (Tally); 0 = none apart.
	maxMapped int64
	limits    batch.Limits
	log       *slog.Logger

	entries atomic.Pointer[map[string]*entry]

	mu        sync.Mutex // guards publishing, pathLocks and loading
	pathLocks map[string]*pathLock
	closed    bool
	// loading counts the registrations under way per path.
	loading map[string]int

	closing sync.WaitGroup // background Close of replaced models

	// maxPerClient and idleAfter are the sequence managers' MaxPerClient
	// and IdleAfter.
	maxPerClient int
	idleAfter    time.Duration
	// stopCleaner ends the sequence cleaner (nil when it does not run).
	stopCleaner chan struct{}

	// metrics are the per-model histograms; a published model's
	// *pathMetrics is its runtimes observer (see metrics.go).
	metrics *modelMetrics

	// afterLookup, when set (tests only), runs between the lookup of a
	// model and the call into it: the window a swap can close the model in.
	afterLookup func(path string)
}

// entry is one published model with everything that serves it. It is
// immutable once published: a re-registration publishes a new entry.
type entry struct {
	model *runtimes.Model
	// batcher merges the model's calls (nil: unbatched; see batcher.go).
	batcher *batcher
	// sequences holds the sequences of a stateful model served with
	// sequences (nil: none; see sequences.go).
	sequences *sequence.Manager
	// metrics are the model path's histograms (nil for a model published
	// without a registration, in tests).
	metrics *pathMetrics
	meta    modelMeta
}

// pathLock serialises registrations and deletions of one path, so that two
// concurrent registrations never interleave: the one that takes the lock
// last is the one that serves (last writer wins) and no model leaks.
type pathLock struct {
	mu   sync.Mutex
	refs int
}

// New returns an empty registry over opts.Runtime, and starts the sequence
// cleaner (a model may become stateful by its own registration, not only
// by stateful_models; a sweep with no sequences costs nothing). Close it
// when done.
func New(opts Options) (*Registry, error) {
	if opts.Runtime == nil {
		return nil, errors.New("registry: Options.Runtime is nil")
	}
	if opts.MaxModelBytes <= 0 {
		opts.MaxModelBytes = runtimes.DefaultMaxModelBytes
	}
	if opts.Limits.MaxElements <= 0 {
		opts.Limits.MaxElements = opts.Runtime.Config().MaxTensorElements
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Registry{rt: opts.Runtime, settings: opts.Settings, maxBytes: opts.MaxModelBytes, maxMapped: opts.MaxMappedModelBytes,
		limits: opts.Limits.WithDefaults(), log: opts.Logger, pathLocks: map[string]*pathLock{},
		loading: map[string]int{}, metrics: newModelMetrics(), maxPerClient: opts.MaxSequencesPerClient}
	empty := map[string]*entry{}
	r.entries.Store(&empty)
	cleanEvery := opts.SequenceCleanerInterval
	if cleanEvery == 0 {
		cleanEvery = opts.Settings.SequenceCleanerPollWait()
	}
	r.idleAfter = max(cleanEvery, 0)
	if cleanEvery > 0 {
		r.stopCleaner = make(chan struct{})
		go r.runSequenceCleaner(cleanEvery, r.stopCleaner)
	}
	return r, nil
}

// Runtime is the runtime the registry loads models with.
func (r *Registry) Runtime() *runtimes.Runtime { return r.rt }

func (r *Registry) lockPath(path string) func() {
	r.mu.Lock()
	pl := r.pathLocks[path]
	if pl == nil {
		pl = &pathLock{}
		r.pathLocks[path] = pl
	}
	pl.refs++
	r.mu.Unlock()
	pl.mu.Lock()
	return func() {
		pl.mu.Unlock()
		r.mu.Lock()
		if pl.refs--; pl.refs == 0 {
			delete(r.pathLocks, path)
		}
		r.mu.Unlock()
	}
}

// lookup returns the entry serving path, if any.
func (r *Registry) lookup(path string) *entry {
	return (*r.entries.Load())[path]
}

// Paths lists the published paths, sorted.
func (r *Registry) Paths() []string {
	return slices.Sorted(maps.Keys(*r.entries.Load()))
}

// validateModel checks a registration before anything is loaded.
func validateModel(path string, files runtimes.Files, total *Tally) error {
	if path == "" {
		return inferr.Errorf(inferr.InputParsing, "register model: model_path is empty")
	}
	if len(files) == 0 {
		return inferr.Errorf(inferr.InputParsing, "register model %s: no files", inferr.Quote(path))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := ValidateFilePath(name); err != nil {
			return inferr.Errorf(inferr.InputParsing, "register model %s: %w", inferr.Quote(path), err)
		}
		if err := total.Add(path, name, int64(len(files[name]))); err != nil {
			return err
		}
	}
	return nil
}

// ValidateFilePath accepts clean, relative, slash-separated paths only.
func ValidateFilePath(name string) error {
	if !fs.ValidPath(name) || name == "." {
		return fmt.Errorf("file path %s is not a clean relative path", inferr.Quote(name))
	}
	return nil
}

// Result reports what a registration did.
type Result struct {
	Replaced     bool
	Load, WarmUp time.Duration
}

// modelMeta is what the registry knows of a published model besides the
// model itself.
type modelMeta struct {
	checksum     string // modelfiles.Checksum of its files
	loadedAt     time.Time
	load, warmUp time.Duration
	files        int
	bytes        int64
}

// Register validates, loads and warms a model, then publishes it under
// path, replacing (and closing in the background) any model there. seq is
// the registration's own sequence settings (its model_metadata entry's);
// nil: Settings.StatefulModels' apply. When ctx's load options carry the
// files' checksum (runtimes.WithLoadOptions: a registration with external
// variables), it is not computed again.
func (r *Registry) Register(ctx context.Context, path string, files runtimes.Files, warmUpJSON string, seq *runtimes.SequenceSettings) (Result, error) {
	if err := validateModel(path, files, r.NewTally()); err != nil {
		return Result{}, err
	}
	return r.registerLoad(ctx, path, warmUpJSON, seq, modelLoad{
		files: len(files), bytes: files.Size(),
		checksum: func() string {
			if sum := runtimes.LoadOptionsFrom(ctx).Checksum; sum != "" {
				return sum
			}
			return modelfiles.Checksum(files)
		},
		load: func(ctx context.Context) (*runtimes.Model, error) { return r.rt.Load(ctx, path, files) },
	})
}

// RegisterDisk registers a model whose files were received into files on
// disk (a streamed registration, already checked against the limits with
// a Tally); checksum is theirs, computed as they arrived. The runtime
// loads them from disk where it can (runtimes.Runtime.LoadDisk).
func (r *Registry) RegisterDisk(ctx context.Context, path string, files runtimes.DiskFiles, size int64, checksum, warmUpJSON string, seq *runtimes.SequenceSettings) (Result, error) {
	return r.registerLoad(ctx, path, warmUpJSON, seq, modelLoad{
		files: len(files), bytes: size,
		checksum: func() string { return checksum },
		load:     func(ctx context.Context) (*runtimes.Model, error) { return r.rt.LoadDisk(ctx, path, files) },
	})
}

// modelLoad is what a registration loads, and what Models says of it.
type modelLoad struct {
	files    int
	bytes    int64
	checksum func() string
	load     func(ctx context.Context) (*runtimes.Model, error)
}

// registerLoad parses the warm-up batch, loads, warms and publishes a
// validated registration.
func (r *Registry) registerLoad(ctx context.Context, path, warmUpJSON string, seq *runtimes.SequenceSettings, ml modelLoad) (Result, error) {
	var res Result
	// Parse the warm-up batch before loading: a bad one costs no load.
	var warmUp []batch.Entry
	if warmUpJSON != "" {
		entries, err := batch.Parse([]byte(warmUpJSON), r.limits)
		if err != nil {
			return res, inferr.Wrap(inferr.InputParsing, err, fmt.Sprintf("register model %s: warm-up batch", inferr.Quote(path)))
		}
		for i, e := range entries {
			if e.Err != nil {
				return res, inferr.Wrap(inferr.InputParsing, e.Err, fmt.Sprintf("register model %s: warm-up entry %d", inferr.Quote(path), i))
			}
		}
		warmUp = entries
	}

	r.startLoading(path)
	defer r.stopLoading(path)
	unlock := r.lockPath(path)
	defer unlock()

	start := time.Now()
	m, err := ml.load(ctx)
	if err != nil {
		return res, err
	}
	res.Load = time.Since(start)
	e := &entry{model: m}
	if err := r.shareState(path, e, seq); err != nil {
		r.retire(e)
		return res, err
	}

	start = time.Now()
	if err := warmUpModel(ctx, m, warmUp); err != nil {
		r.retire(e)
		return res, fmt.Errorf("register model %s: warm-up failed: %w", inferr.Quote(path), err)
	}
	res.WarmUp = time.Since(start)

	e.meta = modelMeta{checksum: ml.checksum(), load: res.Load, warmUp: res.WarmUp,
		files: ml.files, bytes: ml.bytes}
	if err := r.startSequences(path, e, seq); err != nil {
		r.retire(e)
		return res, err
	}
	r.startBatcher(path, e)
	// After the warm-up: its calls are not the model's traffic.
	e.metrics = r.metrics.forPath(path)
	m.SetObserver(e.metrics)
	old, err := r.publish(path, e)
	if err != nil {
		r.retire(e)
		return res, err
	}
	if old != nil {
		res.Replaced = true
		r.retire(old)
	}
	return res, nil
}

// warmUpModel runs every warm-up entry against m, WarmUpRuns times. Entries
// run against the model being registered whatever model_path they name.
func warmUpModel(ctx context.Context, m *runtimes.Model, entries []batch.Entry) error {
	for run := 0; run < m.WarmUpRuns(); run++ {
		for i, e := range entries {
			if _, err := m.Predict(ctx, e.Tensors); err != nil {
				return fmt.Errorf("warm-up entry %d: %w", i, err)
			}
		}
	}
	return nil
}

var errRegistryClosed = inferr.Errorf(inferr.GRPC, "sidecar is shutting down")

// publish swaps e in under path (e nil: unpublishes path), stamped with
// the time it starts serving, and returns the entry it replaced.
func (r *Registry) publish(path string, e *entry) (*entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errRegistryClosed
	}
	cur := *r.entries.Load()
	next := make(map[string]*entry, len(cur)+1)
	maps.Copy(next, cur)
	old := cur[path]
	if e == nil {
		delete(next, path)
	} else {
		e.meta.loadedAt = time.Now() // before anyone can see e
		next[path] = e
	}
	r.entries.Store(&next)
	return old, nil
}

func (r *Registry) startLoading(path string) {
	r.mu.Lock()
	r.loading[path]++
	r.mu.Unlock()
}

func (r *Registry) stopLoading(path string) {
	r.mu.Lock()
	if r.loading[path]--; r.loading[path] <= 0 {
		delete(r.loading, path)
	}
	r.mu.Unlock()
}

// ModelInfo describes a model the registry serves or is loading.
type ModelInfo struct {
	Path string
	// State is ModelServing, or ModelLoading while a registration is
	// under way and no model serves the path yet.
	State ModelState
	// Runtime is the registered name of the runtime serving the model
	// ("tensorflow", "onnx", "pytorch"); "" while it is loading.
	Runtime  string
	Checksum string    // of the serving files, as `inferctl checksum` computes it
	LoadedAt time.Time // when the serving model was published
	// Load and WarmUp are how long the serving model took to load and
	// warm up.
	Load, WarmUp time.Duration
	Files        int
	Bytes        int64
	Signature    runtimes.Signature
	// MappedBytes and CopiedBytes say how the runtime holds the model's
	// weights when it can tell (driver.WeightMemory): served from a
	// read-only memory mapping, or copied into the sidecar's heap.
	MappedBytes, CopiedBytes int64
}

// ModelState is what the registry holds at a path.
type ModelState string

// The states a registry reports.
const (
	ModelLoading ModelState = "loading"
	ModelServing ModelState = "serving"
)

// Models describes the models serving or loading, sorted by path; with
// path set, only the model there (false when there is none).
func (r *Registry) Models(path string) ([]ModelInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	entries := *r.entries.Load()
	byPath := map[string]ModelInfo{}
	for p, e := range entries {
		if path != "" && p != path {
			continue
		}
		m, meta := e.model, e.meta
		wm, _ := m.WeightMemory()
		byPath[p] = ModelInfo{Path: p, State: ModelServing, Runtime: r.rt.Name(), Checksum: meta.checksum, LoadedAt: meta.loadedAt,
			Load: meta.load, WarmUp: meta.warmUp, Files: meta.files, Bytes: meta.bytes, Signature: m.Signature(),
			MappedBytes: wm.MappedBytes, CopiedBytes: wm.CopiedBytes}
	}
	for p := range r.loading {
		if _, serving := byPath[p]; !serving && (path == "" || p == path) {
			byPath[p] = ModelInfo{Path: p, State: ModelLoading}
		}
	}
	if path != "" && len(byPath) == 0 {
		return nil, false
	}
	out := make([]ModelInfo, 0, len(byPath))
	for _, p := range slices.Sorted(maps.Keys(byPath)) {
		out = append(out, byPath[p])
	}
	return out, true
}

// Delete unpublishes path; calls in flight finish on the model before it
// is closed.
func (r *Registry) Delete(path string) error {
	if path == "" {
		return inferr.Errorf(inferr.InputParsing, "delete model: model_path is empty")
	}
	unlock := r.lockPath(path)
	defer unlock()
	if r.lookup(path) == nil {
		return inferr.Errorf(inferr.ModelNotFound, "delete model %s: no model is registered at this path", inferr.Quote(path))
	}
	old, err := r.publish(path, nil)
	if err != nil {
		return err
	}
	r.retire(old)
	r.metrics.forget(path)
	return nil
}

// retire closes an entry that was replaced, deleted or never published:
// its sequences now (a reload starts with none), its batcher and model in
// the background once their calls in flight have finished.
func (r *Registry) retire(e *entry) {
	if e == nil {
		return
	}
	r.stopSequences(e)
	r.closing.Add(1)
	go func() {
		defer r.closing.Done()
		r.stopBatcher(e)
		if err := e.model.Close(); err != nil {
			r.log.Warn("closing replaced model", "model_path", e.model.Path(), "err", err)
		}
	}()
}

// Predict runs one entry that arrived in the sidecar at arrived (zero:
// now), recording its end-to-end and queue times in the model's metrics.
// A model that was closed between lookup and call has been replaced or
// deleted: the call retries on the current model, so a swap never shows
// MODEL_NOT_FOUND.
func (r *Registry) Predict(ctx context.Context, path string, inputs []tensor.Tensor, arrived time.Time) ([]tensor.Tensor, error) {
	e := r.lookup(path)
	for {
		if e == nil {
			return nil, inferr.Errorf(inferr.ModelNotFound, "model %s is not registered", inferr.Quote(path))
		}
		if r.afterLookup != nil {
			r.afterLookup(path)
		}
		started := time.Now()
		if arrived.IsZero() {
			arrived = started
		}
		out, queued, err := r.call(ctx, e, inputs)
		if e.metrics != nil {
			e.metrics.entry(arrived, started, queued)
		}
		if err != nil && (errors.Is(err, runtimes.ErrClosed) || errors.Is(err, sequence.ErrClosed)) {
			if next := r.lookup(path); next != e {
				e = next
				continue
			}
		}
		return out, err
	}
}

// Close unpublishes every model, closes them (waiting for calls in
// flight), stops the sequence cleaner and waits for background closes.
// Later registrations fail.
func (r *Registry) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.closing.Wait()
		return
	}
	r.closed = true
	cur := *r.entries.Load()
	empty := map[string]*entry{}
	r.entries.Store(&empty)
	r.mu.Unlock()
	if r.stopCleaner != nil {
		close(r.stopCleaner)
	}
	for _, e := range cur {
		r.retire(e)
	}
	r.closing.Wait()
}
