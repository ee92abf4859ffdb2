package kserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
)

// affineFixture is a runtime's two affine models (input x FLOAT [-1,3]):
// V1 is y = 2x+1, V2 is y = 3x-1.
type affineFixture struct {
	Platform string
	V1, V2   runtimes.Files
	// Positional: the runtime ignores input names, and its signature has
	// no dtypes and no outputs (TorchScript).
	Positional bool

	// AllDTypes returns its six inputs (double, float, int8, int16, int32,
	// int64 in that order, each [-1,2]) unchanged; InName and OutName name
	// them from the lower-case dtype ("int8"); OutName nil matches outputs
	// by position.
	AllDTypes       runtimes.Files
	InName, OutName func(dtype string) string
}

// registerAffine registers V2 as affine/v9/ and V1 as affine/v10/: the
// newest version is v10 by number, not by text.
func registerAffine(t *testing.T, client *sidecar.Client, fx affineFixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for path, files := range map[string]runtimes.Files{"affine/v9/": fx.V2, "affine/v10/": fx.V1} {
		if err := client.RegisterModel(ctx, path, files, ""); err != nil {
			t.Fatalf("register %s: %v", path, err)
		}
	}
}

// affineWant is y for x under version v10 (2x+1) or v9 (3x-1).
func affineWant(version string, x []float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		if version == "v10" {
			y[i] = 2*v + 1
		} else {
			y[i] = 3*v - 1
		}
	}
	return y
}

func close32(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-5*(1+math.Abs(b[i])) {
			return false
		}
	}
	return true
}

// runConformance registers one runtime's fixtures in its sidecar and checks
// both surfaces of the protocol against them.
func runConformance(t *testing.T, client *sidecar.Client, fx affineFixture) {
	registerAffine(t, client, fx)
	if fx.AllDTypes != nil {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if err := client.RegisterModel(ctx, "alldtypes/", fx.AllDTypes, ""); err != nil {
			t.Fatalf("register alldtypes/: %v", err)
		}
	}
	srv := kserve.New(kserve.Options{})
	srv.SetBackend(client)
	t.Run("HTTP", func(t *testing.T) { runHTTPConformance(t, srv, fx) })
	t.Run("gRPC", func(t *testing.T) { runGRPCConformance(t, srv, fx) })
}

// runHTTPConformance checks every HTTP endpoint against a sidecar holding
// the affine models of one runtime.
func runHTTPConformance(t *testing.T, srv *kserve.Server, fx affineFixture) {
	url := serveHTTP(t, srv)

	for _, path := range []string{"/v2/health/live", "/v2/health/ready", "/v2/models/affine/ready", "/v2/models/affine/versions/v9/ready", "/v2/models/affine/versions/v10/ready"} {
		if code, body := call(t, "GET", url+path, ""); code != 200 || len(body) != 0 {
			t.Errorf("GET %s: %d %q, want 200 and no body", path, code, body)
		}
	}
	if code, _ := call(t, "GET", url+"/v2/models/affine/versions/v1/ready", ""); code != 404 {
		t.Errorf("ready of a missing version: %d, want 404", code)
	}

	code, body := call(t, "GET", url+"/v2/models/affine", "")
	if code != 200 {
		t.Fatalf("model metadata: %d %s", code, body)
	}
	var md kserve.ModelMetadata
	decodeJSON(t, body, &md)
	if md.Name != "affine" || !slices.Equal(md.Versions, []string{"v9", "v10"}) || md.Platform != fx.Platform || len(md.Inputs) != 1 || (len(md.Outputs) == 0 && !fx.Positional) {
		t.Fatalf("model metadata %s: want affine, versions [v9 v10], platform %s, one input", body, fx.Platform)
	}
	if !fx.Positional && (md.Inputs[0].Name != "x" || md.Inputs[0].Datatype != "FP32" || !slices.Equal(md.Inputs[0].Shape, []int64{-1, 3})) {
		t.Errorf("model metadata input %+v, want x FP32 [-1,3]", md.Inputs[0])
	}

	x := []float64{0.5, -1, 2, 3, 4.25, -6}
	for _, c := range []struct{ path, version string }{
		{"/v2/models/affine/infer", "v10"},
		{"/v2/models/affine/versions/v10/infer", "v10"},
		{"/v2/models/affine/versions/v9/infer", "v9"},
	} {
		body := fmt.Sprintf(`{"id":"req-%s","inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[[0.5,-1,2],[3,4.25,-6]]}]}`, c.version)
		code, b := call(t, "POST", url+c.path, body)
		if code != 200 {
			t.Errorf("POST %s: %d %s", c.path, code, b)
			continue
		}
		var r inferResponse
		decodeJSON(t, b, &r)
		if r.ModelName != "affine" || r.ModelVersion != c.version || r.ID != "req-"+c.version || len(r.Outputs) != 1 {
			t.Errorf("POST %s: %s: want model affine version %s, the id, one output", c.path, b, c.version)
			continue
		}
		out := r.Outputs[0]
		if len(md.Outputs) > 0 && out.Name != md.Outputs[0].Name {
			t.Errorf("POST %s: output named %q, model metadata names it %q", c.path, out.Name, md.Outputs[0].Name)
		}
		if out.Datatype != "FP32" || !slices.Equal(out.Shape, []int64{2, 3}) || !close32(out.Data, affineWant(c.version, x)) {
			t.Errorf("POST %s: output %+v, want FP32 [2,3] %v", c.path, out, affineWant(c.version, x))
		}
		// The output asked by name.
		req := fmt.Sprintf(`{"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[0.5,-1,2,3,4.25,-6]}],"outputs":[{"name":%q}]}`, out.Name)
		if code, b := call(t, "POST", url+c.path, req); code != 200 {
			t.Errorf("POST %s asking for output %q: %d %s", c.path, out.Name, code, b)
		}
	}

	bad := func(dt, data string) string {
		return fmt.Sprintf(`{"inputs":[{"name":"x","shape":[2,3],"datatype":%q,"data":%s}]}`, dt, data)
	}
	// A datatype the model cannot take. TorchScript declares no input
	// dtypes (the model's own check would be a 500, as for FP64), so for
	// PyTorch one libtorch cannot take at all.
	odd, oddData := "BOOL", "[true,false,true,false,true,false]"
	if fx.Positional {
		odd, oddData = "UINT16", "[1,2,3,4,5,6]"
	}
	code, body = call(t, "POST", url+"/v2/models/affine/infer", bad(odd, oddData))
	wantError(t, odd+" input", code, body, 400, `"x"`, odd)
	code, body = call(t, "POST", url+"/v2/models/affine/infer", bad("FP32", "[1,2,3]"))
	wantError(t, "short data", code, body, 400, `"x"`)
	code, body = call(t, "POST", url+"/v2/models/affine/versions/v3/infer", bad("FP32", "[1,2,3,4,5,6]"))
	wantError(t, "missing version", code, body, 404, "v3")
	code, body = call(t, "POST", url+"/v2/models/affine/infer", `{"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]}],"outputs":[{"name":"nosuch"}]}`)
	wantError(t, "unknown requested output", code, body, 400, "nosuch")
	if fx.AllDTypes != nil {
		checkAllDTypes(t, url, fx)
	}
	if !fx.Positional {
		// A dtype the model cannot take: INPUT_PARSING from the runtime's
		// signature check, a 400 naming the input.
		code, body = call(t, "POST", url+"/v2/models/affine/infer", bad("FP64", "[1,2,3,4,5,6]"))
		wantError(t, "FP64 for an FP32 input", code, body, 400, "x", "affine/v10/", "FLOAT is FP32")
	}
}

// allDTypesData are values at the edges of each datatype, as JSON text
// (an INT64 beyond float64's exact integers included).
var allDTypesData = []struct{ dtype, datatype, data string }{
	{"double", "FP64", "[[1e-300,-2.5],[3.141592653589793,1e+300]]"},
	{"float", "FP32", "[[1.5,-2.25],[3.4028235e+38,1e-07]]"},
	{"int8", "INT8", "[[-128,127],[0,-1]]"},
	{"int16", "INT16", "[[-32768,32767],[1,2]]"},
	{"int32", "INT32", "[[-2147483648,2147483647],[3,4]]"},
	{"int64", "INT64", "[[-9223372036854775808,9223372036854775807],[9007199254740993,5]]"},
}

// checkAllDTypes sends every datatype the sidecar carries through the
// identity model and wants each value back exactly.
func checkAllDTypes(t *testing.T, url string, fx affineFixture) {
	t.Helper()
	var inputs []string
	for _, d := range allDTypesData {
		inputs = append(inputs, fmt.Sprintf(`{"name":%q,"shape":[2,2],"datatype":%q,"data":%s}`, fx.InName(d.dtype), d.datatype, d.data))
	}
	code, body := call(t, "POST", url+"/v2/models/alldtypes/infer", `{"inputs":[`+strings.Join(inputs, ",")+`]}`)
	if code != 200 {
		t.Fatalf("alldtypes infer: %d %s", code, body)
	}
	var r struct {
		ModelName string `json:"model_name"`
		Outputs   []struct {
			Name     string          `json:"name"`
			Shape    []int64         `json:"shape"`
			Datatype string          `json:"datatype"`
			Data     json.RawMessage `json:"data"`
		} `json:"outputs"`
	}
	decodeJSON(t, body, &r)
	if len(r.Outputs) != len(allDTypesData) {
		t.Fatalf("alldtypes: %d outputs, want %d: %s", len(r.Outputs), len(allDTypesData), body)
	}
	for i, d := range allDTypesData {
		j := i
		if fx.OutName != nil {
			j = slices.IndexFunc(r.Outputs, func(o struct {
				Name     string          `json:"name"`
				Shape    []int64         `json:"shape"`
				Datatype string          `json:"datatype"`
				Data     json.RawMessage `json:"data"`
			}) bool {
				return o.Name == fx.OutName(d.dtype)
			})
			if j < 0 {
				t.Errorf("alldtypes: no output %q in %s", fx.OutName(d.dtype), body)
				continue
			}
		}
		o := r.Outputs[j]
		flat := strings.NewReplacer("[[", "[", "]]", "]", "],[", ",").Replace(d.data)
		if o.Datatype != d.datatype || !slices.Equal(o.Shape, []int64{2, 2}) || string(o.Data) != flat {
			t.Errorf("alldtypes %s: output %s %v %s, want %s [2,2] %s", d.dtype, o.Datatype, o.Shape, o.Data, d.datatype, flat)
		}
	}
}
