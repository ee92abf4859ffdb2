package sidecar

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

// registry maps model paths to loaded models. Readers take a snapshot of an
// immutable map through an atomic pointer (no lock on the Predict path);
// writers copy the map under mu and publish the copy.
type registry struct {
	rt       *runtimes.Runtime
	maxBytes int64
	// maxMapped caps the files the runtime maps (modelLimits); 0 = none
	// apart.
	maxMapped int64
	limits    batch.Limits
	log       *slog.Logger

	models atomic.Pointer[map[string]*runtimes.Model]

	mu        sync.Mutex // guards publishing, pathLocks, meta and loading
	pathLocks map[string]*pathLock
	closed    bool
	// meta describes each published model (for GetModels); loading counts
	// the registrations under way per path.
	meta    map[*runtimes.Model]modelMeta
	loading map[string]int

	closing sync.WaitGroup // background Close of replaced models

	// batchers holds the dynamic batcher of each published model that
	// batches (*runtimes.Model -> *batcher, see batcher.go); batching is
	// set when the runtime config has a dynamic_batching section at all.
	batchers sync.Map
	batching bool

	// maxPerClient and idleAfter are the sequence managers' MaxPerClient
	// and IdleAfter (ServerOptions).
	maxPerClient int
	idleAfter    time.Duration

	// sequences holds the sequence manager of each published stateful
	// model served with sequences (*runtimes.Model -> *sequence.Manager,
	// see sequences.go).
	sequences sync.Map

	// metrics are the per-model histograms; a published model's
	// *pathMetrics is its runtimes observer (see modelmetrics.go).
	metrics *modelMetrics

	// afterLookup, when set (tests only), runs between the lookup of a
	// model and the call into it: the window a swap can close the model in.
	afterLookup func(path string)
}

// pathLock serialises registrations and deletions of one path, so that two
// concurrent registrations never interleave: the one that takes the lock
// last is the one that serves (last writer wins) and no model leaks.
type pathLock struct {
	mu   sync.Mutex
	refs int
}

// newRegistry takes resolved options (NewServer applies the defaults).
func newRegistry(rt *runtimes.Runtime, maxBytes int64, limits batch.Limits, log *slog.Logger) *registry {
	r := &registry{rt: rt, maxBytes: maxBytes, limits: limits, log: log, pathLocks: map[string]*pathLock{},
		meta: map[*runtimes.Model]modelMeta{}, loading: map[string]int{}, metrics: newModelMetrics()}
	r.batching = rt.Config().DynamicBatching != nil
	empty := map[string]*runtimes.Model{}
	r.models.Store(&empty)
	return r
}

func (r *registry) lockPath(path string) func() {
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

// lookup returns the model serving path, if any.
func (r *registry) lookup(path string) *runtimes.Model {
	return (*r.models.Load())[path]
}

// paths lists the published paths, sorted.
func (r *registry) paths() []string {
	return slices.Sorted(maps.Keys(*r.models.Load()))
}

// validateModel checks a registration before anything is loaded.
func validateModel(path string, files runtimes.Files, lim modelLimits) error {
	if path == "" {
		return inferr.Errorf(inferr.InputParsing, "register model: model_path is empty")
	}
	if len(files) == 0 {
		return inferr.Errorf(inferr.InputParsing, "register model %s: no files", inferr.Quote(path))
	}
	total := tally{lim: lim}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := validateFilePath(name); err != nil {
			return inferr.Errorf(inferr.InputParsing, "register model %s: %w", inferr.Quote(path), err)
		}
		if err := total.add(path, name, int64(len(files[name]))); err != nil {
			return err
		}
	}
	return nil
}

// validateFilePath accepts clean, relative, slash-separated paths only.
func validateFilePath(name string) error {
	if !fs.ValidPath(name) || name == "." {
		return fmt.Errorf("file path %s is not a clean relative path", inferr.Quote(name))
	}
	return nil
}

// registerResult reports what a registration did.
type registerResult struct {
	replaced     bool
	load, warmUp time.Duration
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

// register validates, loads and warms a model, then publishes it under
// path, replacing (and closing in the background) any model there.
func (r *registry) register(ctx context.Context, path string, files runtimes.Files, warmUpJSON string) (registerResult, error) {
	return r.registerWith(ctx, path, files, warmUpJSON, nil)
}

// registerWith is register with the registration's sequence settings (nil:
// the runtime config's apply).
func (r *registry) registerWith(ctx context.Context, path string, files runtimes.Files, warmUpJSON string, seq *runtimes.SequenceSettings) (registerResult, error) {
	if err := validateModel(path, files, r.byteLimits()); err != nil {
		return registerResult{}, err
	}
	return r.registerLoad(ctx, path, warmUpJSON, seq, modelLoad{
		files: len(files), bytes: files.Size(),
		checksum: func() string { return modelfiles.Checksum(files) },
		load:     func(ctx context.Context) (*runtimes.Model, error) { return r.rt.Load(ctx, path, files) },
	})
}

// registerDisk registers a model whose files were received into files on
// disk (a streamed registration, already checked against the limits);
// checksum is theirs, computed as they arrived. The runtime loads them from
// disk where it can (runtimes.Runtime.LoadDisk).
func (r *registry) registerDisk(ctx context.Context, path string, files runtimes.DiskFiles, size int64, checksum, warmUpJSON string, seq *runtimes.SequenceSettings) (registerResult, error) {
	return r.registerLoad(ctx, path, warmUpJSON, seq, modelLoad{
		files: len(files), bytes: size,
		checksum: func() string { return checksum },
		load:     func(ctx context.Context) (*runtimes.Model, error) { return r.rt.LoadDisk(ctx, path, files) },
	})
}

// modelLoad is what a registration loads, and what GetModels says of it.
type modelLoad struct {
	files    int
	bytes    int64
	checksum func() string
	load     func(ctx context.Context) (*runtimes.Model, error)
}

// registerLoad parses the warm-up batch, loads, warms and publishes a
// validated registration.
func (r *registry) registerLoad(ctx context.Context, path, warmUpJSON string, seq *runtimes.SequenceSettings, ml modelLoad) (registerResult, error) {
	var res registerResult
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
	res.load = time.Since(start)
	if err := r.shareState(path, m, seq); err != nil {
		r.closeInBackground(m)
		return res, err
	}

	start = time.Now()
	if err := warmUpModel(ctx, m, warmUp); err != nil {
		r.closeInBackground(m)
		return res, fmt.Errorf("register model %s: warm-up failed: %w", inferr.Quote(path), err)
	}
	res.warmUp = time.Since(start)

	meta := modelMeta{checksum: ml.checksum(), load: res.load, warmUp: res.warmUp,
		files: ml.files, bytes: ml.bytes}
	if err := r.startSequences(path, m, seq); err != nil {
		r.closeInBackground(m)
		return res, err
	}
	r.startBatcher(path, m)
	// After the warm-up: its calls are not the model's traffic.
	pm := r.metrics.forPath(path)
	m.SetObserver(pm)
	old, err := r.publishWithMeta(path, m, meta)
	if err != nil {
		r.closeInBackground(m)
		return res, err
	}
	if old != nil {
		res.replaced = true
		r.closeInBackground(old)
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

// publish swaps m in under path and returns the model it replaced.
func (r *registry) publish(path string, m *runtimes.Model) (*runtimes.Model, error) {
	return r.publishWithMeta(path, m, modelMeta{})
}

// publishWithMeta is publish recording m's meta, stamped with the time it
// starts serving.
func (r *registry) publishWithMeta(path string, m *runtimes.Model, meta modelMeta) (*runtimes.Model, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errRegistryClosed
	}
	if m != nil {
		meta.loadedAt = time.Now()
		r.meta[m] = meta
	}
	cur := *r.models.Load()
	next := make(map[string]*runtimes.Model, len(cur)+1)
	maps.Copy(next, cur)
	old := cur[path]
	if m == nil {
		delete(next, path)
	} else {
		next[path] = m
	}
	r.models.Store(&next)
	if old != nil {
		delete(r.meta, old)
	}
	return old, nil
}

func (r *registry) startLoading(path string) {
	r.mu.Lock()
	r.loading[path]++
	r.mu.Unlock()
}

func (r *registry) stopLoading(path string) {
	r.mu.Lock()
	if r.loading[path]--; r.loading[path] <= 0 {
		delete(r.loading, path)
	}
	r.mu.Unlock()
}

// ModelInfo describes a model the sidecar serves or is loading.
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

// ModelState is what the sidecar holds at a path.
type ModelState string

// The states a sidecar reports.
const (
	ModelLoading ModelState = "loading"
	ModelServing ModelState = "serving"
)

// infos describes the models serving or loading, sorted by path; with path
// set, only the model there (false when there is none).
func (r *registry) infos(path string) ([]ModelInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	models := *r.models.Load()
	byPath := map[string]ModelInfo{}
	for p, m := range models {
		if path != "" && p != path {
			continue
		}
		meta := r.meta[m]
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

// delete unpublishes path; calls in flight finish on the model before it
// is closed.
func (r *registry) delete(path string) error {
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
	r.closeInBackground(old)
	r.metrics.forget(path)
	return nil
}

func (r *registry) closeInBackground(m *runtimes.Model) {
	if m == nil {
		return
	}
	r.stopSequences(m)
	r.closing.Add(1)
	go func() {
		defer r.closing.Done()
		r.stopBatcher(m)
		if err := m.Close(); err != nil {
			r.log.Warn("closing replaced model", "model_path", m.Path(), "err", err)
		}
	}()
}

// predict runs one entry. A model that was closed between lookup and call
// has been replaced or deleted: the call retries on the current model, so
// a swap never shows MODEL_NOT_FOUND.
func (r *registry) predict(ctx context.Context, path string, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	return r.predictAt(ctx, path, inputs, time.Time{})
}

// predictAt is predict for an entry that arrived in the sidecar at arrived
// (zero: now), recording its end-to-end and queue times in the model's
// metrics.
func (r *registry) predictAt(ctx context.Context, path string, inputs []tensor.Tensor, arrived time.Time) ([]tensor.Tensor, error) {
	m := r.lookup(path)
	for {
		if m == nil {
			return nil, inferr.Errorf(inferr.ModelNotFound, "model %s is not registered", inferr.Quote(path))
		}
		if r.afterLookup != nil {
			r.afterLookup(path)
		}
		started := time.Now()
		if arrived.IsZero() {
			arrived = started
		}
		out, queued, err := r.call(ctx, m, inputs)
		if pm, ok := m.Observer().(*pathMetrics); ok {
			pm.entry(arrived, started, queued)
		}
		if err != nil && (errors.Is(err, runtimes.ErrClosed) || errors.Is(err, sequence.ErrClosed)) {
			if next := r.lookup(path); next != m {
				m = next
				continue
			}
		}
		return out, err
	}
}

// close unpublishes every model, closes them (waiting for calls in flight)
// and waits for background closes. Later registrations fail.
func (r *registry) close() {
	r.mu.Lock()
	r.closed = true
	cur := *r.models.Load()
	empty := map[string]*runtimes.Model{}
	r.models.Store(&empty)
	clear(r.meta)
	r.mu.Unlock()
	for _, m := range cur {
		r.closeInBackground(m)
	}
	r.closing.Wait()
}
