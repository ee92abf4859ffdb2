//go:build cgo

package onnx

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
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

// refuseAll is externalData that refuses every tensor it visits, naming
// it and its location.
func refuseAll(model []byte) error {
	return externalData(model, func(what, name, location string) error {
		return fmt.Errorf("%s %q at %q", what, name, location)
	})
}

// TestExternalDataWalk: a tensor anywhere in the model (initializer,
// sparse initializer, a node's attribute, a subgraph's, a function's) that
// declares ONNX external data is visited, with its name and location; a
// model without any visits nothing.
func TestExternalDataWalk(t *testing.T) {
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
		err := refuseAll(c.model)
		if err == nil || !strings.Contains(err.Error(), `"W"`) || !strings.Contains(err.Error(), `"../../etc/passwd"`) {
			t.Errorf("%s: %v; want the tensor visited with its location", c.name, err)
		}
		_, err = externalFiles(c.model, "m/model.onnx", func(string) bool { return true })
		if err == nil || !strings.Contains(err.Error(), `"W"`) || !strings.Contains(err.Error(), "inside the model's directory") {
			t.Errorf("%s, externalFiles: %v; want ../../etc/passwd refused", c.name, err)
		}
	}
	if err := refuseAll(bigMatMulModel(2, 3)); err != nil {
		t.Errorf("a model with inline data: %v", err)
	}
	if err := refuseAll(readModel(t, "affine_v1.onnx")["affine_v1.onnx"]); err != nil {
		t.Errorf("affine_v1.onnx: %v", err)
	}
	// Subgraphs nested past protobuf's own limit are refused, not walked.
	deep := pbStr(2, "g") // a GraphProto's fields
	for range 200 {
		deep = node(pbMsg(6, deep))
	}
	if err := refuseAll(pbMsg(7, deep)); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("200 nested subgraphs: %v; want an error", err)
	}
}

// TestExternalFiles: a location is allowed only when it names another
// file of the registration, taken from the model's directory.
func TestExternalFiles(t *testing.T) {
	files := map[string]bool{"m/model.onnx": true, "m/w.bin": true, "m/data/w2.bin": true, "other.bin": true}
	has := func(p string) bool { return files[p] }
	for _, c := range []struct {
		location string
		want     string // the registration's file; "" = refused
	}{
		{"w.bin", "m/w.bin"},
		{"data/w2.bin", "m/data/w2.bin"},
		{"../other.bin", ""},
		{"/etc/passwd", ""},
		{"secret.bin", ""},
		{"model.onnx", ""},
		{"./w.bin", ""},
		{"data//w2.bin", ""},
		{`data\w2.bin`, ""},
		{"", ""},
	} {
		refs, err := externalFiles(externalDataModel("initializer", c.location), "m/model.onnx", has)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("location %q: allowed (%v), want refused", c.location, refs)
		case c.want == "" && !strings.Contains(err.Error(), fmt.Sprintf("%q", c.location)):
			t.Errorf("location %q: %v, want the location named", c.location, err)
		case c.want != "" && (err != nil || refs[c.location] != c.want):
			t.Errorf("location %q: %v, %v; want %s", c.location, refs, err, c.want)
		}
	}
}

// TestLoadRefusesExternalData: a model declaring external data at a
// location that ONNX Runtime itself accepts, but that is no file of the
// model (a file beside the received model on disk; from bytes, a file in
// the working directory, here the package's), is refused before ONNX
// Runtime reads that file: its bytes would come back in the model's
// outputs.
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

// TestLoadExternalDataOfTheModel: a model whose weights are ONNX external
// data in another file of the same registration (how ONNX keeps models
// past protobuf's 2 GiB) serves from bytes and from disk, in a
// subdirectory too, with the weights the file holds.
func TestLoadExternalDataOfTheModel(t *testing.T) {
	requireLibrary(t)
	rt := openRuntime(t, runtimes.Config{})
	w := []float32{1, 2, 3, 4} // W = [[1,2],[3,4]]
	wbytes := make([]byte, 16)
	for i, v := range w {
		binary.LittleEndian.PutUint32(wbytes[4*i:], math.Float32bits(v))
	}
	check := func(what string, m *runtimes.Model, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		defer m.Close()
		out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 2}, []float32{1, 1})})
		if err != nil {
			t.Errorf("%s: predict: %v", what, err)
			return
		}
		// y = x·W = [1+3, 2+4]
		if y, _ := tensor.Data[float32](out[0]); !reflect.DeepEqual(y, []float32{4, 6}) {
			t.Errorf("%s: y = %v, want [4 6]", what, out[0].Data)
		}
	}
	for _, where := range []string{"initializer", "constant"} {
		for _, location := range []string{"w.bin", "weights.bin", "data/w.bin"} {
			model := externalDataModel(where, location)
			what := where + " at " + location
			m, err := rt.Load(context.Background(), "mem/", runtimes.Files{"m/model.onnx": model, "m/" + location: wbytes})
			check("Load, "+what, m, err)
			dir := t.TempDir()
			local := map[string][]byte{"0": model, "1": wbytes}
			for name, data := range local {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			m, err = rt.LoadDisk(context.Background(), "disk/", runtimes.DiskFiles{"m/model.onnx": filepath.Join(dir, "0"), "m/" + location: filepath.Join(dir, "1")})
			check("LoadDisk, "+what, m, err)
			if entries, _ := os.ReadDir(dir); len(entries) != 2 {
				t.Errorf("LoadDisk, %s: %d entries left in the registration's directory, want its 2 files", what, len(entries))
			}
		}
	}
}

// FuzzExternalFiles: any bytes are accepted or refused, never a panic or
// a walk without end; and a location allowed even where every path is a
// file of the registration is never the model itself and stays inside the
// staging directory (a load from bytes writes the files there).
func FuzzExternalFiles(f *testing.F) {
	f.Add(bigMatMulModel(2, 3))
	f.Add(externalDataModel("initializer", "../../etc/passwd"))
	f.Add(externalDataModel("constant", "weights.bin"))
	f.Add([]byte{0x3a, 0x05, 0x2a, 0x03, 0x4a, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		externalFiles(data, "m/model.onnx", func(p string) bool { return p == "m/weights.bin" })
		refs, err := externalFiles(data, "m/model.onnx", func(string) bool { return true })
		if err != nil {
			return
		}
		for location, p := range refs {
			staged := filepath.Join("/staging", filepath.FromSlash(location))
			if !strings.HasPrefix(staged, "/staging/") || p == "m/model.onnx" {
				t.Errorf("location %q (%s) allowed: staged at %s", location, p, staged)
			}
		}
	})
}

// TestExternalDataStagingRemoved: the directory a load stages a model with
// external data in is removed whether ONNX Runtime takes the model or not
// (here, weights 8 bytes short of the 16 the tensor declares): from bytes
// no staging directory is left in $TMPDIR, from disk nothing beside the
// registration's files.
func TestExternalDataStagingRemoved(t *testing.T) {
	requireLibrary(t)
	rt := openRuntime(t, runtimes.Config{})
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	model := externalDataModel("initializer", "w.bin")
	for _, c := range []struct {
		what    string
		weights []byte
		ok      bool
	}{
		{"weights", make([]byte, 16), true},
		{"short weights", make([]byte, 8), false},
	} {
		m, err := rt.Load(context.Background(), "mem/", runtimes.Files{"m/model.onnx": model, "m/w.bin": c.weights})
		if err == nil {
			m.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("Load, %s: %v, want ok=%v", c.what, err, c.ok)
		}
		// Only the staging directories: other code of the process may
		// keep its own files in $TMPDIR.
		if left, _ := filepath.Glob(filepath.Join(tmp, "inferbid-onnx-*")); len(left) != 0 {
			t.Errorf("Load, %s: left %v in $TMPDIR", c.what, left)
		}
		dir := t.TempDir()
		for name, data := range map[string][]byte{"0": model, "1": c.weights} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		m, err = rt.LoadDisk(context.Background(), "disk/", runtimes.DiskFiles{"m/model.onnx": filepath.Join(dir, "0"), "m/w.bin": filepath.Join(dir, "1")})
		if err == nil {
			m.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("LoadDisk, %s: %v, want ok=%v", c.what, err, c.ok)
		}
		if left, _ := os.ReadDir(dir); len(left) != 2 {
			t.Errorf("LoadDisk, %s: %d entries in the registration's directory, want its 2 files", c.what, len(left))
		}
	}
}

// TestLoadDiskExternalDataOnAnotherFilesystem: a file of the model that
// cannot be hard-linked beside it (here on another filesystem, /dev/shm)
// is staged as a symbolic link, which ONNX Runtime follows.
func TestLoadDiskExternalDataOnAnotherFilesystem(t *testing.T) {
	requireLibrary(t)
	dir := t.TempDir()
	shm, err := os.MkdirTemp("/dev/shm", "inferbid-test-*")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	var a, b unix.Stat_t
	if unix.Stat(dir, &a) != nil || unix.Stat(shm, &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm is not another filesystem here")
	}
	rt := openRuntime(t, runtimes.Config{})
	w := make([]byte, 16)
	for i, v := range []float32{1, 2, 3, 4} {
		binary.LittleEndian.PutUint32(w[4*i:], math.Float32bits(v))
	}
	local, weights := filepath.Join(dir, "0"), filepath.Join(shm, "1")
	if err := os.WriteFile(local, externalDataModel("initializer", "w.bin"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(weights, w, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := rt.LoadDisk(context.Background(), "disk/", runtimes.DiskFiles{"m/model.onnx": local, "m/w.bin": weights})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 2}, []float32{1, 1})})
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := tensor.Data[float32](out[0]); !reflect.DeepEqual(y, []float32{4, 6}) {
		t.Errorf("y = %v, want [4 6]", out[0].Data)
	}
}
