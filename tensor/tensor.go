package tensor

import (
	"fmt"
	"math"
	"strings"
)

// DType is the element type of a tensor. The first six are the types of
// the batch JSON contract (DTypes, Contract); the others only travel from
// the v2 (KServe) surfaces to the runtimes. The zero value is Invalid.
type DType int

const (
	Invalid DType = iota
	Double        // DOUBLE, float64
	Float         // FLOAT, float32
	Int8          // INT8
	Int16         // INT16
	Int32         // INT32
	Int64         // INT64
	Bool          // BOOL, bool
	Uint8         // UINT8
	Uint16        // UINT16
	Uint32        // UINT32
	Uint64        // UINT64
	Half          // FP16, held as its IEEE 754 binary16 bits (Float16)
	Bytes         // BYTES, []byte per element (binary-safe strings)
)

// DTypes lists the six dtypes of the batch JSON contract, in contract order.
var DTypes = []DType{Double, Float, Int8, Int16, Int32, Int64}

// AllDTypes lists every valid dtype: the contract's six, then the others.
var AllDTypes = []DType{Double, Float, Int8, Int16, Int32, Int64, Bool, Uint8, Uint16, Uint32, Uint64, Half, Bytes}

var dtypeNames = [...]string{Invalid: "INVALID", Double: "DOUBLE", Float: "FLOAT", Int8: "INT8", Int16: "INT16", Int32: "INT32", Int64: "INT64",
	Bool: "BOOL", Uint8: "UINT8", Uint16: "UINT16", Uint32: "UINT32", Uint64: "UINT64", Half: "FP16", Bytes: "BYTES"}

// Contract reports whether d is one of the six dtypes of the batch JSON
// contract (the B&A path carries no other).
func (d DType) Contract() bool { return d >= Double && d <= Int64 }

// Float16 is one IEEE 754 binary16 value as its raw bits. Tensors carry the
// bits untouched; Float32 and Float16FromFloat32 convert only where a text
// form needs a number (the v2 JSON surface).
type Float16 uint16

// Float32 is h's value (exact: every binary16 is a float32). A NaN keeps
// its payload in the top mantissa bits.
func (h Float16) Float32() float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Float16FromFloat32 rounds f to the nearest binary16 (ties to even);
// values beyond 65504 round to an infinity, NaN stays NaN.
func Float16FromFloat32(f float32) Float16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23) & 0xff
	mant := bits & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return Float16(sign | 0x7e00 | uint16(mant>>13))
		}
		return Float16(sign | 0x7c00)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return Float16(sign | 0x7c00)
	}
	if e <= 0 {
		if e < -10 {
			return Float16(sign)
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := mant >> shift
		rem, tie := mant&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > tie || (rem == tie && half&1 == 1) {
			half++
		}
		return Float16(sign | uint16(half))
	}
	half := uint32(e)<<10 | mant>>13
	if rem := mant & 0x1fff; rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // a carry into the exponent is right, up to infinity
	}
	return Float16(sign | uint16(half))
}

// IsNaNOrInf reports whether h is a NaN or an infinity (exponent all ones).
func (h Float16) IsNaNOrInf() bool { return h&0x7c00 == 0x7c00 }

// DefaultMaxBytes bounds the total content of one BYTES tensor (the sum of
// its elements' lengths): 64 MiB. Decoders check it before they allocate.
const DefaultMaxBytes = 64 << 20

// String returns the contract name, e.g. "FLOAT".
func (d DType) String() string {
	if d < 0 || int(d) >= len(dtypeNames) {
		return fmt.Sprintf("DType(%d)", int(d))
	}
	return dtypeNames[d]
}

// ParseDType maps a contract name ("DOUBLE", ...) to its DType; only the
// six of the batch JSON contract parse (BOOL, FP16, ... do not).
func ParseDType(s string) (DType, bool) {
	for _, d := range DTypes {
		if dtypeNames[d] == s {
			return d, true
		}
	}
	return Invalid, false
}

// Size is the size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case Double, Int64, Uint64:
		return 8
	case Float, Int32, Uint32:
		return 4
	case Int16, Uint16, Half:
		return 2
	case Int8, Uint8, Bool:
		return 1
	}
	return 0 // Invalid, and Bytes (variable size)
}

// Element is the set of Go element types of the six contract dtypes.
type Element interface {
	float64 | float32 | int8 | int16 | int32 | int64
}

// AnyElement is the set of Go element types a Tensor can hold.
type AnyElement interface {
	Element | bool | uint8 | uint16 | uint32 | uint64 | Float16 | []byte
}

// Tensor is a dense row-major tensor. Data holds exactly one of []float64,
// []float32, []int8, []int16, []int32, []int64 (the contract's six), []bool,
// []uint8, []uint16, []uint32, []uint64, []Float16 or [][]byte, with as many
// elements as Shape describes; an empty Shape is a scalar of one element.
type Tensor struct {
	Name  string
	Shape []int64
	Data  any
}

// New returns a tensor of the given name, shape and data.
func New[T AnyElement](name string, shape []int64, data []T) Tensor {
	return Tensor{Name: name, Shape: shape, Data: data}
}

// DType reports the element type held in Data (Invalid for nil or others).
func (t Tensor) DType() DType {
	switch t.Data.(type) {
	case []float64:
		return Double
	case []float32:
		return Float
	case []int8:
		return Int8
	case []int16:
		return Int16
	case []int32:
		return Int32
	case []int64:
		return Int64
	case []bool:
		return Bool
	case []uint8:
		return Uint8
	case []uint16:
		return Uint16
	case []uint32:
		return Uint32
	case []uint64:
		return Uint64
	case []Float16:
		return Half
	case [][]byte:
		return Bytes
	}
	return Invalid
}

// Len is the number of elements held in Data.
func (t Tensor) Len() int {
	switch d := t.Data.(type) {
	case []float64:
		return len(d)
	case []float32:
		return len(d)
	case []int8:
		return len(d)
	case []int16:
		return len(d)
	case []int32:
		return len(d)
	case []int64:
		return len(d)
	case []bool:
		return len(d)
	case []uint8:
		return len(d)
	case []uint16:
		return len(d)
	case []uint32:
		return len(d)
	case []uint64:
		return len(d)
	case []Float16:
		return len(d)
	case [][]byte:
		return len(d)
	}
	return 0
}

// Data returns the tensor's elements as []T, or nil and false if the tensor
// holds another type.
func Data[T AnyElement](t Tensor) ([]T, bool) {
	d, ok := t.Data.([]T)
	return d, ok
}

// MakeData allocates n zero elements of dtype d.
func MakeData(d DType, n int) any {
	switch d {
	case Double:
		return make([]float64, n)
	case Float:
		return make([]float32, n)
	case Int8:
		return make([]int8, n)
	case Int16:
		return make([]int16, n)
	case Int32:
		return make([]int32, n)
	case Int64:
		return make([]int64, n)
	case Bool:
		return make([]bool, n)
	case Uint8:
		return make([]uint8, n)
	case Uint16:
		return make([]uint16, n)
	case Uint32:
		return make([]uint32, n)
	case Uint64:
		return make([]uint64, n)
	case Half:
		return make([]Float16, n)
	case Bytes:
		return make([][]byte, n)
	}
	return nil
}

// DefaultMaxElements bounds the element count of one tensor when a limit is
// left zero: 16M elements (128 MiB of int64), far above any bidding batch.
const DefaultMaxElements = 1 << 24

// NumElements returns the element count of shape, checking that every
// dimension is >= 1 and that the product neither overflows nor exceeds max
// (DefaultMaxElements when max <= 0).
func NumElements(shape []int64, max int64) (int64, error) {
	if max <= 0 {
		max = DefaultMaxElements
	}
	n := int64(1)
	for i, d := range shape {
		if d < 1 {
			return 0, fmt.Errorf("tensor_shape[%d] is %d: dimensions must be >= 1", i, d)
		}
		if n > max/d {
			return 0, fmt.Errorf("tensor_shape %s has more than %d elements", FormatShape(shape), max)
		}
		n *= d
	}
	return n, nil
}

// Validate checks that Data holds a valid dtype and exactly as many elements
// as Shape describes, within max elements, and that a BYTES tensor's
// content stays within DefaultMaxBytes.
func (t Tensor) Validate(max int64) error {
	if t.DType() == Invalid {
		return fmt.Errorf("tensor %q has no data of a supported type (%T)", t.Name, t.Data)
	}
	n, err := NumElements(t.Shape, max)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if int64(t.Len()) != n {
		return fmt.Errorf("tensor %q: tensor_shape %s needs %d values, tensor_content has %d", t.Name, FormatShape(t.Shape), n, t.Len())
	}
	if b, ok := t.Data.([][]byte); ok {
		total := 0
		for _, e := range b {
			total += len(e)
			if total > DefaultMaxBytes {
				return fmt.Errorf("tensor %q: BYTES content is over %d bytes", t.Name, DefaultMaxBytes)
			}
		}
	}
	return nil
}

// FormatShape prints a shape as [d0,d1,...].
func FormatShape(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// HasNaNOrInf reports whether a floating tensor holds a value JSON cannot
// encode.
func (t Tensor) HasNaNOrInf() bool {
	switch d := t.Data.(type) {
	case []float64:
		for _, v := range d {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return true
			}
		}
	case []float32:
		for _, v := range d {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return true
			}
		}
	case []Float16:
		for _, v := range d {
			if v.IsNaNOrInf() {
				return true
			}
		}
	}
	return false
}
