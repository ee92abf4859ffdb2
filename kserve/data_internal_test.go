package kserve

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// A shape at the element cap with one value is refused before its 128 MiB
// are allocated.
func TestDecodeDataCountsBeforeAllocating(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := decodeData("[[1]]", tensor.Int64, tensor.DefaultMaxElements)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "holds 1 values") {
		t.Fatalf("err = %v, want a count mismatch", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("refusing the data allocated %d bytes", grew)
	}
}

// FuzzDecodeInferJSON: any body is a request whose every tensor is valid,
// or an error; never a panic.
func FuzzDecodeInferJSON(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5,6]]}]}`,
		`{"inputs":[{"name":"a","shape":[1],"datatype":"INT8","data":[-128]},{"name":"b","shape":[],"datatype":"INT64","data":[9223372036854775807]}],"outputs":[{"name":"y"}]}`,
		`{"parameters":{"a":1,"b":"x","c":true},"inputs":[{"name":"x","shape":[2],"datatype":"FP64","data":["1",[2]]}]}`,
		`{"inputs":[{"name":"x","shape":[1],"datatype":"BOOL","data":[true]}]}`,
		`{"inputs":[{"name":"x","shape":[3],"datatype":"INT16","data":[1.0,2e2,-3]}]}`,
		`{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":["[1,2]"]}]}`,
		`{"inputs":[{"name":"s","shape":[2,2],"datatype":"BYTES","data":[["a, ]b\"","\u00e9"],["","\u0000"]]}]}`,
		`{"inputs":[{"name":"h","shape":[3],"datatype":"FP16","data":[1,-65504,5.9604645e-08]},{"name":"u","shape":[1],"datatype":"UINT64","data":[18446744073709551615]}]}`,
		`{"inputs":[{"name":"u","shape":[2],"datatype":"UINT8","data":[255,1e2]},{"name":"b","shape":[2],"datatype":"BOOL","data":[false,true]}]}`,
	} {
		f.Add([]byte(seed))
	}
	s := New(Options{Limits: batch.Limits{MaxElements: 1 << 12, MaxTensors: 8}})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := s.decodeInferJSON(body)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that is not JSON: %q", body)
		}
		for _, in := range req.Inputs {
			if err := in.Validate(1 << 12); err != nil {
				t.Fatalf("accepted an invalid tensor: %v (body %q)", err, body)
			}
		}
	})
}

// Malformed raw BYTES and BOOL buffers are errors naming what is wrong; a
// huge element count with a small buffer is refused before the element
// slice is allocated.
func TestDecodeRawV2DTypesErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		d    tensor.DType
		n    int64
		want string
	}{
		{"BYTES length cut", []byte{1, 0, 0, 0, 'a', 2, 0}, tensor.Bytes, 2, "too few"},
		{"BYTES ends in a length", []byte{4, 0, 0, 0, 'a', 'b', 'c', 'd', 0}, tensor.Bytes, 2, "ends inside the length of BYTES element 1"},
		{"BYTES length beyond", []byte{9, 0, 0, 0, 'a', 0, 0, 0, 0}, tensor.Bytes, 2, "declares 9 bytes"},
		{"BYTES trailing", []byte{1, 0, 0, 0, 'a', 'b'}, tensor.Bytes, 1, "after the 1 BYTES elements"},
		{"BYTES count over buffer", []byte{0, 0, 0, 0}, tensor.Bytes, tensor.DefaultMaxElements, "too few"},
		{"BOOL not 0 or 1", []byte{1, 2}, tensor.Bool, 2, "byte 1 is 2"},
		{"FP16 odd", []byte{1, 2, 3}, tensor.Half, 2, "need 4"},
	} {
		_, err := decodeRaw(c.b, c.d, c.n)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	got, err := decodeRaw([]byte{2, 0, 0, 0, 0, 0xff, 0, 0, 0, 0}, tensor.Bytes, 2)
	if b, _ := got.([][]byte); err != nil || len(b) != 2 || string(b[0]) != "\x00\xff" || len(b[1]) != 0 {
		t.Errorf("raw BYTES: %q, %v", got, err)
	}
}

// An FP16 output has no typed contents field and the protocol forbids
// mixing forms: an answer to a typed request that holds one goes all raw.
func TestFP16OutputTurnsTheAnswerRaw(t *testing.T) {
	resp := &InferResponse{ModelName: "m", Outputs: []tensor.Tensor{
		tensor.New("b", []int64{2}, []bool{true, false}),
		tensor.New("h", []int64{2}, []tensor.Float16{0x3c00, 0x7e01}),
	}}
	out, err := encodeInferResponse(resp, false)
	if err != nil {
		t.Fatal(err)
	}
	raw := out.GetRawOutputContents()
	if len(raw) != 2 || string(raw[0]) != "\x01\x00" || string(raw[1]) != "\x00\x3c\x01\x7e" {
		t.Errorf("raw_output_contents % x, want both outputs raw", raw)
	}
	for _, o := range out.GetOutputs() {
		if o.GetContents() != nil {
			t.Errorf("output %s has typed contents besides raw ones", o.GetName())
		}
	}
	typed, err := encodeInferResponse(&InferResponse{Outputs: resp.Outputs[:1]}, false)
	if err != nil || len(typed.GetRawOutputContents()) != 0 || len(typed.GetOutputs()[0].GetContents().GetBoolContents()) != 2 {
		t.Errorf("without FP16 the answer stays typed: %v, %v", typed, err)
	}
}

// FuzzDecodeInferBinary: a binary tensor data body (a JSON header of
// headerLen bytes, then the inputs' bytes) is a request whose every tensor
// is valid and whose binary inputs used the whole binary section, or an
// error; never a panic, never an allocation beyond the limits. The seed
// corpus is testdata/fuzz/FuzzDecodeInferBinary plus the seeds below.
func FuzzDecodeInferBinary(f *testing.F) {
	seed := func(header string, data ...byte) {
		f.Add(append([]byte(header), data...), len(header))
	}
	seed(`{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]}`, 0, 0, 128, 63, 0, 0, 0, 64)
	seed(`{"inputs":[{"name":"s","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":11}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`, 3, 0, 0, 0, 'a', 'b', 'c', 0, 0, 0, 0)
	seed(`{"parameters":{"binary_data_output":true},"inputs":[{"name":"a","shape":[1],"datatype":"BOOL","parameters":{"binary_data_size":1}},{"name":"b","shape":[1],"datatype":"INT64","data":[7]},{"name":"h","shape":[1],"datatype":"FP16","parameters":{"binary_data_size":2}}]}`, 1, 0, 60)
	seed(`{"inputs":[{"name":"x","shape":[1],"datatype":"UINT64","parameters":{"binary_data_size":8}}]}`, 255, 255, 255, 255, 255, 255, 255, 255)
	s := New(Options{Limits: batch.Limits{MaxElements: 1 << 12, MaxTensors: 8}})
	f.Fuzz(func(t *testing.T, body []byte, headerLen int) {
		if headerLen < 0 || headerLen > len(body) {
			headerLen = len(body)
		}
		req, err := s.decodeInferRequest(body, headerLen)
		if err != nil {
			return
		}
		if !json.Valid(body[:headerLen]) {
			t.Fatalf("accepted a header that is not JSON: %q", body[:headerLen])
		}
		for _, in := range req.Inputs {
			if err := in.Validate(1 << 12); err != nil {
				t.Fatalf("accepted an invalid tensor: %v (body %q)", err, body)
			}
		}
	})
}

// FuzzDecodeTFServingJSON: any TF Serving predict body (columnar or row
// form) decodes to valid tensors or an error; never a panic. The seed
// corpus is testdata/fuzz/FuzzDecodeTFServingJSON plus the seeds below.
func FuzzDecodeTFServingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"instances": [{"x": [1, 2], "s": "a"}, {"x": [3, 4], "s": {"b64": "AP8="}}]}`,
		`{"signature_name": "serving_default", "inputs": {"x": [[1, 2]], "sequence_id": [10], "sequence_control_input": [1]}}`,
		`{"instances": [[1, 2], [3]]}`,
		`{"inputs": [[1.5, -2e3]]}`,
		`{"instances": [{"x": [true]}]}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	s := New(Options{Limits: batch.Limits{MaxElements: 1 << 12, MaxTensors: 8}})
	two := sidecar.ModelInfo{Signature: runtimes.Signature{Inputs: []runtimes.TensorSpec{
		{Name: "serving_default_x:0", Aliases: []string{"x"}, DType: tensor.Float},
		{Name: "serving_default_s:0", Aliases: []string{"s"}, DType: tensor.Bytes}}}}
	one := sidecar.ModelInfo{Signature: runtimes.Signature{Inputs: two.Signature.Inputs[:1]}}
	f.Fuzz(func(t *testing.T, body []byte, oneInput bool) {
		info := two
		if oneInput {
			info = one
		}
		ins, _, err := s.decodeTFServingJSON(body, info)
		if err != nil {
			return
		}
		for _, in := range ins {
			if err := in.Validate(1 << 12); err != nil {
				t.Fatalf("accepted an invalid tensor: %v (body %q)", err, body)
			}
		}
	})
}

// BenchmarkDecodeInferBody decodes the same 64-row pctr request (two
// INT64 [64,1] inputs, one FP32 [64,6]) as JSON and as binary tensor data,
// the form Triton's and KServe's clients send for larger tensors.
func BenchmarkDecodeInferBody(b *testing.B) {
	const rows = 64
	var ids, dense []string
	var raw []byte
	for i := range rows {
		ids = append(ids, strconv.Itoa(1000+i))
	}
	for i := range rows * 6 {
		dense = append(dense, strconv.FormatFloat(float64(i)*0.37, 'g', -1, 32))
	}
	jsonBody := []byte(`{"inputs":[{"name":"ad_id","shape":[64,1],"datatype":"INT64","data":[` + strings.Join(ids, ",") + `]},` +
		`{"name":"publisher_id","shape":[64,1],"datatype":"INT64","data":[` + strings.Join(ids, ",") + `]},` +
		`{"name":"dense","shape":[64,6],"datatype":"FP32","data":[` + strings.Join(dense, ",") + `]}]}`)
	for range 2 {
		for i := range rows {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(1000+i))
		}
	}
	for i := range rows * 6 {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(float64(i)*0.37)))
	}
	header := `{"inputs":[{"name":"ad_id","shape":[64,1],"datatype":"INT64","parameters":{"binary_data_size":512}},` +
		`{"name":"publisher_id","shape":[64,1],"datatype":"INT64","parameters":{"binary_data_size":512}},` +
		`{"name":"dense","shape":[64,6],"datatype":"FP32","parameters":{"binary_data_size":1536}}]}`
	binBody := append([]byte(header), raw...)
	s := New(Options{})
	for _, c := range []struct {
		name      string
		body      []byte
		headerLen int
	}{{"json", jsonBody, -1}, {"binary", binBody, len(header)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if _, err := s.decodeInferRequest(c.body, c.headerLen); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
