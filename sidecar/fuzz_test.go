package sidecar

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/sidecar/registry"
	"github.com/inferbid/inferbid/tensor"
)

// FuzzParseRuntimeConfig: any input gives a config or an INPUT_PARSING
// error, never a panic; accepted configs are in range.
func FuzzParseRuntimeConfig(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"num_interop_threads":2,"num_intraop_threads":1,"module_name":"onnx","cpuset":[0,1]}`, `{"x":1}`, `null`, `{} []`, `{"cpuset":[-1]}`,
		`{"dynamic_batching":{"default":{"max_batch_size":64,"max_delay_us":200},"models":{"pctr/v1/":{"max_batch_size":32,"max_delay_us":100},"off/":{}}}}`,
		`{"dynamic_batching":{"default":{"max_batch_size":1,"max_delay_us":0}}}`, `{"dynamic_batching":{"models":{"":null}}}`,
		`{"dynamic_batching":{"models":{"a/":{"max_delay_us":100001,"max_batch_size":2}}}}`, `{"dynamic_batching":[]}`} {
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
		if db := cfg.DynamicBatching; db != nil {
			settings := []registry.BatchSettings{db.Default}
			for path, s := range db.Models {
				if path == "" {
					t.Fatalf("accepted an empty model path in %+v", db)
				}
				settings = append(settings, s)
			}
			for _, s := range settings {
				on := s.MaxBatchSize >= 2 && s.MaxBatchSize <= MaxBatchSizeLimit && s.MaxDelayMicros >= 1 && s.MaxDelayMicros <= MaxDelayMicrosLimit
				if s != (registry.BatchSettings{}) && !on {
					t.Fatalf("accepted out-of-range batching settings %+v", s)
				}
			}
		}
	})
}

// FuzzTensorFromProto: any wire tensor decodes or gives an error, never a
// panic; a decoded tensor holds data of its wire dtype, and converting it
// back gives the same dtype, shape and element count.
func FuzzTensorFromProto(f *testing.F) {
	seed := func(p *inferencepb.Tensor) {
		b, _ := proto.Marshal(p)
		f.Add(b)
	}
	seed(&inferencepb.Tensor{Name: "x", DataType: inferencepb.DataType_FLOAT, Shape: []int64{1, 3}, FloatData: []float32{1, 2, 3}})
	seed(&inferencepb.Tensor{Name: "x", DataType: inferencepb.DataType_INT8, Shape: []int64{2}, IntData: []int32{1, 300}})
	seed(&inferencepb.Tensor{Name: "x", DataType: inferencepb.DataType_INT64, Shape: []int64{math.MaxInt64, 2}})
	seed(&inferencepb.Tensor{DataType: inferencepb.DataType_DOUBLE})
	seed(&inferencepb.Tensor{Name: "b", DataType: inferencepb.DataType_BOOL, Shape: []int64{2}, BoolData: []bool{true, false}})
	seed(&inferencepb.Tensor{Name: "u", DataType: inferencepb.DataType_UINT8, Shape: []int64{2}, UintData: []uint32{255, 256}})
	seed(&inferencepb.Tensor{Name: "u", DataType: inferencepb.DataType_UINT16, Shape: []int64{1}, UintData: []uint32{65535}})
	seed(&inferencepb.Tensor{Name: "u", DataType: inferencepb.DataType_UINT64, Shape: []int64{1}, Uint64Data: []uint64{math.MaxUint64}})
	seed(&inferencepb.Tensor{Name: "h", DataType: inferencepb.DataType_FP16, Shape: []int64{2}, Fp16Data: []byte{0x00, 0x3c, 0x00, 0x7e}})
	seed(&inferencepb.Tensor{Name: "h", DataType: inferencepb.DataType_FP16, Shape: []int64{1}, Fp16Data: []byte{0x00}})
	seed(&inferencepb.Tensor{Name: "s", DataType: inferencepb.DataType_BYTES, Shape: []int64{2}, BytesData: [][]byte{{0, 0xff}, nil}})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p inferencepb.Tensor
		if proto.Unmarshal(b, &p) != nil {
			return
		}
		got, err := tensorFromProto(&p)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("tensor %q", p.GetName())) {
				t.Fatalf("error does not name the tensor: %v", err)
			}
			return
		}
		if got.DType() == tensor.Invalid {
			t.Fatalf("decoded a tensor without a dtype: %+v", got)
		}
		back := tensorToProto(got)
		if back.GetDataType() != p.GetDataType() || !slices.Equal(back.GetShape(), p.GetShape()) {
			t.Fatalf("round trip changed the dtype or shape: %s %v -> %s %v", p.GetDataType(), p.GetShape(), back.GetDataType(), back.GetShape())
		}
		if got.Len() != len(back.GetDoubleData())+len(back.GetFloatData())+len(back.GetIntData())+len(back.GetInt64Data())+
			len(back.GetBoolData())+len(back.GetUintData())+len(back.GetUint64Data())+len(back.GetFp16Data())/2+len(back.GetBytesData()) {
			t.Fatalf("round trip changed the element count")
		}
	})
}
