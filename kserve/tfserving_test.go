package kserve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// tfServingServer serves TF Serving's predict over the example bucket's
// models and the conformance fixtures: affine/1/ (one input x [-1,3], one
// output y) and alldtypes/1/ (six inputs, six outputs).
func tfServingServer(t *testing.T) (*kserve.Server, *sidecar.Client, string) {
	t.Helper()
	client := tfSidecar(t)
	m, err := tfsave.BuildConformanceModels(tfsave.Options{FunctionCall: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for path, files := range map[string]map[string][]byte{"affine/1/": m.AffineV1, "alldtypes/1/": m.AllDTypes} {
		if err := client.RegisterModel(ctx, path, files, ""); err != nil {
			t.Fatalf("register %s: %v", path, err)
		}
	}
	srv := kserve.New(kserve.Options{})
	srv.SetBackend(client)
	mux := http.NewServeMux()
	mux.Handle("/v2/", srv.Handler())
	mux.Handle("POST /v1/models/", srv.TFServingPredictHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return srv, client, hs.URL
}

// asRows turns a columnar answer's "outputs" into the row form's
// "predictions": the value itself for one output, else one object per
// row.
func asRows(t *testing.T, outputs any) any {
	t.Helper()
	m, ok := outputs.(map[string]any)
	if !ok {
		return outputs
	}
	var rows []any
	for name, v := range m {
		col := v.([]any)
		if rows == nil {
			rows = make([]any, len(col))
			for i := range rows {
				rows[i] = map[string]any{}
			}
		}
		for i, r := range col {
			rows[i].(map[string]any)[name] = r
		}
	}
	return rows
}

// TF Serving's row form ("instances" -> "predictions") answers what the
// columnar form answers, named and unnamed, one output and several.
func TestTFServingInstances(t *testing.T) {
	_, _, url := tfServingServer(t)
	for _, c := range []struct {
		what, model, columnar, rows string
	}{
		{"one unnamed input", "affine", `{"inputs": [[1, 2, 3], [4, 5, 6]]}`, `{"instances": [[1, 2, 3], [4, 5, 6]]}`},
		{"one named input", "affine", `{"inputs": {"x": [[1, 2, 3], [4, 5, 6]]}}`, `{"signature_name": "serving_default", "instances": [{"x": [1, 2, 3]}, {"x": [4, 5, 6]}]}`},
		{"one row", "affine", `{"inputs": {"x": [[0.5, -1, 2]]}}`, `{"instances": [{"x": [0.5, -1, 2]}]}`},
		{"three named inputs", "pctr/versions/v1", `{"inputs": {"ad_id": [[1], [2]], "publisher_id": [[3], [4]], "dense": [[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1, 2, 3, 4, 5, 6]]}}`,
			`{"instances": [{"ad_id": [1], "publisher_id": [3], "dense": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}, {"dense": [1, 2, 3, 4, 5, 6], "publisher_id": [4], "ad_id": [2]}]}`},
		{"six outputs", "alldtypes", `{"inputs": {"double_in": [[1, 2]], "float_in": [[3, 4]], "int8_in": [[-5, 6]], "int16_in": [[7, 8]], "int32_in": [[9, 10]], "int64_in": [[11, 12]]}}`,
			`{"instances": [{"double_in": [1, 2], "float_in": [3, 4], "int8_in": [-5, 6], "int16_in": [7, 8], "int32_in": [9, 10], "int64_in": [11, 12]}]}`},
	} {
		code, b := call(t, http.MethodPost, url+"/v1/models/"+c.model+":predict", c.columnar)
		if code != http.StatusOK {
			t.Fatalf("%s: columnar: %d %s", c.what, code, b)
		}
		var col struct{ Outputs any }
		decodeJSON(t, b, &col)
		code, b = call(t, http.MethodPost, url+"/v1/models/"+c.model+":predict", c.rows)
		if code != http.StatusOK {
			t.Fatalf("%s: rows: %d %s", c.what, code, b)
		}
		var rows struct{ Predictions any }
		decodeJSON(t, b, &rows)
		if want := asRows(t, col.Outputs); rows.Predictions == nil || !reflect.DeepEqual(rows.Predictions, want) {
			t.Errorf("%s: predictions %v, want %v (the columnar answer's rows)", c.what, rows.Predictions, want)
		}
	}
	// The affine model's values, so that the comparison above compares
	// something: y = 2x+1.
	code, b := call(t, http.MethodPost, url+"/v1/models/affine:predict", `{"instances": [[1, 2, 3]]}`)
	if code != http.StatusOK || string(b) != `{"predictions":[[3,5,7]]}`+"\n" {
		t.Errorf("affine rows: %d %s", code, b)
	}
}

func TestTFServingInstancesErrors(t *testing.T) {
	_, _, url := tfServingServer(t)
	for _, c := range []struct {
		what, path, body string
		code             int
		msg              string
	}{
		{"unnamed, three inputs", "pctr/versions/v1:predict", `{"instances": [[1], [2]]}`, 400, "need a model of one input; the model has 3"},
		{"rows name other inputs", "pctr/versions/v1:predict", `{"instances": [{"ad_id": [1], "publisher_id": [3], "dense": [0, 0, 0, 0, 0, 0]}, {"ad_id": [1], "publisher": [3], "dense": [0, 0, 0, 0, 0, 0]}]}`, 400, `names input "publisher"`},
		{"row missing an input", "pctr/versions/v1:predict", `{"instances": [{"ad_id": [1], "publisher_id": [3], "dense": [0, 0, 0, 0, 0, 0]}, {"ad_id": [1], "dense": [0, 0, 0, 0, 0, 0]}]}`, 400, `"instances"[1] names 2 inputs`},
		{"rows of two forms", "affine:predict", `{"instances": [[1, 2, 3], {"x": [1, 2, 3]}]}`, 400, "every row takes one form"},
		{"ragged rows", "affine:predict", `{"instances": [[1, 2, 3], [1, 2]]}`, 400, "not rectangular"},
		{"unknown input", "affine:predict", `{"instances": [{"z": [1, 2, 3]}]}`, 400, `input "z" is not an input of the model`},
		{"empty", "affine:predict", `{"instances": []}`, 400, "empty list"},
		{"not a list", "affine:predict", `{"instances": {"x": [1, 2, 3]}}`, 400, "not a list of rows"},
		{"both forms", "affine:predict", `{"instances": [[1, 2, 3]], "inputs": [[1, 2, 3]]}`, 400, "give one"},
		{"neither", "affine:predict", `{"signature_name": "serving_default"}`, 400, "neither"},
		{"classify", "affine:classify", `{"examples": [{"x": 1}]}`, 501, ":classify is not supported"},
		{"regress", "affine/versions/1:regress", `{"examples": [{"x": 1}]}`, 501, ":regress is not supported"},
	} {
		code, b := call(t, http.MethodPost, url+"/v1/models/"+c.path, c.body)
		wantError(t, c.what, code, b, c.code, c.msg)
		var e map[string]any
		if err := json.Unmarshal(b, &e); err != nil || len(e) != 1 || e["error"] == nil {
			t.Errorf("%s: %s is not TF Serving's error shape {\"error\": ...}", c.what, b)
		}
	}
}

// BOOL, FP16 and BYTES in TF Serving's REST forms: true/false, numbers,
// strings and {"b64": ...}; a BYTES output whose name ends in "_bytes"
// comes back as {"b64": ...}, as TF Serving writes it.
func TestTFServingRESTDTypes(t *testing.T) {
	files, err := tfsave.V2DTypesModel(tfsave.Options{FunctionCall: true}, tensor.Bool, tensor.Half, tensor.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	b := tfsave.NewBuilderWith(tfsave.Options{FunctionCall: true})
	s := b.Placeholder("serving_default_s", tensor.Bytes, []int64{-1})
	b.Signature("serving_default", map[string]string{"s": s}, map[string]string{"s_bytes": b.OpNamed("s_id", "Identity", []string{s}, nil)})
	raw, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	_, client, url := tfServingServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for path, f := range map[string]map[string][]byte{"v2types/1/": files, "raw/1/": raw} {
		if err := client.RegisterModel(ctx, path, f, ""); err != nil {
			t.Fatal(err)
		}
	}
	code, got := call(t, http.MethodPost, url+"/v1/models/v2types:predict",
		`{"instances": [{"bool_in": [true, false], "fp16_in": [1, -2], "bytes_in": ["ab", {"b64": "w6k="}]}]}`)
	var rows struct{ Predictions []map[string]any }
	decodeJSON(t, got, &rows)
	want := map[string]any{"bool_out": []any{true, false}, "fp16_out": []any{1.0, -2.0}, "bytes_out": []any{"ab", "é"},
		"bool_as_float": []any{1.0, 0.0}, "fp16_as_float": []any{1.0, -2.0}}
	if code != http.StatusOK || len(rows.Predictions) != 1 || !reflect.DeepEqual(rows.Predictions[0], want) {
		t.Fatalf("v2types: %d %s, want one row %v", code, got, want)
	}
	code, got = call(t, http.MethodPost, url+"/v1/models/raw:predict", `{"inputs": {"s": [{"b64": "AP8="}, "x"]}}`)
	if code != http.StatusOK || string(got) != `{"outputs":[{"b64":"AP8="},{"b64":"eA=="}]}`+"\n" {
		t.Fatalf("raw: %d %s", code, got)
	}
	code, got = call(t, http.MethodPost, url+"/v1/models/raw:predict", `{"inputs": {"s": [{"b64": "%%%"}]}}`)
	wantError(t, "bad base64", code, got, http.StatusBadRequest, `"b64" is not base64`)
	code, got = call(t, http.MethodPost, url+"/v1/models/v2types:predict", `{"instances": [{"bool_in": [1, 0], "fp16_in": [1, -2], "bytes_in": ["a", "b"]}]}`)
	wantError(t, "bool as a number", code, got, http.StatusBadRequest, "is not true or false")
}

// REST's numeric versions resolve as gRPC's model_spec.version does (one
// function, tfServingVersion; TestTFServingNumericVersionAndObservation has
// pctr's /versions/1 as "v1"): affine's /versions/1 is its "1", and a
// number no version has is gRPC's 404, naming the versions there are.
func TestTFServingRESTNumericVersion(t *testing.T) {
	_, _, url := tfServingServer(t)
	if code, b := call(t, http.MethodPost, url+"/v1/models/affine/versions/1:predict", `{"instances": [[1, 2, 3]]}`); code != http.StatusOK || string(b) != `{"predictions":[[3,5,7]]}`+"\n" {
		t.Errorf("affine /versions/1: %d %s", code, b)
	}
	code, b := call(t, http.MethodPost, url+"/v1/models/pctr/versions/9:predict", `{"inputs": {"ad_id": [[1]], "publisher_id": [[3]], "dense": [[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]]}}`)
	wantError(t, "pctr /versions/9", code, b, http.StatusNotFound, "no version 9 (versions: v1, v2)")
}

// countingBackend is the real sidecar client, counting its GetModels.
type countingBackend struct {
	*sidecar.Client
	models atomic.Int64
}

func (c *countingBackend) Models(ctx context.Context, path string) ([]sidecar.ModelInfo, error) {
	c.models.Add(1)
	return c.Client.Models(ctx, path)
}

// TF Serving REST predict reads the model's signature from the cache
// output aliases use (one GetModels a TTL), not from a GetModels a request.
func TestTFServingRESTSignatureCached(t *testing.T) {
	_, client, _ := tfServingServer(t)
	b := &countingBackend{Client: client}
	srv := kserve.New(kserve.Options{})
	srv.SetBackend(b)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/models/", srv.TFServingPredictHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	const n = 20
	start := time.Now()
	for range n {
		if code, out := call(t, http.MethodPost, hs.URL+"/v1/models/affine:predict", `{"instances": [[1, 2, 3]]}`); code != http.StatusOK {
			t.Fatalf("predict: %d %s", code, out)
		}
	}
	// At most one GetModels per 100 ms TTL the loop lasted (and one more
	// for the edge), so no bound on a slow machine; a GetModels a request
	// is n where the loop takes the few ms it does.
	if got, most := b.models.Load(), int64(time.Since(start)/(100*time.Millisecond))+2; got > most {
		t.Errorf("%d predicts asked GetModels %d times, want at most %d (one a TTL)", n, got, most)
	}
}

// TF Serving REST reads its body as the v2 API does (Server.readBody): a
// body over MaxRequestBytes is a 413 in TF Serving's error shape.
func TestTFServingRESTBodyLimit(t *testing.T) {
	_, client, _ := tfServingServer(t)
	srv := kserve.New(kserve.Options{MaxRequestBytes: 64})
	srv.SetBackend(client)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/models/", srv.TFServingPredictHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	code, b := call(t, http.MethodPost, hs.URL+"/v1/models/affine:predict", `{"instances": [[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3]]}`)
	wantError(t, "body over the limit", code, b, http.StatusRequestEntityTooLarge, "larger than 64 bytes")
}
