package tensorflow

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	tenpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// dtype is TensorFlow's DataType enum.
type dtype = tpb.DataType

const (
	dtFloat    = tpb.DataType_DT_FLOAT
	dtDouble   = tpb.DataType_DT_DOUBLE
	dtInt32    = tpb.DataType_DT_INT32
	dtUint8    = tpb.DataType_DT_UINT8
	dtInt16    = tpb.DataType_DT_INT16
	dtInt8     = tpb.DataType_DT_INT8
	dtString   = tpb.DataType_DT_STRING
	dtInt64    = tpb.DataType_DT_INT64
	dtBool     = tpb.DataType_DT_BOOL
	dtResource = tpb.DataType_DT_RESOURCE
	dtHalf     = tpb.DataType_DT_HALF
	dtBfloat16 = tpb.DataType_DT_BFLOAT16
	dtUint16   = tpb.DataType_DT_UINT16
	dtUint32   = tpb.DataType_DT_UINT32
	dtUint64   = tpb.DataType_DT_UINT64
	dtVariant  = tpb.DataType_DT_VARIANT
)

// baseType strips the reference flag of TF1 ref dtypes (DT_FLOAT_REF = 101).
func baseType(d dtype) dtype {
	if d > 100 {
		return d - 100
	}
	return d
}

func dtypeName(d dtype) string {
	return strings.TrimPrefix(d.String(), "DT_")
}

// tensor is the executor's tensor. Exactly one data field is used, chosen
// by dt; keeping typed fields (rather than an interface) lets kernels reuse
// buffers across calls without allocating.
type dense struct {
	dt    dtype
	shape []int64
	f32   []float32
	f64   []float64
	i32   []int32
	i64   []int64
	i16   []int16
	i8    []int8
	u8    []uint8
	b     []bool
	s     []string
	// u16 holds UINT16 and the bits of HALF and BFLOAT16; u32 and u64 hold
	// UINT32 and UINT64. Kernels do not compute in these dtypes: constants
	// of them are decoded so Identity and Cast can pass them on.
	u16 []uint16
	u32 []uint32
	u64 []uint64
	res *variable
	// list is a TensorList (dtype VARIANT), immutable once made.
	list *tensorList
	// restored marks a tensor RestoreV2 decoded from the checkpoint: it
	// is never written, so a variable restored from it takes it as its
	// value instead of a copy (a model's weights were copied once more at
	// load).
	restored bool
	// file, for a tensor viewing a memory-mapped checkpoint shard, is
	// where its bytes are in the mapped file: gathers read rows from
	// there (fileView).
	file *fileView
	// ext marks an external variable's placeholder (external.go): its
	// dtype and shape, no data; only its gathers read it, from the store.
	ext *extTable

	// Per-slot scratch that kernels reuse across calls (the state owns the
	// tensor, so this is race-free).
	scratch, scratch2 []int64
	parts             []*dense
	views             []dense
	tmp32             []float32
}

// elem is the set of numeric element types kernels are generic over.
type elem interface {
	float32 | float64 | int32 | int64 | int16 | int8 | uint8
}

func data[T elem](t *dense) []T { return *field[T](t) }

// alloc makes t a tensor of dtype dt and shape (copied), reusing its
// buffers, and returns its element slice. Contents are not cleared.
func alloc[T elem](t *dense, dt dtype, shape []int64) []T {
	t.dt = dt
	t.setShape(shape)
	n := numElems(shape)
	p := field[T](t)
	if cap(*p) < n {
		*p = make([]T, n)
	} else {
		*p = (*p)[:n]
	}
	return *p
}

func (t *dense) setShape(shape []int64) {
	if cap(t.shape) < len(shape) {
		t.shape = make([]int64, len(shape), len(shape)+2)
	}
	t.shape = t.shape[:len(shape)]
	copy(t.shape, shape)
}

func numElems(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// elemCount is the number of elements t holds.
func (t *dense) elemCount() int {
	switch t.dt {
	case dtFloat:
		return len(t.f32)
	case dtDouble:
		return len(t.f64)
	case dtInt32:
		return len(t.i32)
	case dtInt64:
		return len(t.i64)
	case dtInt16:
		return len(t.i16)
	case dtInt8:
		return len(t.i8)
	case dtUint8:
		return len(t.u8)
	case dtBool:
		return len(t.b)
	case dtString:
		return len(t.s)
	case dtHalf, dtBfloat16, dtUint16:
		return len(t.u16)
	case dtUint32:
		return len(t.u32)
	case dtUint64:
		return len(t.u64)
	case dtResource, dtVariant:
		return 1
	}
	return 0
}

// shareFrom makes t a view of src's data with a new shape (no copy).
func (t *dense) shareFrom(src *dense, shape []int64) {
	t.dt = src.dt
	t.setShape(shape)
	t.f32, t.f64, t.i32, t.i64, t.i16, t.i8, t.u8, t.b, t.s, t.res = src.f32, src.f64, src.i32, src.i64, src.i16, src.i8, src.u8, src.b, src.s, src.res
	t.u16, t.u32, t.u64 = src.u16, src.u32, src.u64
	t.list = src.list
}

// clone returns a deep copy of t.
func (t *dense) clone() *dense {
	c := &dense{dt: t.dt, shape: append([]int64(nil), t.shape...), res: t.res, list: t.list}
	c.f32 = append([]float32(nil), t.f32...)
	c.f64 = append([]float64(nil), t.f64...)
	c.i32 = append([]int32(nil), t.i32...)
	c.i64 = append([]int64(nil), t.i64...)
	c.i16 = append([]int16(nil), t.i16...)
	c.i8 = append([]int8(nil), t.i8...)
	c.u8 = append([]uint8(nil), t.u8...)
	c.b = append([]bool(nil), t.b...)
	c.s = append([]string(nil), t.s...)
	c.u16 = append([]uint16(nil), t.u16...)
	c.u32 = append([]uint32(nil), t.u32...)
	c.u64 = append([]uint64(nil), t.u64...)
	return c
}

func (t *dense) String() string {
	return fmt.Sprintf("%s%s", dtypeName(t.dt), tensor.FormatShape(t.shape))
}

// fromDType maps TensorFlow's dtype to the boundary's (Invalid for others).
func fromDType(d dtype) tensor.DType {
	switch baseType(d) {
	case dtFloat:
		return tensor.Float
	case dtDouble:
		return tensor.Double
	case dtInt8:
		return tensor.Int8
	case dtInt16:
		return tensor.Int16
	case dtInt32:
		return tensor.Int32
	case dtInt64:
		return tensor.Int64
	case dtBool:
		return tensor.Bool
	case dtUint8:
		return tensor.Uint8
	case dtUint16:
		return tensor.Uint16
	case dtUint32:
		return tensor.Uint32
	case dtUint64:
		return tensor.Uint64
	case dtHalf:
		return tensor.Half
	case dtString:
		return tensor.Bytes
	}
	return tensor.Invalid
}

// viewInput wraps a boundary tensor without copying its data (except FP16
// bits and BYTES, which the executor holds as []uint16 and []string).
func viewInput(dst *dense, in tensor.Tensor) {
	*dst = dense{shape: in.Shape}
	switch d := in.Data.(type) {
	case []float32:
		dst.dt, dst.f32 = dtFloat, d
	case []float64:
		dst.dt, dst.f64 = dtDouble, d
	case []int8:
		dst.dt, dst.i8 = dtInt8, d
	case []int16:
		dst.dt, dst.i16 = dtInt16, d
	case []int32:
		dst.dt, dst.i32 = dtInt32, d
	case []int64:
		dst.dt, dst.i64 = dtInt64, d
	case []bool:
		dst.dt, dst.b = dtBool, d
	case []uint8:
		dst.dt, dst.u8 = dtUint8, d
	case []uint16:
		dst.dt, dst.u16 = dtUint16, d
	case []uint32:
		dst.dt, dst.u32 = dtUint32, d
	case []uint64:
		dst.dt, dst.u64 = dtUint64, d
	case []tensor.Float16:
		bits := make([]uint16, len(d))
		for i, h := range d {
			bits[i] = uint16(h)
		}
		dst.dt, dst.u16 = dtHalf, bits
	case [][]byte:
		strs := make([]string, len(d))
		for i, b := range d {
			strs[i] = string(b)
		}
		dst.dt, dst.s = dtString, strs
	}
}

// exportTensor copies t into a fresh boundary tensor.
func exportTensor(name string, t *dense) (tensor.Tensor, error) {
	out := tensor.Tensor{Name: name, Shape: append([]int64{}, t.shape...)}
	switch t.dt {
	case dtFloat:
		out.Data = append([]float32{}, t.f32...)
	case dtDouble:
		out.Data = append([]float64{}, t.f64...)
	case dtInt8:
		out.Data = append([]int8{}, t.i8...)
	case dtInt16:
		out.Data = append([]int16{}, t.i16...)
	case dtInt32:
		out.Data = append([]int32{}, t.i32...)
	case dtInt64:
		out.Data = append([]int64{}, t.i64...)
	case dtBool:
		out.Data = append([]bool{}, t.b...)
	case dtUint8:
		out.Data = append([]uint8{}, t.u8...)
	case dtUint16:
		out.Data = append([]uint16{}, t.u16...)
	case dtUint32:
		out.Data = append([]uint32{}, t.u32...)
	case dtUint64:
		out.Data = append([]uint64{}, t.u64...)
	case dtHalf:
		h := make([]tensor.Float16, len(t.u16))
		for i, v := range t.u16 {
			h[i] = tensor.Float16(v)
		}
		out.Data = h
	case dtString:
		b := make([][]byte, len(t.s))
		for i, v := range t.s {
			b[i] = []byte(v)
		}
		out.Data = b
	default:
		return out, fmt.Errorf("%w: output %q has dtype %s, which cannot be returned", driver.ErrInvalidOutput, name, dtypeName(t.dt))
	}
	return out, nil
}

// decodeTensorProto decodes a constant with TensorFlow's rules
// (Tensor::FromProto): tensor_content, when present, holds every element
// little-endian; otherwise the dtype's typed field is read (int_val for
// INT8/16/32 and UINT8/16, half_val for the bits of HALF and BFLOAT16,
// uint32_val, uint64_val, ...). An empty field means zeros (or empty
// strings), a field shorter than the element count repeats its last value,
// and a longer one is an error.
func decodeTensorProto(p *tenpb.TensorProto) (*dense, error) {
	shape, err := shapeOf(p.TensorShape)
	if err != nil {
		return nil, err
	}
	dt := p.Dtype
	n := numElems(shape)
	t := &dense{dt: dt, shape: shape}
	m, ok := typedValCount(p)
	if !ok {
		return nil, fmt.Errorf("constants of dtype %s are not supported", dtypeName(dt))
	}
	if dt != dtString && len(p.TensorContent) > 0 {
		size := protoElemSize(dt)
		if len(p.TensorContent) != n*size {
			return nil, fmt.Errorf("tensor_content has %d bytes, shape %v of %s needs %d", len(p.TensorContent), shape, dtypeName(dt), n*size)
		}
		return t, decodeContent(t, p.TensorContent)
	}
	if m > n {
		return nil, fmt.Errorf("constant has %d values for %d elements", m, n)
	}
	if m < n && n > maxSplatElements {
		return nil, fmt.Errorf("constant of %d elements has %d values; at most %d elements may be filled by repetition or zeros", n, m, maxSplatElements)
	}
	switch dt {
	case dtFloat:
		t.f32 = fillVals(p.FloatVal, n, func(v float32) float32 { return v })
	case dtDouble:
		t.f64 = fillVals(p.DoubleVal, n, func(v float64) float64 { return v })
	case dtInt32:
		t.i32 = fillVals(p.IntVal, n, func(v int32) int32 { return v })
	case dtInt16:
		t.i16 = fillVals(p.IntVal, n, func(v int32) int16 { return int16(v) })
	case dtInt8:
		t.i8 = fillVals(p.IntVal, n, func(v int32) int8 { return int8(v) })
	case dtUint8:
		t.u8 = fillVals(p.IntVal, n, func(v int32) uint8 { return uint8(v) })
	case dtUint16:
		t.u16 = fillVals(p.IntVal, n, func(v int32) uint16 { return uint16(v) })
	case dtHalf, dtBfloat16:
		t.u16 = fillVals(p.HalfVal, n, func(v int32) uint16 { return uint16(v) })
	case dtInt64:
		t.i64 = fillVals(p.Int64Val, n, func(v int64) int64 { return v })
	case dtUint32:
		t.u32 = fillVals(p.Uint32Val, n, func(v uint32) uint32 { return v })
	case dtUint64:
		t.u64 = fillVals(p.Uint64Val, n, func(v uint64) uint64 { return v })
	case dtBool:
		t.b = fillVals(p.BoolVal, n, func(v bool) bool { return v })
	case dtString:
		t.s = fillVals(p.StringVal, n, func(v []byte) string { return string(v) })
	}
	return t, nil
}

// typedValCount is the length of the typed value field dtype p reads, and
// false for dtypes the runtime cannot hold (complex, variant, ...).
func typedValCount(p *tenpb.TensorProto) (int, bool) {
	switch p.Dtype {
	case dtFloat:
		return len(p.FloatVal), true
	case dtDouble:
		return len(p.DoubleVal), true
	case dtInt32, dtInt16, dtInt8, dtUint8, dtUint16:
		return len(p.IntVal), true
	case dtHalf, dtBfloat16:
		return len(p.HalfVal), true
	case dtInt64:
		return len(p.Int64Val), true
	case dtUint32:
		return len(p.Uint32Val), true
	case dtUint64:
		return len(p.Uint64Val), true
	case dtBool:
		return len(p.BoolVal), true
	case dtString:
		return len(p.StringVal), true
	}
	return 0, false
}

// fillVals converts vals into n elements: zeros when vals is empty, the
// last value repeated when it is short (the caller checked len(vals) <= n).
func fillVals[S, D any](vals []S, n int, conv func(S) D) []D {
	out := make([]D, n)
	if len(vals) == 0 {
		return out
	}
	for i := range out {
		out[i] = conv(vals[min(i, len(vals)-1)])
	}
	return out
}

// protoElemSize is the byte size of one element in tensor_content.
func protoElemSize(dt dtype) int {
	switch dt {
	case dtHalf, dtBfloat16, dtUint16:
		return 2
	case dtUint32:
		return 4
	case dtUint64:
		return 8
	}
	return elemSize(dt)
}

// decodeContent fills t from tensor_content (length already checked).
func decodeContent(t *dense, b []byte) error {
	n := numElems(t.shape)
	switch t.dt {
	case dtHalf, dtBfloat16, dtUint16:
		t.u16 = make([]uint16, n)
		for i := range t.u16 {
			t.u16[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	case dtUint32:
		t.u32 = make([]uint32, n)
		for i := range t.u32 {
			t.u32[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
	case dtUint64:
		t.u64 = make([]uint64, n)
		for i := range t.u64 {
			t.u64[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	default:
		return decodeRaw(t, b)
	}
	return nil
}

// halfToFloat32 widens IEEE 754 binary16 bits exactly.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf and NaN keep their payload
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0: // zero and subnormals: mant * 2^-24, exact in float32
		f := float32(mant) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// bfloat16ToFloat32 widens bfloat16 bits (the top half of a float32).
func bfloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
