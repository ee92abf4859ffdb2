package kserve_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// pctrInputs is a pctr request body's inputs: two rows.
const pctrInputs = `[
 {"name":"ad_id","shape":[2,1],"datatype":"INT64","data":[[1],[2]]},
 {"name":"publisher_id","shape":[2,1],"datatype":"INT64","data":[3,4]},
 {"name":"dense","shape":[2,6],"datatype":"FP32","data":[[0.1,0.2,0.3,0.4,0.5,0.6],[1,2,3,4,5,6]]}]`

type inferResponse struct {
	ModelName    string `json:"model_name"`
	ModelVersion string `json:"model_version"`
	ID           string `json:"id"`
	Outputs      []struct {
		Name     string    `json:"name"`
		Shape    []int64   `json:"shape"`
		Datatype string    `json:"datatype"`
		Data     []float64 `json:"data"`
	} `json:"outputs"`
}

func newTFServer(t *testing.T, opts kserve.Options) (string, *kserve.Server) {
	t.Helper()
	srv := kserve.New(opts)
	srv.SetBackend(tfSidecar(t))
	return serveHTTP(t, srv), srv
}

func TestHTTPHealth(t *testing.T) {
	notReady := errors.New("first model sync not finished")
	ready := notReady
	url, _ := newTFServer(t, kserve.Options{Ready: func(context.Context) error { return ready }})
	for _, c := range []struct {
		path string
		want int
	}{
		{"/v2/health/live", 200},
		{"/v2/health/ready", 400}, // Ready says no
		{"/v2/models/pctr/ready", 200},
		{"/v2/models/pctr/versions/v1/ready", 200},
		{"/v2/models/pctr/versions/v9/ready", 404},
		{"/v2/models/nosuch/ready", 404},
	} {
		code, body := call(t, "GET", url+c.path, "")
		// A 200 has no body; a model's 4xx says why (server ready's 400
		// stays empty, as the protocol's health answers are).
		wantBody := code == 404
		if code != c.want || (len(body) != 0) != wantBody || (wantBody && !strings.Contains(string(body), `"error"`)) {
			t.Errorf("GET %s: %d %q, want %d and a body only with a model's 4xx", c.path, code, body, c.want)
		}
	}
	ready = nil
	if code, _ := call(t, "GET", url+"/v2/health/ready", ""); code != 200 {
		t.Errorf("GET /v2/health/ready once ready: %d, want 200", code)
	}
}

func TestHTTPNotReadyWithoutBackend(t *testing.T) {
	url := serveHTTP(t, kserve.New(kserve.Options{}))
	if code, _ := call(t, "GET", url+"/v2/health/live", ""); code != 200 {
		t.Errorf("live without a sidecar: %d, want 200", code)
	}
	if code, _ := call(t, "GET", url+"/v2/health/ready", ""); code != 400 {
		t.Errorf("ready without a sidecar: %d, want 400", code)
	}
	code, body := call(t, "POST", url+"/v2/models/pctr/infer", `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}`)
	wantError(t, "infer without a sidecar", code, body, 404, "inference is not available")
}

func TestHTTPServerMetadata(t *testing.T) {
	url, _ := newTFServer(t, kserve.Options{ServerVersion: "1.2.3"})
	code, body := call(t, "GET", url+"/v2", "")
	if code != 200 {
		t.Fatalf("GET /v2: %d %s", code, body)
	}
	var md struct {
		Name       string   `json:"name"`
		Version    string   `json:"version"`
		Extensions []string `json:"extensions"`
	}
	decodeJSON(t, body, &md)
	if md.Name != "inferbid" || md.Version != "1.2.3" || md.Extensions == nil {
		t.Errorf("GET /v2 = %s, want name inferbid, version 1.2.3, extensions []", body)
	}
}

func TestHTTPModelMetadata(t *testing.T) {
	url, _ := newTFServer(t, kserve.Options{})
	for _, path := range []string{"/v2/models/pctr", "/v2/models/pctr/versions/v2", "/v2/models/pctr/versions/v1"} {
		code, body := call(t, "GET", url+path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var md kserve.ModelMetadata
		decodeJSON(t, body, &md)
		if md.Name != "pctr" || !slices.Equal(md.Versions, []string{"v1", "v2"}) || md.Platform != "tensorflow_savedmodel" {
			t.Errorf("GET %s: %s: want name pctr, versions [v1 v2], platform tensorflow_savedmodel", path, body)
		}
		want := map[string]kserve.TensorMetadata{
			"ad_id":        {Name: "ad_id", Datatype: "INT64", Shape: []int64{-1, 1}},
			"publisher_id": {Name: "publisher_id", Datatype: "INT64", Shape: []int64{-1, 1}},
			"dense":        {Name: "dense", Datatype: "FP32", Shape: []int64{-1, 6}},
		}
		if len(md.Inputs) != len(want) {
			t.Errorf("GET %s: inputs %+v, want %d", path, md.Inputs, len(want))
		}
		for _, in := range md.Inputs {
			w := want[in.Name]
			if in.Datatype != w.Datatype || !slices.Equal(in.Shape, w.Shape) {
				t.Errorf("GET %s: input %+v, want %+v", path, in, w)
			}
		}
		if len(md.Outputs) == 0 || md.Outputs[0].Datatype != "FP32" || len(md.Outputs[0].Shape) == 0 || md.Outputs[0].Shape[0] != -1 {
			t.Errorf("GET %s: outputs %+v, want an FP32 output with a variable first dimension", path, md.Outputs)
		}
	}
	code, body := call(t, "GET", url+"/v2/models/nosuch", "")
	wantError(t, "unknown model", code, body, 404, `"nosuch"`)
	code, body = call(t, "GET", url+"/v2/models/pctr/versions/v7", "")
	wantError(t, "unknown version", code, body, 404, `"v7"`, "v1, v2")
}

func TestHTTPInfer(t *testing.T) {
	url, _ := newTFServer(t, kserve.Options{})
	infer := func(path, body string) inferResponse {
		t.Helper()
		code, b := call(t, "POST", url+path, body)
		if code != 200 {
			t.Fatalf("POST %s: %d %s", path, code, b)
		}
		var r inferResponse
		decodeJSON(t, b, &r)
		return r
	}
	// The newest version, id echoed, every output.
	r := infer("/v2/models/pctr/infer", `{"id":"42","parameters":{"a":1,"b":"x","c":true},"inputs":`+pctrInputs+`}`)
	if r.ModelName != "pctr" || r.ModelVersion != "v2" || r.ID != "42" || len(r.Outputs) == 0 {
		t.Fatalf("answer %+v: want model pctr version v2, id 42, outputs", r)
	}
	out := r.Outputs[0]
	if out.Datatype != "FP32" || len(out.Shape) == 0 || out.Shape[0] != 2 || len(out.Data) == 0 {
		t.Errorf("output %+v: want FP32 with 2 rows", out)
	}
	for _, v := range out.Data {
		if v <= 0 || v >= 1 {
			t.Errorf("output %s = %v: a pCTR is a probability in (0, 1)", out.Name, out.Data)
		}
	}
	// An explicit version (pctr v1 and v2 share their weights: the
	// affine fixtures of the conformance tests tell versions apart); flat
	// data is the same as nested.
	flat := strings.NewReplacer("[[1],[2]]", "[1,2]", "[[0.1,0.2,0.3,0.4,0.5,0.6],[1,2,3,4,5,6]]", "[0.1,0.2,0.3,0.4,0.5,0.6,1,2,3,4,5,6]").Replace(pctrInputs)
	v1 := infer("/v2/models/pctr/versions/v1/infer", `{"inputs":`+flat+`}`)
	if v1.ModelVersion != "v1" || v1.ID != "" {
		t.Errorf("answer %+v: want version v1 and no id", v1)
	}
	v2 := infer("/v2/models/pctr/versions/v2/infer", `{"inputs":`+flat+`}`)
	if !slices.Equal(v2.Outputs[0].Data, out.Data) {
		t.Errorf("flat data gave %v, nested %v", v2.Outputs[0].Data, out.Data)
	}
	// Requested outputs.
	r = infer("/v2/models/pctr/infer", `{"inputs":`+pctrInputs+`,"outputs":[{"name":"`+out.Name+`","parameters":{"binary_data":false}}]}`)
	if len(r.Outputs) != 1 || r.Outputs[0].Name != out.Name {
		t.Errorf("requested output %q: got %+v", out.Name, r.Outputs)
	}
}

func TestHTTPInferErrors(t *testing.T) {
	url, _ := newTFServer(t, kserve.Options{Limits: kserveLimits})
	input := func(name, shape, dt, data string) string {
		return fmt.Sprintf(`{"inputs":[{"name":%q,"shape":%s,"datatype":%q,"data":%s}]}`, name, shape, dt, data)
	}
	for _, c := range []struct {
		what, path, body string
		code             int
		parts            []string
	}{
		{"unknown model", "/v2/models/nosuch/infer", input("x", "[1]", "FP32", "[1]"), 404, []string{`"nosuch"`}},
		{"unknown version", "/v2/models/pctr/versions/v3/infer", input("x", "[1]", "FP32", "[1]"), 404, []string{`"v3"`}},
		{"not JSON", "/v2/models/pctr/infer", `{"inputs":`, 400, []string{"not an inference request"}},
		{"two values", "/v2/models/pctr/infer", `{} {}`, 400, []string{"more than one"}},
		{"trailing brace", "/v2/models/pctr/infer", `{"inputs":[]} }`, 400, []string{"more than one"}},
		{"not an object", "/v2/models/pctr/infer", `[1]`, 400, []string{"not a JSON object"}},
		{"field name case", "/v2/models/pctr/infer", `{"Inputs":[]}`, 400, []string{`"Inputs"`, "case-sensitive"}},
		{"input field name case", "/v2/models/pctr/infer", `{"inputs":[{"name":"x","Shape":[1],"datatype":"FP32","data":[1]}]}`, 400, []string{`"Shape"`, "case-sensitive"}},
		{"field twice", "/v2/models/pctr/infer", `{"inputs":[],"inputs":[]}`, 400, []string{`"inputs" twice`}},
		{"body too deep", "/v2/models/pctr/infer", `{"parameters":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, 400, []string{"nests deeper"}},
		{"outputs not an array", "/v2/models/pctr/infer", `{"inputs":` + pctrInputs + `,"outputs":{}}`, 400, []string{`"outputs"`, "not an array"}},
		{"too many dimensions", "/v2/models/pctr/infer", input("dense", "["+strings.Repeat("1,", 64)+"1]", "FP32", "[1]"), 400, []string{`"dense"`, "more than 64"}},
		{"id not a string", "/v2/models/pctr/infer", `{"id":1,"inputs":[]}`, 400, []string{`"id"`}},
		{"inputs not an array", "/v2/models/pctr/infer", `{"inputs":{}}`, 400, []string{`"inputs"`, "not an array"}},
		{"shape of strings", "/v2/models/pctr/infer", input("dense", `["1"]`, "FP32", "[1]"), 400, []string{`"dense"`, `"shape"`}},
		{"fractional shape", "/v2/models/pctr/infer", input("dense", `[1.5]`, "FP32", "[1]"), 400, []string{`"dense"`, `"shape"`}},
		{"no inputs", "/v2/models/pctr/infer", `{"id":"1"}`, 400, []string{`no "inputs"`}},
		{"no name", "/v2/models/pctr/infer", `{"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]}`, 400, []string{`inputs[0] has no "name"`}},
		{"empty name", "/v2/models/pctr/infer", input("", "[1]", "FP32", "[1]"), 400, []string{`inputs[0] has an empty "name"`}},
		{"no datatype", "/v2/models/pctr/infer", `{"inputs":[{"name":"dense","shape":[1],"data":[1]}]}`, 400, []string{`"dense"`, "datatype"}},
		{"no shape", "/v2/models/pctr/infer", `{"inputs":[{"name":"dense","datatype":"FP32","data":[1]}]}`, 400, []string{`"dense"`, "shape"}},
		{"no data", "/v2/models/pctr/infer", `{"inputs":[{"name":"dense","shape":[1],"datatype":"FP32"}]}`, 400, []string{`"dense"`, "data"}},
		{"twice", "/v2/models/pctr/infer", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]},{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]}`, 400, []string{`"a"`, "twice"}},
		{"lower-case datatype", "/v2/models/pctr/infer", input("dense", "[1]", "fp32", "[1]"), 400, []string{`"dense"`, `"fp32"`}},
		{"unknown datatype", "/v2/models/pctr/infer", input("dense", "[1]", "FLOAT", "[1]"), 400, []string{`"dense"`, `"FLOAT"`}},
		// A datatype the model does not take: the runtime's 400, naming the input.
		{"BOOL", "/v2/models/pctr/infer", input("dense", "[1]", "BOOL", "[true]"), 400, []string{`"dense"`, "BOOL", "model expects FLOAT", "FP32"}},
		{"UINT8", "/v2/models/pctr/infer", input("dense", "[1]", "UINT8", "[1]"), 400, []string{`"dense"`, "UINT8", "model expects FLOAT"}},
		{"FP16", "/v2/models/pctr/infer", input("dense", "[1]", "FP16", "[1]"), 400, []string{`"dense"`, "FP16", "model expects FLOAT"}},
		{"BYTES", "/v2/models/pctr/infer", input("dense", "[1]", "BYTES", `["a"]`), 400, []string{`"dense"`, "BYTES", "model expects FLOAT"}},
		{"BOOL not a bool", "/v2/models/pctr/infer", input("dense", "[2]", "BOOL", "[true,1]"), 400, []string{`"dense"`, "element 1", "not true or false"}},
		{"UINT8 out of range", "/v2/models/pctr/infer", input("dense", "[1]", "UINT8", "[256]"), 400, []string{`"dense"`, "out of range for UINT8"}},
		{"UINT64 negative", "/v2/models/pctr/infer", input("dense", "[1]", "UINT64", "[-1]"), 400, []string{`"dense"`, "out of range for UINT64"}},
		{"FP16 out of range", "/v2/models/pctr/infer", input("dense", "[1]", "FP16", "[65520]"), 400, []string{`"dense"`, "out of range for FP16"}},
		{"BYTES not a string", "/v2/models/pctr/infer", input("dense", "[2]", "BYTES", `["a, ]b",3]`), 400, []string{`"dense"`, "element 1", "not a string"}},
		{"too few values", "/v2/models/pctr/infer", input("dense", "[2,6]", "FP32", "[1,2,3]"), 400, []string{`"dense"`, "3 values", "12"}},
		{"too many values", "/v2/models/pctr/infer", input("dense", "[1,2]", "FP32", "[1,2,3]"), 400, []string{`"dense"`, "more than the 2"}},
		{"zero dimension", "/v2/models/pctr/infer", input("dense", "[0,6]", "FP32", "[]"), 400, []string{`"dense"`, ">= 1"}},
		{"negative dimension", "/v2/models/pctr/infer", input("dense", "[-1,6]", "FP32", "[]"), 400, []string{`"dense"`, ">= 1"}},
		{"too many elements", "/v2/models/pctr/infer", input("dense", "[1000,1000]", "FP32", "[1]"), 400, []string{`"dense"`, "more than"}},
		{"string data", "/v2/models/pctr/infer", input("dense", "[1]", "FP32", `["1"]`), 400, []string{`"dense"`, "element 0", "not a number"}},
		{"data not an array", "/v2/models/pctr/infer", input("dense", "[1]", "FP32", `1`), 400, []string{`"dense"`, "not an array"}},
		{"fraction for INT64", "/v2/models/pctr/infer", input("ad_id", "[1]", "INT64", `[1.5]`), 400, []string{`"ad_id"`, "not an integer"}},
		{"INT8 out of range", "/v2/models/pctr/infer", input("ad_id", "[1]", "INT8", `[300]`), 400, []string{`"ad_id"`, "out of range for INT8"}},
		{"FP32 out of range", "/v2/models/pctr/infer", input("dense", "[1]", "FP32", `[1e300]`), 400, []string{`"dense"`, "out of range for FP32"}},
		{"deep nesting", "/v2/models/pctr/infer", input("dense", "[1]", "FP32", strings.Repeat("[", 100)+"1"+strings.Repeat("]", 100)), 400, []string{`"dense"`, "nests deeper"}},
		{"bad parameters", "/v2/models/pctr/infer", `{"parameters":{"a":{"b":1}},"inputs":[]}`, 400, []string{"parameters", `"a"`}},
		{"parameters not an object", "/v2/models/pctr/infer", `{"parameters":[1],"inputs":[]}`, 400, []string{"parameters"}},
		{"unknown input", "/v2/models/pctr/infer", input("nosuch", "[1,1]", "INT64", "[1]"), 400, []string{"nosuch", "pctr/v2/"}},
		{"wrong dtype for the model", "/v2/models/pctr/infer", `{"inputs":` + strings.Replace(pctrInputs, `"FP32"`, `"FP64"`, 1) + `}`, 400, []string{"dense", "pctr/v2/"}},
		{"unknown requested output", "/v2/models/pctr/infer", `{"inputs":` + pctrInputs + `,"outputs":[{"name":"nosuch"}]}`, 400, []string{`"nosuch"`, "not an output"}},
		{"output without name", "/v2/models/pctr/infer", `{"inputs":` + pctrInputs + `,"outputs":[{}]}`, 400, []string{`outputs[0] has no "name"`}},
	} {
		code, body := call(t, "POST", url+c.path, c.body)
		wantError(t, c.what, code, body, c.code, c.parts...)
	}
	// A body over the limit.
	big := `{"inputs":[{"name":"dense","shape":[1],"datatype":"FP32","data":[` + strings.Repeat(" ", kserve.DefaultMaxRequestBytes) + `1]}]}`
	code, body := call(t, "POST", url+"/v2/models/pctr/infer", big)
	wantError(t, "body over the limit", code, body, http.StatusRequestEntityTooLarge, "larger than")
}

func TestHTTPRoutingErrors(t *testing.T) {
	url, _ := newTFServer(t, kserve.Options{})
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/v2/nosuch", 404},
		{"GET", "/v2/models/", 404},
		{"GET", "/v2/models/pctr/infer", 405},
		{"POST", "/v2/models/pctr", 405},
		{"POST", "/v2/health/live", 405},
		{"GET", "/v2/models/pctr/versions//ready", 404},
	} {
		code, body := call(t, c.method, url+c.path, "")
		if c.code == 405 || c.code == 404 && !strings.HasSuffix(c.path, "/ready") {
			wantError(t, c.method+" "+c.path, code, body, c.code)
		} else if code != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, code, c.code)
		}
	}
}

func TestConformanceTensorFlow(t *testing.T) {
	m, err := tfsave.BuildConformanceModels(tfsave.Options{FunctionCall: true})
	if err != nil {
		t.Fatal(err)
	}
	runConformance(t, tfSidecar(t), affineFixture{Platform: kserve.PlatformTensorFlow, V1: m.AffineV1, V2: m.AffineV2,
		AllDTypes: m.AllDTypes,
		InName:    func(d string) string { return d + "_in" },
		OutName:   func(d string) string { return d + "_out" }})
}

func TestV2DTypesTensorFlow(t *testing.T) {
	all, err := tfsave.V2DTypesModel(tfsave.Options{FunctionCall: true})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := tfsave.V2DTypesModel(tfsave.Options{FunctionCall: true},
		tensor.Bool, tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64, tensor.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	runV2DTypesConformance(t, tfSidecar(t), v2Fixture{All: all, Typed: typed,
		InName:  func(d string) string { return d + "_in" },
		OutName: func(d string) string { return d + "_out" }})
}
