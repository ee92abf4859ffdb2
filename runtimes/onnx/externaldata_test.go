//go:build cgo

package onnx

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferbid/inferbid/runtimes"
)

// Protobuf builders for hand-made models.
func pbMsg(field protowire.Number, parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, field, protowire.BytesType), body)
}

func pbStr(field protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, field, protowire.BytesType), s)
}

func pbVarint(field protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, field, protowire.VarintType), v)
}

// externalTensor is a FLOAT [2,2] TensorProto (as field) whose data is
// ONNX external data at location.
func externalTensor(field protowire.Number, name, location string) []byte {
	entry := func(k, v string) []byte { return pbMsg(13, pbStr(1, k), pbStr(2, v)) }
	return pbMsg(field, pbVarint(1, 2), pbVarint(1, 2), pbVarint(2, 1), pbStr(8, name),
		entry("location", location), entry("offset", "0"), entry("length", "16"), pbVarint(14, 1))
}

// externalDataModel is y = x·W, x FLOAT [batch,2], with W [2,2] as ONNX
// external data at location: an initializer ("initializer"), or the value
// of a Constant node ("constant").
func externalDataModel(where, location string) []byte {
	valueInfo := func(field protowire.Number, name string) []byte {
		shape := pbMsg(2, pbMsg(1, pbStr(2, "batch")), pbMsg(1, pbVarint(1, 2)))
		return pbMsg(field, pbStr(1, name), pbMsg(2, pbMsg(1, pbVarint(1, 1), shape)))
	}
	matmul := pbMsg(1, pbStr(1, "x"), pbStr(1, "W"), pbStr(2, "y"), pbStr(4, "MatMul"))
	var graph []byte
	switch where {
	case "initializer":
		graph = pbMsg(7, matmul, pbStr(2, "ext"), externalTensor(5, "W", location), valueInfo(11, "x"), valueInfo(12, "y"))
	case "constant":
		constant := pbMsg(1, pbStr(2, "W"), pbStr(4, "Constant"),
			pbMsg(5, pbStr(1, "value"), externalTensor(5, "", location), pbVarint(20, 4))) // AttributeProto: name, t, type TENSOR
		graph = pbMsg(7, constant, matmul, pbStr(2, "ext"), valueInfo(11, "x"), valueInfo(12, "y"))
	}
	return append(append(pbVarint(1, 7), pbMsg(8, pbStr(1, ""), pbVarint(2, 13))...), graph...)
}

// TestRefuseExternalData: a tensor anywhere in the model (initializer,
// sparse initializer, a node's attribute, a subgraph's, a function's) that
// declares ONNX external data is refused, naming it and its location; a
// model without any is not.
func TestRefuseExternalData(t *testing.T) {
	ext := func(field protowire.Number) []byte { return externalTensor(field, "W", "../../etc/passwd") }
	node := func(attr []byte) []byte { return pbMsg(1, pbStr(4, "Op"), pbMsg(5, pbStr(1, "a"), attr)) }
	for _, c := range []struct {
		name  string
		model []byte
	}{
		{"initializer", pbMsg(7, ext(5))},
		{"sparse initializer", pbMsg(7, pbMsg(15, ext(1)))},
		{"sparse indices", pbMsg(7, pbMsg(15, ext(2)))},
		{"attribute t", pbMsg(7, node(ext(5)))},
		{"attribute tensors", pbMsg(7, node(ext(10)))},
		{"attribute sparse_tensor", pbMsg(7, node(pbMsg(22, ext(1))))},
		{"subgraph", pbMsg(7, node(pbMsg(6, node(ext(5)))))},
		{"subgraphs", pbMsg(7, node(pbMsg(11, node(pbMsg(6, ext(5))))))},
		{"function", pbMsg(25, pbMsg(7, pbStr(4, "Op"), pbMsg(5, ext(5))))},
		{"training info", pbMsg(20, pbMsg(1, ext(5)))},
	} {
		err := refuseExternalData(c.model)
		if err == nil || !strings.Contains(err.Error(), `"W"`) || !strings.Contains(err.Error(), `"../../etc/passwd"`) {
			t.Errorf("%s: %v; want a refusal naming the tensor and its location", c.name, err)
		}
	}
	if err := refuseExternalData(bigMatMulModel(2, 3)); err != nil {
		t.Errorf("a model with inline data: %v", err)
	}
	if err := refuseExternalData(readModel(t, "affine_v1.onnx")["affine_v1.onnx"]); err != nil {
		t.Errorf("affine_v1.onnx: %v", err)
	}
	// Subgraphs nested past protobuf's own limit are refused, not walked.
	deep := pbStr(2, "g") // a GraphProto's fields
	for range 200 {
		deep = node(pbMsg(6, deep))
	}
	if err := refuseExternalData(pbMsg(7, deep)); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("200 nested subgraphs: %v; want an error", err)
	}
}

// TestLoadRefusesExternalData: a model declaring external data at a
// location that ONNX Runtime itself accepts (a file beside the model from
// disk; from bytes, a file in the working directory, here the package's)
// is refused before ONNX Runtime reads that file: a model is one .onnx
// file, so its external data could only be another file of the server's,
// whose bytes would come back in the model's outputs.
func TestLoadRefusesExternalData(t *testing.T) {
	requireLibrary(t)
	rt := openRuntime(t, runtimes.Config{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.bin"), []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "0")
	for _, where := range []string{"initializer", "constant"} {
		if err := os.WriteFile(local, externalDataModel(where, "secret.bin"), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := rt.LoadDisk(context.Background(), "disk/", runtimes.DiskFiles{"m.onnx": local})
		if err == nil {
			m.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "external data") || !strings.Contains(err.Error(), "secret.bin") {
			t.Errorf("LoadDisk, %s at secret.bin: %v; want the model refused", where, err)
		}
		m, err = rt.Load(context.Background(), "mem/", runtimes.Files{"m.onnx": externalDataModel(where, "doc.go")})
		if err == nil {
			m.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "external data") || !strings.Contains(err.Error(), "doc.go") {
			t.Errorf("Load, %s at doc.go: %v; want the model refused", where, err)
		}
	}
}

// FuzzRefuseExternalData: any bytes are accepted or refused, never a
// panic or a walk without end.
func FuzzRefuseExternalData(f *testing.F) {
	f.Add(bigMatMulModel(2, 3))
	f.Add(externalDataModel("initializer", "../../etc/passwd"))
	f.Add(externalDataModel("constant", "weights.bin"))
	f.Add([]byte{0x3a, 0x05, 0x2a, 0x03, 0x4a, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		refuseExternalData(data)
	})
}
