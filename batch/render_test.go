package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/tensor"
)

func TestRenderDesignFormat(t *testing.T) {
	results := []Result{
		{ModelPath: "pcvr_v1/", Tensors: []tensor.Tensor{
			tensor.New("PartitionedCall:0", []int64{2, 1}, []float32{3.14, 0.5}),
			tensor.New("ids", []int64{}, []int64{9007199254740993}),
		}},
		{ModelPath: "gone/", Err: inferr.Errorf(inferr.ModelNotFound, "model gone/ is not registered")},
	}
	// Written by hand from the JSON contract in docs/architecture.md: key
	// order, FLOAT widened to float64.
	want := `{"response":[` +
		`{"model_path":"pcvr_v1/","tensors":[` +
		`{"tensor_name":"PartitionedCall:0","tensor_shape":[2,1],"data_type":"FLOAT","tensor_content":[3.140000104904175,0.5]},` +
		`{"tensor_name":"ids","tensor_shape":[],"data_type":"INT64","tensor_content":[9007199254740993]}]},` +
		`{"model_path":"gone/","error":{"error_type":"MODEL_NOT_FOUND","description":"model gone/ is not registered"}}]}`
	if got := string(Render(results)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestRenderEveryErrorType(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{inferr.Errorf(inferr.InputParsing, "bad shape"), "INPUT_PARSING"},
		{inferr.Errorf(inferr.ModelNotFound, "no model m/"), "MODEL_NOT_FOUND"},
		{inferr.Errorf(inferr.ModelExecution, "onnx: %w", errors.New("bad node")), "MODEL_EXECUTION"},
		{inferr.Errorf(inferr.OutputParsing, "output y"), "OUTPUT_PARSING"},
		{inferr.Errorf(inferr.GRPC, "sidecar unreachable"), "GRPC"},
		{inferr.Errorf(inferr.Unknown, "strange"), "UNKNOWN"},
		{errors.New("untyped"), "UNKNOWN"},
		{fmt.Errorf("predict: %w", context.DeadlineExceeded), "GRPC"},
		{fmt.Errorf("wrapped: %w", inferr.Errorf(inferr.ModelNotFound, "inner")), "MODEL_NOT_FOUND"},
	}
	for _, c := range cases {
		for _, batchLevel := range []bool{false, true} {
			var out []byte
			if batchLevel {
				out = AppendBatchError(nil, c.err)
			} else {
				out = Render([]Result{{ModelPath: "m/", Err: c.err}})
			}
			var resp struct {
				Response []map[string]json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.Response) != 1 {
				t.Fatalf("%s is not a one-entry response: %v", out, err)
			}
			entry := resp.Response[0]
			var e struct {
				ErrorType   string `json:"error_type"`
				Description string `json:"description"`
			}
			if err := json.Unmarshal(entry["error"], &e); err != nil {
				t.Fatalf("%s: no error object: %v", out, err)
			}
			if e.ErrorType != c.want || e.Description != c.err.Error() {
				t.Errorf("%s: got %q %q, want %q %q", out, e.ErrorType, e.Description, c.want, c.err.Error())
			}
			_, hasPath := entry["model_path"]
			if hasPath == batchLevel || len(entry) != 1+btoi(!batchLevel) {
				t.Errorf("%s: keys %v (batch-level %v)", out, keys(entry), batchLevel)
			}
			// And back: the type and description survive ParseResponse.
			rs, err := ParseResponse(out)
			if batchLevel {
				if rs != nil || inferr.TypeOf(err).String() != c.want || err.Error() != c.err.Error() {
					t.Errorf("ParseResponse(%s) = %v, %v", out, rs, err)
				}
			} else if err != nil || len(rs) != 1 || rs[0].ModelPath != "m/" || inferr.TypeOf(rs[0].Err).String() != c.want || rs[0].Err.Error() != c.err.Error() {
				t.Errorf("ParseResponse(%s) = %+v, %v", out, rs, err)
			}
		}
	}
	if got := string(AppendBatchError(nil, nil)); !json.Valid([]byte(got)) || !strings.Contains(got, `"UNKNOWN"`) {
		t.Errorf("AppendBatchError(nil) = %s", got)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func keys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestRenderFloatsLikeEncodingJSON(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-6, 9.99999e-7, 1e-7, 1.5e-9, 1e20, 1e21, 123456789e15,
		math.MaxFloat64, math.SmallestNonzeroFloat64, -math.MaxFloat64, float64(float32(3.14)), float64(float32(0.1)),
		float64(math.MaxFloat32), float64(float32(1e-45)), 12345678901234567890, 0.000001234}
	for i := range 5000 {
		vals = append(vals, math.Float64frombits(uint64(i)*0x9E3779B97F4A7C15), float64(math.Float32frombits(uint32(i)*0x9E3779B9)))
	}
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, v); !bytes.Equal(got, want) {
			t.Errorf("appendFloat(%v) = %s, encoding/json says %s", v, got, want)
		}
	}
}

func TestRenderStringsLikeEncodingJSON(t *testing.T) {
	strs := []string{"", "plain/path/", `quo"te`, `back\slash`, "tab\tnew\nline\rret", "\x00\x01\x1f\x7f", "\b\f",
		"<script>&amp;</script>", "模型/😀", "line\u2028sep\u2029", "bad\xffutf8\xc3", "\xed\xa0\x80 surrogate", "é"}
	for _, s := range strs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSuffix(buf.String(), "\n")
		if got := string(appendString(nil, s)); got != want {
			t.Errorf("appendString(%q) = %s, encoding/json says %s", s, got, want)
		}
	}
}

func TestRenderNonFiniteIsBatchError(t *testing.T) {
	cases := []struct {
		name   string
		tensor tensor.Tensor
		parts  []string
	}{
		{"float NaN", tensor.New("PartitionedCall:0", []int64{3}, []float32{1, float32(math.NaN()), 2}), []string{"tensor_content[1]", "NaN"}},
		{"double +Inf", tensor.New("y", []int64{1}, []float64{math.Inf(1)}), []string{"tensor_content[0]", "+Inf"}},
		{"float -Inf", tensor.New("y", []int64{1, 1}, []float32{float32(math.Inf(-1))}), []string{"-Inf"}},
		{"no data", tensor.Tensor{Name: "y", Shape: []int64{1}}, []string{"six dtypes"}},
		{"unsupported data", tensor.Tensor{Name: "y", Shape: []int64{1}, Data: []string{"a"}}, []string{"six dtypes"}},
		{"shape mismatch", tensor.New("y", []int64{2, 2}, []int32{1, 2, 3}), []string{"[2,2] needs 4 values", "has 3"}},
		{"negative dim", tensor.New("y", []int64{-1}, []int32{1}), []string{"negative"}},
		{"overflowing shape", tensor.New("y", []int64{1 << 62, 4}, []int8{1}), []string{"overflows"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			results := []Result{
				{ModelPath: "ok/", Tensors: []tensor.Tensor{tensor.New("y", []int64{1}, []float64{1})}},
				{ModelPath: "ctr_v2/", Tensors: []tensor.Tensor{tensor.New("z", []int64{1}, []int8{1}), c.tensor}},
			}
			prefix := []byte("prefix:")
			out, err := AppendResponse(prefix, results)
			if inferr.TypeOf(err) != inferr.OutputParsing {
				t.Fatalf("error %v, want OUTPUT_PARSING", err)
			}
			for _, p := range append(c.parts, "response[1]", `model_path "ctr_v2/"`, "tensors[1]", `tensor_name "`+c.tensor.Name+`"`) {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("description %q does not mention %q", err, p)
				}
			}
			if string(out) != "prefix:" {
				t.Errorf("on failure AppendResponse returned %q, want dst unchanged", out)
			}
			rendered := Render(results)
			var resp struct {
				Response []map[string]json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal(rendered, &resp); err != nil || len(resp.Response) != 1 {
				t.Fatalf("Render fallback %s: %v", rendered, err)
			}
			if _, ok := resp.Response[0]["model_path"]; ok {
				t.Errorf("batch error %s has a model_path", rendered)
			}
			if _, err := ParseResponse(rendered); inferr.TypeOf(err) != inferr.OutputParsing || !strings.Contains(err.Error(), "ctr_v2/") {
				t.Errorf("ParseResponse of the batch error: %v", err)
			}
		})
	}
}

func TestRenderEmptyOutputs(t *testing.T) {
	// Runtimes may return empty tensors (a zero dimension); they render and
	// parse back even though requests may not contain them.
	results := []Result{{ModelPath: "m", Tensors: []tensor.Tensor{tensor.New("e", []int64{0, 3}, []float32{})}}}
	out := Render(results)
	if !json.Valid(out) || !bytes.Contains(out, []byte(`"tensor_shape":[0,3],"data_type":"FLOAT","tensor_content":[]`)) {
		t.Fatalf("rendered %s", out)
	}
	back, err := ParseResponse(out)
	if err != nil || !reflect.DeepEqual(back, results) {
		t.Fatalf("ParseResponse: %+v, %v", back, err)
	}
	if out := Render(nil); string(out) != `{"response":[]}` {
		t.Errorf("Render(nil) = %s", out)
	}
}

func TestRoundTripThroughParseResponse(t *testing.T) {
	doc := []byte(`{"request":[
		{"model_path":"mixed/","tensors":[
			{"tensor_name":"d","data_type":"DOUBLE","tensor_shape":[2,2],"tensor_content":["0.1", -1e-7, "1e21", 5e-324]},
			{"tensor_name":"f","data_type":"FLOAT","tensor_shape":[3],"tensor_content":["3.14", "-0", 1e-40]},
			{"tensor_name":"i8","data_type":"INT8","tensor_shape":[1],"tensor_content":[-128]},
			{"tensor_name":"i16","data_type":"INT16","tensor_shape":[1],"tensor_content":["32767"]},
			{"tensor_name":"i32","data_type":"INT32","tensor_shape":[1,1,1],"tensor_content":[-2147483648]},
			{"tensor_name":"i64","data_type":"INT64","tensor_shape":[],"tensor_content":["9007199254740993"]}]},
		{"model_path":"bad/","tensors":[{"tensor_name":"x","data_type":"INT8","tensor_shape":[1],"tensor_content":["300"]}]},
		{"model_path":"\u6a21\u578b/\"quoted\"\n","tensors":[{"tensor_name":"名前\u2028","data_type":"DOUBLE","tensor_shape":[1],"tensor_content":[2]}]},
		{"tensors":[]}
	]}`)
	entries := mustParse(t, doc)
	results := make([]Result, len(entries))
	for i, e := range entries {
		results[i] = Result(e)
	}
	out := Render(results)
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
	back, err := ParseResponse(out)
	if err != nil {
		t.Fatalf("ParseResponse: %v\n%s", err, out)
	}
	if len(back) != len(results) {
		t.Fatalf("%d results back, want %d", len(back), len(results))
	}
	for i := range results {
		got, want := back[i], results[i]
		if got.ModelPath != want.ModelPath || !reflect.DeepEqual(got.Tensors, want.Tensors) {
			t.Errorf("result %d: got %+v, want %+v", i, got, want)
		}
		if (got.Err == nil) != (want.Err == nil) || got.Err != nil && (got.Err.Error() != want.Err.Error() || inferr.TypeOf(got.Err) != inferr.TypeOf(want.Err)) {
			t.Errorf("result %d: error %v, want %v", i, got.Err, want.Err)
		}
	}
	// -0 keeps its sign through the round trip.
	if f := back[0].Tensors[1].Data.([]float32)[1]; !math.Signbit(float64(f)) {
		t.Errorf("-0 came back as %v", f)
	}
}

func TestParseResponseMalformed(t *testing.T) {
	for _, doc := range []string{
		``, `{}`, `{"response":{}}`, `{"response":[1]}`, `{"response":[{}]}`,
		`{"response":[{"model_path":"m"}]}`,
		`{"response":[{"model_path":"m","tensors":[],"error":{"error_type":"GRPC"}}]}`,
		`{"response":[{"model_path":"m","error":"x"}]}`,
		`{"response":[{"model_path":"m","error":{"description":"no type"}}]}`,
		`{"response":[{"model_path":"m","tensors":[{"tensor_name":"y","tensor_shape":[2],"data_type":"FLOAT","tensor_content":[1]}]}]}`,
		`{"response":[{"model_path":"m","tensors":[{"tensor_name":"y","tensor_shape":[-1],"data_type":"FLOAT","tensor_content":[1]}]}]}`,
		`{"response":[{"error":{"error_type":"GRPC","description":"a"}},{"error":{"error_type":"GRPC","description":"b"}}]}`,
	} {
		rs, err := ParseResponse([]byte(doc))
		if rs != nil || inferr.TypeOf(err) != inferr.OutputParsing || !strings.HasPrefix(err.Error(), "batch response") {
			t.Errorf("ParseResponse(%s) = %v, %v; want an OUTPUT_PARSING error", doc, rs, err)
		}
	}
}

func TestAppendResponseReusesBuffer(t *testing.T) {
	rs := benchResults(2, 8)
	first, err := AppendResponse(nil, rs)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 2*len(first))
	allocs := testing.AllocsPerRun(100, func() {
		buf, err = AppendResponse(buf[:0], rs)
	})
	if err != nil || !bytes.Equal(buf, first) {
		t.Fatalf("second render differs: %s", buf)
	}
	if allocs != 0 {
		t.Errorf("AppendResponse into a large enough buffer allocated %v times", allocs)
	}
}

// TestRenderV2OnlyDTypeFailsItsEntry: a model answering a dtype the batch
// JSON contract has no name for (the v2 API carries it) fails its own entry
// with OUTPUT_PARSING; the other entries of the batch are still answered.
func TestRenderV2OnlyDTypeFailsItsEntry(t *testing.T) {
	for _, c := range []struct {
		dtype  string
		tensor tensor.Tensor
	}{
		{"BOOL", tensor.New("y", []int64{1}, []bool{true})},
		{"FP16", tensor.New("y", []int64{1}, []tensor.Float16{0x3c00})},
		{"BYTES", tensor.New("y", []int64{1}, [][]byte{{1}})},
	} {
		t.Run(c.dtype, func(t *testing.T) {
			results := []Result{
				{ModelPath: "ok/", Tensors: []tensor.Tensor{tensor.New("y", []int64{1}, []float64{1})}},
				{ModelPath: "flags/", Tensors: []tensor.Tensor{tensor.New("z", []int64{1}, []int8{1}), c.tensor}},
			}
			out, err := AppendResponse(nil, results)
			if err != nil {
				t.Fatalf("AppendResponse: %v; want the batch answered", err)
			}
			got, err := ParseResponse(out)
			if err != nil || len(got) != 2 {
				t.Fatalf("ParseResponse(%s) = %d entries, %v", out, len(got), err)
			}
			if got[0].Err != nil || len(got[0].Tensors) != 1 {
				t.Errorf("entry 0: %+v, want its tensor", got[0])
			}
			if inferr.TypeOf(got[1].Err) != inferr.OutputParsing {
				t.Fatalf("entry 1 error %v, want OUTPUT_PARSING", got[1].Err)
			}
			for _, part := range []string{"tensors[1]", `tensor_name "y"`, "data_type " + c.dtype, "six dtypes"} {
				if !strings.Contains(got[1].Err.Error(), part) {
					t.Errorf("description %q does not mention %q", got[1].Err, part)
				}
			}
		})
	}
}

// A sequence error's class is rendered as error.sequence_error and parsed
// back; a bad value is refused, naming the field.
func TestSequenceErrorClassInBatchJSON(t *testing.T) {
	err := inferr.Wrap(inferr.ModelNotFound, &sequence.Error{Code: sequence.NotFound, Msg: "model \"m/\": gone"}, "")
	out := Render([]Result{{ModelPath: "m/", Err: err}})
	if !strings.Contains(string(out), `"sequence_error":"NOT_FOUND"`) {
		t.Fatalf("render %s has no sequence_error", out)
	}
	res, perr := ParseResponse(out)
	if perr != nil {
		t.Fatal(perr)
	}
	if c, ok := sequence.CodeOf(res[0].Err); !ok || c != sequence.NotFound || inferr.TypeOf(res[0].Err) != inferr.ModelNotFound {
		t.Fatalf("parsed back %v (class %v %v)", res[0].Err, c, ok)
	}
	if out := Render([]Result{{ModelPath: "m/", Err: inferr.Errorf(inferr.InputParsing, "x")}}); strings.Contains(string(out), "sequence_error") {
		t.Fatalf("a plain error got a sequence_error: %s", out)
	}
	bad := `{"response":[{"model_path":"m/","error":{"error_type":"MODEL_NOT_FOUND","description":"d","sequence_error":"GONE"}}]}`
	if _, perr := ParseResponse([]byte(bad)); perr == nil || !strings.Contains(perr.Error(), "sequence_error") {
		t.Fatalf("bad sequence_error: %v", perr)
	}
}
