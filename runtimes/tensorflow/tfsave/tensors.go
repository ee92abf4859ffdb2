package tfsave

import (
	"encoding/binary"
	"fmt"
	"math"

	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/inferbid/inferbid/tensor"
)

// DataType converts a tensor.DType to TensorFlow's DataType enum.
func DataType(d tensor.DType) (typespb.DataType, error) {
	switch d {
	case tensor.Double:
		return typespb.DataType_DT_DOUBLE, nil
	case tensor.Float:
		return typespb.DataType_DT_FLOAT, nil
	case tensor.Int8:
		return typespb.DataType_DT_INT8, nil
	case tensor.Int16:
		return typespb.DataType_DT_INT16, nil
	case tensor.Int32:
		return typespb.DataType_DT_INT32, nil
	case tensor.Int64:
		return typespb.DataType_DT_INT64, nil
	case tensor.Bool:
		return typespb.DataType_DT_BOOL, nil
	case tensor.Uint8:
		return typespb.DataType_DT_UINT8, nil
	case tensor.Uint16:
		return typespb.DataType_DT_UINT16, nil
	case tensor.Uint32:
		return typespb.DataType_DT_UINT32, nil
	case tensor.Uint64:
		return typespb.DataType_DT_UINT64, nil
	case tensor.Half:
		return typespb.DataType_DT_HALF, nil
	case tensor.Bytes:
		return typespb.DataType_DT_STRING, nil
	}
	return 0, fmt.Errorf("tfsave: dtype %s has no TensorFlow DataType", d)
}

// shapeProto converts dims (-1 unknown) to a TensorShapeProto; nil is an
// unknown rank.
func shapeProto(shape []int64) *shapepb.TensorShapeProto {
	if shape == nil {
		return &shapepb.TensorShapeProto{UnknownRank: true}
	}
	p := &shapepb.TensorShapeProto{}
	for _, d := range shape {
		p.Dim = append(p.Dim, &shapepb.TensorShapeProto_Dim{Size: d})
	}
	return p
}

// rawBytes is the little-endian, row-major encoding TensorFlow uses for
// TensorProto.tensor_content and for checkpoint data.
func rawBytes(t tensor.Tensor) ([]byte, error) {
	switch d := t.Data.(type) {
	case []float64:
		b := make([]byte, 8*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
		}
		return b, nil
	case []float32:
		b := make([]byte, 4*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b, nil
	case []int8:
		b := make([]byte, len(d))
		for i, v := range d {
			b[i] = byte(v)
		}
		return b, nil
	case []int16:
		b := make([]byte, 2*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
		}
		return b, nil
	case []int32:
		b := make([]byte, 4*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
		return b, nil
	case []int64:
		b := make([]byte, 8*len(d))
		for i, v := range d {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
		}
		return b, nil
	}
	return nil, fmt.Errorf("tfsave: tensor %q holds %T, not a supported slice", t.Name, t.Data)
}

// checkTensor validates t with dimensions >= 0 allowed (an empty tensor is
// a valid constant) and returns its DataType.
func checkTensor(t tensor.Tensor) (typespb.DataType, error) {
	dt, err := DataType(t.DType())
	if err != nil {
		return 0, fmt.Errorf("tfsave: tensor %q holds %T: %w", t.Name, t.Data, err)
	}
	n := int64(1)
	for i, d := range t.Shape {
		if d < 0 {
			return 0, fmt.Errorf("tfsave: tensor %q: shape[%d] is %d", t.Name, i, d)
		}
		if d > 0 && n > math.MaxInt32/d {
			return 0, fmt.Errorf("tfsave: tensor %q: shape %s too large", t.Name, tensor.FormatShape(t.Shape))
		}
		n *= d
	}
	if int64(t.Len()) != n {
		return 0, fmt.Errorf("tfsave: tensor %q: shape %s needs %d values, has %d", t.Name, tensor.FormatShape(t.Shape), n, t.Len())
	}
	return dt, nil
}

// tensorProto encodes t as TensorFlow does for constants: one-element
// tensors in the typed repeated field (float_val, int_val, ...), larger
// ones as tensor_content bytes. Readers must handle both.
func tensorProto(t tensor.Tensor) (*tensorpb.TensorProto, error) {
	dt, err := checkTensor(t)
	if err != nil {
		return nil, err
	}
	p := &tensorpb.TensorProto{Dtype: dt, TensorShape: shapeProto(nonNil(t.Shape))}
	if t.Len() != 1 {
		if p.TensorContent, err = rawBytes(t); err != nil {
			return nil, err
		}
		return p, nil
	}
	switch d := t.Data.(type) {
	case []float64:
		p.DoubleVal = d
	case []float32:
		p.FloatVal = d
	case []int8:
		p.IntVal = []int32{int32(d[0])}
	case []int16:
		p.IntVal = []int32{int32(d[0])}
	case []int32:
		p.IntVal = d
	case []int64:
		p.Int64Val = d
	}
	return p, nil
}

// stringTensorProto encodes a string tensor of shape (scalar when shape is
// empty).
func stringTensorProto(shape []int64, vals ...string) *tensorpb.TensorProto {
	p := &tensorpb.TensorProto{Dtype: typespb.DataType_DT_STRING, TensorShape: shapeProto(nonNil(shape))}
	for _, v := range vals {
		p.StringVal = append(p.StringVal, []byte(v))
	}
	return p
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}
