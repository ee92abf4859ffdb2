//go:build cgo

package sidecar_test

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// TestSidecarModelMemoryONNX: a 128 MiB ONNX model in a real
// inference-sidecar-onnx process. go test -v -run ModelMemory ./sidecar/
func TestSidecarModelMemoryONNX(t *testing.T) {
	requireONNX(t)
	if testing.Short() {
		t.Skip("registers a 128 MiB model")
	}
	files := runtimes.Files{"big.onnx": bigMatMulModel(1024, 32768)}
	sidecartest.ModelMemory(t, buildBinary(t, "inference-sidecar-onnx", true), files, 1.5)
}

// bigMatMulModel is an ONNX model y = x·W with W a [k,n] FLOAT initializer
// (4·k·n bytes of raw_data), x [batch,k], y [batch,n]; written with
// protowire so that the test needs no Python (as in runtimes/onnx's TestLoadedModelMemory).
func bigMatMulModel(k, n int) []byte {
	msg := func(field protowire.Number, parts ...[]byte) []byte {
		var body []byte
		for _, p := range parts {
			body = append(body, p...)
		}
		b := protowire.AppendTag(nil, field, protowire.BytesType)
		return protowire.AppendBytes(b, body)
	}
	str := func(field protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, field, protowire.BytesType), s)
	}
	varint := func(field protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, field, protowire.VarintType), v)
	}
	valueInfo := func(field protowire.Number, name string, dim int) []byte {
		shape := msg(2, msg(1, str(2, "batch")), msg(1, varint(1, uint64(dim))))
		return msg(field, str(1, name), msg(2, msg(1, varint(1, 1), shape)))
	}
	raw := make([]byte, 4*k*n)
	for i := range raw {
		raw[i] = byte(i % 251)
	}
	initializer := msg(5, varint(1, uint64(k)), varint(1, uint64(n)), varint(2, 1), str(8, "W"), protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), raw))
	node := msg(1, str(1, "x"), str(1, "W"), str(2, "y"), str(4, "MatMul"))
	graph := msg(7, node, str(2, "big"), initializer, valueInfo(11, "x", k), valueInfo(12, "y", n))
	var model []byte
	model = append(model, varint(1, 7)...)
	model = append(model, msg(8, str(1, ""), varint(2, 13))...)
	return append(model, graph...)
}
