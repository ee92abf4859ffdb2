package jsworker

import (
	"context"
	"log/slog"
	"testing"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/jsbridge"
)

// BenchmarkHop is the cost of the host-worker hop without inference: one
// request of one interest group whose generateBid returns a small object,
// through a Host of one worker process (worker) and through a pool of size
// one in this process (inproc, CallJSONGroup as the worker calls it).
// Each reports p50-µs and p99-µs; the hop is the difference of the p50s.
func BenchmarkHop(b *testing.B) {
	const src = `function generateBid(ig) { return {ig: ig.name, bid: ig.name.length}; }`
	ctx := context.Background()
	ig := []byte(`{"name":"shoes"}`)
	b.Run("inproc", func(b *testing.B) {
		pool, err := jsbridge.New("bench.js", src, jsbridge.Options{Size: 1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		calls := [][][]byte{{ig}}
		benchlat.Loop(b, func() error {
			return pool.CallJSONGroup(ctx, "generateBid", calls, jsbridge.GroupOptions{})[0].Err
		})
	})
	b.Run("worker", func(b *testing.B) {
		h, err := Start(ctx, Options{Module: Module{Name: "bench.js", Source: src}, Workers: 1, Spares: -1,
			HeapBudget: 1 << 30, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		req := Request{InterestGroups: [][]byte{ig}}
		benchlat.Loop(b, func() error { return h.GenerateBids(ctx, req).Results[0].Err })
	})
}
