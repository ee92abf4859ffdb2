//go:build cgo

package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/sidecar"
)

// tailRound is how many calls a variant makes in a row before the next
// variant's turn (BenchmarkTail).
const tailRound = 200

// tailVariant is one setting of the JS path in BenchmarkTail.
type tailVariant struct {
	cause string // what it varies; "" = the reference (today's defaults)
	label string
	// enter, if set, runs before each of the variant's rounds (a setting
	// of this process).
	enter func()
	call  func() error
	rec   benchlat.Recorder
}

// BenchmarkTail measures the causes of the JS path's tail
// (docs/architecture.md, "The JS path's tail"): the js-worker row's call
// (the js-string script in one JS worker process, as bidding-server runs
// it) with today's defaults, and beside it the same call with one setting
// changed per variant: the worker's GOMAXPROCS, its collector, polling on
// its connection to the host (the worker's for its next chunk, on by
// default; the host's for the answer, off) and on its fast lane to the
// sidecar (on by default); and the js-string
// row's call (in this process) at Go's default GOGC and at bidding-server's
// in-process setting. Every variant runs in alternating rounds of
// tailRound calls (ABC..CBA), so that a neighbour's load falls on all
// alike, at batch 1 and 64, b.N calls each (-benchtime Nx). It prints a
// table of p50, p99, p99/p50 and each variant's p50 and p99 over the
// reference's; the worker hop is js-worker minus js-string (both
// measured in the same rounds).
func BenchmarkTail(b *testing.B) {
	ctx := context.Background()
	f := newFixture(b)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sup := startSidecar(b, f, log)
	fast, _, err := newClients(sup.SocketPath(), log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fast.Close() })
	pool, err := jsbridge.New("bench.js", f.script, jsbridge.Options{Inference: fast, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	// host starts a Host of one worker (env added to the worker's
	// environment).
	host := func(env string, mod func(*jsworker.Options)) func(rows int) pathCall {
		o := jsworker.Options{
			Modules:       []jsworker.Module{{Name: "bench.js", Source: f.script}},
			Workers:       1,
			Spares:        -1,
			HeapBudget:    workerHeapBudget,
			SidecarSocket: sup.SocketPath(),
			Inference:     fast,
			Logger:        log,
		}
		if env != "" {
			o.Command = func() *exec.Cmd {
				exe, _ := os.Executable()
				cmd := exec.Command(exe)
				cmd.Env = append(os.Environ(), strings.Fields(env)...)
				return cmd
			}
		}
		if mod != nil {
			mod(&o)
		}
		h, err := jsworker.Start(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close() })
		return func(rows int) pathCall {
			return pathCall{call: workerCall(ctx, h, rows), scores: callWorker(ctx, h, rows)}
		}
	}
	inProcess := func(rows int) pathCall {
		scores := callJSScores(ctx, pool, "jsString", rows)
		return pathCall{call: func() error { _, err := scores(); return err }, scores: scores}
	}
	setGC := func(pct int) func() { return func() { debug.SetGCPercent(pct) } }

	type spec struct {
		cause, label string
		path         func(rows int) pathCall
		enter        func()
	}
	specs := []spec{
		{"", "js-worker, defaults", host("", nil), nil},
		{"worker threads", "GOMAXPROCS=2 in the worker", host("GOMAXPROCS=2", nil), nil},
		{"worker GC", "GOGC=100 in the worker", host("GOGC=100", nil), nil},
		{"worker GC", "GOGC=off in the worker (memory limit only)", host("GOGC=off", nil), nil},
		{"host-worker polling", "the worker parks (SpinWait < 0)", host("", func(o *jsworker.Options) { o.SpinWait = -1 }), nil},
		{"host-worker polling", "the host polls too (HostSpinWait 200µs)", host("", func(o *jsworker.Options) { o.HostSpinWait = 200 * time.Microsecond }), nil},
		{"worker-sidecar polling", "no fast-lane polling (SidecarSpinWait < 0)", host("", func(o *jsworker.Options) { o.SidecarSpinWait = -1 }), nil},
		{"in-process GC", "js-string, GOGC 400 (as --js_in_process)", inProcess, setGC(inProcessGCPercent)},
		{"in-process GC", "js-string, GOGC 100 (Go's default)", inProcess, setGC(100)},
	}
	out := &strings.Builder{}
	fmt.Fprintf(out, "\n=== The JS path's tail: one setting changed per variant, in alternating rounds of %d calls (bench/tail_test.go) ===\n", tailRound)
	for _, rows := range []int{1, 64} {
		req := f.request(b, rows)
		vs := make([]*tailVariant, len(specs))
		for i, s := range specs {
			p := s.path(rows)
			// Every variant answers the bare runtime's scores.
			got, err := p.scores()
			if err == nil {
				err = sameScores(req.want, got, 0)
			}
			if err != nil {
				b.Fatalf("batch %d: %s: %v", rows, s.label, err)
			}
			vs[i] = &tailVariant{cause: s.cause, label: s.label, call: p.call, enter: s.enter}
		}
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			alternateTail(b, vs)
			if b.N >= 1000 {
				printTail(out, rows, b.N, vs)
			}
		})
	}
	io.WriteString(os.Stdout, out.String())
}

// pathCall is one way of making the call: timed, and with its scores.
type pathCall struct {
	call   func() error
	scores func() ([]float64, error)
}

// inProcessGCPercent is the GOGC bidding-server sets when JS runs in its
// own process with a heap budget (cmd/bidding-server, gcPercent).
const inProcessGCPercent = 400

// startSidecar starts inference-sidecar-onnx (a child process, one
// intra-op thread) with the comparison's model registered.
func startSidecar(b *testing.B, f *fixture, log *slog.Logger) *sidecar.Supervisor {
	b.Helper()
	ctx := context.Background()
	b.Setenv(onnx.LibraryEnv, f.lib)
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath:    testhelp.BuildBinary(b, "cmd/inference-sidecar-onnx", true),
		RuntimeConfig: runtimeConfig,
		SocketPath:    testhelp.SocketPath(b, "sidecar.sock"),
		Logger:        log,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sup.Close() })
	if err := sup.RegisterModel(ctx, modelPath, f.files, f.request(b, 1).json); err != nil {
		b.Fatal(err)
	}
	return sup
}

// alternateTail times b.N calls of each variant in rounds of tailRound
// calls, in ABC..CBA order, after a few untimed calls each.
func alternateTail(b *testing.B, vs []*tailVariant) {
	for _, v := range vs {
		if v.enter != nil {
			v.enter()
		}
		for range 20 {
			if err := v.call(); err != nil {
				b.Fatalf("%s: %v", v.label, err)
			}
		}
	}
	b.ResetTimer()
	for done, r := 0, 0; done < b.N; r++ {
		n := min(tailRound, b.N-done)
		for i := range vs {
			v := vs[i]
			if r%2 == 1 {
				v = vs[len(vs)-1-i]
			}
			if v.enter != nil {
				v.enter()
			}
			for range n {
				if err := v.rec.TimeErr(v.call); err != nil {
					b.Fatalf("%s: %v", v.label, err)
				}
			}
		}
		done += n
	}
	b.StopTimer()
	ref := vs[0].rec.Stats()
	b.ReportMetric(us(ref.P50), "p50-µs")
	b.ReportMetric(us(ref.P99), "p99-µs")
}

// printTail writes one batch size's table: each variant against the
// first (the reference), and the worker hop.
func printTail(out io.Writer, rows, n int, vs []*tailVariant) {
	fmt.Fprintf(out, "\nbatch %d, %d calls per variant\n", rows, n)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "cause\tvariant\t%8s\t%8s\tp99/p50\tp50 / ref\tp99 / ref\n", "p50 µs", "p99 µs")
	ref := vs[0].rec.Stats()
	var inProc benchlat.Stats
	for _, v := range vs {
		s := v.rec.Stats()
		cause := v.cause
		if cause == "" {
			cause = "(reference)"
		}
		if v.enter != nil && inProc.Calls == 0 {
			inProc = s // the first in-process variant: bidding-server's setting
		}
		fmt.Fprintf(w, "%s\t%s\t%8.1f\t%8.1f\t%6.1fx\t%8.2fx\t%8.2fx\n", cause, v.label, us(s.P50), us(s.P99),
			float64(s.P99)/float64(s.P50), float64(s.P50)/float64(ref.P50), float64(s.P99)/float64(ref.P99))
	}
	w.Flush()
	if inProc.Calls > 0 {
		fmt.Fprintf(out, "worker hop (js-worker, defaults - js-string, GOGC %d), p50: %.1f µs (target ≤ 25 µs)\n",
			inProcessGCPercent, us(ref.P50-inProc.P50))
	}
}
