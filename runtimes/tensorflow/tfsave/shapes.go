package tfsave

import (
	"encoding/binary"

	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// inferShapes computes the static output shapes of a node for the ops the
// ready-made models use, so that SignatureDefs carry shapes as TensorFlow's
// do. Anything else is an unknown rank (SetShape overrides).
func (b *Builder) inferShapes(n *node) [][]int64 {
	types, _ := outputTypes(n)
	out := make([][]int64, len(types))
	in := func(i int) []int64 {
		data := dataInputs(n.def.Input)
		if i >= len(data) {
			return nil
		}
		return b.tensorShape(data[i])
	}
	attrShape := func(name string) []int64 { return protoDims(n.def.Attr[name].GetShape()) }
	if len(out) == 0 {
		return out
	}
	switch n.def.Op {
	case "Placeholder", "PlaceholderWithDefault", "VariableV2":
		out[0] = attrShape("shape")
	case "Const":
		out[0] = tensorDims(n.def.Attr["value"].GetTensor())
	case "ReadVariableOp":
		out[0] = b.handleShape(dataInputs(n.def.Input)[0])
	case "Identity", "Relu", "Relu6", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Neg",
		"Softmax", "Cast", "BiasAdd", "Assign":
		out[0] = in(0)
	case "Add", "AddV2", "Sub", "Mul", "RealDiv", "Minimum", "Maximum",
		"Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual":
		out[0] = broadcast(in(0), in(1))
	case "MatMul":
		a, c := in(0), in(1)
		if len(a) == 2 && len(c) == 2 {
			r, k := a[0], c[1]
			if n.def.Attr["transpose_a"].GetB() {
				r = a[1]
			}
			if n.def.Attr["transpose_b"].GetB() {
				k = c[0]
			}
			out[0] = []int64{r, k}
		}
	case "ConcatV2":
		data := dataInputs(n.def.Input)
		axis, ok := b.constInts(data[len(data)-1])
		if !ok || len(axis) != 1 {
			break
		}
		var res []int64
		for i := 0; i < len(data)-1; i++ {
			s := b.tensorShape(data[i])
			if s == nil {
				return out
			}
			ax := int(axis[0])
			if ax < 0 {
				ax += len(s)
			}
			if ax < 0 || ax >= len(s) {
				return out
			}
			if res == nil {
				res = append([]int64{}, s...)
				continue
			}
			if res[ax] < 0 || s[ax] < 0 {
				res[ax] = -1
			} else {
				res[ax] += s[ax]
			}
		}
		out[0] = res
	case "GatherV2":
		axis, ok := b.constInts(dataInputs(n.def.Input)[2])
		params, idx := in(0), in(1)
		if ok && len(axis) == 1 && axis[0] == 0 && params != nil && idx != nil && len(params) > 0 {
			out[0] = append(append([]int64{}, idx...), params[1:]...)
		}
	case "ResourceGather":
		params, idx := b.handleShape(dataInputs(n.def.Input)[0]), in(1)
		if params != nil && idx != nil && len(params) > 0 {
			out[0] = append(append([]int64{}, idx...), params[1:]...)
		}
	case "Reshape":
		if dims, ok := b.constInts(dataInputs(n.def.Input)[1]); ok {
			out[0] = dims
		}
	case "Squeeze":
		s := in(0)
		dims := n.def.Attr["squeeze_dims"].GetList().GetI()
		if s == nil || len(dims) == 0 {
			break
		}
		drop := map[int]bool{}
		for _, d := range dims {
			if d < 0 {
				d += int64(len(s))
			}
			drop[int(d)] = true
		}
		res := []int64{}
		for i, d := range s {
			if !drop[i] {
				res = append(res, d)
			}
		}
		out[0] = res
	case "Shape":
		if s := in(0); s != nil {
			out[0] = []int64{int64(len(s))}
		}
	}
	return out
}

func dataInputs(inputs []string) []string {
	var d []string
	for _, in := range inputs {
		if len(in) > 0 && in[0] != '^' {
			d = append(d, in)
		}
	}
	return d
}

// handleShape is the shape of the variable behind a resource tensor.
func (b *Builder) handleShape(t string) []int64 {
	n, ok := b.byName[nodeName(t)]
	if !ok || n.def.Op != "VarHandleOp" {
		return nil
	}
	return protoDims(n.def.Attr["shape"].GetShape())
}

func tensorDims(p *tensorpb.TensorProto) []int64 { return protoDims(p.GetTensorShape()) }

// protoDims is a shape's dimensions as written (-1 for unknown), or nil
// when the shape or its rank is unknown.
func protoDims(s *shapepb.TensorShapeProto) []int64 {
	if s == nil || s.UnknownRank {
		return nil
	}
	dims := make([]int64, len(s.Dim))
	for i, d := range s.Dim {
		dims[i] = d.Size
	}
	return dims
}

// constInts reads an int32/int64 Const tensor's values.
func (b *Builder) constInts(t string) ([]int64, bool) {
	src, idx, err := splitTensor(t)
	if err != nil || idx != 0 {
		return nil, false
	}
	n, ok := b.byName[src]
	if !ok || n.def.Op != "Const" {
		return nil, false
	}
	p := n.def.Attr["value"].GetTensor()
	switch p.GetDtype() {
	case typespb.DataType_DT_INT32:
		if len(p.TensorContent) > 0 {
			v := make([]int64, len(p.TensorContent)/4)
			for i := range v {
				v[i] = int64(int32(binary.LittleEndian.Uint32(p.TensorContent[4*i:])))
			}
			return v, true
		}
		v := make([]int64, len(p.IntVal))
		for i, x := range p.IntVal {
			v[i] = int64(x)
		}
		return v, true
	case typespb.DataType_DT_INT64:
		if len(p.TensorContent) > 0 {
			v := make([]int64, len(p.TensorContent)/8)
			for i := range v {
				v[i] = int64(binary.LittleEndian.Uint64(p.TensorContent[8*i:]))
			}
			return v, true
		}
		return append([]int64{}, p.Int64Val...), true
	}
	return nil, false
}

// broadcast is the numpy-style broadcast of two static shapes.
func broadcast(a, c []int64) []int64 {
	if a == nil || c == nil {
		return nil
	}
	if len(a) < len(c) {
		a, c = c, a
	}
	out := append([]int64{}, a...)
	off := len(a) - len(c)
	for i, d := range c {
		o := out[off+i]
		switch {
		case o == 1:
			out[off+i] = d
		case d == 1 || d == o:
		case o < 0 || d < 0:
			out[off+i] = -1
		default:
			return nil
		}
	}
	return out
}
