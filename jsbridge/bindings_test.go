package jsbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/sidecar"
)

// callScript is a module whose call(expr) evaluates a JS expression and
// returns its value: the tests drive runInference through real JS.
const callScript = `
function call(src) { return (0, eval)(src); }
`

type response struct {
	Response []struct {
		ModelPath *string `json:"model_path"`
		Tensors   []struct {
			TensorName string    `json:"tensor_name"`
			Shape      []int64   `json:"tensor_shape"`
			DataType   string    `json:"data_type"`
			Content    []float64 `json:"tensor_content"`
		} `json:"tensors"`
		Error *struct {
			Type        string `json:"error_type"`
			Description string `json:"description"`
		} `json:"error"`
	} `json:"response"`
}

// evalJS runs expr in the pool and returns its (JSON-encoded) value.
func evalJS(t *testing.T, p *Pool, expr string) string {
	t.Helper()
	arg, _ := json.Marshal(expr)
	out, err := p.CallJSON(context.Background(), "call", arg)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return string(out)
}

// infer runs runInference(argExpr) from JS, checks that it returned a
// string (not an exception, not another type) and decodes it.
func infer(t *testing.T, p *Pool, argExpr string) response {
	t.Helper()
	out := evalJS(t, p, "(function(){ var r = runInference("+argExpr+"); if (typeof r !== 'string') throw new Error('runInference returned ' + typeof r); return r; })()")
	var s string
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("runInference(%s) returned %s: %v", argExpr, out, err)
	}
	var r response
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("runInference(%s) returned invalid JSON %q: %v", argExpr, s, err)
	}
	return r
}

func newInferencePool(t *testing.T, inf Inference, opts Options) *Pool {
	t.Helper()
	opts.Inference = inf
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	p, err := New("test.js", callScript, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func batchJSON(path string, shape string, content string) string {
	return fmt.Sprintf(`{"request":[{"model_path":%q,"tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":%s,"tensor_content":%s}]}]}`, path, shape, content)
}

func TestRunInferenceSuccess(t *testing.T) {
	client := startInProcessSidecar(t)
	register(t, client, "affine/v1/", "affine 2 1")
	p := newInferencePool(t, client, Options{})

	xs := []float32{0.5, -1.25, 3}
	for _, form := range []string{"string", "object"} {
		arg := batchJSON("affine/v1/", "[3,1]", `["0.5", -1.25, "3"]`)
		if form == "string" {
			q, _ := json.Marshal(arg)
			arg = string(q)
		}
		r := infer(t, p, arg)
		if len(r.Response) != 1 || r.Response[0].Error != nil {
			t.Fatalf("%s: want one result, got %+v", form, r)
		}
		got := r.Response[0]
		if got.ModelPath == nil || *got.ModelPath != "affine/v1/" || len(got.Tensors) != 1 {
			t.Fatalf("%s: bad result %+v", form, got)
		}
		ten := got.Tensors[0]
		if ten.DataType != "FLOAT" || fmt.Sprint(ten.Shape) != "[3 1]" || len(ten.Content) != 3 {
			t.Fatalf("%s: bad tensor %+v", form, ten)
		}
		for i, x := range xs {
			if want := float64(2*x + 1); ten.Content[i] != want {
				t.Errorf("%s: y[%d] = %v, want %v", form, i, ten.Content[i], want)
			}
		}
	}
}

// TestRunInferenceErrorTypes: every error type reaches JS as the batch
// error JSON, never as an exception.
func TestRunInferenceErrorTypes(t *testing.T) {
	client := startInProcessSidecar(t)
	register(t, client, "affine/v1/", "affine 2 1")
	register(t, client, "nan/", "nan")
	register(t, client, "fail/", "fail")
	register(t, client, "unknown/", "unknown")
	p := newInferencePool(t, client, Options{MaxArgumentBytes: 4096})

	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	good := batchJSON("affine/v1/", "[1]", `["1"]`)
	cases := []struct {
		name, arg, wantType string
		wholeBatch          bool
		wantInDescription   string
	}{
		{"number argument", "42", "INPUT_PARSING", true, "number"},
		{"no argument", "", "INPUT_PARSING", true, "undefined"},
		{"null argument", "null", "INPUT_PARSING", true, "null"},
		{"function argument", "function(){}", "INPUT_PARSING", true, "function"},
		{"boolean argument", "true", "INPUT_PARSING", true, "boolean"},
		{"symbol argument", "Symbol('s')", "INPUT_PARSING", true, "symbol"},
		{"bigint argument", "10n", "INPUT_PARSING", true, "bigint"},
		{"array argument", "[]", "INPUT_PARSING", true, "request"},
		{"String object", "new String('{}')", "INPUT_PARSING", true, "request"},
		{"not JSON", q("{nope"), "INPUT_PARSING", true, ""},
		{"no request array", q(`{"requests":[]}`), "INPUT_PARSING", true, "request"},
		{"too large", q(strings.Repeat(" ", 5000) + good), "INPUT_PARSING", true, "limit"},
		{"too large with unicode", q(strings.Repeat("é", 3000) + good), "INPUT_PARSING", true, "limit"},
		{"object too large", `{request:[{model_path:"affine/v1/",tensors:[{tensor_name:"x",data_type:"FLOAT",tensor_shape:[3000],tensor_content:new Array(3000).fill(1)}]}]}`, "INPUT_PARSING", true, "limit"},
		{"object with a cycle", `(function(){ var o = {request:[]}; o.self = o; return o; })()`, "INPUT_PARSING", true, "JSON"},
		{"throwing getter", `{get request() { throw new Error("boom"); }}`, "INPUT_PARSING", true, "boom"},
		{"bad dtype", q(`{"request":[{"model_path":"affine/v1/","tensors":[{"tensor_name":"x","data_type":"FLOAT16","tensor_shape":[1],"tensor_content":["1"]}]}]}`), "INPUT_PARSING", false, "FLOAT16"},
		{"count mismatch", q(batchJSON("affine/v1/", "[2]", `["1"]`)), "INPUT_PARSING", false, "tensor_content"},
		{"unknown input", q(`{"request":[{"model_path":"affine/v1/","tensors":[{"tensor_name":"z","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]}]}`), "INPUT_PARSING", false, "z"},
		{"model not found", q(batchJSON("nope/", "[1]", `["1"]`)), "MODEL_NOT_FOUND", false, "nope/"},
		{"model execution", q(batchJSON("fail/", "[1]", `["1"]`)), "MODEL_EXECUTION", false, "fail/"},
		{"unknown", q(batchJSON("unknown/", "[1]", `["1"]`)), "UNKNOWN", false, "unclassified"},
		{"output parsing", q(batchJSON("nan/", "[1]", `["1"]`)), "OUTPUT_PARSING", true, ""},
		{"output parsing from an object", batchJSON("nan/", "[1]", `[1]`), "OUTPUT_PARSING", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := infer(t, p, c.arg)
			if len(r.Response) != 1 || r.Response[0].Error == nil {
				t.Fatalf("want one error, got %+v", r)
			}
			e := r.Response[0]
			if e.Error.Type != c.wantType {
				t.Errorf("error_type %s, want %s (%s)", e.Error.Type, c.wantType, e.Error.Description)
			}
			if c.wholeBatch != (e.ModelPath == nil) {
				t.Errorf("whole-batch error %v, want %v: %+v", e.ModelPath == nil, c.wholeBatch, e)
			}
			if !strings.Contains(e.Error.Description, c.wantInDescription) {
				t.Errorf("description %q does not mention %q", e.Error.Description, c.wantInDescription)
			}
		})
	}

	// Per-entry errors leave the other entries running, in request order.
	mixed := `{"request":[` +
		`{"model_path":"nope/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]},` +
		`{"model_path":"affine/v1/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["5"]}]},` +
		`{"model_path":"affine/v1/","tensors":[{"tensor_name":"x","data_type":"INT99","tensor_shape":[1],"tensor_content":["1"]}]},` +
		`{"model_path":"fail/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]}]}`
	for _, arg := range []string{q(mixed), mixed} {
		r := infer(t, p, arg)
		if len(r.Response) != 4 {
			t.Fatalf("want 4 results, got %+v", r)
		}
		wantTypes := []string{"MODEL_NOT_FOUND", "", "INPUT_PARSING", "MODEL_EXECUTION"}
		for i, w := range wantTypes {
			got := ""
			if r.Response[i].Error != nil {
				got = r.Response[i].Error.Type
			}
			if got != w {
				t.Errorf("entry %d: error type %q, want %q", i, got, w)
			}
		}
		if ts := r.Response[1].Tensors; len(ts) != 1 || len(ts[0].Content) != 1 || ts[0].Content[0] != 11 {
			t.Errorf("entry 1: want y = 2*5+1, got %+v", r.Response[1])
		}
	}
}

// TestRunInferenceSidecarUnreachable: a GRPC batch error, not an exception.
func TestRunInferenceSidecarUnreachable(t *testing.T) {
	client, err := sidecar.NewClient(testhelp.SocketPath(t, "none.sock"), sidecar.ClientOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p := newInferencePool(t, client, Options{})
	for _, arg := range []string{fmt.Sprintf("%q", batchJSON("m/", "[1]", `["1"]`)), batchJSON("m/", "[1]", `[1]`)} {
		r := infer(t, p, arg)
		if len(r.Response) != 1 || r.Response[0].Error == nil || r.Response[0].Error.Type != "GRPC" || r.Response[0].ModelPath != nil {
			t.Fatalf("want a GRPC batch error, got %+v", r)
		}
	}
	// getModelPaths degrades to an empty list.
	if got := evalJS(t, p, "getModelPaths()"); got != `"[]"` {
		t.Errorf("getModelPaths() = %s, want \"[]\"", got)
	}
}

func TestGetModelPaths(t *testing.T) {
	client := startInProcessSidecar(t)
	for _, m := range []string{"pcvr/v2/", "pctr/v10/", "pctr/v2/", "a"} {
		register(t, client, m, "affine 1 0")
	}
	p := newInferencePool(t, client, Options{ModelPathsTTL: -1})
	out := evalJS(t, p, "getModelPaths()")
	var s string
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("getModelPaths() returned %s, want a string", out)
	}
	var paths []string
	if err := json.Unmarshal([]byte(s), &paths); err != nil {
		t.Fatalf("getModelPaths() = %q, not a JSON array: %v", s, err)
	}
	want := []string{"a", "pctr/v10/", "pctr/v2/", "pcvr/v2/"}
	if fmt.Sprint(paths) != fmt.Sprint(want) {
		t.Errorf("getModelPaths() = %v, want %v", paths, want)
	}
	// A new model shows up (no TTL here).
	register(t, client, "new/", "affine 1 0")
	if out := evalJS(t, p, "JSON.parse(getModelPaths()).length"); out != "5" {
		t.Errorf("after a registration, %s paths, want 5", out)
	}
	// With a TTL, concurrent scripts share one answer until it expires.
	cached := newInferencePool(t, client, Options{ModelPathsTTL: time.Hour})
	before := evalJS(t, cached, "getModelPaths()")
	register(t, client, "newer/", "affine 1 0")
	if after := evalJS(t, cached, "getModelPaths()"); after != before {
		t.Errorf("within the TTL the answer changed: %s -> %s", before, after)
	}
}

func TestInferenceDisabledWithoutSidecar(t *testing.T) {
	p, err := New("t.js", callScript, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if p.InferenceEnabled() {
		t.Error("InferenceEnabled() with no Inference")
	}
	for _, fn := range []string{"runInference", "getModelPaths"} {
		if got := evalJS(t, p, "typeof "+fn); got != `"undefined"` {
			t.Errorf("typeof %s = %s, want undefined", fn, got)
		}
	}
}
