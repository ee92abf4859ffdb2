package tensorflow

import (
	"math"
	"reflect"
	"strings"
	"testing"

	tenpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

func protoShape(dims ...int64) *shpb.TensorShapeProto {
	p := &shpb.TensorShapeProto{}
	for _, d := range dims {
		p.Dim = append(p.Dim, &shpb.TensorShapeProto_Dim{Size: d})
	}
	return p
}

// decodedData returns the data field decodeTensorProto filled for t's dtype.
func decodedData(t *dense) any {
	switch t.dt {
	case dtFloat:
		return t.f32
	case dtDouble:
		return t.f64
	case dtInt32:
		return t.i32
	case dtInt16:
		return t.i16
	case dtInt8:
		return t.i8
	case dtUint8:
		return t.u8
	case dtInt64:
		return t.i64
	case dtBool:
		return t.b
	case dtString:
		return t.s
	case dtHalf, dtBfloat16, dtUint16:
		return t.u16
	case dtUint32:
		return t.u32
	case dtUint64:
		return t.u64
	}
	return nil
}

// TestDecodeTensorProto checks TensorFlow's TensorProto rules for every
// dtype the runtime holds: each dtype's typed field, an empty field as
// zeros, a short field repeating its last value, and tensor_content.
func TestDecodeTensorProto(t *testing.T) {
	shape := protoShape(3)
	tp := func(dt tpb.DataType, set func(p *tenpb.TensorProto)) *tenpb.TensorProto {
		p := &tenpb.TensorProto{Dtype: dt, TensorShape: shape}
		if set != nil {
			set(p)
		}
		return p
	}
	cases := []struct {
		name string
		p    *tenpb.TensorProto
		want any
	}{
		{"float full", tp(dtFloat, func(p *tenpb.TensorProto) { p.FloatVal = []float32{1, 2, 3} }), []float32{1, 2, 3}},
		{"float short", tp(dtFloat, func(p *tenpb.TensorProto) { p.FloatVal = []float32{1, 2} }), []float32{1, 2, 2}},
		{"float empty", tp(dtFloat, nil), []float32{0, 0, 0}},
		{"double short", tp(dtDouble, func(p *tenpb.TensorProto) { p.DoubleVal = []float64{0.5} }), []float64{0.5, 0.5, 0.5}},
		{"double empty", tp(dtDouble, nil), []float64{0, 0, 0}},
		{"int32", tp(dtInt32, func(p *tenpb.TensorProto) { p.IntVal = []int32{-7, 8} }), []int32{-7, 8, 8}},
		{"int32 empty", tp(dtInt32, nil), []int32{0, 0, 0}},
		{"int16", tp(dtInt16, func(p *tenpb.TensorProto) { p.IntVal = []int32{-300} }), []int16{-300, -300, -300}},
		{"int8", tp(dtInt8, func(p *tenpb.TensorProto) { p.IntVal = []int32{-5, 6, 7} }), []int8{-5, 6, 7}},
		{"uint8", tp(dtUint8, func(p *tenpb.TensorProto) { p.IntVal = []int32{255, 1} }), []uint8{255, 1, 1}},
		{"uint16", tp(dtUint16, func(p *tenpb.TensorProto) { p.IntVal = []int32{65535} }), []uint16{65535, 65535, 65535}},
		{"int64", tp(dtInt64, func(p *tenpb.TensorProto) { p.Int64Val = []int64{1 << 40, -1} }), []int64{1 << 40, -1, -1}},
		{"int64 empty", tp(dtInt64, nil), []int64{0, 0, 0}},
		{"uint32", tp(dtUint32, func(p *tenpb.TensorProto) { p.Uint32Val = []uint32{1 << 31} }), []uint32{1 << 31, 1 << 31, 1 << 31}},
		{"uint64", tp(dtUint64, func(p *tenpb.TensorProto) { p.Uint64Val = []uint64{1 << 63, 2} }), []uint64{1 << 63, 2, 2}},
		{"bool", tp(dtBool, func(p *tenpb.TensorProto) { p.BoolVal = []bool{false, true} }), []bool{false, true, true}},
		{"bool empty", tp(dtBool, nil), []bool{false, false, false}},
		{"string", tp(dtString, func(p *tenpb.TensorProto) { p.StringVal = [][]byte{[]byte("a"), []byte("b")} }), []string{"a", "b", "b"}},
		{"string empty", tp(dtString, nil), []string{"", "", ""}},
		// half_val holds the 16 bits in an int32: 0x3c00 is 1.0 in FP16,
		// 0x3f80 is 1.0 in BF16.
		{"half", tp(dtHalf, func(p *tenpb.TensorProto) { p.HalfVal = []int32{0x3c00, 0xc000} }), []uint16{0x3c00, 0xc000, 0xc000}},
		{"half empty", tp(dtHalf, nil), []uint16{0, 0, 0}},
		{"bfloat16", tp(dtBfloat16, func(p *tenpb.TensorProto) { p.HalfVal = []int32{0x3f80} }), []uint16{0x3f80, 0x3f80, 0x3f80}},
		// tensor_content wins over the typed fields.
		{"float content", tp(dtFloat, func(p *tenpb.TensorProto) {
			p.TensorContent = []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40}
		}), []float32{1, 2, 3}},
		{"half content", tp(dtHalf, func(p *tenpb.TensorProto) { p.TensorContent = []byte{0, 0x3c, 0, 0xc0, 0, 0x7c} }), []uint16{0x3c00, 0xc000, 0x7c00}},
		{"uint32 content", tp(dtUint32, func(p *tenpb.TensorProto) { p.TensorContent = []byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0x80} }), []uint32{1, 2, 1 << 31}},
		{"uint64 content", tp(dtUint64, func(p *tenpb.TensorProto) {
			p.TensorContent = make([]byte, 24)
			p.TensorContent[23] = 0x80
		}), []uint64{0, 0, 1 << 63}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := decodeTensorProto(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.shape, []int64{3}) || d.elemCount() != 3 {
				t.Errorf("shape %v, %d elements; want [3], 3", d.shape, d.elemCount())
			}
			if got := decodedData(d); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	// A scalar with no values is a zero, the failing case of the issue.
	d, err := decodeTensorProto(&tenpb.TensorProto{Dtype: dtFloat, TensorShape: protoShape()})
	if err != nil || !reflect.DeepEqual(d.f32, []float32{0}) {
		t.Errorf("empty scalar: %v %v, want [0]", d, err)
	}

	bad := []struct {
		name string
		p    *tenpb.TensorProto
		want string
	}{
		{"too many values", tp(dtFloat, func(p *tenpb.TensorProto) { p.FloatVal = []float32{1, 2, 3, 4} }), "4 values for 3 elements"},
		{"short content", tp(dtFloat, func(p *tenpb.TensorProto) { p.TensorContent = []byte{1, 2, 3} }), "tensor_content has 3 bytes"},
		{"complex", tp(tpb.DataType_DT_COMPLEX64, func(p *tenpb.TensorProto) { p.ScomplexVal = []float32{1, 2} }), "COMPLEX64 are not supported"},
		{"huge splat", &tenpb.TensorProto{Dtype: dtFloat, TensorShape: protoShape(1<<26, 2)}, "at most"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeTensorProto(tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestHalfToFloat32(t *testing.T) {
	for _, tc := range []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x3555, 0.333251953125}, {0x7bff, 65504},
		{0x0001, float32(math.Ldexp(1, -24))}, {0x03ff, float32(math.Ldexp(1023, -24))}, {0x0400, float32(math.Ldexp(1, -14))},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	} {
		if got := halfToFloat32(tc.h); got != tc.want {
			t.Errorf("half %#04x = %v, want %v", tc.h, got, tc.want)
		}
	}
	if got := halfToFloat32(0x7e00); got == got {
		t.Errorf("half 0x7e00 = %v, want NaN", got)
	}
	if got := bfloat16ToFloat32(0xbfc0); got != -1.5 {
		t.Errorf("bfloat16 0xbfc0 = %v, want -1.5", got)
	}
}

// TestConstProtoInGraph runs hand-made TensorProtos through a model: an
// empty float_val (zeros), a short one (last value repeated) and FP16
// half_val bits cast to float, as mixed-precision exports store constants.
func TestConstProtoInGraph(t *testing.T) {
	gc := graphCase{
		name: "const protos",
		build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
			x := b.Placeholder("x", tensor.Float, []int64{-1, 3})
			zeros := b.OpNamed("zeros", "Const", nil, map[string]any{"dtype": dtFloat,
				"value": &tenpb.TensorProto{Dtype: dtFloat, TensorShape: protoShape(3)}})
			splat := b.OpNamed("splat", "Const", nil, map[string]any{"dtype": dtFloat,
				"value": &tenpb.TensorProto{Dtype: dtFloat, TensorShape: protoShape(3), FloatVal: []float32{1, 10}}})
			half := b.OpNamed("half", "Const", nil, map[string]any{"dtype": dtHalf,
				"value": &tenpb.TensorProto{Dtype: dtHalf, TensorShape: protoShape(3), HalfVal: []int32{0x3800, 0xc000}}})
			return map[string]string{"x": x}, map[string]string{
				"zeros": b.Op("AddV2", []string{x, zeros}, nil),
				"splat": b.Op("Mul", []string{x, splat}, nil),
				"half":  b.Op("AddV2", []string{x, b.Op("Cast", []string{half}, map[string]any{"DstT": dtFloat})}, nil),
			}
		},
		feed: []tensor.Tensor{named("x", f32([]int64{1, 3}, 1, 2, 3))},
		want: map[string]tensor.Tensor{
			"zeros": f32([]int64{1, 3}, 1, 2, 3),
			"splat": f32([]int64{1, 3}, 1, 20, 30),
			"half":  f32([]int64{1, 3}, 1.5, 0, 1),
		},
	}
	for _, opts := range []tfsave.Options{{}, {FunctionCall: true}} {
		runCase(t, opts, gc)
	}
}
