package kserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// childSidecarEnv makes the test binary a TensorFlow sidecar (for the
// benchmark's sidecar process, which a sidecar.Supervisor starts).
const childSidecarEnv = "KSERVE_TEST_CHILD_SIDECAR"

func TestMain(m *testing.M) {
	if os.Getenv(childSidecarEnv) == "1" {
		rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(sidecartest.ServeChild(os.Args[1:], rt))
	}
	os.Exit(m.Run())
}

// hangGuard bounds every wait of these tests; it is no performance
// assertion.
const hangGuard = time.Minute

// tfSidecar serves the TensorFlow runtime in-process on a real Unix socket
// with the example bucket's models registered: pctr/v1/, pctr/v2/ and
// pcvr/v1/.
func tfSidecar(t *testing.T) *sidecar.Client {
	t.Helper()
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Logger: slog.New(slog.DiscardHandler)}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for _, p := range []string{"pctr/v1/", "pctr/v2/", "pcvr/v1/"} {
		files, err := modelfiles.ReadLocal("../examples/bucket/" + p)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.RegisterModel(ctx, p, files, ""); err != nil {
			t.Fatalf("register %s: %v", p, err)
		}
	}
	return client
}

// serveHTTP serves srv's handler on a real TCP listener.
func serveHTTP(t *testing.T, srv *kserve.Server) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/v2", srv.Handler())
	mux.Handle("/v2/", srv.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

// call makes one request and returns the status and body.
func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// wantError checks a protocol error answer: the status and an
// {"error": "..."} object whose message holds every one of parts.
func wantError(t *testing.T, what string, code int, body []byte, wantCode int, parts ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: status %d, want %d (body %s)", what, code, wantCode, body)
		return
	}
	var e map[string]any
	if err := json.Unmarshal(body, &e); err != nil || len(e) != 1 {
		t.Errorf("%s: body %s is not an error object {\"error\": ...}", what, body)
		return
	}
	msg, ok := e["error"].(string)
	if !ok {
		t.Errorf("%s: body %s has no string \"error\"", what, body)
		return
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("%s: error %q does not mention %q", what, msg, p)
		}
	}
}

func decodeJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
}

// kserveLimits are small limits for the error tests.
var kserveLimits = batch.Limits{MaxElements: 1 << 16}
