//go:build cgo

package onnx

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

// TestLoadDiskMatchesLoad: a model with a large initializer (moved out to
// a mapped weights file by LoadDisk) and one without answer from disk as
// they do from bytes, and LoadDisk leaves nothing beside the model file.
func TestLoadDiskMatchesLoad(t *testing.T) {
	requireLibrary(t)
	rt := openRuntime(t, runtimes.Config{})
	const k, n = 64, 8192 // a 2 MiB weight: moved out
	for _, c := range []struct {
		name  string
		model []byte
		input tensor.Tensor
	}{
		{"big.onnx", bigMatMulModel(k, n), tensor.Tensor{Name: "x", Shape: []int64{2, k}, Data: ramp(2 * k)}},
		{"affine_v1.onnx", readModel(t, "affine_v1.onnx")["affine_v1.onnx"], tensor.Tensor{Name: "x", Shape: []int64{1, 3}, Data: []float32{1, 2, 3}}},
	} {
		dir := t.TempDir()
		local := filepath.Join(dir, "0")
		if err := os.WriteFile(local, c.model, 0o600); err != nil {
			t.Fatal(err)
		}
		mem, err := rt.Load(context.Background(), "mem/", runtimes.Files{c.name: c.model})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		disk, err := rt.LoadDisk(context.Background(), "disk/", runtimes.DiskFiles{c.name: local})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		defer disk.Close()
		if left, _ := os.ReadDir(dir); len(left) != 1 {
			t.Errorf("%s: LoadDisk left %v beside the model", c.name, left)
		}
		want, err := mem.Predict(context.Background(), []tensor.Tensor{c.input})
		if err != nil {
			t.Fatal(err)
		}
		got, err := disk.Predict(context.Background(), []tensor.Tensor{c.input})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(want[0].Data.([]float32), got[0].Data.([]float32)) || len(got[0].Data.([]float32)) == 0 {
			t.Errorf("%s: from disk %v, from bytes %v", c.name, got[0].Data, want[0].Data)
		}
	}
}

func ramp(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%17) / 17
	}
	return x
}

// TestExternalizeMovesLargeInitializers: the rewritten model is small, the
// weights file holds the weight at an aligned offset, and a model without
// a large initializer is left alone.
func TestExternalizeMovesLargeInitializers(t *testing.T) {
	for _, c := range []struct {
		model []byte
		moved bool
	}{{bigMatMulModel(64, 8192), true}, {bigMatMulModel(4, 8), false}} {
		dir := t.TempDir()
		local := filepath.Join(dir, "src")
		if err := os.WriteFile(local, c.model, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(local)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		path, err := externalize(c.model, f, dir, weightsName)
		if err != nil {
			t.Fatal(err)
		}
		if !c.moved {
			if path != "" {
				t.Errorf("a model of %d bytes was rewritten", len(c.model))
			}
			continue
		}
		rewritten, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		weights, err := os.ReadFile(filepath.Join(dir, weightsName))
		if err != nil {
			t.Fatal(err)
		}
		if len(rewritten) > 4096 || len(weights) != 4*64*8192 {
			t.Errorf("model %d bytes, weights %d bytes; want a small model and the 2 MiB weight", len(rewritten), len(weights))
		}
		for i, b := range weights {
			if b != byte(i%251) {
				t.Fatalf("weights[%d] = %d, want %d", i, b, i%251)
			}
		}
		info, err := parseModelInfo(rewritten)
		if err != nil || len(info.Inputs) != 1 || info.Inputs[0].Name != "x" {
			t.Errorf("the rewritten model reads as %+v, %v", info, err)
		}
	}
}

// FuzzExternalize: any bytes are rewritten or refused, never a panic.
func FuzzExternalize(f *testing.F) {
	f.Add(bigMatMulModel(2, 3))
	f.Add(readModel(f, "affine_v1.onnx")["affine_v1.onnx"])
	f.Add([]byte{0x3a, 0x05, 0x2a, 0x03, 0x4a, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		local := filepath.Join(dir, "src")
		if err := os.WriteFile(local, data, 0o600); err != nil {
			t.Fatal(err)
		}
		src, err := os.Open(local)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		externalize(data, src, dir, weightsName)
	})
}
