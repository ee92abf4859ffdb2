package sidecar

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/tensor"
)

// TestTensorProtoRoundTripsEveryDType marshals a tensor of every dtype
// (extreme values, FP16 NaN/Inf bit patterns, BYTES with NUL and non-UTF-8
// bytes) to the wire format the gRPC path and the fast lane share, and back.
func TestTensorProtoRoundTripsEveryDType(t *testing.T) {
	in := []tensor.Tensor{
		tensor.New("d", []int64{2}, []float64{-1.5, math.MaxFloat64}),
		tensor.New("f", []int64{2}, []float32{-1.5, math.MaxFloat32}),
		tensor.New("i8", []int64{2}, []int8{math.MinInt8, math.MaxInt8}),
		tensor.New("i16", []int64{2}, []int16{math.MinInt16, math.MaxInt16}),
		tensor.New("i32", []int64{2}, []int32{math.MinInt32, math.MaxInt32}),
		tensor.New("i64", []int64{2}, []int64{math.MinInt64, math.MaxInt64}),
		tensor.New("b", []int64{3}, []bool{true, false, true}),
		tensor.New("u8", []int64{2}, []uint8{0, math.MaxUint8}),
		tensor.New("u16", []int64{2}, []uint16{0, math.MaxUint16}),
		tensor.New("u32", []int64{2}, []uint32{0, math.MaxUint32}),
		tensor.New("u64", []int64{2}, []uint64{0, math.MaxUint64}),
		tensor.New("h", []int64{4}, []tensor.Float16{0x3c00, 0x7e01, 0xfc00, 0x0001}),
		tensor.New("s", []int64{3}, [][]byte{{0, 1, 0xff}, {}, []byte("é")}),
	}
	if len(in) != len(tensor.AllDTypes) {
		t.Fatalf("test covers %d dtypes, there are %d", len(in), len(tensor.AllDTypes))
	}
	for _, want := range in {
		b, err := proto.Marshal(tensorToProto(want))
		if err != nil {
			t.Fatalf("%s: marshal: %v", want.DType(), err)
		}
		var p inferencepb.Tensor
		if err := proto.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if p.GetDataType().String() != want.DType().String() {
			t.Errorf("%s travels as %s", want.DType(), p.GetDataType())
		}
		got, err := tensorFromProto(&p)
		if err != nil {
			t.Fatalf("%s: %v", want.DType(), err)
		}
		if bs, ok := got.Data.([][]byte); ok && len(bs[1]) == 0 {
			bs[1] = []byte{} // proto gives nil for an empty bytes value
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: round trip gave %+v, want %+v", want.DType(), got, want)
		}
	}
}

func TestTensorFromProtoRejectsOutOfRangeUnsigned(t *testing.T) {
	for _, p := range []*inferencepb.Tensor{
		{Name: "u", DataType: inferencepb.DataType_UINT8, Shape: []int64{1}, UintData: []uint32{256}},
		{Name: "u", DataType: inferencepb.DataType_UINT16, Shape: []int64{1}, UintData: []uint32{65536}},
		{Name: "u", DataType: inferencepb.DataType_FP16, Shape: []int64{1}, Fp16Data: []byte{1, 2, 3}},
	} {
		if _, err := tensorFromProto(p); err == nil || !strings.Contains(err.Error(), `tensor "u"`) {
			t.Errorf("%s: %v, want an error naming the tensor", p.GetDataType(), err)
		}
	}
}

// BenchmarkTensorWire times one [64,8] input through tensorToProto,
// Marshal, Unmarshal and tensorFromProto per dtype: the sidecar's wire
// cost of a tensor (FP16 is packed and unpacked, BYTES carried per element).
func BenchmarkTensorWire(b *testing.B) {
	const n = 64 * 8
	f32 := make([]float32, n)
	h := make([]tensor.Float16, n)
	u8 := make([]uint8, n)
	bs := make([][]byte, n)
	for i := range n {
		f32[i], h[i], u8[i], bs[i] = float32(i), tensor.Float16FromFloat32(float32(i)), uint8(i), []byte("ad-12345")
	}
	shape := []int64{64, 8}
	for _, t := range []tensor.Tensor{tensor.New("x", shape, f32), tensor.New("x", shape, h), tensor.New("x", shape, u8), tensor.New("x", shape, bs)} {
		b.Run(t.DType().String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf, err := proto.Marshal(tensorToProto(t))
				if err != nil {
					b.Fatal(err)
				}
				var p inferencepb.Tensor
				if err := proto.Unmarshal(buf, &p); err != nil {
					b.Fatal(err)
				}
				if _, err := tensorFromProto(&p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A sequence error's class crosses the wire in Error.sequence_class (the
// enum numbers sequence.Code's values), not in the text; an unknown class
// from a newer peer is dropped, leaving the type.
func TestSequenceErrorClassRoundTrips(t *testing.T) {
	for c := sequence.InvalidArgument; c <= sequence.FailedPrecondition; c++ {
		if got, want := inferencepb.SequenceErrorClass(c).String(), "SEQUENCE_"+c.String(); got != want {
			t.Errorf("enum value %d is %s, want %s", c, got, want)
		}
		in := inferr.Wrap(inferr.ModelExecution, &sequence.Error{Code: c, Msg: "model \"m/\": the text says nothing"}, "")
		b, err := proto.Marshal(errorToProto(in))
		if err != nil {
			t.Fatal(err)
		}
		var pe inferencepb.Error
		if err := proto.Unmarshal(b, &pe); err != nil {
			t.Fatal(err)
		}
		out := errorFromProto(&pe)
		if got, ok := sequence.CodeOf(out); !ok || got != c {
			t.Errorf("%v came back as class %v (%v)", c, got, ok)
		}
		if inferr.TypeOf(out) != inferr.ModelExecution || out.Error() != in.Error() {
			t.Errorf("%v: came back as %v %q, want MODEL_EXECUTION %q", c, inferr.TypeOf(out), out, in)
		}
	}
	plain := errorFromProto(errorToProto(inferr.Errorf(inferr.InputParsing, "no class")))
	if _, ok := sequence.CodeOf(plain); ok {
		t.Errorf("an error without a class came back with one: %v", plain)
	}
	odd := errorFromProto(&inferencepb.Error{Type: inferencepb.ErrorType_MODEL_EXECUTION, Description: "d", SequenceClass: 42})
	if _, ok := sequence.CodeOf(odd); ok || inferr.TypeOf(odd) != inferr.ModelExecution {
		t.Errorf("an unknown class must be dropped, keeping the type: %v", odd)
	}
}
