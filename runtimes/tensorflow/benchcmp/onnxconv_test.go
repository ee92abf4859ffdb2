package benchcmp

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// convONNX encodes the Conv2D benchmark model as an ONNX ModelProto
// (opset 13): y = Relu(Conv(x, w, bias)), 3x3 window, stride 1, one pixel
// of padding on each side (TensorFlow's SAME for a 3x3 window), x FLOAT
// [N,c,h,w] (ONNX's NCHW), w [m,c,kh,kw] (OIHW) and bias [m].
func convONNX(w, bias []float32, c, h, wd, m, kh, kw int) []byte {
	tensor := func(name string, dims []int64, v []float32) []byte {
		var b []byte
		for _, d := range dims {
			b = protowire.AppendTag(b, 1, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(d))
		}
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, 1) // FLOAT
		b = appendString(b, 8, name)
		raw := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
		return appendBytes(b, 9, raw)
	}
	valueInfo := func(name string, dims ...int64) []byte {
		var shape, tt, typ []byte
		for _, d := range dims {
			var dim []byte
			if d < 0 {
				dim = appendString(dim, 2, "N") // dim_param
			} else {
				dim = protowire.AppendTag(dim, 1, protowire.VarintType) // dim_value
				dim = protowire.AppendVarint(dim, uint64(d))
			}
			shape = appendBytes(shape, 1, dim)
		}
		tt = protowire.AppendTag(tt, 1, protowire.VarintType) // elem_type
		tt = protowire.AppendVarint(tt, 1)
		tt = appendBytes(tt, 2, shape)
		typ = appendBytes(typ, 1, tt) // tensor_type
		return appendBytes(appendString(nil, 1, name), 2, typ)
	}
	ints := func(name string, v ...int64) []byte { // AttributeProto of type INTS
		b := appendString(nil, 1, name)
		for _, x := range v {
			b = protowire.AppendTag(b, 8, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(x))
		}
		b = protowire.AppendTag(b, 20, protowire.VarintType)
		return protowire.AppendVarint(b, 7) // INTS
	}
	var conv []byte
	for _, in := range []string{"x", "w", "bias"} {
		conv = appendString(conv, 1, in)
	}
	conv = appendString(conv, 2, "z")
	conv = appendString(conv, 3, "conv")
	conv = appendString(conv, 4, "Conv")
	conv = appendBytes(conv, 5, ints("kernel_shape", int64(kh), int64(kw)))
	conv = appendBytes(conv, 5, ints("pads", int64(kh/2), int64(kw/2), int64(kh/2), int64(kw/2)))
	conv = appendBytes(conv, 5, ints("strides", 1, 1))
	var relu []byte
	relu = appendString(relu, 1, "z")
	relu = appendString(relu, 2, "y")
	relu = appendString(relu, 3, "relu")
	relu = appendString(relu, 4, "Relu")

	var g []byte
	g = appendBytes(g, 1, conv)
	g = appendBytes(g, 1, relu)
	g = appendString(g, 2, "conv")
	g = appendBytes(g, 5, tensor("w", []int64{int64(m), int64(c), int64(kh), int64(kw)}, w))
	g = appendBytes(g, 5, tensor("bias", []int64{int64(m)}, bias))
	g = appendBytes(g, 11, valueInfo("x", -1, int64(c), int64(h), int64(wd)))
	g = appendBytes(g, 12, valueInfo("y", -1, int64(m), int64(h), int64(wd)))

	var opset []byte
	opset = protowire.AppendTag(opset, 2, protowire.VarintType)
	opset = protowire.AppendVarint(opset, 13)
	var mp []byte
	mp = protowire.AppendTag(mp, 1, protowire.VarintType) // ir_version
	mp = protowire.AppendVarint(mp, 8)
	mp = appendString(mp, 2, "inferbid-benchcmp")
	mp = appendBytes(mp, 7, g)
	return appendBytes(mp, 8, opset)
}
