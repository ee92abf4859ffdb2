package jsworker

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/jsbridge"
)

// variant is one side of an A/B comparison: a call, timed.
type variant struct {
	name string
	call func() error
	// enter, if set, runs (untimed) before each of the variant's rounds.
	enter func()
	rec   benchlat.Recorder
}

// alternate times b.N calls of each variant, in rounds of perRound calls
// in ABBA order (so that a noisy neighbour's load falls on all alike), and
// reports each one's p50 and p99 and their ratios to the first.
func alternate(b *testing.B, perRound int, vs ...*variant) {
	for _, v := range vs {
		for range 50 {
			if err := v.call(); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
		}
	}
	b.ResetTimer()
	for done, r := 0, 0; done < b.N; r++ {
		n := min(perRound, b.N-done)
		for i := range vs {
			v := vs[i]
			if r%2 == 1 {
				v = vs[len(vs)-1-i]
			}
			if v.enter != nil {
				b.StopTimer()
				v.enter()
				b.StartTimer()
			}
			for range n {
				if err := v.rec.TimeErr(v.call); err != nil {
					b.Fatalf("%s: %v", v.name, err)
				}
			}
		}
		done += n
	}
	b.StopTimer()
	base := vs[0].rec.Stats()
	for _, v := range vs {
		s := v.rec.Stats()
		b.ReportMetric(us(s.P50), v.name+"-p50-µs")
		b.ReportMetric(us(s.P99), v.name+"-p99-µs")
		if b.N >= 1000 {
			fmt.Printf("%-40s %-14s p50 %7.1f µs  p99 %8.1f µs  p99/p50 %5.1fx  p50 %.2fx, p99 %.2fx of %s\n",
				b.Name(), v.name, us(s.P50), us(s.P99), float64(s.P99)/float64(s.P50),
				float64(s.P50)/float64(base.P50), float64(s.P99)/float64(base.P99), vs[0].name)
		}
	}
}

func us(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1e6 }

// BenchmarkHop is the cost of the host-worker hop without inference: one
// request of one interest group whose generateBid returns a small object,
// through a Host of one worker process and through a pool of size one in
// this process (inproc, CallJSONGroup as the worker calls it), in
// alternating rounds. Each reports p50-µs and p99-µs; the hop is the
// difference of the p50s. The worker runs on defaults (it polls for its
// next chunk), parking instead (SpinWait < 0), and with the host polling
// for the answer too (HostSpinWait).
func BenchmarkHop(b *testing.B) {
	const src = `function generateBid(ig) { return {ig: ig.name, bid: ig.name.length}; }`
	ctx := context.Background()
	ig := []byte(`{"name":"shoes"}`)
	pool, err := jsbridge.New("bench.js", src, jsbridge.Options{Size: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	calls := [][][]byte{{ig}}
	host := func(o Options) func() error {
		o.Modules, o.Workers, o.Spares = []Module{{Name: "bench.js", Source: src}}, 1, -1
		o.HeapBudget, o.Logger = 1<<30, slog.New(slog.DiscardHandler)
		h, err := Start(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close() })
		req := Request{InterestGroups: [][]byte{ig}}
		return func() error { return h.GenerateBids(ctx, req).Results[0].Err }
	}
	alternate(b, 100,
		&variant{name: "inproc", call: func() error {
			return pool.CallJSONGroup(ctx, "generateBid", calls, jsbridge.GroupOptions{})[0].Err
		}},
		&variant{name: "worker", call: host(Options{})},
		&variant{name: "worker-parks", call: host(Options{SpinWait: -1})},
		&variant{name: "host-polls-too", call: host(Options{HostSpinWait: 200 * time.Microsecond})},
	)
}
