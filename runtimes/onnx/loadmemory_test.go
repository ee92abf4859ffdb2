//go:build cgo

package onnx

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
)

// bigMatMulModel is an ONNX model y = x·W with W a [k,n] FLOAT initializer
// (4·k·n bytes of raw_data), x [batch,k], y [batch,n]; written with
// protowire so that the test needs no Python.
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

// TestLoadedModelMemory reports the resident memory a loaded ONNX model
// keeps relative to its file size (ONNX Runtime's allocations are native,
// so the measure is the process's RSS with the Go heap returned to the OS),
// for a 128 MiB MatMul weight. It fails only when a model holds three
// times its file size. go test -v -run LoadedModelMemory ./runtimes/onnx/
func TestLoadedModelMemory(t *testing.T) {
	requireLibrary(t)
	if testing.Short() || raceEnabled {
		t.Skip("loads a 128 MiB model and measures resident memory (not under -short or -race)")
	}
	rt := openRuntime(t, runtimes.Config{})
	// ONNX Runtime's environment and threads, outside the measure.
	loadModel(t, rt, "affine_v1.onnx")

	model := bigMatMulModel(1024, 32768)
	size := int64(len(model))
	files := runtimes.Files{"big.onnx": model}
	model = nil
	runtime.GC()
	debug.FreeOSMemory()
	withFiles := testhelp.ProcStatus(t, os.Getpid(), "VmRSS")
	m, err := rt.Load(context.Background(), "big/", files)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	files = nil
	runtime.GC()
	debug.FreeOSMemory()
	held := testhelp.ProcStatus(t, os.Getpid(), "VmRSS") - (withFiles - size)
	ratio := float64(held) / float64(size)
	t.Logf("files %d MiB, resident memory held by the loaded model %d MiB: %.2fx the file size", size>>20, held>>20, ratio)
	if ratio > 3 {
		t.Errorf("the loaded model holds %.2fx its file size", ratio)
	}
}
