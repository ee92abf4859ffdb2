package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/modelstore/storetest"
)

// The lifecycle tests run the real binary through its start-up (port
// first, bucket retried, sidecar failures), its drain at SIGTERM, and its
// listener's connection cap and header timeout.

// waitFor polls until cond holds; the deadline is only a hang guard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var attemptRE = regexp.MustCompile(`model bucket not opened \(attempt (\d+),`)

// TestStartsWithMissingBucket: the bucket's directory does not exist at
// start. The server listens at once, /readyz is 503 naming the bucket and
// why, the open is retried in the background (logged once, not per
// attempt), and once the directory appears with a config and a model the
// server becomes ready without a restart.
func TestStartsWithMissingBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	sidecarBin := buildForTest(t, "cmd/inference-sidecar-tensorflow")
	dir := filepath.Join(t.TempDir(), "bucket") // not there yet
	udf := filepath.Join(t.TempDir(), "churn.js")
	if err := os.WriteFile(udf, []byte(churnModule), 0o644); err != nil {
		t.Fatal(err)
	}
	s := launchBiddingServer(t, server, []string{"--udf_code_path", udf}, []string{
		"INFERENCE_SIDECAR_BINARY_PATH=" + sidecarBin,
		"INFERENCE_MODEL_BUCKET_NAME=file://" + dir,
		"INFERENCE_MODEL_CONFIG_PATH=model_config.json",
		"INFERENCE_MODEL_FETCH_PERIOD_MS=100",
	})
	if code, body := get(t, s.url+"/healthz"); code != 200 {
		t.Errorf("/healthz right after listening: %d %s", code, body)
	}
	// Not ready, naming the bucket, for at least three attempts.
	var body string
	waitFor(t, "/readyz to report the third failed attempt to open the bucket", func() bool {
		var code int
		code, body = get(t, s.url+"/readyz")
		if code == 200 {
			t.Fatalf("/readyz is 200 without a bucket: %s", body)
		}
		m := attemptRE.FindStringSubmatch(body)
		n := 0
		if m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		return n >= 3
	})
	t.Logf("/readyz without the bucket: %s", strings.TrimSpace(body))
	if !strings.Contains(body, dir) {
		t.Errorf("/readyz does not name the bucket %s: %s", dir, body)
	}
	if code, body := post(t, s.url+"/v1/generateBids", `{"interest_groups":[{"name":"g","model":"m/"}]}`); code != 200 {
		t.Errorf("generateBids while the bucket is missing: %d %s (requests are served; the model is absent)", code, body)
	}

	// The bucket appears whole (written aside, then renamed into place).
	ctx := context.Background()
	staging := dir + ".staging"
	if err := os.Mkdir(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	m := affine{a: 2, c: 1}
	files := m.files(t)
	if err := storetest.WriteFiles(ctx, "file://"+staging, "m/", files); err != nil {
		t.Fatal(err)
	}
	if err := storetest.WriteConfig(ctx, "file://"+staging, "model_config.json",
		storetest.ConfigEntry{ModelPath: "m/", Checksum: modelfiles.Checksum(files)}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(staging, dir); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t)
	if y, et := bidFor(t, s.url, "m/"); et != "" || !slices.Equal(y, m.want()) {
		t.Errorf("m/: y=%v error_type=%q, want %v", y, et, m.want())
	}
	// Deduplicated: one WARN for the failure, no ERROR, one INFO for the
	// recovery.
	log := s.log()
	if n := strings.Count(log, `level=WARN msg="model bucket not opened; retrying`); n != 1 {
		t.Errorf("the failure to open the bucket was logged %d times at WARN, want once", n)
	}
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, "bucket") {
			t.Errorf("logged at ERROR: %s", line)
		}
	}
	if !strings.Contains(log, `msg=recovered step="model bucket"`) {
		t.Error("the recovery is not logged")
	}
	s.stop(t)
}

// TestSidecarStartFailureExits: a sidecar that exits 2 at start (a runtime
// config with an unknown field) stops the server with exit status 1 and a
// message naming the cause and holding the sidecar's own stderr, after the
// port served; the sidecar's ERROR record is in the server's log.
func TestSidecarStartFailureExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	sidecarBin := buildForTest(t, "cmd/inference-sidecar-tensorflow")
	s := launchBiddingServer(t, server, []string{
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_sidecar_runtime_config", `{"num_threads":2}`,
	}, nil)
	var err error
	select {
	case err = <-s.done:
	case <-time.After(time.Minute):
		t.Fatal("bidding-server did not exit with a failing sidecar")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want exit status 1", err)
	}
	// cli.Main's last line: "bidding-server: start sidecar ...", with the
	// sidecar's stderr after it.
	log := s.log()
	i := strings.LastIndex(log, "bidding-server: start sidecar")
	if i < 0 {
		t.Fatalf("no start error in the output:\n%s", log)
	}
	msg := log[i:]
	t.Logf("exit message: %s", msg)
	if !strings.Contains(msg, "exit status 2") || !strings.Contains(msg, "num_threads") {
		t.Errorf("the exit message lacks the sidecar's exit status or its stderr (num_threads): %s", msg)
	}
	// The cause comes first, from the sidecar's ERROR record ...
	if !strings.Contains(msg, "exit status 2; the sidecar's error: sidecar failed: --runtime_config: ") {
		t.Errorf("the exit message does not name the cause first: %s", msg)
	}
	// ... which is in the server's log as one record of its own: the
	// sidecar's level, message and attributes, one timestamp.
	found := false
	for line := range strings.SplitSeq(log[:i], "\n") {
		if strings.Contains(line, "source=sidecar") {
			if strings.Count(line, "time=") != 1 || strings.Contains(line, "sidecar output") {
				t.Errorf("a sidecar line is wrapped: %s", line)
			}
			if strings.Contains(line, `level=ERROR msg="sidecar failed"`) && strings.Contains(line, "num_threads") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("the sidecar's ERROR record is not in the server's log:\n%s", log)
	}
}

// TestDrainOnSIGTERM: after SIGTERM, /readyz answers 503 "draining" while
// generateBids still succeeds; at the end of the drain period the listener
// closes, a request in flight then still completes, and the process exits
// 0.
func TestDrainOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	udf := filepath.Join(t.TempDir(), "bid.js")
	if err := os.WriteFile(udf, []byte(`function generateBid(ig) { return {bid: ig.value * 2}; }`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The drain period only has to outlast the few requests below.
	s := startBiddingServer(t, server, []string{"--udf_code_path", udf, "--drain_period", "10s", "--shutdown_grace", "1m"}, nil)
	addr := strings.TrimPrefix(s.url, "http://")
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, "/readyz to answer 503 draining", func() bool {
		var code int
		code, body = get(t, s.url+"/readyz")
		return code == 503 && strings.Contains(body, `"status":"draining"`)
	})
	t.Logf("/readyz after SIGTERM: %s", strings.TrimSpace(body))
	http.DefaultClient.CloseIdleConnections()
	if code, body := post(t, s.url+"/v1/generateBids", `{"interest_groups":[{"name":"a","value":21}]}`); code != 200 || !strings.Contains(body, `"bid":{"bid":42}`) {
		t.Errorf("generateBids while draining: %d %s", code, body)
	}

	// A request whose body is half sent when the drain ends.
	reqBody := `{"interest_groups":[{"name":"late","value":50}]}`
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	half := len(reqBody) / 2
	fmt.Fprintf(conn, "POST /v1/generateBids HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(reqBody), reqBody[:half])
	waitFor(t, "the listener to close at the end of the drain period", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	if _, err := io.WriteString(conn, reqBody[half:]); err != nil {
		t.Fatalf("the request in flight lost its connection: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r bidsResponse
	if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || len(r.Bids) != 1 || string(r.Bids[0].Bid) != `{"bid":100}` {
		t.Errorf("the request in flight: %d %s", resp.StatusCode, b)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("exit after the drain: %v, want 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("bidding-server did not exit after the drain")
	}
	for _, want := range []string{`msg="draining: /readyz answers 503`, `msg="shutting down"`, "msg=stopped"} {
		if !strings.Contains(s.log(), want) {
			t.Errorf("the log lacks %s", want)
		}
	}
}

// TestConnectionCapAndHeaderTimeout: with --max_connections 3, three idle
// keep-alive connections hold every slot: a fourth connection's request is
// not served until one of them closes. A client that sends its headers
// slowly is cut off after --read_header_timeout.
func TestConnectionCapAndHeaderTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := buildForTest(t, "cmd/bidding-server")
	udf := filepath.Join(t.TempDir(), "bid.js")
	if err := os.WriteFile(udf, []byte(`function generateBid(ig) { return 1; }`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startBiddingServer(t, server, []string{"--udf_code_path", udf, "--max_connections", "3", "--read_header_timeout", "1s", "--read_timeout", "5m"}, nil)
	addr := strings.TrimPrefix(s.url, "http://")
	http.DefaultClient.CloseIdleConnections() // the readiness probe's

	// Three connections, each idle after one request (kept alive).
	type kaConn struct {
		net.Conn
		r *bufio.Reader
	}
	roundTrip := func(c kaConn, path string) (int, string, error) {
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
			return 0, "", err
		}
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			return 0, "", err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), err
	}
	var idle []kaConn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		kc := kaConn{c, bufio.NewReader(c)}
		c.SetDeadline(time.Now().Add(time.Minute)) // a hang guard
		if code, body, err := roundTrip(kc, "/healthz"); err != nil || code != 200 {
			t.Fatalf("connection %d: %d %s %v", len(idle)+1, code, body, err)
		}
		idle = append(idle, kc)
	}

	// The fourth connects (the kernel's accept queue) and sends its request.
	fourth, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	fmt.Fprintf(fourth, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	answered := make(chan error, 1)
	go func() {
		fourth.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard
		resp, err := http.ReadResponse(bufio.NewReader(fourth), nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		answered <- err
	}()
	// While the three stay open, the server holds three connections and
	// the fourth gets no answer (checked over a few rounds on a held one).
	for range 10 {
		_, metrics, err := roundTrip(idle[0], "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(metrics, "\ninferbid_http_connections_open 3\n") {
			t.Fatalf("with the cap at 3, the server does not hold exactly 3 connections:\n%s", grepLine(metrics, "inferbid_http_connections_open"))
		}
		select {
		case err := <-answered:
			t.Fatalf("the fourth connection was served while three were open (%v)", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// One closes: the fourth is served.
	idle[2].Close()
	if err := <-answered; err != nil {
		t.Fatalf("the fourth connection after one closed: %v", err)
	}

	// Slowloris: a header line every 100 ms, never the end of the headers.
	for _, c := range idle[:2] {
		c.Close()
	}
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	closed := make(chan time.Time, 1)
	go func() {
		slow.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard
		b, err := io.ReadAll(slow)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Logf("slow connection: read %q, %v", b, err)
			closed <- time.Now()
		}
		close(closed)
	}()
	start := time.Now()
	fmt.Fprintf(slow, "GET /healthz HTTP/1.1\r\nHost: %s\r\n", addr)
	for i := 0; ; i++ {
		select {
		case at, ok := <-closed:
			if !ok {
				t.Fatal("the slow client was not cut off within a minute")
			}
			t.Logf("the slow client was cut off after %v (--read_header_timeout 1s)", at.Sub(start).Round(time.Millisecond))
			return
		case <-time.After(100 * time.Millisecond):
		}
		fmt.Fprintf(slow, "X-Slow-%d: 1\r\n", i) // errors once closed; the reader reports it
	}
}

// grepLine returns the lines of s that contain sub.
func grepLine(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
