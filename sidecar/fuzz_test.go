package sidecar

import (
	"math"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"google.golang.org/protobuf/proto"
)

// FuzzParseRuntimeConfig: any input gives a config or an INPUT_PARSING
// error, never a panic; accepted configs are in range.
func FuzzParseRuntimeConfig(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"num_interop_threads":2,"num_intraop_threads":1,"module_name":"onnx","cpuset":[0,1]}`, `{"x":1}`, `null`, `{} []`, `{"cpuset":[-1]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseRuntimeConfig(s)
		if err != nil {
			if inferr.TypeOf(err) != inferr.InputParsing {
				t.Fatalf("error of type %s: %v", inferr.TypeOf(err), err)
			}
			return
		}
		if cfg.NumInteropThreads < 0 || cfg.NumIntraopThreads < 0 || cfg.MaxTensorElements < 0 {
			t.Fatalf("accepted out-of-range config %+v", cfg)
		}
	})
}

// FuzzTensorFromProto: any wire tensor converts or gives INPUT_PARSING, and
// an accepted tensor is valid and within the element limit.
func FuzzTensorFromProto(f *testing.F) {
	seed := func(p *inferencepb.Tensor) {
		b, _ := proto.Marshal(p)
		f.Add(b)
	}
	seed(&inferencepb.Tensor{Name: "x", DataType: inferencepb.DataType_FLOAT, Shape: []int64{1, 3}, FloatData: []float32{1, 2, 3}})
	seed(&inferencepb.Tensor{Name: "x", DataType: inferencepb.DataType_INT8, Shape: []int64{2}, IntData: []int32{1, 300}})
	seed(&inferencepb.Tensor{Name: "x", DataType: inferencepb.DataType_INT64, Shape: []int64{math.MaxInt64, 2}})
	seed(&inferencepb.Tensor{DataType: inferencepb.DataType_DOUBLE})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p inferencepb.Tensor
		if proto.Unmarshal(b, &p) != nil {
			return
		}
		tensor, err := tensorFromProto(&p, 1000)
		if err != nil {
			if inferr.TypeOf(err) != inferr.InputParsing {
				t.Fatalf("error of type %s: %v", inferr.TypeOf(err), err)
			}
			return
		}
		if err := tensor.Validate(1000); err != nil {
			t.Fatalf("accepted an invalid tensor: %v", err)
		}
		back := tensorToProto(tensor)
		if back.GetDataType() != p.GetDataType() {
			t.Fatalf("round trip changed the dtype: %s -> %s", p.GetDataType(), back.GetDataType())
		}
	})
}
