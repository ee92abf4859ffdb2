package jsbridge

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// BenchmarkInferenceLayers measures the benchmark MLP (tfsave.MLP on the
// pure-Go TensorFlow runtime) at batch 1 and 64 through each layer, so the
// cost of each is visible:
//
//	runtime      Model.Predict in-process: the bare runtime call
//	socket       sidecar.Client.Predict (typed) to a sidecar process over its Unix socket
//	socket_json  sidecar.Client.PredictJSON (the B&A JSON path) over the socket
//	js_string    a JS function calling runInference(batchJsonString), from Go through the pool
//	js_stringify the same, the script running JSON.stringify(batchObject) first (a B&A-style script)
//	js_object    runInference(batchObject), the object extension
//
// Every run reports p50-µs, p99-µs and calls/s (benchlat): serial runs at
// one goroutine, parallel runs at GOMAXPROCS goroutines (pool size
// GOMAXPROCS), where calls/s is all callers together.
func BenchmarkInferenceLayers(b *testing.B) {
	ctx := context.Background()
	files, err := tfsave.MLP(tfsave.Options{})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		b.Fatal(err)
	}
	model, err := rt.Load(ctx, "mlp/", files)
	if err != nil {
		b.Fatal(err)
	}
	defer model.Close()

	os.Setenv(runtimeEnv, tensorflow.Name)
	defer os.Unsetenv(runtimeEnv)
	sup := startChildSidecar(b)
	if err := sup.RegisterModel(ctx, "mlp/", files, ""); err != nil {
		b.Fatal(err)
	}
	client := sup.Client()

	for _, rows := range []int{1, 64} {
		x := tfsave.MLPInput(rows)
		input := tensor.New("x", []int64{int64(rows), 8}, x)
		entries := []batch.Entry{{ModelPath: "mlp/", Tensors: []tensor.Tensor{input}}}
		content := make([]string, len(x))
		for i, v := range x {
			content[i] = fmt.Sprint(v)
		}
		reqJSON := fmt.Sprintf(`{"request":[{"model_path":"mlp/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[%d,8],"tensor_content":[%s]}]}]}`, rows, strings.Join(content, ","))
		script := fmt.Sprintf(`
var reqString = %q;
var reqObject = JSON.parse(reqString);
function check(out) { if (out.indexOf('"error"') >= 0) throw new Error(out); return out.length; }
function js_string() { return check(runInference(reqString)); }
function js_stringify() { return check(runInference(JSON.stringify(reqObject))); }
function js_object() { return check(runInference(reqObject)); }
`, reqJSON)
		pool, err := New("bench.js", script, Options{Inference: client, Logger: quietLogger(), Size: runtime.GOMAXPROCS(0)})
		if err != nil {
			b.Fatal(err)
		}
		callJS := func(fn string) func() error {
			return func() error {
				return pool.Do(ctx, fn, func(_ *goja.Runtime, f goja.Callable) error {
					_, err := f(goja.Undefined())
					return err
				})
			}
		}
		layers := []struct {
			name string
			call func() error
		}{
			{"runtime", func() error { _, err := model.Predict(ctx, []tensor.Tensor{input}); return err }},
			{"socket", func() error {
				res, err := client.Predict(ctx, entries)
				if err == nil && res[0].Err != nil {
					err = res[0].Err
				}
				return err
			}},
			{"socket_json", func() error {
				out, err := client.PredictJSON(ctx, []byte(reqJSON))
				if err == nil && strings.Contains(string(out), `"error"`) {
					err = fmt.Errorf("%s", out)
				}
				return err
			}},
			{"js_string", callJS("js_string")},
			{"js_stringify", callJS("js_stringify")},
			{"js_object", callJS("js_object")},
		}
		for _, l := range layers {
			b.Run(fmt.Sprintf("batch=%d/%s/serial", rows, l.name), func(b *testing.B) { benchSerial(b, l.call) })
			b.Run(fmt.Sprintf("batch=%d/%s/parallel", rows, l.name), func(b *testing.B) { benchParallel(b, l.call) })
		}
		pool.Close()
	}
}

func benchSerial(b *testing.B, call func() error) {
	var r benchlat.Recorder
	for b.Loop() {
		if err := r.TimeErr(call); err != nil {
			b.Fatal(err)
		}
	}
	r.Report(b)
}

// BenchmarkObjectArgument compares, in-process (no sidecar), the two ways a
// batch object becomes entries: the direct walk of runInference(object) and
// JSON.stringify + batch.Parse, which is what runInference(JSON.stringify(
// object)) costs on the host and in JS.
func BenchmarkObjectArgument(b *testing.B) {
	for _, rows := range []int{1, 64} {
		rt := goja.New()
		x := tfsave.MLPInput(rows)
		content := make([]string, len(x))
		for i, v := range x {
			content[i] = fmt.Sprint(v)
		}
		v, err := rt.RunString(fmt.Sprintf(`({"request":[{"model_path":"mlp/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[%d,8],"tensor_content":[%s]}]}]})`, rows, strings.Join(content, ",")))
		if err != nil {
			b.Fatal(err)
		}
		obj := v.(*goja.Object)
		strfy, _ := goja.AssertFunction(rt.Get("JSON").ToObject(rt).Get("stringify"))
		b.Run(fmt.Sprintf("batch=%d/walk", rows), func(b *testing.B) {
			for b.Loop() {
				if _, ok := walkBatch(rt, obj, batch.Limits{}, 1<<20); !ok {
					b.Fatal("walk refused")
				}
			}
		})
		b.Run(fmt.Sprintf("batch=%d/stringify+parse", rows), func(b *testing.B) {
			for b.Loop() {
				s, err := strfy(goja.Undefined(), obj)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := batch.Parse([]byte(s.String()), batch.Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCall is one Go->JS->Go call through the pool (JSON arguments and
// result), with shared runtimes and with isolated ones (the default: a fresh
// runtime per call, built in the background), at GOMAXPROCS goroutines.
func BenchmarkCall(b *testing.B) {
	for _, shared := range []bool{true, false} {
		b.Run(fmt.Sprintf("isolate=%v", !shared), func(b *testing.B) {
			p, err := New("pool.js", poolScript, Options{ShareRuntimes: shared, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.CallJSON(context.Background(), "add", []byte(`{"x":1}`), []byte(`{"x":2}`)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkIsolation is the cost of isolation (a fresh runtime per call,
// the default) against shared runtimes (ShareRuntimes), at GOMAXPROCS
// callers and pool size GOMAXPROCS:
//
//	js_string  batch 1: the js_string row of BenchmarkInferenceLayers (a JS
//	           function calling runInference on the benchmark MLP in a
//	           TensorFlow sidecar process)
//	js_only    a bid computed in JS from its JSON arguments, no inference:
//	           the worst case, where the call itself costs least
//
// Each runs with the garbage collector at GOGC=100 (Go's default) and 400
// (bidding-server's when a heap budget bounds the heap): a fresh runtime per
// call is garbage per call. The two modes run in alternating rounds
// (shared, isolated, isolated, shared, ...) on pools that stay up, so that
// a neighbour's load on this shared machine falls on both alike. Besides
// latency and calls/s it reports cpu-µs/call, the CPU time of this process
// and of the sidecar's per call: calls/s moves with the neighbours' load,
// CPU per call does not, and at saturation throughput is the cores over it.
// It prints the throughput isolation costs by both measures.
func BenchmarkIsolation(b *testing.B) {
	ctx := context.Background()
	files, err := tfsave.MLP(tfsave.Options{})
	if err != nil {
		b.Fatal(err)
	}
	os.Setenv(runtimeEnv, tensorflow.Name)
	defer os.Unsetenv(runtimeEnv)
	sup := startChildSidecar(b)
	if err := sup.RegisterModel(ctx, "mlp/", files, ""); err != nil {
		b.Fatal(err)
	}
	x := tfsave.MLPInput(1)
	content := make([]string, len(x))
	for i, v := range x {
		content[i] = fmt.Sprint(v)
	}
	reqJSON := fmt.Sprintf(`{"request":[{"model_path":"mlp/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,8],"tensor_content":[%s]}]}]}`, strings.Join(content, ","))
	script := fmt.Sprintf(`
var reqString = %q;
function check(out) { if (out.indexOf('"error"') >= 0) throw new Error(out); return out.length; }
function js_string() { return check(runInference(reqString)); }
function js_only(ig, signals) {
  var best = null;
  for (var i = 0; i < ig.ads.length; i++) {
    var ad = ig.ads[i], score = ad.value;
    for (var j = 0; j < signals.weights.length; j++) score *= 1 + signals.weights[j] * ig.dense[j];
    if (best === null || score > best.bid) best = {render: ad.render_url, bid: score};
  }
  return best;
}
`, reqJSON)
	ig := []byte(`{"name":"shoes","dense":[0.9,0.1,0.4,0.0,0.7,0.3],"ads":[{"render_url":"https://ads.example/a","value":2.5},{"render_url":"https://ads.example/b","value":1.8}]}`)
	signals := []byte(`{"weights":[0.3,1.2,-0.4,0.0,2.0,0.1]}`)

	const rounds = 4 // of each mode
	callers := runtime.GOMAXPROCS(0)
	for _, fn := range []string{"js_string", "js_only"} {
		for _, gogc := range []int{100, 400} {
			b.Run(fmt.Sprintf("%s/gogc=%d", fn, gogc), func(b *testing.B) {
				defer debug.SetGCPercent(debug.SetGCPercent(gogc))
				var modes [2]isolationRun // shared, isolated
				for i := range modes {
					pool, err := New("bench.js", script, Options{Inference: sup.Client(), Logger: quietLogger(), ShareRuntimes: i == 0})
					if err != nil {
						b.Fatal(err)
					}
					defer pool.Close()
					modes[i].pool = pool
				}
				call := func(pool *Pool) func() error {
					if fn == "js_only" {
						return func() error { _, err := pool.CallJSON(ctx, fn, ig, signals); return err }
					}
					return func() error {
						return pool.Do(ctx, fn, func(_ *goja.Runtime, f goja.Callable) error {
							_, err := f(goja.Undefined())
							return err
						})
					}
				}
				perRound := max(1, b.N/(2*rounds))
				runtime.GC()
				b.ResetTimer()
				for r := range 2 * rounds {
					// ABBA order: shared, isolated, isolated, shared, ...
					m := &modes[(r+r/2)%2]
					if err := m.round(perRound, callers, sup.Pid(), call(m.pool)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if b.N < 2*rounds {
					return // the framework's probe run
				}
				sh, iso := modes[0].summary(), modes[1].summary()
				b.ReportMetric(sh.CallsPerSec, "shared-calls/s")
				b.ReportMetric(iso.CallsPerSec, "isolated-calls/s")
				b.ReportMetric(sh.cpu, "shared-cpu-µs/call")
				b.ReportMetric(iso.cpu, "isolated-cpu-µs/call")
				b.ReportMetric(100*(sh.cpu/iso.cpu-1), "cpu-cost-%")
				b.ReportMetric(100*(iso.CallsPerSec/sh.CallsPerSec-1), "measured-cost-%")
				// Calls that found no ready runtime and ran the module first.
				b.ReportMetric(float64(modes[1].pool.Stats().InlineBuilds)/float64(iso.Calls), "inline-builds/call")
				fmt.Printf("isolation cost, %s at batch 1, GOGC=%d, %d callers, %d alternating rounds: CPU per call %.1f µs shared, %.1f µs isolated: %+.1f%% throughput at saturation; measured %.0f calls/s shared, %.0f isolated (%+.1f%%); p50 %v / %v, p99 %v / %v\n",
					fn, gogc, callers, 2*rounds, sh.cpu, iso.cpu, 100*(sh.cpu/iso.cpu-1),
					sh.CallsPerSec, iso.CallsPerSec, 100*(iso.CallsPerSec/sh.CallsPerSec-1),
					sh.P50, iso.P50, sh.P99, iso.P99)
			})
		}
	}
}

// isolationRun accumulates one mode's rounds in BenchmarkIsolation.
type isolationRun struct {
	pool *Pool
	lat  benchlat.Recorder
	wall time.Duration
	cpu  time.Duration // this process's and the sidecar's
	n    int
}

// round makes n calls from callers goroutines.
func (m *isolationRun) round(n, callers, sidecarPid int, call func() error) error {
	h0, c0 := benchlat.ProcessCPU(), benchlat.PidCPU(sidecarPid)
	wall, err := benchlat.RunCalls(n, callers, &m.lat, call)
	m.wall += wall
	m.cpu += benchlat.ProcessCPU() - h0 + benchlat.PidCPU(sidecarPid) - c0
	m.n += n
	return err
}

// isolationSummary is a mode's latencies, throughput and CPU per call.
type isolationSummary struct {
	benchlat.Stats
	cpu float64 // µs per call
}

func (m *isolationRun) summary() isolationSummary {
	s := isolationSummary{Stats: m.lat.Stats(), cpu: m.cpu.Seconds() * 1e6 / float64(m.n)}
	s.CallsPerSec = float64(m.n) / m.wall.Seconds()
	return s
}

func benchParallel(b *testing.B, call func() error) {
	var r benchlat.Recorder
	var once sync.Once
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := r.TimeErr(call); err != nil {
				once.Do(func() { b.Error(err) })
				return
			}
		}
	})
	r.Report(b)
}
