package tensorflow

import (
	"encoding/binary"
	"fmt"
	"math"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	tenpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
)

// maxModelElements bounds the element count of any tensor a model file
// describes (constants, checkpoint tensors): 1<<28, 1 GiB of float32.
const maxModelElements = 1 << 28

// maxSplatElements bounds constants TensorFlow fills by repeating their last
// value, so a few bytes of graph cannot ask for a gigabyte.
const maxSplatElements = 1 << 24

// shapeOf converts a fully known shape.
func shapeOf(p *shpb.TensorShapeProto) ([]int64, error) {
	if p == nil {
		return []int64{}, nil
	}
	if p.UnknownRank {
		return nil, fmt.Errorf("shape of unknown rank")
	}
	s := make([]int64, len(p.Dim))
	n := int64(1)
	for i, d := range p.Dim {
		if d.Size < 0 {
			return nil, fmt.Errorf("dimension %d is unknown (%d)", i, d.Size)
		}
		s[i] = d.Size
		if d.Size > 0 && n > maxModelElements/d.Size {
			return nil, fmt.Errorf("shape has more than %d elements", maxModelElements)
		}
		n *= d.Size
	}
	return s, nil
}

// specShape converts a signature shape: nil for unknown rank, -1 for
// unknown dimensions.
func specShape(p *shpb.TensorShapeProto) []int64 {
	if p == nil || p.UnknownRank {
		return nil
	}
	s := make([]int64, len(p.Dim))
	for i, d := range p.Dim {
		s[i] = d.Size
		if d.Size < 0 {
			s[i] = -1
		}
	}
	return s
}

// decodeTensorProto decodes a constant.
func decodeTensorProto(p *tenpb.TensorProto) (*dense, error) {
	shape, err := shapeOf(p.TensorShape)
	if err != nil {
		return nil, err
	}
	n := numElems(shape)
	t := &dense{dt: p.Dtype, shape: shape}
	if p.Dtype == dtString {
		if len(p.StringVal) != n && !(len(p.StringVal) == 1) {
			return nil, fmt.Errorf("string constant has %d values for %d elements", len(p.StringVal), n)
		}
		t.s = make([]string, n)
		for i := range t.s {
			t.s[i] = string(p.StringVal[min(i, len(p.StringVal)-1)])
		}
		return t, nil
	}
	size := elemSize(p.Dtype)
	if size == 0 {
		return nil, fmt.Errorf("constants of dtype %s are not supported", dtypeName(p.Dtype))
	}
	if len(p.TensorContent) > 0 || n == 0 {
		if len(p.TensorContent) != n*size {
			return nil, fmt.Errorf("tensor_content has %d bytes, shape %v needs %d", len(p.TensorContent), shape, n*size)
		}
		return t, decodeRaw(t, p.TensorContent)
	}
	// Typed value fields; TensorFlow repeats the last value to fill.
	var m int
	switch p.Dtype {
	case dtFloat:
		m = len(p.FloatVal)
	case dtDouble:
		m = len(p.DoubleVal)
	case dtInt32, dtInt16, dtInt8, dtUint8:
		m = len(p.IntVal)
	case dtInt64:
		m = len(p.Int64Val)
	case dtBool:
		m = len(p.BoolVal)
	}
	if m == 0 || m > n {
		return nil, fmt.Errorf("constant has %d values for %d elements", m, n)
	}
	if m < n && n > maxSplatElements {
		return nil, fmt.Errorf("constant of %d elements repeats %d values; at most %d elements may be filled that way", n, m, maxSplatElements)
	}
	buf := make([]byte, n*size)
	for i := range n {
		j := min(i, m-1)
		switch p.Dtype {
		case dtFloat:
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(p.FloatVal[j]))
		case dtDouble:
			binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(p.DoubleVal[j]))
		case dtInt32:
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(p.IntVal[j]))
		case dtInt16:
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(p.IntVal[j]))
		case dtInt8, dtUint8:
			buf[i] = byte(p.IntVal[j])
		case dtInt64:
			binary.LittleEndian.PutUint64(buf[8*i:], uint64(p.Int64Val[j]))
		case dtBool:
			if p.BoolVal[j] {
				buf[i] = 1
			}
		}
	}
	return t, decodeRaw(t, buf)
}

// attrs wraps a node's attributes with typed getters.
type attrs map[string]*apb.AttrValue

func (a attrs) typ(name string) (dtype, error) {
	v, ok := a[name]
	if !ok {
		return 0, fmt.Errorf("missing attribute %q", name)
	}
	t, ok := v.Value.(*apb.AttrValue_Type)
	if !ok {
		return 0, fmt.Errorf("attribute %q is not a type", name)
	}
	return t.Type, nil
}

func (a attrs) typOr(name string, def dtype) dtype {
	if t, err := a.typ(name); err == nil {
		return t
	}
	return def
}

func (a attrs) i(name string, def int64) int64 {
	if v, ok := a[name].GetValue().(*apb.AttrValue_I); ok {
		return v.I
	}
	return def
}

func (a attrs) f(name string, def float32) float32 {
	if v, ok := a[name].GetValue().(*apb.AttrValue_F); ok {
		return v.F
	}
	return def
}

func (a attrs) b(name string) bool {
	if v, ok := a[name].GetValue().(*apb.AttrValue_B); ok {
		return v.B
	}
	return false
}

func (a attrs) s(name string) string {
	if v, ok := a[name].GetValue().(*apb.AttrValue_S); ok {
		return string(v.S)
	}
	return ""
}

func (a attrs) list(name string) *apb.AttrValue_ListValue {
	if v, ok := a[name].GetValue().(*apb.AttrValue_List); ok {
		return v.List
	}
	return nil
}

func (a attrs) fn(name string) string {
	if v, ok := a[name].GetValue().(*apb.AttrValue_Func); ok {
		return v.Func.GetName()
	}
	return ""
}
