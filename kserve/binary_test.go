package kserve_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"testing"

	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// binaryCall posts a binary tensor data body (JSON header, then data) the
// way Triton's and KServe's Python clients do, and splits the answer.
func binaryCall(t *testing.T, url string, header string, data []byte) (int, []byte, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(append([]byte(header), data...)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(kserve.HeaderContentLength, strconv.Itoa(len(header)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	h := resp.Header.Get(kserve.HeaderContentLength)
	if h == "" {
		return resp.StatusCode, body, nil, resp.Header
	}
	n, err := strconv.Atoi(h)
	if err != nil || n > len(body) {
		t.Fatalf("%s: %q for a %d-byte body", kserve.HeaderContentLength, h, len(body))
	}
	return resp.StatusCode, body[:n], body[n:], resp.Header
}

func f32le(v ...float32) []byte { return le32(v) }

func le64i(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

type v2Output struct {
	Name       string         `json:"name"`
	Shape      []int64        `json:"shape"`
	Datatype   string         `json:"datatype"`
	Parameters map[string]any `json:"parameters"`
	Data       []float64      `json:"data"`
}

type v2Answer struct {
	ModelName    string     `json:"model_name"`
	ModelVersion string     `json:"model_version"`
	Outputs      []v2Output `json:"outputs"`
}

// The binary tensor data extension, both directions: binary inputs give
// the answers their JSON form gives; binary outputs carry the bytes of
// the JSON form's values.
func TestHTTPBinaryTensorData(t *testing.T) {
	_, _, base := tfServingServer(t)
	url := base + "/v2/models/affine/infer"
	code, b := call(t, http.MethodPost, url, `{"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]}]}`)
	if code != http.StatusOK {
		t.Fatalf("JSON: %d %s", code, b)
	}
	var want v2Answer
	decodeJSON(t, b, &want)

	// Binary in, JSON out (tritonclient.http with binary_data=True on the
	// input, binary_data=False on the output).
	code, hdr, rest, h := binaryCall(t, url, `{"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "parameters": {"binary_data_size": 24}}], "outputs": [{"name": "y", "parameters": {"binary_data": false}}]}`, f32le(1, 2, 3, 4, 5, 6))
	var got v2Answer
	if code != http.StatusOK || len(rest) != 0 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("binary in: %d %s %q", code, hdr, rest)
	}
	decodeJSON(t, hdr, &got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("binary in: %+v, want %+v", got, want)
	}

	// Binary in and out (the clients' default for outputs: binary_data
	// true), and binary_data_output for every output.
	for _, header := range []string{
		`{"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "parameters": {"binary_data_size": 24}}], "outputs": [{"name": "y", "parameters": {"binary_data": true}}]}`,
		`{"parameters": {"binary_data_output": true}, "inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "parameters": {"binary_data_size": 24}}]}`,
	} {
		code, hdr, rest, h = binaryCall(t, url, header, f32le(1, 2, 3, 4, 5, 6))
		if code != http.StatusOK || h.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("binary out: %d %s", code, hdr)
		}
		got = v2Answer{}
		decodeJSON(t, hdr, &got)
		o := got.Outputs[0]
		wantRaw := f32le(3, 5, 7, 9, 11, 13)
		if len(got.Outputs) != 1 || o.Data != nil || o.Parameters["binary_data_size"] != float64(len(wantRaw)) || !bytes.Equal(rest, wantRaw) ||
			!reflect.DeepEqual(o.Shape, want.Outputs[0].Shape) || o.Datatype != "FP32" {
			t.Fatalf("binary out (%s): %s + %x, want the bytes of %v", header, hdr, rest, want.Outputs[0].Data)
		}
	}

	// JSON in, binary out: a request without the header may ask for it.
	code, hdr, rest, _ = binaryCall(t, url, `{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [0, 1, 2]}], "outputs": [{"name": "y", "parameters": {"binary_data": true}}]}`, nil)
	if code != http.StatusOK || !bytes.Equal(rest, f32le(1, 3, 5)) {
		t.Fatalf("JSON in, binary out: %d %s %x", code, hdr, rest)
	}

	// Several inputs, some binary and some JSON, in input order (pctr:
	// INT64 ad_id and publisher_id, FP32 dense).
	pctr := base + "/v2/models/pctr/infer"
	code, b = call(t, http.MethodPost, pctr, `{"inputs": `+pctrInputs+`}`)
	if code != http.StatusOK {
		t.Fatalf("the JSON form: %d %s", code, b)
	}
	want = v2Answer{}
	decodeJSON(t, b, &want)
	data := append(append(le64i(1, 2), le64i(3, 4)...), f32le(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1, 2, 3, 4, 5, 6)...)
	code, hdr, rest, _ = binaryCall(t, pctr, `{"inputs": [
		{"name": "ad_id", "shape": [2, 1], "datatype": "INT64", "parameters": {"binary_data_size": 16}},
		{"name": "publisher_id", "shape": [2, 1], "datatype": "INT64", "parameters": {"binary_data_size": 16}},
		{"name": "dense", "shape": [2, 6], "datatype": "FP32", "parameters": {"binary_data_size": 48}}]}`, data)
	got = v2Answer{}
	decodeJSON(t, hdr, &got)
	if code != http.StatusOK || len(rest) != 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("pctr binary: %d %s, want %s", code, hdr, b)
	}
	mixed := append(le64i(1, 2), f32le(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1, 2, 3, 4, 5, 6)...)
	code, hdr, _, _ = binaryCall(t, pctr, `{"inputs": [
		{"name": "ad_id", "shape": [2, 1], "datatype": "INT64", "parameters": {"binary_data_size": 16}},
		{"name": "publisher_id", "shape": [2, 1], "datatype": "INT64", "data": [3, 4]},
		{"name": "dense", "shape": [2, 6], "datatype": "FP32", "parameters": {"binary_data_size": 48}}]}`, mixed)
	got = v2Answer{}
	decodeJSON(t, hdr, &got)
	if code != http.StatusOK || !reflect.DeepEqual(got, want) {
		t.Fatalf("pctr mixed: %d %s, want %s", code, hdr, b)
	}

	for _, c := range []struct {
		what, header string
		data         []byte
		msg          string
	}{
		{"short data", `{"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "parameters": {"binary_data_size": 24}}]}`, f32le(1, 2), "24 but 8 bytes of binary data remain"},
		{"size not the shape's", `{"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]}`, f32le(1, 2), "binary data holds 8 bytes, the shape and datatype need 24"},
		{"bytes left over", `{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "parameters": {"binary_data_size": 12}}]}`, f32le(1, 2, 3, 4), "4 bytes of binary data after"},
		{"data and size", `{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3], "parameters": {"binary_data_size": 12}}]}`, f32le(1, 2, 3), `both "data" and a "binary_data_size"`},
		{"negative size", `{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "parameters": {"binary_data_size": -12}}]}`, f32le(1, 2, 3), "want a non-negative integer"},
		{"binary_data not a boolean", `{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}], "outputs": [{"name": "y", "parameters": {"binary_data": 1}}]}`, nil, `"binary_data" is 1, want true or false`},
	} {
		code, hdr, _, _ := binaryCall(t, url, c.header, c.data)
		wantError(t, c.what, code, hdr, http.StatusBadRequest, c.msg)
	}
	// A header longer than the body, and one that is not a number.
	for _, h := range []string{"99999", "x"} {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{}`)))
		req.Header.Set(kserve.HeaderContentLength, h)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantError(t, "header "+h, resp.StatusCode, b, http.StatusBadRequest, kserve.HeaderContentLength)
	}

	// Server metadata declares the extension.
	code, b = call(t, http.MethodGet, base+"/v2", "")
	var md struct{ Extensions []string }
	if err := json.Unmarshal(b, &md); err != nil || code != http.StatusOK || !contains(md.Extensions, kserve.ExtBinaryTensorData) || !contains(md.Extensions, kserve.ExtSequence) || contains(md.Extensions, kserve.ExtModelRepository) {
		t.Fatalf("server metadata: %d %s", code, b)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// BYTES (binary content a JSON string cannot carry), BOOL and FP16 travel
// as binary data both ways through a TensorFlow model that returns its
// inputs unchanged.
func TestHTTPBinaryV2DTypes(t *testing.T) {
	files, err := tfsave.V2DTypesModel(tfsave.Options{FunctionCall: true}, tensor.Bool, tensor.Half, tensor.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	client := tfSidecar(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := client.RegisterModel(ctx, "v2types/1/", files, ""); err != nil {
		t.Fatal(err)
	}
	srv := kserve.New(kserve.Options{})
	srv.SetBackend(client)
	url := serveHTTP(t, srv) + "/v2/models/v2types/infer"
	bytesIn := []byte{3, 0, 0, 0, 'a', 0, 0xff, 0, 0, 0, 0} // "a\x00\xff", ""
	boolIn := []byte{1, 0}                                  // true, false
	halfIn := []byte{0x00, 0x3c, 0x00, 0xc0}                // 1, -2
	data := append(append(append([]byte{}, boolIn...), halfIn...), bytesIn...)
	header := `{"parameters": {"binary_data_output": true}, "inputs": [
		{"name": "bool_in", "shape": [1, 2], "datatype": "BOOL", "parameters": {"binary_data_size": 2}},
		{"name": "fp16_in", "shape": [1, 2], "datatype": "FP16", "parameters": {"binary_data_size": 4}},
		{"name": "bytes_in", "shape": [1, 2], "datatype": "BYTES", "parameters": {"binary_data_size": 11}}],
		"outputs": [{"name": "bool_out"}, {"name": "fp16_out"}, {"name": "bytes_out"}, {"name": "fp16_as_float", "parameters": {"binary_data": false}}]}`
	code, hdr, rest, _ := binaryCall(t, url, header, data)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, hdr)
	}
	var got v2Answer
	decodeJSON(t, hdr, &got)
	want := [][]byte{boolIn, halfIn, bytesIn}
	off := 0
	for i, o := range got.Outputs[:3] {
		n := int(o.Parameters["binary_data_size"].(float64))
		if !bytes.Equal(rest[off:off+n], want[i]) {
			t.Errorf("%s: %x, want %x", o.Name, rest[off:off+n], want[i])
		}
		off += n
	}
	if off != len(rest) || got.Outputs[3].Name != "fp16_as_float" || !reflect.DeepEqual(got.Outputs[3].Data, []float64{1, -2}) {
		t.Fatalf("answer %s + %d bytes", hdr, len(rest))
	}
}
