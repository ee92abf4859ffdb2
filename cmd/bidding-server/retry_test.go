package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferbid/inferbid/runtimes"
)

// unusedRegistrar is the registrar of a bucket that never opens: nothing
// reaches it.
type unusedRegistrar struct{}

func (unusedRegistrar) RegisterModel(context.Context, string, runtimes.Files, string) error {
	return errors.New("unexpected RegisterModel")
}
func (unusedRegistrar) DeleteModel(context.Context, string) error {
	return errors.New("unexpected DeleteModel")
}

// syncBuffer is a log destination safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBucketSchemeTypoRetried: a bucket URL with an unknown scheme is
// retried with back-off, not given up on: /readyz names the URL and the
// attempt, the log says it once at WARN, and every attempt registers the
// watcher's metrics afresh (a failed one leaves none behind).
func TestBucketSchemeTypoRetried(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	srv := &server{metrics: newMetrics(reg), gatherer: reg, logger: logger}
	cfg := config{ModelBucketName: "fiel:///no/such/scheme", ModelConfigPath: "model_config.json", ModelFetchPeriod: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		syncModels(ctx, cfg, unusedRegistrar{}, srv, reg, logger)
	}()
	defer func() { cancel(); <-done }()

	h := srv.handler()
	deadline := time.Now().Add(time.Minute) // a hang guard
	var body string
	for !strings.Contains(body, "(attempt 4,") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never reported a fourth attempt: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
		if w.Code != 503 {
			t.Fatalf("/readyz with a bucket that cannot open: %d %s", w.Code, w.Body)
		}
		body = w.Body.String()
	}
	t.Logf("/readyz: %s", strings.TrimSpace(body))
	if !strings.Contains(body, "fiel:///no/such/scheme") {
		t.Errorf("/readyz does not name the bucket: %s", body)
	}
	cancel()
	<-done
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Errorf("%d WARN lines for one repeated failure, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "level=DEBUG"); n < 3 {
		t.Errorf("%d DEBUG lines for the repeats, want >= 3:\n%s", n, out)
	}
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("logged at ERROR:\n%s", out)
	}
}

// TestRetrierBackoff: the waits double from retryMin up to the poll
// period, kept within [retryCapMin, retryCapMax].
func TestRetrierBackoff(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		period, ceiling time.Duration
	}{{100 * time.Millisecond, time.Second}, {5 * time.Second, 5 * time.Second}, {0, 30 * time.Second}, {time.Hour, 30 * time.Second}} {
		r := newRetrier(quiet, "x", c.period)
		if r.ceiling != c.ceiling || r.next != retryMin {
			t.Errorf("period %v: first wait %v, ceiling %v; want %v, %v", c.period, r.next, r.ceiling, retryMin, c.ceiling)
		}
	}
}
