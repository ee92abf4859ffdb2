package onnx

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferbid/inferbid/tensor"
)

// The ONNX protobuf is read directly with protowire, for the few fields that
// name and type the graph's inputs and outputs. The alternative, asking ONNX
// Runtime (onnxruntime_go's GetInputOutputInfoWithONNXData), builds a whole
// second session: twice the load time and, briefly, twice the memory.
//
// Field numbers are those of onnx/onnx.proto3 (stable since IR version 3).
const (
	modelGraph = 7 // ModelProto.graph

	graphNode              = 1  // GraphProto.node (NodeProto)
	nodeOutput             = 2  // NodeProto.output
	graphInitializer       = 5  // GraphProto.initializer (TensorProto)
	graphInput             = 11 // GraphProto.input (ValueInfoProto)
	graphOutput            = 12 // GraphProto.output (ValueInfoProto)
	graphSparseInitializer = 15 // GraphProto.sparse_initializer (SparseTensorProto)

	tensorName       = 8 // TensorProto.name
	sparseValues     = 1 // SparseTensorProto.values (TensorProto named like the sparse tensor)
	valueInfoName    = 1 // ValueInfoProto.name
	valueInfoType    = 2 // ValueInfoProto.type (TypeProto)
	typeTensor       = 1 // TypeProto.tensor_type
	typeSequence     = 4 // TypeProto.sequence_type
	typeMap          = 5 // TypeProto.map_type
	typeSparseTensor = 8 // TypeProto.sparse_tensor_type
	typeOptional     = 9 // TypeProto.optional_type
	tensorTypeElem   = 1 // TypeProto.Tensor.elem_type
	tensorTypeShape  = 2 // TypeProto.Tensor.shape (TensorShapeProto)
	shapeDim         = 1 // TensorShapeProto.dim
	dimValue         = 1 // TensorShapeProto.Dimension.dim_value
	dimParam         = 2 // TensorShapeProto.Dimension.dim_param
)

// ONNX TensorProto.DataType values.
const (
	elemFloat   = 1
	elemUint8   = 2
	elemInt8    = 3
	elemUint16  = 4
	elemInt16   = 5
	elemInt32   = 6
	elemInt64   = 7
	elemString  = 8
	elemBool    = 9
	elemFloat16 = 10
	elemDouble  = 11
)

var elemNames = map[int32]string{
	0: "UNDEFINED", elemFloat: "FLOAT", elemUint8: "UINT8", elemInt8: "INT8", elemUint16: "UINT16",
	elemInt16: "INT16", elemInt32: "INT32", elemInt64: "INT64", elemString: "STRING", elemBool: "BOOL",
	elemFloat16: "FLOAT16", elemDouble: "DOUBLE", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64",
	15: "COMPLEX128", 16: "BFLOAT16",
}

func elemName(e int32) string {
	if n, ok := elemNames[e]; ok {
		return n
	}
	return fmt.Sprintf("element type %d", e)
}

// elemDType maps an ONNX element type to the dtype that carries it
// (Invalid for those inferbid does not carry: BFLOAT16, COMPLEX, ...).
func elemDType(e int32) tensor.DType {
	switch e {
	case elemBool:
		return tensor.Bool
	case elemUint8:
		return tensor.Uint8
	case elemUint16:
		return tensor.Uint16
	case 12:
		return tensor.Uint32
	case 13:
		return tensor.Uint64
	case elemFloat16:
		return tensor.Half
	case elemString:
		return tensor.Bytes
	case elemDouble:
		return tensor.Double
	case elemFloat:
		return tensor.Float
	case elemInt8:
		return tensor.Int8
	case elemInt16:
		return tensor.Int16
	case elemInt32:
		return tensor.Int32
	case elemInt64:
		return tensor.Int64
	}
	return tensor.Invalid
}

// valueInfo is one graph input or output as the model declares it.
type valueInfo struct {
	Name string
	// Kind is "tensor", or what else the value is ("sequence", "map",
	// "optional", "sparse tensor", "unknown type").
	Kind string
	// Elem is the ONNX element type of a tensor (0 when undeclared).
	Elem int32
	// Shape is nil when the rank is unknown; -1 marks a symbolic or
	// unknown dimension.
	Shape []int64
	// DimParams are the names of symbolic dimensions ("batch"), "" for
	// fixed or unnamed ones; same length as Shape.
	DimParams []string
	// Computed is set for outputs that a node of the graph produces (not a
	// graph input or an initializer passed straight through).
	Computed bool
}

// modelInfo is what the runtime needs to know about a model before running it.
type modelInfo struct {
	Inputs, Outputs []valueInfo
}

var errTruncated = errors.New("truncated or malformed protobuf")

// fields calls fn for each field of the protobuf message b.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, val []byte, varint uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errTruncated
		}
		b = b[n:]
		var val []byte
		var v uint64
		switch typ {
		case protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errTruncated
		}
		b = b[n:]
		if err := fn(num, typ, val, v); err != nil {
			return err
		}
	}
	return nil
}

// parseModelInfo reads the graph's inputs (without initializers, which ONNX
// Runtime does not count as inputs) and outputs from a serialized ModelProto.
func parseModelInfo(data []byte) (*modelInfo, error) {
	var graphs [][]byte
	err := fields(data, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if num == modelGraph && typ == protowire.BytesType {
			graphs = append(graphs, val) // repeated occurrences of a message field merge
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("not an ONNX model: %w", err)
	}
	if len(graphs) == 0 {
		return nil, errors.New("not an ONNX model: no graph")
	}
	var inputs, outputs []valueInfo
	initializers := map[string]bool{}
	computed := map[string]bool{}
	for _, g := range graphs {
		err := fields(g, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case graphNode:
				return fields(val, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
					if num == nodeOutput && typ == protowire.BytesType {
						computed[string(val)] = true
					}
					return nil
				})
			case graphInput, graphOutput:
				vi, err := parseValueInfo(val)
				if err != nil {
					return err
				}
				if num == graphInput {
					inputs = append(inputs, vi)
				} else {
					outputs = append(outputs, vi)
				}
			case graphInitializer:
				name, err := stringField(val, tensorName)
				if err != nil {
					return fmt.Errorf("initializer: %w", err)
				}
				initializers[name] = true
			case graphSparseInitializer:
				var name string
				err := fields(val, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
					if num == sparseValues && typ == protowire.BytesType {
						n, err := stringField(val, tensorName)
						name = n
						return err
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("sparse initializer: %w", err)
				}
				initializers[name] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("not an ONNX model: graph: %w", err)
		}
	}
	for i := range outputs {
		outputs[i].Computed = computed[outputs[i].Name]
	}
	info := &modelInfo{Outputs: outputs}
	for _, in := range inputs {
		if !initializers[in.Name] {
			info.Inputs = append(info.Inputs, in)
		}
	}
	if len(info.Outputs) == 0 {
		return nil, errors.New("the ONNX graph has no outputs")
	}
	return info, nil
}

func stringField(msg []byte, field protowire.Number) (string, error) {
	var s string
	err := fields(msg, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if num == field && typ == protowire.BytesType {
			s = string(val)
		}
		return nil
	})
	return s, err
}

func parseValueInfo(b []byte) (valueInfo, error) {
	vi := valueInfo{Kind: "unknown type"}
	err := fields(b, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case valueInfoName:
			vi.Name = string(val)
		case valueInfoType:
			return parseType(val, &vi)
		}
		return nil
	})
	if err != nil {
		return vi, fmt.Errorf("value info %q: %w", vi.Name, err)
	}
	return vi, nil
}

func parseType(b []byte, vi *valueInfo) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case typeTensor:
			vi.Kind = "tensor"
			return parseTensorType(val, vi)
		case typeSequence:
			vi.Kind = "sequence"
		case typeMap:
			vi.Kind = "map"
		case typeSparseTensor:
			vi.Kind = "sparse tensor"
		case typeOptional:
			vi.Kind = "optional"
		}
		return nil
	})
}

func parseTensorType(b []byte, vi *valueInfo) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, val []byte, v uint64) error {
		switch {
		case num == tensorTypeElem && typ == protowire.VarintType:
			vi.Elem = int32(v)
		case num == tensorTypeShape && typ == protowire.BytesType:
			shape, params := []int64{}, []string{} // a shape field present with no dims is a scalar
			err := fields(val, func(num protowire.Number, typ protowire.Type, dim []byte, _ uint64) error {
				if num != shapeDim || typ != protowire.BytesType {
					return nil
				}
				d, param := int64(-1), "" // dim_param, or no value at all: unknown
				err := fields(dim, func(num protowire.Number, typ protowire.Type, s []byte, v uint64) error {
					switch {
					case num == dimValue && typ == protowire.VarintType && int64(v) >= 0:
						d, param = int64(v), ""
					case num == dimParam && typ == protowire.BytesType:
						d, param = -1, string(s)
					}
					return nil
				})
				shape, params = append(shape, d), append(params, param)
				return err
			})
			if err != nil {
				return err
			}
			vi.Shape, vi.DimParams = shape, params
		}
		return nil
	})
}
