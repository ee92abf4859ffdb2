package modelstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gocloud.dev/blob"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/modelstore/storetest"
	"github.com/inferbid/inferbid/runtimes"
)

// call is one Registrar call the fake saw.
type call struct {
	op, path, checksum, warmUp string
	files                      runtimes.Files
}

func (c call) String() string { return c.op + " " + c.path }

// fakeRegistrar records calls and fails on demand. It keeps what is
// registered, like the sidecar, so tests can check what would serve.
type fakeRegistrar struct {
	mu       sync.Mutex
	calls    []call
	serving  map[string]string // path -> checksum
	failNext map[string]error  // path -> error for RegisterModel
	failAll  error             // DeleteModel and RegisterModel fail with it
	block    bool              // RegisterModel waits for its context to end

	inFlight, maxInFlight int // concurrent RegisterModel calls
}

func newFakeRegistrar() *fakeRegistrar {
	return &fakeRegistrar{serving: map[string]string{}, failNext: map[string]error{}}
}

func (r *fakeRegistrar) RegisterModel(ctx context.Context, path string, files runtimes.Files, warmUp string) error {
	r.mu.Lock()
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	block := r.block
	r.mu.Unlock()
	if block {
		<-ctx.Done()
	} else {
		time.Sleep(time.Millisecond) // widen the window in which overlapping calls would show
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	if block {
		r.calls = append(r.calls, call{op: "register", path: path})
		return inferr.Wrap(inferr.GRPC, ctx.Err(), "register")
	}
	c := call{op: "register", path: path, checksum: modelfiles.Checksum(files), warmUp: warmUp, files: files}
	r.calls = append(r.calls, c)
	if r.failAll != nil {
		return r.failAll
	}
	if err := r.failNext[path]; err != nil {
		return err
	}
	// A warm-up the model cannot run fails the registration, as in the sidecar.
	if strings.Contains(warmUp, "bad-warm-up") {
		return inferr.Errorf(inferr.ModelExecution, "warm up model %q: input tensor missing", path)
	}
	r.serving[path] = c.checksum
	return nil
}

func (r *fakeRegistrar) DeleteModel(ctx context.Context, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{op: "delete", path: path})
	if r.failAll != nil {
		return r.failAll
	}
	if _, ok := r.serving[path]; !ok {
		return inferr.Errorf(inferr.ModelNotFound, "model %q not found", path)
	}
	delete(r.serving, path)
	return nil
}

// take returns and forgets the calls so far.
func (r *fakeRegistrar) take() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func (r *fakeRegistrar) servingChecksum(path string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.serving[path]
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// backend makes fresh buckets of one kind.
type backend struct {
	name      string
	newBucket func(t *testing.T) string // returns the bucket URL
}

// bucketSeq numbers the S3 and GCS buckets of a test run: names must not
// repeat however many times backends is called.
var bucketSeq atomic.Int64

func backends() []backend {
	unique := func() string {
		return fmt.Sprintf("inferbid-%d-%d", os.Getpid(), bucketSeq.Add(1))
	}
	return []backend{
		{"file", func(t *testing.T) string { return "file://" + t.TempDir() }},
		{"s3", func(t *testing.T) string {
			if servers.S3Endpoint == "" {
				storetest.Need(t, "S3 (versitygw)", servers.S3SkipReason)
			}
			u, err := servers.S3BucketURL(context.Background(), unique())
			if err != nil {
				t.Fatal(err)
			}
			return u
		}},
		{"gcs", func(t *testing.T) string {
			if servers.GCSHost == "" {
				storetest.Need(t, "GCS (fake-gcs-server)", servers.GCSSkipReason)
			}
			u, err := servers.GCSBucketURL(context.Background(), unique())
			if err != nil {
				t.Fatal(err)
			}
			return u
		}},
	}
}

// env is one test's bucket, watcher, registrar and clock.
type env struct {
	t      *testing.T
	ctx    context.Context
	bucket *blob.Bucket
	url    string
	reg    *fakeRegistrar
	clock  *fakeClock
	prom   *prometheus.Registry
	w      *Watcher
	opts   WatcherOptions
}

func newEnv(t *testing.T, be backend, tweak func(*WatcherOptions)) *env {
	t.Helper()
	u := be.newBucket(t)
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	e := &env{t: t, ctx: ctx, bucket: b, url: u, reg: newFakeRegistrar(), clock: &fakeClock{t: t0}, prom: prometheus.NewRegistry()}
	e.opts = WatcherOptions{
		BucketURL:  u,
		ConfigPath: "config/model_config.json",
		Registrar:  e.reg,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:    e.prom,
		TempDir:    t.TempDir(),
		Now:        e.clock.Now,
	}
	if testing.Verbose() {
		e.opts.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	}
	if tweak != nil {
		tweak(&e.opts)
	}
	e.w, err = NewWatcher(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.w.Close() })
	return e
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (e *env) put(key string, data []byte) {
	e.t.Helper()
	if err := e.bucket.WriteAll(e.ctx, key, data, nil); err != nil {
		e.t.Fatalf("write %s: %v", key, err)
	}
}

// putModel writes files under prefix (a directory model) and returns their
// checksum (modelfiles' tests pin it to the seed's shell pipeline).
func (e *env) putModel(prefix string, files runtimes.Files) string {
	e.t.Helper()
	for rel, b := range files {
		e.put(prefix+rel, b)
	}
	return modelfiles.Checksum(files)
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

type cfgEntry struct {
	path, checksum, warmUp string
	graceMs                int
	extra                  string // more fields, as JSON text after a comma
}

func (e *env) putConfig(entries ...cfgEntry) {
	e.t.Helper()
	var parts []string
	for _, c := range entries {
		s := fmt.Sprintf(`{"model_path":%q,"checksum":%q,"eviction_grace_period_in_ms":%d`, c.path, c.checksum, c.graceMs)
		if c.warmUp != "" {
			s += fmt.Sprintf(`,"warm_up_batch_request_json":%q`, c.warmUp)
		}
		if c.extra != "" {
			s += "," + c.extra
		}
		parts = append(parts, s+"}")
	}
	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[`+strings.Join(parts, ",")+`]}`))
}

func (e *env) sync() error {
	e.t.Helper()
	return e.w.SyncOnce(e.ctx)
}

func (e *env) mustSync() {
	e.t.Helper()
	if err := e.sync(); err != nil {
		e.t.Fatalf("SyncOnce: %v", err)
	}
}

// expectCalls checks the registrar calls since the last check (order-free).
func (e *env) expectCalls(want ...string) []call {
	e.t.Helper()
	calls := e.reg.take()
	var got []string
	for _, c := range calls {
		got = append(got, c.String())
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		e.t.Fatalf("registrar calls = [%s], want [%s]", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	return calls
}

func (e *env) counter(name string, labels ...string) float64 {
	e.t.Helper()
	mfs, err := e.prom.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

func tfModel(t testing.TB, seed string) runtimes.Files {
	return runtimes.Files{
		"saved_model.pb":                          append([]byte(seed), randomBytes(t, 500)...),
		"variables/variables.index":               randomBytes(t, 40),
		"variables/variables.data-00000-of-00001": randomBytes(t, 2000),
	}
}

func TestWatcher(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Run("LoadsDirectoryAndExactFileModels", func(t *testing.T) { testLoads(t, be) })
			t.Run("ChecksumMismatchNeverLoads", func(t *testing.T) { testChecksumMismatch(t, be) })
			t.Run("FailedWarmUpFailsTheLoadAndRetries", func(t *testing.T) { testWarmUpFailure(t, be) })
			t.Run("DeletionAfterGrace", func(t *testing.T) { testDeletionAfterGrace(t, be) })
			t.Run("DeletionWithoutGrace", func(t *testing.T) { testDeletionWithoutGrace(t, be) })
			t.Run("ReAddedDuringGraceIsKept", func(t *testing.T) { testReAdded(t, be) })
			t.Run("InPlaceUpdateAfterGrace", func(t *testing.T) { testInPlaceUpdate(t, be) })
			t.Run("BadConfigChangesNothing", func(t *testing.T) { testBadConfig(t, be) })
			t.Run("UnchangedConfigIsNotReparsed", func(t *testing.T) { testUnchangedConfig(t, be) })
			t.Run("SizeCap", func(t *testing.T) { testSizeCap(t, be) })
			t.Run("MissingObjects", func(t *testing.T) { testMissingObjects(t, be) })
			t.Run("ManyModelsInParallel", func(t *testing.T) { testMany(t, be) })
			t.Run("FailedModelBacksOff", func(t *testing.T) { testBackoff(t, be) })
		})
	}
}

func testLoads(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	tf := tfModel(t, "tf")
	tfSum := e.putModel("models/pcvr_v1/", tf)
	pt := runtimes.Files{"model.pt": randomBytes(t, 3000)}
	ptSum := e.putModel("models/pctr/", pt)
	// A sibling whose name shares the prefix string must not be picked up.
	e.put("models/pcvr_v1_old/saved_model.pb", []byte("not part of the model"))
	warm := `{"request":[{"model_path":"models/pcvr_v1/","tensors":[]}]}`
	e.putConfig(cfgEntry{path: "models/pcvr_v1/", checksum: tfSum, warmUp: warm},
		cfgEntry{path: "models/pctr/model.pt", checksum: ptSum})
	e.mustSync()
	calls := e.expectCalls("register models/pcvr_v1/", "register models/pctr/model.pt")
	for _, c := range calls {
		var want runtimes.Files
		var wantWarm string
		switch c.path {
		case "models/pcvr_v1/":
			want, wantWarm = tf, warm
		default:
			want = pt
		}
		if len(c.files) != len(want) {
			t.Errorf("%s: registered %d files, want %d", c.path, len(c.files), len(want))
		}
		for rel, b := range want {
			if !bytes.Equal(c.files[rel], b) {
				t.Errorf("%s: file %q missing or different (have keys %v)", c.path, rel, keys(c.files))
			}
		}
		if c.warmUp != wantWarm {
			t.Errorf("%s: warm-up %q, want %q", c.path, c.warmUp, wantWarm)
		}
	}
	if got := sortedPaths(e.w.Models()); strings.Join(got, ",") != "models/pctr/model.pt,models/pcvr_v1/" {
		t.Errorf("Models() = %v", got)
	}
	if got := e.counter("inferbid_modelstore_models_available"); got != 2 {
		t.Errorf("models_available = %v, want 2", got)
	}
	if got := e.counter("inferbid_modelstore_registrations_total", "kind", "load", "outcome", "success"); got != 2 {
		t.Errorf("registrations{load,success} = %v, want 2", got)
	}
	if got := e.counter("inferbid_modelstore_registration_seconds", "model_path", "models/pctr/model.pt"); got <= 0 {
		t.Errorf("registration_seconds for the model = %v, want > 0", got)
	}
	if got := e.counter("inferbid_modelstore_last_good_sync_timestamp_seconds"); got != float64(t0.Unix()) {
		t.Errorf("last good sync = %v, want %v", got, t0.Unix())
	}
	// A second poll changes nothing.
	e.mustSync()
	e.expectCalls()
}

func keys(f runtimes.Files) []string {
	var k []string
	for p := range f {
		k = append(k, p)
	}
	sort.Strings(k)
	return k
}

func testChecksumMismatch(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	wrong := strings.Repeat("0", 64)
	e.putConfig(cfgEntry{path: "m/", checksum: wrong})
	err := e.sync()
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), sum) {
		t.Fatalf("SyncOnce = %v, want a checksum mismatch naming the content's checksum %s", err, sum)
	}
	e.expectCalls()
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "model", "result", reasonChecksum); got != 1 {
		t.Errorf("fetches{model,checksum_mismatch} = %v, want 1", got)
	}
	// Retried each poll; fixed config loads.
	if err := e.sync(); err == nil {
		t.Fatal("second poll succeeded with the wrong checksum")
	}
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	e.mustSync()
	e.expectCalls("register m/")
}

func testWarmUpFailure(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum, warmUp: `{"request":["bad-warm-up"]}`})
	err := e.sync()
	if err == nil || inferr.TypeOf(err) != inferr.ModelExecution {
		t.Fatalf("SyncOnce = %v, want the sidecar's MODEL_EXECUTION error", err)
	}
	e.expectCalls("register m/")
	if len(e.w.Models()) != 0 {
		t.Fatal("a model whose warm-up failed is recorded as loaded")
	}
	if got := e.counter("inferbid_modelstore_registrations_total", "kind", "load", "outcome", "failure"); got != 1 {
		t.Errorf("registrations{load,failure} = %v, want 1", got)
	}
	// Not retried while its back-off runs; retried (and fails again) once it
	// has; a changed warm-up is tried at once, and loads.
	if err := e.sync(); err == nil || !strings.Contains(err.Error(), "input tensor missing") {
		t.Fatalf("held-back model: SyncOnce = %v, want its last error", err)
	}
	e.expectCalls()
	e.clock.Advance(DefaultPeriod)
	e.sync()
	e.expectCalls("register m/")
	e.putConfig(cfgEntry{path: "m/", checksum: sum, warmUp: `{"request":[]}`})
	e.mustSync()
	e.expectCalls("register m/")
	if e.reg.servingChecksum("m/") != sum {
		t.Error("model not serving after a good warm-up")
	}
}

func testDeletionAfterGrace(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	keep := e.putModel("k/", tfModel(t, "k"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum, graceMs: 30000}, cfgEntry{path: "k/", checksum: keep})
	e.mustSync()
	e.expectCalls("register m/", "register k/")

	e.putConfig(cfgEntry{path: "k/", checksum: keep})
	e.clock.Advance(time.Second)
	e.mustSync() // grace starts: ends at t0+31s
	e.expectCalls()
	if e.w.Models()["m/"].EvictAt != t0.Add(31*time.Second) {
		t.Errorf("EvictAt = %v, want t0+31s", e.w.Models()["m/"].EvictAt)
	}
	e.clock.Advance(29*time.Second + 999*time.Millisecond)
	e.mustSync()
	e.expectCalls() // still in grace: serving
	e.clock.Advance(time.Millisecond)
	e.mustSync()
	e.expectCalls("delete m/")
	if _, ok := e.w.Models()["m/"]; ok {
		t.Error("deleted model still recorded")
	}
	if got := e.counter("inferbid_modelstore_deletions_total", "outcome", "success"); got != 1 {
		t.Errorf("deletions{success} = %v, want 1", got)
	}
	if got := e.counter("inferbid_modelstore_models_available"); got != 1 {
		t.Errorf("models_available = %v, want 1", got)
	}
}

func testDeletionWithoutGrace(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	e.mustSync()
	e.expectCalls("register m/")
	e.putConfig()
	// A failing delete is retried next poll.
	e.reg.mu.Lock()
	e.reg.failAll = inferr.Errorf(inferr.GRPC, "sidecar unreachable")
	e.reg.mu.Unlock()
	if err := e.sync(); err == nil {
		t.Fatal("SyncOnce hid the failed deletion")
	}
	e.expectCalls("delete m/")
	if got := e.counter("inferbid_modelstore_deletions_total", "outcome", "failure"); got != 1 {
		t.Errorf("deletions{failure} = %v, want 1", got)
	}
	e.reg.mu.Lock()
	e.reg.failAll = nil
	e.reg.mu.Unlock()
	e.mustSync()
	e.expectCalls("delete m/")
	if len(e.w.Models()) != 0 {
		t.Error("model still recorded after deletion")
	}
}

func testReAdded(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum, graceMs: 30000})
	e.mustSync()
	e.expectCalls("register m/")
	e.putConfig()
	e.mustSync()
	e.clock.Advance(10 * time.Second)
	e.putConfig(cfgEntry{path: "m/", checksum: sum, graceMs: 30000})
	e.mustSync()
	e.clock.Advance(time.Hour)
	e.mustSync()
	e.expectCalls() // never deleted, never reloaded
	if e.reg.servingChecksum("m/") != sum {
		t.Error("re-added model not serving")
	}
	if !e.w.Models()["m/"].EvictAt.IsZero() {
		t.Error("re-added model still scheduled for eviction")
	}
}

func testInPlaceUpdate(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	v1 := tfModel(t, "v1")
	sum1 := e.putModel("m/", v1)
	e.putConfig(cfgEntry{path: "m/", checksum: sum1, graceMs: 30000})
	e.mustSync()
	e.expectCalls("register m/")

	v2 := tfModel(t, "v2")
	sum2 := e.putModel("m/", v2) // same keys, new content
	e.putConfig(cfgEntry{path: "m/", checksum: sum2, graceMs: 5000})
	e.mustSync()
	e.clock.Advance(29 * time.Second)
	e.mustSync()
	e.expectCalls() // the old content serves during the grace
	if e.reg.servingChecksum("m/") != sum1 {
		t.Fatal("old content not serving during the grace")
	}
	e.clock.Advance(time.Second)
	// The first attempt at the end of the grace fails: the old content
	// keeps serving and the update is retried once its back-off ends.
	e.reg.mu.Lock()
	e.reg.failNext["m/"] = inferr.Errorf(inferr.ModelExecution, "cannot load")
	e.reg.mu.Unlock()
	if err := e.sync(); err == nil {
		t.Fatal("failed update not reported")
	}
	e.expectCalls("register m/")
	if e.reg.servingChecksum("m/") != sum1 {
		t.Fatal("a failed update changed what serves")
	}
	e.reg.mu.Lock()
	delete(e.reg.failNext, "m/")
	e.reg.mu.Unlock()
	e.clock.Advance(DefaultPeriod)
	e.mustSync()
	calls := e.expectCalls("register m/") // no delete: the sidecar swaps in place
	if calls[0].checksum != sum2 || e.reg.servingChecksum("m/") != sum2 {
		t.Errorf("update registered checksum %s, want %s", calls[0].checksum, sum2)
	}
	m := e.w.Models()["m/"]
	if m.Checksum != sum2 || m.Entry.EvictionGrace != 5*time.Second || !m.EvictAt.IsZero() {
		t.Errorf("after the update the state is %+v", m)
	}
	if got := e.counter("inferbid_modelstore_registrations_total", "kind", "update", "outcome", "success"); got != 1 {
		t.Errorf("registrations{update,success} = %v, want 1", got)
	}
}

func testBadConfig(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	e.mustSync()
	e.expectCalls("register m/")

	// Not valid JSON, or wrong at the top level: nothing of it applies
	// (rejected entries are TestRejectedEntryHoldsItsModel's).
	for _, bad := range []string{`{"model_metadata":[`, `{"model_metadata":[]} trailing`, `{"models":[]}`} {
		e.put(e.opts.ConfigPath, []byte(bad))
		err := e.sync()
		if err == nil || inferr.TypeOf(err) != inferr.InputParsing {
			t.Errorf("config %s: SyncOnce = %v, want INPUT_PARSING", bad, err)
		}
		e.expectCalls()
	}
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", reasonParse); got != 3 {
		t.Errorf("fetches{config,parse_error} = %v, want 3", got)
	}
	// A missing config is not an empty one: nothing is deleted.
	if err := e.bucket.Delete(e.ctx, e.opts.ConfigPath); err != nil {
		t.Fatal(err)
	}
	if err := e.sync(); err == nil || !strings.Contains(err.Error(), e.opts.ConfigPath) {
		t.Errorf("missing config: SyncOnce = %v", err)
	}
	e.expectCalls()
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", reasonNotFound); got != 1 {
		t.Errorf("fetches{config,not_found} = %v, want 1", got)
	}
	if e.reg.servingChecksum("m/") != sum {
		t.Error("a bad config changed what serves")
	}
	// The last good sync is the first poll's.
	e.clock.Advance(7 * time.Second)
	if got := e.counter("inferbid_modelstore_seconds_since_last_good_sync"); got != 7 {
		t.Errorf("seconds_since_last_good_sync = %v, want 7", got)
	}
}

func testUnchangedConfig(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	e.mustSync()
	e.mustSync()
	e.mustSync()
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", resultSuccess); got != 1 {
		t.Errorf("fetches{config,success} = %v, want 1 (parsed once)", got)
	}
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", resultUnchanged); got != 2 {
		t.Errorf("fetches{config,unchanged} = %v, want 2", got)
	}
	// S3's ETag and GCS's generation are trusted, so unchanged polls do not
	// even read the object; fileblob's are not (content hash instead).
	if trusted := e.w.configVersion != ""; trusted != (be.name != "file") {
		t.Errorf("config version %q: trusted = %v for %s", e.w.configVersion, trusted, be.name)
	}
	// Rewriting the config with the same size but new content is seen
	// (fileblob's ETag alone could miss it).
	other := strings.Replace(sum, sum[:1], string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", sum[0])+1)%16]), 1)
	e.putConfig(cfgEntry{path: "m/", checksum: other})
	if err := e.sync(); err == nil {
		t.Fatal("a changed config was not re-read")
	}
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", resultSuccess); got != 2 {
		t.Errorf("fetches{config,success} = %v, want 2", got)
	}
}

func testSizeCap(t *testing.T, be backend) {
	e := newEnv(t, be, func(o *WatcherOptions) { o.MaxModelBytes = 1000 })
	big := e.putModel("big/", runtimes.Files{"a": randomBytes(t, 600), "b": randomBytes(t, 600)})
	small := e.putModel("small.pt", nil)
	_ = small
	e.put("one.pt", randomBytes(t, 1001))
	e.putConfig(cfgEntry{path: "big/", checksum: big}, cfgEntry{path: "one.pt"})
	err := e.sync()
	if err == nil || !strings.Contains(err.Error(), "size limit") {
		t.Fatalf("SyncOnce = %v, want size-limit errors", err)
	}
	e.expectCalls()
	if got := e.counter("inferbid_modelstore_fetches_total", "kind", "model", "result", reasonTooLarge); got != 2 {
		t.Errorf("fetches{model,too_large} = %v, want 2", got)
	}
}

func testMissingObjects(t *testing.T, be backend) {
	e := newEnv(t, be, nil)
	e.put("dir/model.pt", []byte("x"))
	e.putConfig(cfgEntry{path: "nothing/"}, cfgEntry{path: "dir"})
	err := e.sync()
	if err == nil || !strings.Contains(err.Error(), "no objects under the prefix") || !strings.Contains(err.Error(), `"dir/"`) {
		t.Fatalf("SyncOnce = %v, want a no-objects error and a hint for the exact path", err)
	}
	e.expectCalls()
	// Unchecked (no checksum) exact-file model: loaded under its base name.
	e.putConfig(cfgEntry{path: "dir/model.pt"})
	e.mustSync()
	calls := e.expectCalls("register dir/model.pt")
	if string(calls[0].files["model.pt"]) != "x" {
		t.Errorf("files = %v", keys(calls[0].files))
	}
}

func testMany(t *testing.T, be backend) {
	e := newEnv(t, be, func(o *WatcherOptions) { o.Parallelism = 3 })
	var entries []cfgEntry
	var want []string
	for i := range 8 {
		p := fmt.Sprintf("many/m%d/", i)
		entries = append(entries, cfgEntry{path: p, checksum: e.putModel(p, tfModel(t, p))})
		want = append(want, "register "+p)
	}
	e.putConfig(entries...)
	e.mustSync()
	e.expectCalls(want...)
	// Downloads overlap, registrations do not: host memory holds one model.
	if e.reg.maxInFlight != 1 {
		t.Errorf("%d registrations overlapped, want 1", e.reg.maxInFlight)
	}
	// No temp files are left behind.
	left, _ := filepath.Glob(filepath.Join(e.opts.TempDir, "*"))
	if len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
}

// TestHungSidecarDoesNotStallPolling: a registration that never answers is
// cut off by OpTimeout and reported; the next poll runs.
func TestHungSidecarDoesNotStallPolling(t *testing.T) {
	e := newEnv(t, backends()[0], func(o *WatcherOptions) { o.OpTimeout = 50 * time.Millisecond })
	e.reg.block = true
	sum := e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	for range 2 {
		if err := e.sync(); err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SyncOnce = %v, want a deadline error", err)
		}
		e.expectCalls("register m/")
		e.clock.Advance(time.Hour) // past the retry back-off
	}
	if len(e.w.Models()) != 0 {
		t.Error("timed-out model recorded as loaded")
	}
}

func TestNewWatcherErrors(t *testing.T) {
	reg := newFakeRegistrar()
	for name, o := range map[string]WatcherOptions{
		"no bucket":    {ConfigPath: "c", Registrar: reg},
		"no config":    {BucketURL: "file:///tmp", Registrar: reg},
		"no registrar": {BucketURL: "file:///tmp", ConfigPath: "c"},
		"bad scheme":   {BucketURL: "nosuch://x", ConfigPath: "c", Registrar: reg},
		"negative":     {BucketURL: "file:///tmp", ConfigPath: "c", Registrar: reg, Parallelism: -1},
	} {
		if w, err := NewWatcher(o); err == nil {
			w.Close()
			t.Errorf("%s: NewWatcher succeeded", name)
		}
	}
	// Two watchers on one registry: the second cannot register its metrics.
	prom := prometheus.NewRegistry()
	w1, err := NewWatcher(WatcherOptions{BucketURL: "file://" + t.TempDir(), ConfigPath: "c", Registrar: reg, Metrics: prom})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	if _, err := NewWatcher(WatcherOptions{BucketURL: "file://" + t.TempDir(), ConfigPath: "c", Registrar: reg, Metrics: prom}); err == nil {
		t.Error("second watcher on one registry succeeded")
	}
}

// TestRunPollsAndStops runs the real loop with a short period on a file
// bucket: a model listed after start gets registered, and Run returns when
// the context ends.
func TestRunPollsAndStops(t *testing.T) {
	be := backends()[0]
	e := newEnv(t, be, func(o *WatcherOptions) { o.Period = 20 * time.Millisecond; o.Now = nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.w.Run(ctx) }()
	sum := e.putModel("m/", tfModel(t, "x"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum})
	deadline := time.Now().Add(10 * time.Second)
	for e.reg.servingChecksum("m/") != sum {
		if time.Now().After(deadline) {
			t.Fatal("Run never registered the model")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestJitterStaysWithinTenPercent(t *testing.T) {
	for range 1000 {
		d := jitter(time.Minute)
		if d < 54*time.Second || d > 66*time.Second {
			t.Fatalf("jitter(1m) = %v", d)
		}
	}
}

// BenchmarkSyncOnceUnchanged measures a poll when nothing changed (the
// steady state): one config read (file) or HEAD (s3, gcs) and a plan over
// 50 loaded models.
func BenchmarkSyncOnceUnchanged(b *testing.B) {
	for _, name := range []string{"file", "s3", "gcs"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			var u string
			var err error
			switch name {
			case "file":
				u = "file://" + b.TempDir()
			case "s3":
				if servers.S3Endpoint == "" {
					b.Skip(servers.S3SkipReason)
				}
				u, err = servers.S3BucketURL(ctx, fmt.Sprintf("bench-%d", os.Getpid()))
			case "gcs":
				if servers.GCSHost == "" {
					b.Skip(servers.GCSSkipReason)
				}
				u, err = servers.GCSBucketURL(ctx, fmt.Sprintf("bench-%d", os.Getpid()))
			}
			if err != nil {
				b.Fatal(err)
			}
			bk, err := blob.OpenBucket(ctx, u)
			if err != nil {
				b.Fatal(err)
			}
			defer bk.Close()
			var parts []string
			for i := range 50 {
				p := fmt.Sprintf("m%d/", i)
				bk.WriteAll(ctx, p+"model.pt", []byte(p), nil)
				parts = append(parts, fmt.Sprintf(`{"model_path":%q,"eviction_grace_period_in_ms":1000}`, p))
			}
			bk.WriteAll(ctx, "config.json", []byte(`{"model_metadata":[`+strings.Join(parts, ",")+`]}`), nil)
			w, err := NewWatcher(WatcherOptions{BucketURL: u, ConfigPath: "config.json", Registrar: nopRegistrar{},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TempDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			if err := w.SyncOnce(ctx); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := w.SyncOnce(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type nopRegistrar struct{}

func (nopRegistrar) RegisterModel(context.Context, string, runtimes.Files, string) error { return nil }
func (nopRegistrar) DeleteModel(context.Context, string) error                           { return nil }

// BenchmarkLoadModel measures download to temp files, checksum and reading
// back of one 8 MiB directory model from a file bucket (no-op registrar).
func BenchmarkLoadModel(b *testing.B) {
	ctx := context.Background()
	u := "file://" + b.TempDir()
	bk, err := blob.OpenBucket(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	data := randomBytes(b, 8<<20)
	bk.WriteAll(ctx, "m/variables/variables.data-00000-of-00001", data, nil)
	bk.WriteAll(ctx, "m/saved_model.pb", data[:4096], nil)
	w, err := NewWatcher(WatcherOptions{BucketURL: u, ConfigPath: "c", Registrar: nopRegistrar{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TempDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.SetBytes(int64(len(data) + 4096))
	for b.Loop() {
		if err := w.load(ctx, Action{Kind: ActLoad, Path: "m/", Entry: ModelEntry{Path: "m/"}}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestValidRelPath(t *testing.T) {
	for rel, want := range map[string]bool{
		"saved_model.pb": true, "variables/variables.index": true, "a b/c": true, "..data": true,
		"": false, "/abs": false, "../up": false, "..": false, "a/../b": false, "a//b": false, "./a": false, "a/.": false,
	} {
		if got := validRelPath(rel); got != want {
			t.Errorf("validRelPath(%q) = %v, want %v", rel, got, want)
		}
	}
}

func sortedPaths(m map[string]Loaded) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestBadConfigDoesNotHoldBackDueActions: while the config is broken, the
// last good config still drives what it scheduled (a grace period ending),
// and nothing the broken config says takes effect.
func TestBadConfigDoesNotHoldBackDueActions(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	sum := e.putModel("m/", tfModel(t, "x"))
	keep := e.putModel("k/", tfModel(t, "k"))
	e.putConfig(cfgEntry{path: "m/", checksum: sum, graceMs: 1000}, cfgEntry{path: "k/", checksum: keep})
	e.mustSync()
	e.expectCalls("register m/", "register k/")
	e.putConfig(cfgEntry{path: "k/", checksum: keep})
	e.mustSync() // m/'s grace starts
	e.put(e.opts.ConfigPath, []byte(`{"model_metadata":[{"model_path":"k/","checksum":"broken"}]}`))
	e.clock.Advance(time.Second)
	if err := e.sync(); err == nil {
		t.Fatal("broken config accepted")
	}
	e.expectCalls("delete m/")
	if e.reg.servingChecksum("k/") != keep {
		t.Error("k/ changed under a broken config")
	}
}

// diskRegistrar is a fakeRegistrar that takes models as files on disk: it
// reads them while the call runs (the watcher removes them afterwards).
type diskRegistrar struct {
	*fakeRegistrar
	disk int // RegisterModelFiles calls
}

func (r *diskRegistrar) RegisterModelFiles(ctx context.Context, path string, files runtimes.DiskFiles, warmUp string, seq *runtimes.SequenceSettings) error {
	mem := make(runtimes.Files, len(files))
	for rel, local := range files {
		b, err := os.ReadFile(local)
		if err != nil {
			return err
		}
		mem[rel] = b
	}
	r.mu.Lock()
	r.disk++
	r.mu.Unlock()
	return r.RegisterModel(ctx, path, mem, warmUp)
}

// TestDiskRegistrarGetsTheDownloadedFiles: a registrar that takes files on
// disk gets the download's files (what it reads there is the model), not
// bytes, and they are gone once the sync ends.
func TestDiskRegistrarGetsTheDownloadedFiles(t *testing.T) {
	be := backends()[0]
	var dr *diskRegistrar
	tmp := t.TempDir()
	e := newEnv(t, be, func(o *WatcherOptions) {
		dr = &diskRegistrar{fakeRegistrar: o.Registrar.(*fakeRegistrar)}
		o.Registrar = dr
		o.TempDir = tmp
	})
	tf := tfModel(t, "tf")
	sum := e.putModel("models/pcvr_v1/", tf)
	e.putConfig(cfgEntry{path: "models/pcvr_v1/", checksum: sum})
	e.mustSync()
	calls := e.expectCalls("register models/pcvr_v1/")
	if dr.disk != 1 || calls[0].checksum != sum {
		t.Errorf("RegisterModelFiles calls %d (want 1), checksum of what it read %s (want %s)", dr.disk, calls[0].checksum, sum)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the download stayed: %v", left)
	}
}

// digestRegistrar is a diskRegistrar that also takes the downloaded
// files' SHA-256 digests (the sidecar Supervisor); it checks each against
// what it reads and records the digests.
type digestRegistrar struct {
	*diskRegistrar
	sums []map[string][sha256.Size]byte
}

func (r *digestRegistrar) RegisterDownloadedFiles(ctx context.Context, path string, files runtimes.DiskFiles, sums map[string][sha256.Size]byte, warmUp string, seq *runtimes.SequenceSettings) error {
	for rel, local := range files {
		b, err := os.ReadFile(local)
		if err != nil {
			return err
		}
		if sum, ok := sums[rel]; !ok || sum != sha256.Sum256(b) {
			return fmt.Errorf("file %q: digest %x given, the file's is %x", rel, sum, sha256.Sum256(b))
		}
	}
	r.mu.Lock()
	r.sums = append(r.sums, sums)
	r.mu.Unlock()
	return r.RegisterModelFiles(ctx, path, files, warmUp, seq)
}

// TestDigestRegistrarGetsTheDownloadsDigests: a DigestRegistrar gets the
// downloaded files with the SHA-256 of each, computed as the download was
// written (the registrar checks them against the files), one per file; a
// download whose checksum does not match the config's never reaches it.
func TestDigestRegistrarGetsTheDownloadsDigests(t *testing.T) {
	be := backends()[0]
	var gr *digestRegistrar
	e := newEnv(t, be, func(o *WatcherOptions) {
		gr = &digestRegistrar{diskRegistrar: &diskRegistrar{fakeRegistrar: o.Registrar.(*fakeRegistrar)}}
		o.Registrar = gr
	})
	tf := tfModel(t, "tf")
	sum := e.putModel("models/pcvr_v1/", tf)
	e.putModel("models/bad/", tf)
	e.putConfig(cfgEntry{path: "models/pcvr_v1/", checksum: sum}, cfgEntry{path: "models/bad/", checksum: strings.Repeat("0", 64)})
	if err := e.sync(); err == nil {
		t.Error("a sync with a checksum mismatch reported no failure")
	}
	calls := e.expectCalls("register models/pcvr_v1/")
	if gr.disk != 1 || calls[0].checksum != sum || len(gr.sums) != 1 || len(gr.sums[0]) != len(tf) {
		t.Errorf("RegisterDownloadedFiles calls %d (want 1), checksum %s (want %s), digests %v (want one per file of %d)", gr.disk, calls[0].checksum, sum, gr.sums, len(tf))
	}
}

// loadOptionsRegistrar records the external variables each registration's
// context carries (runtimes.LoadOptionsFrom), as the sidecar reads them.
type loadOptionsRegistrar struct {
	*fakeRegistrar
	ext []map[string]string
}

func (r *loadOptionsRegistrar) RegisterModel(ctx context.Context, path string, files runtimes.Files, warmUp string) error {
	r.mu.Lock()
	r.ext = append(r.ext, runtimes.LoadOptionsFrom(ctx).ExternalVariables)
	r.mu.Unlock()
	return r.fakeRegistrar.RegisterModel(ctx, path, files, warmUp)
}

// TestWatcherExternalVariables: an entry's external_variables reach the
// registration (in its context) and Status; the same content listed with
// other stores, or with none, is registered again at once, with them.
func TestWatcherExternalVariables(t *testing.T) {
	be := backends()[0]
	var lr *loadOptionsRegistrar
	e := newEnv(t, be, func(o *WatcherOptions) {
		lr = &loadOptionsRegistrar{fakeRegistrar: o.Registrar.(*fakeRegistrar)}
		o.Registrar = lr
	})
	sum := e.putModel("models/emb/", tfModel(t, "tf"))
	status := func() map[string]string {
		for _, st := range e.w.Status() {
			if st.Path == "models/emb/" {
				return st.ExternalVariables
			}
		}
		t.Fatal("models/emb/ is not in Status")
		return nil
	}
	for i, url := range []string{"redis-cluster://127.0.0.1:7000", "redis-cluster://127.0.0.1:7001,127.0.0.1:7002", ""} {
		c := cfgEntry{path: "models/emb/", checksum: sum}
		var want map[string]string
		if url != "" {
			c.extra = `"external_variables":{"emb/table":"` + url + `"}`
			want = map[string]string{"emb/table": url}
		}
		e.putConfig(c)
		e.mustSync()
		e.expectCalls("register models/emb/")
		if got := lr.ext[i]; !maps.Equal(got, want) {
			t.Errorf("registration %d: external variables %v in its context, want %v", i, got, want)
		}
		if got := status(); !maps.Equal(got, want) {
			t.Errorf("registration %d: Status' external variables %v, want %v", i, got, want)
		}
	}
}
