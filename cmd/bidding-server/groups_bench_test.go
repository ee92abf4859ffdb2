package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
)

// groupsPerRequest and groupsClients shape BenchmarkServerGroups.
const (
	groupsPerRequest = 20
	groupsClients    = 4
)

// groupsModule is the bidding module of BenchmarkServerGroups, appended
// to bench/peer/request.js (the peer comparison's request builder): each
// generateBid builds the pCTR model's request for one ad from strings,
// calls runInference once (batch 1) and bids value * pctr.
const groupsModule = `
var FEATURES = benchFeatures(1);
function generateBid(ig) {
  var scores = readScores(JSON.parse(runInference(JSON.stringify(buildRequest("pctr/v1/", FEATURES)))), 1);
  return {render: ig.name, pctr: scores[0], bid: ig.value * scores[0]};
}
`

// BenchmarkServerGroups is bidding-server end to end, as a user of the
// binary sees it: requests of 20 interest groups whose generateBid each
// call runInference once at batch 1 on the peer comparison's model
// (bench/testdata/pctr.onnx, one intra-op thread) in the ONNX sidecar, the
// JS in worker processes on default settings. groupsClients keep-alive
// clients send b.N requests (-benchtime Nx: a fixed count) back to back.
// It reports requests/s, bids/s and the request latency's p50 and p99, and
// prints them; every bid of the first request is checked (a pctr in (0, 1),
// the same for every group, the bid value * pctr), and every bid of every
// request must come without an error.
func BenchmarkServerGroups(b *testing.B) {
	root := testhelp.ModuleRoot(b)
	requireONNXRuntime(b, root)
	server := testhelp.BuildBinary(b, "cmd/bidding-server", false)
	s := startBiddingServer(b, server, groupsServerArgs(b, root), nil)

	body := groupsBody(groupsPerRequest)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: groupsClients}}
	send := func() ([]byte, error) {
		resp, err := client.Post(s.url+"/v1/generateBids", "application/json", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("generateBids: %d %s", resp.StatusCode, out)
		}
		return out, nil
	}
	// Every group bids; the first request's bids are read.
	call := func() error {
		out, err := send()
		if err != nil {
			return err
		}
		var r bidsResponse
		if err := json.Unmarshal(out, &r); err != nil || len(r.Bids) != groupsPerRequest {
			return fmt.Errorf("generateBids: %d bids (%v): %s", len(r.Bids), err, out)
		}
		for _, bid := range r.Bids {
			if bid.Error != "" {
				return fmt.Errorf("generateBids: %s: %s", bid.IG, bid.Error)
			}
		}
		return nil
	}
	out, err := send()
	if err != nil {
		b.Fatal(err)
	}
	if err := checkGroupBids(out); err != nil {
		b.Fatal(err)
	}
	for range 2 * groupsClients { // warm the connections and workers
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}

	var rec benchlat.Recorder
	b.ResetTimer()
	wall, err := benchlat.RunCalls(b.N, groupsClients, &rec, call)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	st := rec.Stats()
	reqs := float64(b.N) / wall.Seconds()
	b.ReportMetric(reqs, "requests/s")
	b.ReportMetric(reqs*groupsPerRequest, "bids/s")
	b.ReportMetric(st.P50.Seconds()*1e6, "p50-µs")
	b.ReportMetric(st.P99.Seconds()*1e6, "p99-µs")
	if b.N >= 100 {
		fmt.Printf("bidding-server end to end: %d requests of %d interest groups (each generateBid one runInference at batch 1, ONNX sidecar), %d clients, JS in %s: %.0f requests/s, %.0f bids/s, p50 %.2f ms, p99 %.2f ms (p99/p50 %.1fx)\n",
			b.N, groupsPerRequest, groupsClients, jsWorkersOf(s), reqs, reqs*groupsPerRequest,
			st.P50.Seconds()*1e3, st.P99.Seconds()*1e3, float64(st.P99)/float64(st.P50))
	}
}

// groupsServerArgs are bidding-server's flags for the groups benchmarks:
// groupsModule (after bench/peer/request.js) as the bidding module, the ONNX
// sidecar (built here) with one intra-op and one inter-op thread, and
// bench/testdata/pctr.onnx as pctr/v1/.
func groupsServerArgs(tb testing.TB, root string) []string {
	tb.Helper()
	sidecarBin := testhelp.BuildBinary(tb, "cmd/inference-sidecar-onnx", true)
	request, err := os.ReadFile(filepath.Join(root, "bench/peer/request.js"))
	if err != nil {
		tb.Fatal(err)
	}
	udf := filepath.Join(tb.TempDir(), "groups.js")
	if err := os.WriteFile(udf, append(request, groupsModule...), 0o644); err != nil {
		tb.Fatal(err)
	}
	return []string{
		"--udf_code_path", udf,
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_sidecar_runtime_config", `{"num_intraop_threads":1,"num_interop_threads":1}`,
		"--inference_model_local_paths", "pctr/v1/=" + filepath.Join(root, "bench/testdata/pctr.onnx"),
	}
}

// checkGroupBids checks a BenchmarkServerGroups answer: every group bid,
// with the same pctr in (0, 1), and a bid of its value (its index + 1)
// times the pctr.
func checkGroupBids(out []byte) error {
	var r bidsResponse
	if err := json.Unmarshal(out, &r); err != nil || len(r.Bids) != groupsPerRequest {
		return fmt.Errorf("generateBids: %s", out)
	}
	var pctr float64
	for i, b := range r.Bids {
		var bid struct {
			Render    string
			Pctr, Bid float64
		}
		if b.Error != "" || json.Unmarshal(b.Bid, &bid) != nil {
			return fmt.Errorf("bid %d: %+v", i, b)
		}
		if i == 0 {
			pctr = bid.Pctr
		}
		if want := fmt.Sprintf("ig%d", i); b.IG != want || bid.Render != want || bid.Pctr != pctr ||
			!(pctr > 0 && pctr < 1) || bid.Bid != float64(i+1)*pctr {
			return fmt.Errorf("bid %d: %s %s (pctr of the first: %v)", i, b.IG, b.Bid, pctr)
		}
	}
	return nil
}

// jsWorkersOf says how the server runs JS, from its start line.
func jsWorkersOf(s *runningServer) string {
	for _, line := range strings.Split(s.log(), "\n") {
		if !strings.Contains(line, "bidding-server started") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if n, ok := strings.CutPrefix(f, "js_workers="); ok {
				return n + " worker processes"
			}
		}
	}
	return "worker processes"
}

// requireONNXRuntime skips (or, with INFERBID_REQUIRE_NATIVE set, fails)
// without the ONNX Runtime library the ONNX sidecar loads: at
// $INFERBID_ONNXRUNTIME_LIB or in lib/onnxruntime/ (scripts/install-onnxruntime.sh).
func requireONNXRuntime(tb testing.TB, root string) {
	tb.Helper()
	lib := os.Getenv("INFERBID_ONNXRUNTIME_LIB")
	if lib == "" {
		lib = filepath.Join(root, "lib/onnxruntime/libonnxruntime.so.1")
	}
	if _, err := os.Stat(lib); err != nil {
		if os.Getenv("INFERBID_REQUIRE_NATIVE") != "" {
			tb.Fatalf("ONNX Runtime not found (%v) and INFERBID_REQUIRE_NATIVE is set: run scripts/install-onnxruntime.sh", err)
		}
		tb.Skipf("ONNX Runtime not found (%v): run scripts/install-onnxruntime.sh", err)
	}
}
