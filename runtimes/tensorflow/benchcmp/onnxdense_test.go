package benchcmp

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// denseONNX encodes tfsave.Dense's model as an ONNX ModelProto (opset 13):
// y = Relu(Add(MatMul(x, kernel), bias)), x FLOAT [N,in], the same weights.
// It is written field by field (field numbers of onnx.proto) because the
// Python generator of runtimes/onnx/testdata needs python3-onnx, and the
// benchmark's sizes are parameters.
func denseONNX(kernel, bias []float32, in, out int) []byte {
	tensor := func(name string, dims []int64, v []float32) []byte {
		var b []byte
		for _, d := range dims {
			b = protowire.AppendTag(b, 1, protowire.VarintType) // dims
			b = protowire.AppendVarint(b, uint64(d))
		}
		b = protowire.AppendTag(b, 2, protowire.VarintType) // data_type
		b = protowire.AppendVarint(b, 1)                    // FLOAT
		b = appendString(b, 8, name)
		raw := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
		return appendBytes(b, 9, raw) // raw_data
	}
	valueInfo := func(name string, cols int) []byte {
		var dim0, dim1, shape, tt, typ []byte
		dim0 = appendString(dim0, 2, "N") // dim_param
		dim1 = protowire.AppendTag(dim1, 1, protowire.VarintType)
		dim1 = protowire.AppendVarint(dim1, uint64(cols))
		shape = appendBytes(appendBytes(shape, 1, dim0), 1, dim1)
		tt = protowire.AppendTag(tt, 1, protowire.VarintType) // elem_type
		tt = protowire.AppendVarint(tt, 1)
		tt = appendBytes(tt, 2, shape)
		typ = appendBytes(typ, 1, tt) // tensor_type
		return appendBytes(appendString(nil, 1, name), 2, typ)
	}
	node := func(op string, out string, ins ...string) []byte {
		var b []byte
		for _, in := range ins {
			b = appendString(b, 1, in)
		}
		b = appendString(b, 2, out)
		b = appendString(b, 3, op)
		return appendString(b, 4, op)
	}
	var g []byte
	g = appendBytes(g, 1, node("MatMul", "mm", "x", "kernel"))
	g = appendBytes(g, 1, node("Add", "z", "mm", "bias"))
	g = appendBytes(g, 1, node("Relu", "y", "z"))
	g = appendString(g, 2, "dense")
	g = appendBytes(g, 5, tensor("kernel", []int64{int64(in), int64(out)}, kernel))
	g = appendBytes(g, 5, tensor("bias", []int64{int64(out)}, bias))
	g = appendBytes(g, 11, valueInfo("x", in))
	g = appendBytes(g, 12, valueInfo("y", out))

	var opset []byte
	opset = protowire.AppendTag(opset, 2, protowire.VarintType)
	opset = protowire.AppendVarint(opset, 13)
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.VarintType) // ir_version
	m = protowire.AppendVarint(m, 8)
	m = appendString(m, 2, "inferbid-benchcmp") // producer_name
	m = appendBytes(m, 7, g)                    // graph
	return appendBytes(m, 8, opset)             // opset_import
}

func appendBytes(b []byte, field protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendString(b []byte, field protowire.Number, s string) []byte {
	return appendBytes(b, field, []byte(s))
}
