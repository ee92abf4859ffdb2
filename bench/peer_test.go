//go:build cgo

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
)

const (
	// ortNodeVersion is the onnxruntime-node the peer runs
	// (scripts/install-node-peer.sh installs it).
	ortNodeVersion = testhelp.ORTNodeVersion
	peerScript     = "bench/peer/onnx_peer.js"
	peerHint       = testhelp.NodePeerHint
)

// peer runs bench/peer/onnx_peer.js.
type peer struct {
	*testhelp.NodePeer
	script string // absolute path of onnx_peer.js
}

// requirePeer returns the peer, or skips the test saying what is missing;
// with INFERBID_REQUIRE_PEER=1 (make bench) it fails instead
// (testhelp.RequireNodePeer).
func requirePeer(tb testing.TB) *peer {
	tb.Helper()
	np := testhelp.RequireNodePeer(tb)
	return &peer{NodePeer: np, script: filepath.Join(testhelp.ModuleRoot(tb), filepath.FromSlash(peerScript))}
}

// peerResult is what onnx_peer.js prints.
type peerResult struct {
	P50us       float64   `json:"p50_us"`
	P99us       float64   `json:"p99_us"`
	CallsPerSec float64   `json:"calls_per_s"`
	Calls       int       `json:"calls"`
	Batch       int       `json:"batch"`
	Concurrency int       `json:"concurrency"`
	Node        string    `json:"node"`
	ORT         string    `json:"onnxruntime"`
	Scores      []float64 `json:"scores"`
}

func (r peerResult) stats() benchlat.Stats {
	return benchlat.Stats{
		Calls:       r.Calls,
		P50:         time.Duration(r.P50us * 1e3),
		P99:         time.Duration(r.P99us * 1e3),
		CallsPerSec: r.CallsPerSec,
	}
}

// run runs the peer on modelFile: iterations timed calls at batch rows,
// concurrency in flight.
func (p *peer) run(modelFile string, rows, iterations, concurrency int) (peerResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Node, p.script, modelFile, strconv.Itoa(rows), strconv.Itoa(iterations), strconv.Itoa(concurrency))
	cmd.Env = p.Env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return peerResult{}, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	var r peerResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return peerResult{}, fmt.Errorf("%s: reading its output: %v\n%s%s", strings.Join(cmd.Args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	if r.Calls != iterations || r.Batch != rows || r.Concurrency != concurrency {
		return peerResult{}, fmt.Errorf("the peer ran %d calls at batch %d, concurrency %d; asked for %d, %d, %d", r.Calls, r.Batch, r.Concurrency, iterations, rows, concurrency)
	}
	if r.ORT != ortNodeVersion {
		return peerResult{}, fmt.Errorf("the peer runs onnxruntime-node %s, want %s; %s", r.ORT, ortNodeVersion, peerHint)
	}
	return r, nil
}

// peerTolerance bounds the difference between the peer's scores and ONNX
// Runtime's in Go: the same library version, model and inputs; only the
// way the inputs reach it differs (JSON strings read by JS and by Go).
const peerTolerance = 1e-6

// TestPeerMatchesRuntime runs the Node.js peer once per batch size and
// checks that it answers the scores ONNX Runtime gives in Go for the same
// request: the comparison measures the same work on both sides.
func TestPeerMatchesRuntime(t *testing.T) {
	f := newFixture(t)
	p := requirePeer(t)
	for _, rows := range []int{1, 64} {
		req := f.request(t, rows)
		r, err := p.run(f.modelFile, rows, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameScores(req.want, r.Scores, peerTolerance); err != nil {
			t.Fatalf("batch %d: the peer (%s, onnxruntime-node %s) disagrees with ONNX Runtime in Go: %v", rows, r.Node, r.ORT, err)
		}
		t.Logf("batch %d: %d scores agree (largest difference %g; %s, onnxruntime-node %s)", rows, len(req.want), maxDiff(req.want, r.Scores), r.Node, r.ORT)
	}
}
