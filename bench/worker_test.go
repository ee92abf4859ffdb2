//go:build cgo

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/sidecar"
)

// workerHeapBudget is the JS heap budget of the js-worker row's worker:
// bidding-server's default (--js_heap_budget_mb 1024), which also sets the
// worker's GOGC and soft memory limit (jsworker/worker.go, configure).
const workerHeapBudget = 1024 << 20

// startWorkerHost starts a jsworker.Host of one worker process (this test
// binary re-executed, no spare) running script, whose runInference goes
// over the worker's own fast lane to socket; client answers the worker's
// calls to the host.
func startWorkerHost(tb testing.TB, script, socket string, client *sidecar.Client, log *slog.Logger) *jsworker.Host {
	tb.Helper()
	h, err := jsworker.Start(context.Background(), jsworker.Options{
		Modules:       []jsworker.Module{{Name: "bench.js", Source: script}},
		Workers:       1,
		Spares:        -1,
		HeapBudget:    workerHeapBudget,
		SidecarSocket: socket,
		Inference:     client,
		Logger:        log,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

// callWorker runs the js-string call through h: one request of one interest
// group, {"rows": rows}, whose generateBid (jsWorker) is jsString(rows);
// the scores come back as the bid's JSON.
func callWorker(ctx context.Context, h *jsworker.Host, rows int) func() ([]float64, error) {
	req := jsworker.Request{Function: "jsWorker", InterestGroups: [][]byte{[]byte(fmt.Sprintf(`{"rows":%d}`, rows))}}
	return func() ([]float64, error) {
		resp := h.GenerateBids(ctx, req)
		if len(resp.Results) != 1 {
			return nil, fmt.Errorf("%d results for 1 interest group", len(resp.Results))
		}
		r := resp.Results[0]
		if r.Err != nil {
			return nil, r.Err
		}
		var s []float64
		if err := json.Unmarshal(r.Bid, &s); err != nil {
			return nil, fmt.Errorf("bid %s: %v", r.Bid, err)
		}
		return s, nil
	}
}

// workerCall is callWorker without reading the scores (the bid's JSON is
// the answer; reading it is the harness's work, not the path's).
func workerCall(ctx context.Context, h *jsworker.Host, rows int) func() error {
	req := jsworker.Request{Function: "jsWorker", InterestGroups: [][]byte{[]byte(fmt.Sprintf(`{"rows":%d}`, rows))}}
	return func() error {
		resp := h.GenerateBids(ctx, req)
		if len(resp.Results) != 1 {
			return fmt.Errorf("%d results for 1 interest group", len(resp.Results))
		}
		if r := resp.Results[0]; r.Err != nil || len(r.Bid) == 0 {
			return fmt.Errorf("bid %q: %v", r.Bid, r.Err)
		}
		return nil
	}
}
