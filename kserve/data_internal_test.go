package kserve

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/batch"
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
