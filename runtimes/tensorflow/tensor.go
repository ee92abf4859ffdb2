package tensorflow

import (
	"fmt"
	"strings"

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
	res   *variable
	// restored marks a tensor RestoreV2 decoded from the checkpoint: it
	// is never written, so a variable restored from it takes it as its
	// value instead of a copy (a model's weights were copied once more at
	// load).
	restored bool

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

// slot returns a pointer to t's data field for T.
func slot[T elem](t *dense) *[]T {
	var z T
	switch any(z).(type) {
	case float32:
		return any(&t.f32).(*[]T)
	case float64:
		return any(&t.f64).(*[]T)
	case int32:
		return any(&t.i32).(*[]T)
	case int64:
		return any(&t.i64).(*[]T)
	case int16:
		return any(&t.i16).(*[]T)
	case int8:
		return any(&t.i8).(*[]T)
	default:
		return any(&t.u8).(*[]T)
	}
}

func data[T elem](t *dense) []T { return *slot[T](t) }

// alloc makes t a tensor of dtype dt and shape (copied), reusing its
// buffers, and returns its element slice. Contents are not cleared.
func alloc[T elem](t *dense, dt dtype, shape []int64) []T {
	t.dt = dt
	t.setShape(shape)
	n := numElems(shape)
	p := slot[T](t)
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
	case dtResource:
		return 1
	}
	return 0
}

// shareFrom makes t a view of src's data with a new shape (no copy).
func (t *dense) shareFrom(src *dense, shape []int64) {
	t.dt = src.dt
	t.setShape(shape)
	t.f32, t.f64, t.i32, t.i64, t.i16, t.i8, t.u8, t.b, t.s, t.res = src.f32, src.f64, src.i32, src.i64, src.i16, src.i8, src.u8, src.b, src.s, src.res
}

// clone returns a deep copy of t.
func (t *dense) clone() *dense {
	c := &dense{dt: t.dt, shape: append([]int64(nil), t.shape...), res: t.res}
	c.f32 = append([]float32(nil), t.f32...)
	c.f64 = append([]float64(nil), t.f64...)
	c.i32 = append([]int32(nil), t.i32...)
	c.i64 = append([]int64(nil), t.i64...)
	c.i16 = append([]int16(nil), t.i16...)
	c.i8 = append([]int8(nil), t.i8...)
	c.u8 = append([]uint8(nil), t.u8...)
	c.b = append([]bool(nil), t.b...)
	c.s = append([]string(nil), t.s...)
	return c
}

func (t *dense) String() string {
	return fmt.Sprintf("%s%s", dtypeName(t.dt), tensor.FormatShape(t.shape))
}

// toDType maps a boundary dtype to TensorFlow's.
func toDType(d tensor.DType) dtype {
	switch d {
	case tensor.Float:
		return dtFloat
	case tensor.Double:
		return dtDouble
	case tensor.Int8:
		return dtInt8
	case tensor.Int16:
		return dtInt16
	case tensor.Int32:
		return dtInt32
	case tensor.Int64:
		return dtInt64
	}
	return tpb.DataType_DT_INVALID
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
	}
	return tensor.Invalid
}

// viewInput wraps a boundary tensor without copying its data.
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
	default:
		return out, fmt.Errorf("%w: output %q has dtype %s, which cannot be returned", driver.ErrInvalidOutput, name, dtypeName(t.dt))
	}
	return out, nil
}
