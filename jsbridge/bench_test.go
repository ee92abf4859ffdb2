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

func benchParallel(b *testing.B, call func() error) { benchParallelStats(b, call) }

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
// call is garbage per call. Besides latency and calls/s it reports
// cpu-µs/call, the CPU time of this process and of the sidecar's per call:
// on a machine shared with other work calls/s moves with the neighbours'
// load, CPU per call does not, and at saturation throughput is the cores
// over it. It prints the throughput isolation costs by both measures.
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

	type run struct {
		stats benchlat.Stats
		cpu   float64 // µs per call, this process and the sidecar
	}
	type key struct {
		fn   string
		gogc int
	}
	var keys []key
	results := map[key]map[bool]run{}
	for _, k := range []key{{"js_string", 100}, {"js_string", 400}, {"js_only", 100}, {"js_only", 400}} {
		fn := k.fn
		keys = append(keys, k)
		results[k] = map[bool]run{}
		for _, shared := range []bool{true, false} {
			mode := "isolated"
			if shared {
				mode = "shared"
			}
			pool, err := New("bench.js", script, Options{Inference: sup.Client(), Logger: quietLogger(), ShareRuntimes: shared})
			if err != nil {
				b.Fatal(err)
			}
			call := func() error {
				if fn == "js_only" {
					_, err := pool.CallJSON(ctx, fn, ig, signals)
					return err
				}
				return pool.Do(ctx, fn, func(_ *goja.Runtime, f goja.Callable) error {
					_, err := f(goja.Undefined())
					return err
				})
			}
			b.Run(fmt.Sprintf("%s/gogc=%d/%s", fn, k.gogc, mode), func(b *testing.B) {
				defer debug.SetGCPercent(debug.SetGCPercent(k.gogc))
				runtime.GC()
				h0, c0, inline0 := benchlat.ProcessCPU(), childCPU(sup.Pid()), pool.Stats().InlineBuilds
				s := benchParallelStats(b, call)
				h1, c1 := benchlat.ProcessCPU(), childCPU(sup.Pid())
				cpu := h1 - h0 + c1 - c0
				b.ReportMetric((h1-h0).Seconds()*1e6/float64(b.N), "host-cpu-µs/call")
				if !shared {
					// Calls that found no ready runtime and ran the module first.
					b.ReportMetric(float64(pool.Stats().InlineBuilds-inline0)/float64(b.N), "inline-builds/call")
				}
				perCall := cpu.Seconds() * 1e6 / float64(b.N)
				b.ReportMetric(perCall, "cpu-µs/call")
				results[k][shared] = run{s, perCall}
			})
			pool.Close()
		}
	}
	for _, k := range keys {
		sh, iso := results[k][true], results[k][false]
		if sh.stats.CallsPerSec == 0 || iso.stats.CallsPerSec == 0 {
			continue
		}
		fmt.Printf("isolation cost, %s at batch 1, GOGC=%d, %d callers: CPU per call %.1f µs shared, %.1f µs isolated: %+.1f%% throughput at saturation; measured %.0f calls/s shared, %.0f isolated (%+.1f%%); p50 %v / %v, p99 %v / %v\n",
			k.fn, k.gogc, runtime.GOMAXPROCS(0), sh.cpu, iso.cpu, 100*(sh.cpu/iso.cpu-1),
			sh.stats.CallsPerSec, iso.stats.CallsPerSec, 100*(iso.stats.CallsPerSec/sh.stats.CallsPerSec-1),
			sh.stats.P50, iso.stats.P50, sh.stats.P99, iso.stats.P99)
	}
}

// childCPU is the user+system CPU time of process pid (0 when unknown).
func childCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: state is field 3, utime and stime are fields 14 and 15.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	const ticksPerSecond = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// benchParallelStats is benchParallel returning what it reported.
func benchParallelStats(b *testing.B, call func() error) benchlat.Stats {
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
	return r.Stats()
}
