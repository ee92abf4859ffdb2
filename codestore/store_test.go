package codestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/modelstore/storetest"
)

// syncBuf is a log the test reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func bidJS(v string) string {
	return fmt.Sprintf("function generateBid(ig) {\n  return {v: %q};\n}\n", v)
}

const brokenJS = "function generateBid(ig) {\n  return {v: 1 +};\n}\n"

func hostOptions(logger *slog.Logger) jsworker.Options {
	return jsworker.Options{Workers: 2, RequireFunctions: []string{"generateBid"}, Logger: logger}
}

// bidOf runs one group on h and returns the version that bid.
func bidOf(h *jsworker.Host, version string) (string, error) {
	r := h.GenerateBids(context.Background(), jsworker.Request{InterestGroups: [][]byte{[]byte(`{"name":"a"}`)}, CodeVersion: version}).Results[0]
	if r.Err != nil {
		return "", r.Err
	}
	s := string(r.Bid)
	return strings.TrimSuffix(strings.TrimPrefix(s, `{"v":"`), `"}`), nil
}

// startStore makes a Store on cfg, syncs once, starts a Host with its
// modules and attaches it.
func startStore(t *testing.T, cfg FetchConfig, logs *syncBuf) (*Store, *jsworker.Host) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(logs, nil))
	hopts := hostOptions(logger)
	s, err := New(context.Background(), Options{Config: cfg, Logger: logger,
		Validate: func(ctx context.Context, mods []jsworker.Module) map[string]error {
			return jsworker.Validate(ctx, hopts, mods)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	mods, def, ok := s.Modules()
	if !ok {
		t.Fatal("no default after the first sync")
	}
	hopts.Modules, hopts.DefaultModule = mods, def
	h, err := jsworker.Start(context.Background(), hopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	s.Attach(h)
	return s, h
}

func status(s *Store, name string) VersionStatus {
	for _, st := range s.Status() {
		if st.Name == name {
			return st
		}
	}
	return VersionStatus{}
}

// bucketFlow is the ad tech's upload flow against a bucket: the default
// blob replaced under traffic, a broken upload, a request pinned to an
// older blob, a deleted blob.
func bucketFlow(t *testing.T, bucketURL string) {
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	put := func(key, src string) {
		t.Helper()
		if err := b.WriteAll(ctx, key, []byte(src), nil); err != nil {
			t.Fatal(err)
		}
	}
	put("bid.js", bidJS("v1"))
	put("bid-2026-11-01.js", bidJS("old"))
	put("bid.wasm", "\x00asm\x01\x00\x00\x00")
	logs := &syncBuf{}
	s, h := startStore(t, FetchConfig{Mode: ModeBucket, Bucket: bucketURL, DefaultBlob: "bid.js"}, logs)
	if src := s.src.(*bucketSource); src.bucket.Scheme() != "file" {
		// Only what changed is read again: nothing, here.
		before := src.reads
		if err := s.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n := src.reads - before; n != 0 {
			t.Errorf("a poll of an unchanged bucket read %d objects, want 0", n)
		}
		put("bid-2026-11-01.js", bidJS("old")+"// uploaded again, changed\n")
		before = src.reads
		if err := s.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n := src.reads - before; n != 1 {
			t.Errorf("a poll after one upload read %d objects, want 1", n)
		}
	}
	if v, err := bidOf(h, ""); err != nil || v != "v1" {
		t.Fatalf("default: %q, %v", v, err)
	}
	if st := status(s, "bid.js"); st.State != StateDefault || st.WasmHelperSize != 8 || len(st.SHA256) != 64 {
		t.Errorf("status of bid.js: %+v", st)
	}

	// A new default under steady traffic: no request fails.
	trafficCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for range 3 {
		wg.Go(func() {
			for trafficCtx.Err() == nil {
				if _, err := bidOf(h, ""); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	put("bid.js", bidJS("v2"))
	if err := s.SyncOnce(ctx); err != nil {
		t.Fatalf("sync after upload: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	stop()
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d requests failed across the swap; first: %v", n, firstErr.Load())
	}
	if v, _ := bidOf(h, ""); v != "v2" {
		t.Fatalf("after the upload the default bids %q, want v2", v)
	}

	// A broken upload: v2 keeps serving, the status shows the error with
	// its line and column, logged once however many polls see it.
	put("bid.js", brokenJS)
	for range 3 {
		if err := s.SyncOnce(ctx); err == nil || !strings.Contains(err.Error(), "Line 2") {
			t.Fatalf("sync of a broken upload: %v", err)
		}
	}
	if v, _ := bidOf(h, ""); v != "v2" {
		t.Fatalf("after a broken upload the default bids %q, want v2 still", v)
	}
	st := status(s, "bid.js")
	if st.State != StateDefault || !strings.Contains(st.LastError, "Line 2:") || st.FailedSHA256 == "" || st.FailedSHA256 == st.SHA256 {
		t.Errorf("status after a broken upload: %+v", st)
	}
	if n := strings.Count(logs.String(), "version does not load"); n != 1 {
		t.Errorf("the broken version was logged %d times, want once", n)
	}

	// A request pinned to an older blob runs it.
	if v, err := bidOf(h, "bid-2026-11-01.js"); err != nil || v != "old" {
		t.Errorf("pinned to bid-2026-11-01.js: %q, %v", v, err)
	}
	// A deleted blob stops being offered.
	if err := b.Delete(ctx, "bid-2026-11-01.js"); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncOnce(ctx); err == nil {
		t.Log("sync still reports the broken bid.js")
	}
	if _, err := bidOf(h, "bid-2026-11-01.js"); !errors.Is(err, jsworker.ErrUnknownVersion) {
		t.Errorf("a deleted blob: %v, want ErrUnknownVersion", err)
	}
	// A fixed upload serves again and clears the error.
	put("bid.js", bidJS("v3"))
	if err := s.SyncOnce(ctx); err != nil {
		t.Fatalf("sync of a fixed upload: %v", err)
	}
	if v, _ := bidOf(h, ""); v != "v3" {
		t.Errorf("after a fixed upload: %q", v)
	}
	if st := status(s, "bid.js"); st.LastError != "" {
		t.Errorf("error not cleared: %+v", st)
	}
}

func TestFileBucketFlow(t *testing.T) {
	bucketFlow(t, "file://"+t.TempDir())
}

func TestS3BucketFlow(t *testing.T) {
	if servers.S3Endpoint == "" {
		storetest.Need(t, "S3", servers.S3SkipReason)
	}
	u, err := servers.S3BucketURL(context.Background(), "code-flow")
	if err != nil {
		t.Fatal(err)
	}
	bucketFlow(t, u)
}

func TestGCSBucketFlow(t *testing.T) {
	if servers.GCSHost == "" {
		storetest.Need(t, "GCS", servers.GCSSkipReason)
	}
	u, err := servers.GCSBucketURL(context.Background(), "code-flow")
	if err != nil {
		t.Fatal(err)
	}
	bucketFlow(t, u)
}

func TestMissingDefaultChangesNothing(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(&syncBuf{}, nil))
	s, err := New(context.Background(), Options{Config: FetchConfig{Mode: ModeBucket, Bucket: "file://" + dir, DefaultBlob: "bid.js"}, Logger: logger,
		Validate: func(ctx context.Context, mods []jsworker.Module) map[string]error {
			return jsworker.Validate(ctx, hostOptions(logger), mods)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SyncOnce(context.Background()); !errors.Is(err, errNoDefault) {
		t.Fatalf("empty bucket: %v, want errNoDefault", err)
	}
	if _, _, ok := s.Modules(); ok {
		t.Fatal("Modules ok without a default")
	}
}

func TestURLMode(t *testing.T) {
	var mu sync.Mutex
	src, etag := bidJS("u1"), `"1"`
	var notModified, slow atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("If-None-Match") == etag {
			notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		fmt.Fprint(w, src)
	}))
	defer srv.Close()
	url := srv.URL + "/bid.js"
	s, h := startStore(t, FetchConfig{Mode: ModeURL, JSURL: url, Timeout: 200 * time.Millisecond}, &syncBuf{})
	if v, err := bidOf(h, ""); err != nil || v != "u1" {
		t.Fatalf("%q, %v", v, err)
	}
	if err := s.SyncOnce(context.Background()); err != nil || notModified.Load() != 1 {
		t.Fatalf("unchanged resource: %v, %d 304s", err, notModified.Load())
	}
	mu.Lock()
	src, etag = bidJS("u2"), `"2"`
	mu.Unlock()
	if err := s.SyncOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, _ := bidOf(h, ""); v != "u2" {
		t.Fatalf("after a change: %q", v)
	}
	// A fetch past urlFetchTimeoutMs leaves the serving version alone.
	mu.Lock()
	src, etag = bidJS("u3"), `"3"`
	mu.Unlock()
	slow.Store(1)
	if err := s.SyncOnce(context.Background()); err == nil {
		t.Fatal("a fetch past the timeout succeeded")
	}
	if v, _ := bidOf(h, ""); v != "u2" {
		t.Fatalf("after a timed-out fetch: %q, want u2", v)
	}
}

// okValidate accepts every module (for tests of fetching alone).
func okValidate(context.Context, []jsworker.Module) map[string]error { return map[string]error{} }

func TestSizeCapAndHelpers(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for key, data := range map[string]string{
		"bid.js":    bidJS("a"),
		"bid.wasm":  "\x00asm\x01\x00\x00\x00",
		"big.js":    bidJS(strings.Repeat("x", 200)),
		"lone.wasm": "\x00asm",
	} {
		if err := b.WriteAll(ctx, key, []byte(data), nil); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, Options{Config: FetchConfig{Mode: ModeBucket, Bucket: "file://" + dir, DefaultBlob: "bid.js"}, MaxBytes: 100,
		Validate: okValidate, Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.SyncOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), `"big.js"`) || !strings.Contains(err.Error(), "100-byte limit") {
		t.Fatalf("sync with an oversized blob: %v", err)
	}
	mods, def, ok := s.Modules()
	if !ok || def != "bid.js" || len(mods) != 1 {
		t.Fatalf("Modules() = %v, %q, %v; want bid.js alone", mods, def, ok)
	}
	if st := status(s, "bid.js"); st.WasmHelperSize != 8 || st.Size != int64(len(bidJS("a"))+8) {
		t.Errorf("bid.js with its helper: %+v", st)
	}
	if st := status(s, "big.js"); st.State != StateFailed || !strings.Contains(st.LastError, "limit") {
		t.Errorf("big.js: %+v", st)
	}
	if st := status(s, "lone.wasm"); st.Name != "" {
		t.Errorf("a helper without a module is a version: %+v", st)
	}
}

func TestURLModeWasmHelper(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/bid.js", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, bidJS("w")) })
	mux.HandleFunc("/bid.wasm", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "\x00asm\x01\x00\x00\x00") })
	mux.HandleFunc("/gone.wasm", http.NotFound)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	s, err := New(ctx, Options{Config: FetchConfig{Mode: ModeURL, JSURL: srv.URL + "/bid.js", WasmURL: srv.URL + "/bid.wasm"}, Validate: okValidate})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if st := status(s, srv.URL+"/bid.js"); st.State != StateDefault || st.WasmHelperSize != 8 {
		t.Errorf("status: %+v", st)
	}
	s2, err := New(ctx, Options{Config: FetchConfig{Mode: ModeURL, JSURL: srv.URL + "/bid.js", WasmURL: srv.URL + "/gone.wasm"}, Validate: okValidate})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.SyncOnce(ctx); err == nil || !strings.Contains(err.Error(), "biddingWasmHelperUrl") || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing helper: %v, want an error naming biddingWasmHelperUrl and the 404", err)
	}
}

// TestSourceFailureLoggedOnce: a source that cannot be read leaves what
// serves alone and is logged once, however many polls fail the same way,
// and its recovery once; so is a default blob that disappears.
func TestSourceFailureLoggedOnce(t *testing.T) {
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, bidJS("a"))
	}))
	defer srv.Close()
	ctx := context.Background()
	logs := &syncBuf{}
	s, err := New(ctx, Options{Config: FetchConfig{Mode: ModeURL, JSURL: srv.URL + "/bid.js"},
		Validate: okValidate, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	for range 3 {
		if err := s.SyncOnce(ctx); err == nil || !strings.Contains(err.Error(), "500") {
			t.Fatalf("a poll of a failing source: %v", err)
		}
	}
	if _, _, ok := s.Modules(); !ok {
		t.Error("a failed poll dropped what serves")
	}
	if n := strings.Count(logs.String(), "cannot fetch the bidding code"); n != 1 {
		t.Errorf("the failure was logged %d times over 3 polls, want once:\n%s", n, logs)
	}
	failing.Store(false)
	if err := s.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "can be fetched again"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once", n)
	}
}

func TestDeletedDefaultLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := os.WriteFile(dir+"/bid.js", []byte(bidJS("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	s, err := New(ctx, Options{Config: FetchConfig{Mode: ModeBucket, Bucket: "file://" + dir, DefaultBlob: "bid.js"},
		Validate: okValidate, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir + "/bid.js"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.SyncOnce(ctx); !errors.Is(err, errNoDefault) {
			t.Fatalf("default deleted: %v", err)
		}
	}
	if _, _, ok := s.Modules(); !ok {
		t.Error("the deleted default stopped serving")
	}
	if n := strings.Count(logs.String(), "the default version is not available"); n != 1 {
		t.Errorf("logged %d times over 3 polls, want once:\n%s", n, logs)
	}
}

// TestMissingDefaultValidatesOnce: while the default is missing, a version
// that passed validation is not validated again on every poll (each
// validation starts a worker process); once the default arrives, only it
// is validated, and both serve.
func TestMissingDefaultValidatesOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := os.WriteFile(dir+"/other.js", []byte(bidJS("o")), 0o644); err != nil {
		t.Fatal(err)
	}
	var validated []string
	s, err := New(ctx, Options{Config: FetchConfig{Mode: ModeBucket, Bucket: "file://" + dir, DefaultBlob: "bid.js"},
		Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil)),
		Validate: func(ctx context.Context, mods []jsworker.Module) map[string]error {
			for _, m := range mods {
				validated = append(validated, m.Name)
			}
			return map[string]error{}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		if err := s.SyncOnce(ctx); !errors.Is(err, errNoDefault) {
			t.Fatalf("no default yet: %v", err)
		}
	}
	if err := os.WriteFile(dir+"/bid.js", []byte(bidJS("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(validated, ","); got != "other.js,bid.js" {
		t.Fatalf("validated %s over 4 polls, want other.js once, then bid.js", got)
	}
	if mods, def, ok := s.Modules(); !ok || def != "bid.js" || len(mods) != 2 {
		t.Fatalf("serving %v (default %q, %v), want both versions", mods, def, ok)
	}
}
