//go:build cgo

package bench

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/onnx"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

const (
	// modelRel is the comparison's model, relative to the module root.
	modelRel = "bench/testdata/pctr.onnx"
	// modelPath is the path it is registered and requested under (the
	// same string as MODEL_PATH in bench/peer/onnx_peer.js).
	modelPath = "pctr/v1/"
	// runtimeConfig is the ONNX Runtime setting of every Go row, bare and
	// sidecar alike (the peer uses the same: one intra-op thread).
	runtimeConfig = `{"num_intraop_threads":1,"num_interop_threads":1}`
	// requestJS is the request builder the JS rows and the peer share.
	requestJS = "bench/peer/request.js"
)

// benchJS is appended to request.js to make the pool's script: the JS rows
// and what the harness asks of JS.
const benchJS = `
var MODEL = "pctr/v1/";
// FEATURES (defined before this, see featuresJS) are the values of
// benchFeatures(1) and benchFeatures(64) as a literal: the peer computes
// them once, and bidding code gets its features with the call; computing
// them in every isolated runtime (which evaluates the module afresh) would
// measure benchFeatures, not the call.
function features(rows) { return FEATURES[rows] || benchFeatures(rows); }

// The request as the Go rows get it (batch.Parse of this JSON).
function requestJSON(rows) { return JSON.stringify(buildRequest(MODEL, features(rows))); }

// js-string: the request built from strings, JSON.stringify,
// runInference(string), JSON.parse of the answer.
function jsString(rows) {
  return readScores(JSON.parse(runInference(JSON.stringify(buildRequest(MODEL, features(rows))))), rows);
}

// js-worker: the js-string call as generateBid in a JS worker process
// (jsworker), for an interest group {"rows": n}.
function jsWorker(ig) { return jsString(ig.rows); }

// js-object: runInference(object), JSON.parse of the answer.
function jsObject(rows) {
  return readScores(JSON.parse(runInference(buildRequest(MODEL, features(rows)))), rows);
}
`

// fixture is the model, loaded in this process on the bare runtime.
type fixture struct {
	lib       string // the ONNX Runtime library
	modelFile string // absolute path of pctr.onnx (for the peer)
	files     runtimes.Files
	bare      *runtimes.Model
	script    string // request.js + benchJS
}

// newFixture loads the model; it skips (or fails, with
// INFERBID_REQUIRE_NATIVE=1) without the ONNX Runtime library.
func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	lib, err := onnx.FindLibrary("")
	testhelp.RequireNative(tb, "the ONNX Runtime library (scripts/install-onnxruntime.sh)", err)
	cfg, err := sidecar.ParseRuntimeConfig(runtimeConfig)
	if err != nil {
		tb.Fatal(err)
	}
	rt, err := runtimes.Open(onnx.Name, cfg.Config)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close() })
	files := runtimes.Files{"pctr.onnx": testhelp.ReadFile(tb, modelRel)}
	bare, err := rt.Load(context.Background(), modelPath, files)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { bare.Close() })
	request := string(testhelp.ReadFile(tb, requestJS))
	return &fixture{
		lib:       lib,
		modelFile: filepath.Join(testhelp.ModuleRoot(tb), filepath.FromSlash(modelRel)),
		files:     files,
		bare:      bare,
		script:    request + featuresJS(tb, request) + benchJS,
	}
}

// request is the comparison's request at one batch size, in each form the
// rows send it.
type request struct {
	rows    int
	json    string        // as JSON.stringify gives it
	entries []batch.Entry // batch.Parse of json
	want    []float64     // the bare runtime's scores
}

// request builds the request for rows with the JS the rows run (in a
// plain goja runtime), parses it and runs it on the bare runtime.
func (f *fixture) request(tb testing.TB, rows int) request {
	tb.Helper()
	vm := goja.New()
	if _, err := vm.RunString(f.script); err != nil {
		tb.Fatal(err)
	}
	fn, ok := goja.AssertFunction(vm.Get("requestJSON"))
	if !ok {
		tb.Fatal("requestJSON is not a function")
	}
	v, err := fn(goja.Undefined(), vm.ToValue(rows))
	if err != nil {
		tb.Fatal(err)
	}
	r := request{rows: rows, json: v.String()}
	r.entries, err = batch.Parse([]byte(r.json), batch.Limits{})
	if err != nil || len(r.entries) != 1 || r.entries[0].Err != nil {
		tb.Fatalf("parse the request: %v %v", err, r.entries)
	}
	out, err := f.bare.Predict(context.Background(), r.entries[0].Tensors)
	if err != nil {
		tb.Fatal(err)
	}
	if r.want, err = scores(out); err != nil {
		tb.Fatal(err)
	}
	if len(r.want) != rows {
		tb.Fatalf("the runtime answered %d scores for %d rows", len(r.want), rows)
	}
	return r
}

// scores reads the single FLOAT output of the model, widened.
func scores(out []tensor.Tensor) ([]float64, error) {
	if len(out) != 1 {
		return nil, fmt.Errorf("%d outputs, want 1", len(out))
	}
	d, ok := tensor.Data[float32](out[0])
	if !ok {
		return nil, fmt.Errorf("output %q is %s, want FLOAT", out[0].Name, out[0].DType())
	}
	s := make([]float64, len(d))
	for i, v := range d {
		s[i] = float64(v)
	}
	return s, nil
}

// resultScores reads the scores of a one-entry Predict answer.
func resultScores(res []batch.Result, err error) ([]float64, error) {
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("%d results, want 1", len(res))
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return scores(res[0].Tensors)
}

// sameScores fails when got differs from want by more than tol anywhere.
func sameScores(want, got []float64, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d scores, want %d", len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= tol) {
			return fmt.Errorf("score %d is %v, want %v (difference %g, tolerance %g)", i, got[i], want[i], d, tol)
		}
	}
	return nil
}

// maxDiff is the largest difference between two equally long score lists.
func maxDiff(a, b []float64) float64 {
	m := 0.0
	for i := range min(len(a), len(b)) {
		m = max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// featuresJS defines FEATURES: the values of request.js's benchFeatures
// for 1 and 64 rows, computed once by request.js itself (in a runtime of
// their own) and written as a JS literal.
func featuresJS(tb testing.TB, requestSource string) string {
	tb.Helper()
	rt := goja.New()
	v, err := rt.RunString(requestSource + "\nJSON.stringify({1: benchFeatures(1), 64: benchFeatures(64)});")
	if err != nil {
		tb.Fatalf("%s: computing the features: %v", requestJS, err)
	}
	return "\nvar FEATURES = " + v.String() + ";\n"
}
