package onnx

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/inferbid/inferbid/tensor"
)

func TestParseModelInfoAllDTypes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "alldtypes.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := parseModelInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"double", "float", "int8", "int16", "int32", "int64"}
	if len(info.Inputs) != 6 || len(info.Outputs) != 6 {
		t.Fatalf("%d inputs, %d outputs, want 6 and 6", len(info.Inputs), len(info.Outputs))
	}
	for i, n := range names {
		for _, vi := range []struct {
			got  valueInfo
			name string
		}{{info.Inputs[i], "in_" + n}, {info.Outputs[i], "out_" + n}} {
			if vi.got.Name != vi.name || vi.got.Kind != "tensor" || elemDType(vi.got.Elem) != tensor.DTypes[i] ||
				!slices.Equal(vi.got.Shape, []int64{-1, 2}) || !slices.Equal(vi.got.DimParams, []string{"batch", ""}) {
				t.Errorf("got %+v, want %s %s [batch,2]", vi.got, vi.name, tensor.DTypes[i])
			}
		}
	}
}

func TestParseModelInfoRejects(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":     {},
		"text":      []byte("hello, world"),
		"truncated": data[:len(data)/2],
		"no graph":  {0x08, 0x07}, // ir_version 7 only
	} {
		if _, err := parseModelInfo(b); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

// FuzzParseModelInfo: arbitrary bytes never panic, and what parses has
// consistent shapes.
func FuzzParseModelInfo(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.onnx"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := parseModelInfo(data)
		if err != nil {
			return
		}
		for _, vi := range append(append([]valueInfo(nil), info.Inputs...), info.Outputs...) {
			if vi.Shape != nil && len(vi.Shape) != len(vi.DimParams) {
				t.Fatalf("%q: shape %v with dim params %q", vi.Name, vi.Shape, vi.DimParams)
			}
			for _, d := range vi.Shape {
				if d < -1 {
					t.Fatalf("%q: dimension %d", vi.Name, d)
				}
			}
		}
		if sig, err := signature(info); err == nil {
			planOutputs(info, sig) // must not panic either
		}
	})
}

// TestOutputPlans checks which outputs of the test models are preallocated.
func TestOutputPlans(t *testing.T) {
	for _, c := range []struct {
		model string
		want  []bool
	}{
		{"mlp.onnx", []bool{true}},
		{"alldtypes.onnx", []bool{true, true, true, true, true, true}},
		{"odd_outputs.onnx", []bool{true, true, true}},
		{"v2dtypes.onnx", []bool{true, true, true, true, true, true, false}}, // STRING is never preallocated
		{"overridable.onnx", []bool{true}},                                   // fixed [2,3]
		{"passthrough.onnx", []bool{false, true, true, true, true}},          // x is the input itself
	} {
		data, err := os.ReadFile(filepath.Join("testdata", c.model))
		if err != nil {
			t.Fatal(err)
		}
		info, err := parseModelInfo(data)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := signature(info)
		if err != nil {
			t.Fatal(err)
		}
		plans, _ := planOutputs(info, sig)
		if len(plans) != len(c.want) {
			t.Fatalf("%s: %d outputs, want %d", c.model, len(plans), len(c.want))
		}
		for i, p := range plans {
			if p.ok != c.want[i] {
				t.Errorf("%s output %q: planned %v, want %v", c.model, info.Outputs[i].Name, p.ok, c.want[i])
			}
		}
	}
	// A planned shape follows the input and refuses absurd sizes.
	p := outputPlan{ok: true, dtype: tensor.Float, dims: []dimSource{{input: 0, axis: 0}, {fixed: 1, input: -1}}}
	in := []tensor.Tensor{{Shape: []int64{5, 8}}}
	if got, ok := p.tensor("y", in); !ok || tensor.FormatShape(got.Shape) != "[5,1]" || got.Len() != 5 {
		t.Fatalf("planned tensor %v %v", got, ok)
	}
	p.dims = []dimSource{{input: 0, axis: 0}, {input: 0, axis: 0}, {input: 0, axis: 0}}
	if _, ok := p.tensor("y", []tensor.Tensor{{Shape: []int64{1 << 20, 1}}}); ok {
		t.Fatal("a [2^20,2^20,2^20] output was preallocated")
	}
}
