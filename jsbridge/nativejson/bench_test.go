package nativejson

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/tensor"
)

// BenchmarkJSON measures the JSON work of a bidding script around one
// runInference call, on the peer comparison's request (bench/peer/request.js)
// at batch 1 and 64, with goja's JSON built-ins (impl=goja) and the native
// ones (impl=native):
//
//	call       build the request, JSON.stringify it, JSON.parse the response
//	           and read the scores: everything of a js-string call but
//	           runInference itself
//	build      buildRequest alone (no JSON), the floor of the above
//	stringify  JSON.stringify of the built request
//	parse_resp JSON.parse of the response (one FLOAT tensor of scores, as
//	           batch.AppendResponse renders it)
//	parse_req  JSON.parse of the request's JSON text
func BenchmarkJSON(b *testing.B) {
	src, err := os.ReadFile("../../bench/peer/request.js")
	if err != nil {
		b.Fatal(err)
	}
	prog, err := goja.Compile("request.js", string(src), false)
	if err != nil {
		b.Fatal(err)
	}
	for _, rows := range []int{1, 64} {
		resp := benchResponse(b, rows)
		// Both runtimes first, so that each function runs with goja's
		// and the native JSON back to back (a shared machine drifts).
		impls := []string{"goja", "native"}
		var rts []*goja.Runtime
		for _, impl := range impls {
			rt := goja.New()
			if impl == "native" {
				if _, err := install(rt); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := rt.RunProgram(prog); err != nil {
				b.Fatal(err)
			}
			_, err := rt.RunString(fmt.Sprintf(`
var rows = %d, feats = benchFeatures(rows), resp = %q;
var req = buildRequest("pctr/", feats), reqText = JSON.stringify(req);
function call() { var s = JSON.stringify(buildRequest("pctr/", feats)); return readScores(JSON.parse(resp), rows).length + s.length; }
function build() { return buildRequest("pctr/", feats).request.length; }
function stringify() { return JSON.stringify(req).length; }
function parse_resp() { return readScores(JSON.parse(resp), rows).length; }
function parse_req() { return JSON.parse(reqText).request.length; }
`, rows, resp))
			if err != nil {
				b.Fatal(err)
			}
			rts = append(rts, rt)
		}
		for _, fn := range []string{"call", "build", "stringify", "parse_resp", "parse_req"} {
			for i, rt := range rts {
				f, ok := goja.AssertFunction(rt.Get(fn))
				if !ok {
					b.Fatal(fn)
				}
				b.Run(fmt.Sprintf("batch=%d/%s/impl=%s", rows, fn, impls[i]), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := f(goja.Undefined()); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// benchResponse is the response runInference gives for the benchmark
// request: pctr FLOAT [rows,1], rendered by batch.AppendResponse.
func benchResponse(b *testing.B, rows int) string {
	scores := make([]float32, rows)
	for i := range scores {
		scores[i] = float32(1 / (1 + math.Exp(-float64(i%13-6)/3.7)))
	}
	out, err := batch.AppendResponse(nil, []batch.Result{{ModelPath: "pctr/", Tensors: []tensor.Tensor{tensor.New("pctr", []int64{int64(rows), 1}, scores)}}})
	if err != nil {
		b.Fatal(err)
	}
	return string(out)
}
