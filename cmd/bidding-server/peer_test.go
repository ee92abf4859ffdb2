package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// httpBidderScript is the Node.js HTTP bidder of BenchmarkServerPeer.
const httpBidderScript = "bench/peer/http_bidder.js"

// httpBidder is bench/peer/http_bidder.js running in Node.js.
type httpBidder struct {
	cmd    *exec.Cmd
	url    string
	node   string // Node.js version
	ort    string // onnxruntime-node version
	stderr testhelp.SyncBuffer
	done   chan error
}

// startHTTPBidder starts the Node.js bidder on the peer comparison's model
// and returns once it listens; it is killed at the end of the test.
func startHTTPBidder(tb testing.TB, np *testhelp.NodePeer) *httpBidder {
	tb.Helper()
	root := testhelp.ModuleRoot(tb)
	h := &httpBidder{done: make(chan error, 1)}
	h.cmd = exec.Command(np.Node, filepath.Join(root, filepath.FromSlash(httpBidderScript)),
		filepath.Join(root, "bench/testdata/pctr.onnx"))
	h.cmd.Env = np.Env()
	h.cmd.Stderr = &h.stderr
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		io.Copy(io.Discard, stdout)
		h.done <- h.cmd.Wait()
	}()
	tb.Cleanup(func() {
		h.cmd.Process.Kill()
		<-h.done
		if tb.Failed() {
			tb.Logf("http_bidder.js stderr:\n%s", h.stderr.String())
		}
	})
	select {
	case line, ok := <-first:
		var hello struct{ Listening, Node, Onnxruntime string }
		if !ok || json.Unmarshal([]byte(line), &hello) != nil || hello.Listening == "" {
			tb.Fatalf("http_bidder.js did not start: %q\n%s", line, h.stderr.String())
		}
		if hello.Onnxruntime != testhelp.ORTNodeVersion {
			tb.Fatalf("http_bidder.js runs onnxruntime-node %s, want %s; %s", hello.Onnxruntime, testhelp.ORTNodeVersion, testhelp.NodePeerHint)
		}
		h.url, h.node, h.ort = "http://"+hello.Listening, hello.Node, hello.Onnxruntime
	case <-time.After(time.Minute):
		tb.Fatalf("http_bidder.js did not listen within a minute\n%s", h.stderr.String())
	}
	return h
}

// stop sends SIGTERM and waits for the exit.
func (h *httpBidder) stop(tb testing.TB) {
	tb.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		if err != nil {
			tb.Errorf("http_bidder.js exit after SIGTERM: %v\n%s", err, h.stderr.String())
		}
	case <-time.After(time.Minute):
		tb.Fatal("http_bidder.js did not stop after SIGTERM")
	}
}

// groupsBody is the generateBids request of the groups benchmarks: n
// interest groups ig0..ig<n-1> of values 1..n.
func groupsBody(n int) string {
	igs := make([]string, n)
	for i := range igs {
		igs[i] = fmt.Sprintf(`{"name":"ig%d","value":%d}`, i, i+1)
	}
	return `{"interest_groups":[` + strings.Join(igs, ",") + `],"auction_signals":{"id":"bench"}}`
}

// postBids posts body to url's /v1/generateBids and returns the status and
// the answer.
func postBids(tb testing.TB, client *http.Client, url, body string) (int, []byte) {
	tb.Helper()
	resp, err := client.Post(url+"/v1/generateBids", "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, out
}

// onnxPeerScore runs bench/peer/onnx_peer.js once at batch 1 and returns
// its score.
func onnxPeerScore(t *testing.T, np *testhelp.NodePeer) float64 {
	t.Helper()
	root := testhelp.ModuleRoot(t)
	cmd := exec.Command(np.Node, filepath.Join(root, "bench/peer/onnx_peer.js"), filepath.Join(root, "bench/testdata/pctr.onnx"), "1", "1", "1")
	cmd.Env = np.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("onnx_peer.js: %v\n%s", err, stderr.Bytes())
	}
	var res struct{ Scores []float64 }
	if err := json.Unmarshal(out, &res); err != nil || len(res.Scores) != 1 {
		t.Fatalf("onnx_peer.js printed %s (%v)", out, err)
	}
	return res.Scores[0]
}

// TestHTTPBidder runs the Node.js bidder of BenchmarkServerPeer and posts
// it the benchmark's request (every bid checked as the benchmark checks
// bidding-server's, and its pctr against bench/peer/onnx_peer.js's) and
// bad requests, each of which must get its status and an error naming
// what is wrong. It skips without Node.js or
// onnxruntime-node, unless INFERBID_REQUIRE_PEER=1 (make test).
func TestHTTPBidder(t *testing.T) {
	np := testhelp.RequireNodePeer(t)
	h := startHTTPBidder(t, np)
	client := &http.Client{Timeout: time.Minute}

	code, out := postBids(t, client, h.url, groupsBody(groupsPerRequest))
	if code != http.StatusOK {
		t.Fatalf("generateBids: %d %s", code, out)
	}
	if err := checkGroupBids(out); err != nil {
		t.Fatal(err)
	}
	// The pctr is the one bench/peer/onnx_peer.js computes for the same
	// request (which bench's TestPeerMatchesRuntime checks against ONNX
	// Runtime in Go): the features reach the model as they should.
	var r struct {
		Bids []struct{ Bid struct{ Pctr float64 } } `json:"bids"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if want := onnxPeerScore(t, np); math.Abs(r.Bids[0].Bid.Pctr-want) > pctrTolerance {
		t.Fatalf("http_bidder.js bids with pctr %v, onnx_peer.js computes %v for the same request", r.Bids[0].Bid.Pctr, want)
	}

	for _, c := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"not JSON", "POST", "/v1/generateBids", `{"interest_groups":[`, 400, "not a generateBids JSON object"},
		{"not an object", "POST", "/v1/generateBids", `[1]`, 400, "not a generateBids JSON object"},
		{"no groups", "POST", "/v1/generateBids", `{"auction_signals":{}}`, 400, `no "interest_groups"`},
		{"empty groups", "POST", "/v1/generateBids", `{"interest_groups":[]}`, 400, `no "interest_groups"`},
		{"group not an object", "POST", "/v1/generateBids", `{"interest_groups":[{"name":"a","value":1},7]}`, 400, "interest_groups[1] is not an object"},
		{"no name", "POST", "/v1/generateBids", `{"interest_groups":[{"name":"a","value":1},{"value":2}]}`, 400, `interest_groups[1] has no string "name"`},
		{"no value", "POST", "/v1/generateBids", `{"interest_groups":[{"name":"a"}]}`, 400, `interest_groups[0] has no numeric "value"`},
		{"too large", "POST", "/v1/generateBids", `{"x":"` + strings.Repeat("x", 5<<20) + `"}`, 413, "larger than 4194304 bytes"},
		{"GET", "GET", "/v1/generateBids", "", 405, "method GET not allowed"},
		{"other path", "POST", "/v1/other", "{}", 404, "no such endpoint"},
	} {
		req, err := http.NewRequest(c.method, h.url+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		if resp.StatusCode != c.code || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s: %d %s, want %d and an error with %q", c.name, resp.StatusCode, body, c.code, c.want)
		}
	}

	// Still serving after the bad requests.
	if code, out := postBids(t, client, h.url, groupsBody(3)); code != http.StatusOK || !strings.Contains(string(out), `"interest_group":"ig2"`) {
		t.Fatalf("generateBids after the bad requests: %d %s", code, out)
	}
	h.stop(t)
}
