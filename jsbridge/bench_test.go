package jsbridge

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

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
// result), with warm runtimes and with IsolateCalls (a fresh runtime per
// call, built in the background), at GOMAXPROCS goroutines.
func BenchmarkCall(b *testing.B) {
	for _, isolate := range []bool{false, true} {
		b.Run(fmt.Sprintf("isolate=%v", isolate), func(b *testing.B) {
			p, err := New("pool.js", poolScript, Options{IsolateCalls: isolate, Logger: quietLogger()})
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
