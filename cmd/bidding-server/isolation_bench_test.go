package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
)

// BenchmarkServerIsolation is the cost of isolation as a user of
// bin/bidding-server sees it: the demo (examples/bidding/generate_bid.js on
// the examples bucket, TensorFlow sidecar), one interest group with one ad
// per request, so that generateBid runs one batch of batch size 1 per
// model. Two servers run side by side, one on defaults (a fresh runtime per
// call) and one with --js_isolate_calls=false, and take requests from
// 2*GOMAXPROCS keep-alive clients in alternating rounds (shared, isolated,
// isolated, shared, ...), so that a neighbour's load falls on both alike.
// It reports requests/s and the CPU per request of each server with its
// sidecar (this process's client work is not counted: it is the same for
// both), and prints the throughput isolation costs.
func BenchmarkServerIsolation(b *testing.B) {
	root := testhelp.ModuleRoot(b)
	server := testhelp.BuildBinary(b, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(b, "cmd/inference-sidecar-tensorflow", false)
	args := []string{
		"--inference_model_bucket_name", "file://" + filepath.Join(root, "examples/bucket"),
		"--inference_model_config_path", "model_config.json",
	}
	env := []string{"INFERENCE_SIDECAR_BINARY_PATH=" + sidecarBin}
	servers := [2]*runningServer{
		startBiddingServer(b, server, append(args, "--js_isolate_calls=false"), env),
		startBiddingServer(b, server, args, env),
	}
	body := oneAdRequest(b, root)
	callers := 2 * runtime.GOMAXPROCS(0)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers}}
	for _, s := range servers {
		if err := bidOnce(client, s.url, body, true); err != nil {
			b.Fatal(err)
		}
	}

	const rounds = 4 // of each mode
	var modes [2]serverRun
	for i, s := range servers {
		modes[i].url = s.url
		modes[i].pids = append([]int{s.cmd.Process.Pid}, childPIDs(s.cmd.Process.Pid)...)
	}
	perRound := max(1, b.N/(2*rounds))
	b.ResetTimer()
	for r := range 2 * rounds {
		m := &modes[(r+r/2)%2] // ABBA
		if err := m.round(client, body, perRound, callers); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if b.N < 2*rounds {
		return // the framework's probe run
	}
	sh, iso := modes[0].summary(), modes[1].summary()
	b.ReportMetric(sh.CallsPerSec, "shared-req/s")
	b.ReportMetric(iso.CallsPerSec, "isolated-req/s")
	b.ReportMetric(sh.cpu, "shared-cpu-µs/req")
	b.ReportMetric(iso.cpu, "isolated-cpu-µs/req")
	b.ReportMetric(100*(sh.cpu/iso.cpu-1), "cpu-cost-%")
	b.ReportMetric(100*(iso.CallsPerSec/sh.CallsPerSec-1), "measured-cost-%")
	fmt.Printf("isolation cost, bidding-server, demo module, 1 group x 1 ad (batch 1), %d clients, %d alternating rounds: CPU per request (server + sidecar) %.1f µs shared, %.1f µs isolated: %+.1f%% throughput at saturation; measured %.0f req/s shared, %.0f isolated (%+.1f%%); p50 %v / %v, p99 %v / %v\n",
		callers, 2*rounds, sh.cpu, iso.cpu, 100*(sh.cpu/iso.cpu-1),
		sh.CallsPerSec, iso.CallsPerSec, 100*(iso.CallsPerSec/sh.CallsPerSec-1),
		sh.P50, iso.P50, sh.P99, iso.P99)
}

// oneAdRequest is examples/bidding/request.json cut to its first interest
// group's first ad.
func oneAdRequest(tb testing.TB, root string) string {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "examples/bidding/request.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(raw, &req); err != nil {
		tb.Fatal(err)
	}
	igs, _ := req["interest_groups"].([]any)
	if len(igs) == 0 {
		tb.Fatal("examples/bidding/request.json has no interest groups")
	}
	ig := igs[0].(map[string]any)
	ig["ads"] = ig["ads"].([]any)[:1]
	req["interest_groups"] = []any{ig}
	out, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return string(out)
}

// bidOnce posts body to url's generateBids; check also requires that every
// bid came without an error.
func bidOnce(client *http.Client, url, body string, check bool) error {
	resp, err := client.Post(url+"/v1/generateBids", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("generateBids: %d %s", resp.StatusCode, out)
	}
	if check {
		var r bidsResponse
		if err := json.Unmarshal(out, &r); err != nil || len(r.Bids) == 0 {
			return fmt.Errorf("generateBids: %s", out)
		}
		for _, bid := range r.Bids {
			if bid.Error != "" {
				return fmt.Errorf("generateBids: %s", out)
			}
		}
	}
	return nil
}

// serverRun accumulates one server's rounds in BenchmarkServerIsolation.
type serverRun struct {
	url  string
	pids []int // the server and its sidecar
	lat  benchlat.Recorder
	wall time.Duration
	cpu  time.Duration
	n    int
}

func (m *serverRun) cpuNow() time.Duration {
	var d time.Duration
	for _, pid := range m.pids {
		d += benchlat.PidCPU(pid)
	}
	return d
}

// round sends n requests from callers goroutines.
func (m *serverRun) round(client *http.Client, body string, n, callers int) error {
	c0 := m.cpuNow()
	wall, err := benchlat.RunCalls(n, callers, &m.lat, func() error { return bidOnce(client, m.url, body, false) })
	m.wall += wall
	m.cpu += m.cpuNow() - c0
	m.n += n
	return err
}

type serverSummary struct {
	benchlat.Stats
	cpu float64 // µs per request
}

func (m *serverRun) summary() serverSummary {
	s := serverSummary{Stats: m.lat.Stats(), cpu: m.cpu.Seconds() * 1e6 / float64(m.n)}
	s.CallsPerSec = float64(m.n) / m.wall.Seconds()
	return s
}
