//go:build cgo

package bench

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/runtimes/onnx"
)

// callers is the number of concurrent callers of the concurrency section.
const callers = 8

// BenchmarkPeerComparison sends the comparison's request through every
// layer and the Node.js peer at batch 1 and 64, then prints the table of
// latencies, throughputs and ratios (bench/doc.go) on stdout. Each Go row
// is a sub-benchmark (b.Loop, so -benchtime applies) that also reports
// p50-µs, p99-µs and calls/s; the peer runs about as long (runPeer). A
// row filtered out by -bench shows as "-".
func BenchmarkPeerComparison(b *testing.B) {
	ctx := context.Background()
	f := newFixture(b)
	p := requirePeer(b)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The ONNX sidecar, a child process started by the supervisor, with
	// the model registered.
	sup := startSidecar(b, f, log)
	fast, grpc, err := newClients(sup.SocketPath(), log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fast.Close(); grpc.Close() })
	echo := startEcho(b)

	// The JS rows' pool, calling the sidecar through the fast lane.
	pool, err := jsbridge.New("bench.js", f.script, jsbridge.Options{Inference: fast, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	local, err := jsbridge.New("bench.js", f.script, jsbridge.Options{Inference: inProcess{path: modelPath, model: f.bare}, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { local.Close() })
	localShared, err := jsbridge.New("bench.js", f.script, jsbridge.Options{Inference: inProcess{path: modelPath, model: f.bare}, Logger: log, ShareRuntimes: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { localShared.Close() })
	// The js-worker row: the js-string script in one JS worker process
	// (this test binary re-executed), with its own fast lane to the sidecar.
	host := startWorkerHost(b, f.script, sup.SocketPath(), fast, log)
	callJSOn := func(pool *jsbridge.Pool, fn string, rows int) func() ([]float64, error) {
		return callJSScores(ctx, pool, fn, rows)
	}
	callJS := func(fn string, rows int) func() ([]float64, error) { return callJSOn(pool, fn, rows) }

	// The in-process JS rows run as bidding-server --js_in_process runs
	// JS: its collector settings, in this process (the JS worker sets its
	// own).
	defer inProcessGC()()

	tab := &table{}
	tab.header = append(tab.header,
		fmt.Sprintf("model %s: dense FLOAT [b,8], ad_id INT64 [b,1], bid_floor DOUBLE [b,1] -> pctr FLOAT [b,1]", modelRel),
		fmt.Sprintf("Go: ONNX Runtime %s, %s, GOMAXPROCS %d; peer: Node.js %s, onnxruntime-node %s, same thread settings",
			onnx.LibraryVersion(), runtimeConfig, runtime.GOMAXPROCS(0), p.NodeVersion, ortNodeVersion),
		transportNote,
		fmt.Sprintf("collector of this process (the in-process JS rows) as bidding-server --js_in_process sets it: GOGC %d, soft memory limit 1.25 GiB + 64 MiB; js-worker: one worker process on jsworker's defaults (GOMAXPROCS 1, GOGC 400, polling 200 µs for its next chunk)", inProcessGCPercent),
	)

	for _, rows := range []int{1, 64} {
		req := f.request(b, rows)
		in := req.entries[0].Tensors
		echoBytes := fastLaneRequestBytes(req.entries)
		conn := echo.dial(b, echoBytes)
		tab.header = append(tab.header, fmt.Sprintf("batch %d: request %d bytes of JSON, %d bytes on the raw echo (each way)", rows, len(req.json), echoBytes))

		// Every path must answer what the bare runtime answers.
		jsString, jsObject := callJS("jsString", rows), callJS("jsObject", rows)
		jsLocal := callJSOn(local, "jsString", rows)
		jsLocalShared := callJSOn(localShared, "jsString", rows)
		jsWorker := callWorker(ctx, host, rows)
		jsWorkerCall := workerCall(ctx, host, rows)
		for name, got := range map[string]func() ([]float64, error){
			"fast-lane":        func() ([]float64, error) { return resultScores(fast.Predict(ctx, req.entries)) },
			"grpc":             func() ([]float64, error) { return resultScores(grpc.Predict(ctx, req.entries)) },
			"js-string":        jsString,
			"js-object":        jsObject,
			"js-worker":        jsWorker,
			"js-inproc":        jsLocal,
			"js-inproc-shared": jsLocalShared,
		} {
			s, err := got()
			if err == nil {
				err = sameScores(req.want, s, 0)
			}
			if err != nil {
				b.Fatalf("batch %d: %s: %v", rows, name, err)
			}
		}

		rowsOf := []struct {
			name string
			call func() error
			pool *jsbridge.Pool // a JS row's pool (inline builds are reported)
		}{
			{"raw-echo", conn.roundTrip, nil},
			{"runtime", func() error { _, err := f.bare.Predict(ctx, in); return err }, nil},
			{"fast-lane", func() error { _, err := resultScores(fast.Predict(ctx, req.entries)); return err }, nil},
			{"grpc", func() error { _, err := resultScores(grpc.Predict(ctx, req.entries)); return err }, nil},
			{"js-string", func() error { _, err := jsString(); return err }, pool},
			{"js-object", func() error { _, err := jsObject(); return err }, pool},
			{"js-worker", jsWorkerCall, nil},
			{"js-inproc", func() error { _, err := jsLocal(); return err }, local},
			{"js-inproc-shared", func() error { _, err := jsLocalShared(); return err }, localShared},
		}
		for _, r := range rowsOf {
			b.Run(fmt.Sprintf("batch=%d/%s", rows, r.name), func(b *testing.B) {
				var inline0 uint64
				if r.pool != nil {
					inline0 = r.pool.Stats().InlineBuilds
				}
				tab.set(rows, r.name, serial(b, r.call))
				if r.pool != nil && r.pool.Isolated() {
					// Calls that found no fresh runtime ready and ran the
					// module first: back to back, calls outrun the refill
					// when the module costs more than the call.
					b.ReportMetric(float64(r.pool.Stats().InlineBuilds-inline0)/float64(b.N), "inline-builds/call")
				}
			})
		}

		tab.set(rows, "node-peer", runPeer(b, p, f, req, 1))
	}

	// Concurrency: callers goroutines sharing the fast-lane client, and
	// as many on the bare runtime; the peer with as many calls in flight.
	for _, rows := range []int{1, 64} {
		req := f.request(b, rows)
		in := req.entries[0].Tensors
		for _, r := range []struct {
			name string
			call func() error
		}{
			{"fast-lane", func() error { _, err := resultScores(fast.Predict(ctx, req.entries)); return err }},
			{"runtime", func() error { _, err := f.bare.Predict(ctx, in); return err }},
		} {
			b.Run(fmt.Sprintf("batch=%d/%d-callers/%s", rows, callers, r.name), func(b *testing.B) {
				tab.set(rows, concurrent(r.name), parallel(b, callers, r.call))
			})
		}
		tab.set(rows, concurrent("node-peer"), runPeer(b, p, f, req, callers))
	}

	tab.print(os.Stdout)
}

// runPeer runs the Node.js peer on req with concurrency calls in flight,
// for about as long as a Go row runs (-benchtime): a short first run checks
// its scores and gives its rate, which sizes the timed run (whose scores
// are checked too).
func runPeer(b *testing.B, p *peer, f *fixture, req request, concurrency int) benchlat.Stats {
	b.Helper()
	run := func(n int) peerResult {
		r, err := p.run(f.modelFile, req.rows, n, concurrency)
		if err == nil {
			err = sameScores(req.want, r.Scores, peerTolerance)
		}
		if err != nil {
			b.Fatalf("batch %d: node-peer, %d in flight: %v", req.rows, concurrency, err)
		}
		return r
	}
	probe := run(500)
	res := run(peerIterations(probe.CallsPerSec))
	return res.stats()
}

// peerIterations is the number of calls for the peer's timed run: N for
// -benchtime Nx, else what its rate fits in the -benchtime duration (1s by
// default), at least 1000.
func peerIterations(rate float64) int {
	d := time.Second
	if bt := flag.Lookup("test.benchtime"); bt != nil {
		v := bt.Value.String()
		if n, ok := strings.CutSuffix(v, "x"); ok {
			if i, err := strconv.Atoi(n); err == nil && i > 0 {
				return i
			}
		} else if t, err := time.ParseDuration(v); err == nil && t > 0 {
			d = t
		}
	}
	return min(max(int(rate*d.Seconds()), 1000), 1_000_000)
}

// serial times call on every iteration of b.Loop, after a few untimed
// warm-up calls, reports and returns the statistics.
func serial(b *testing.B, call func() error) benchlat.Stats {
	for range 20 {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	var r benchlat.Recorder
	for b.Loop() {
		if err := r.TimeErr(call); err != nil {
			b.Fatal(err)
		}
	}
	r.Report(b)
	return r.Stats()
}

// parallel makes b.N calls from n goroutines, reports and returns the
// statistics (calls/s is all goroutines together).
func parallel(b *testing.B, n int, call func() error) benchlat.Stats {
	var r benchlat.Recorder
	var next atomic.Int64
	var failed sync.Once
	var wg sync.WaitGroup
	b.ResetTimer()
	for range n {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := r.TimeErr(call); err != nil {
					failed.Do(func() { b.Error(err) })
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	r.Report(b)
	return r.Stats()
}

// callJSScores calls the pool's fn(rows) and returns the scores it
// returned.
func callJSScores(ctx context.Context, pool *jsbridge.Pool, fn string, rows int) func() ([]float64, error) {
	return func() ([]float64, error) {
		var s []float64
		err := pool.Do(ctx, fn, func(rt *goja.Runtime, call goja.Callable) error {
			v, err := call(goja.Undefined(), rt.ToValue(rows))
			if err != nil {
				return err
			}
			return rt.ExportTo(v, &s)
		})
		return s, err
	}
}

// inProcessGC sets this process's collector as bidding-server sets its own
// when JS runs in it (--js_in_process with the default heap budget of 1
// GiB): GOGC 400 and a soft memory limit a quarter over the budget plus 64
// MiB. It returns a function restoring the settings before.
func inProcessGC() (restore func()) {
	const budget = 1 << 30
	pct := debug.SetGCPercent(inProcessGCPercent)
	lim := debug.SetMemoryLimit(budget + budget/4 + 64<<20)
	return func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(lim) }
}
