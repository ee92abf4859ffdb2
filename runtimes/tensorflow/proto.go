package tensorflow

import (
	"fmt"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
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
	return shapeWithin(p, maxModelElements)
}

// shapeWithin is shapeOf with a bound of limit elements.
func shapeWithin(p *shpb.TensorShapeProto, limit int64) ([]int64, error) {
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
		if d.Size > 0 && n > limit/d.Size {
			return nil, fmt.Errorf("shape has more than %d elements", limit)
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
