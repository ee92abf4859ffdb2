package tensorflow

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// v2DTypesInputs are [2,2] inputs of every v2-only dtype, with edge values:
// FP16 NaN (with payload), -Inf and the smallest subnormal; BYTES with NUL
// and non-UTF-8 bytes.
func v2DTypesInputs() []tensor.Tensor {
	s := []int64{2, 2}
	return []tensor.Tensor{
		tensor.New("bool_in", s, []bool{true, false, false, true}),
		tensor.New("uint8_in", s, []uint8{0, 1, 254, math.MaxUint8}),
		tensor.New("uint16_in", s, []uint16{0, 1, 40000, math.MaxUint16}),
		tensor.New("uint32_in", s, []uint32{0, 1, 3e9, math.MaxUint32}),
		tensor.New("uint64_in", s, []uint64{0, 1, 1 << 63, math.MaxUint64}),
		tensor.New("fp16_in", s, []tensor.Float16{0x3c00, 0x7e01, 0xfc00, 0x0001}),
		tensor.New("bytes_in", s, [][]byte{{0, 1, 0xff}, {}, []byte("é"), []byte("a,b]")}),
	}
}

// TestV2DTypesIdentityAndCast: the v2-only dtypes go through Placeholder,
// Identity and Cast exactly, in both the TF2 and TF1 layouts.
func TestV2DTypesIdentityAndCast(t *testing.T) {
	for name, opts := range map[string]tfsave.Options{
		"tf2-function": {FunctionCall: true},
		"tf1":          {Variables: tfsave.RefVariables},
	} {
		t.Run(name, func(t *testing.T) {
			files, err := tfsave.V2DTypesModel(opts)
			if err != nil {
				t.Fatal(err)
			}
			rt := openRuntime(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			m, err := rt.Load(ctx, "v2dtypes/", runtimes.Files(files))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, in := range m.Signature().Inputs {
				if in.DType == tensor.Invalid {
					t.Errorf("signature input %q has no dtype", in.Name)
				}
			}
			inputs := v2DTypesInputs()
			out, err := m.Predict(ctx, inputs)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]tensor.Tensor{}
			for i, o := range out {
				byName[m.Signature().Outputs[i].Aliases[0]] = o
			}
			for _, in := range inputs {
				key := strings.TrimSuffix(in.Name, "_in") + "_out"
				got, ok := byName[key]
				if !ok {
					t.Errorf("no output %q", key)
					continue
				}
				got.Name = in.Name
				if !reflect.DeepEqual(got, in) {
					t.Errorf("%s: got %v, want %v", key, got.Data, in.Data)
				}
			}
			if f, _ := tensor.Data[float32](byName["bool_as_float"]); !reflect.DeepEqual(f, []float32{1, 0, 0, 1}) {
				t.Errorf("bool_as_float = %v", byName["bool_as_float"].Data)
			}
			f, _ := tensor.Data[float32](byName["fp16_as_float"])
			if len(f) != 4 || f[0] != 1 || !math.IsNaN(float64(f[1])) || !math.IsInf(float64(f[2]), -1) || f[3] != 5.9604645e-08 {
				t.Errorf("fp16_as_float = %v", byName["fp16_as_float"].Data)
			}
		})
	}
}

// TestV2DTypeMismatchNamesInput: an input of another dtype than the
// model's is refused before running, naming the input and both dtypes.
func TestV2DTypeMismatchNamesInput(t *testing.T) {
	files, err := tfsave.V2DTypesModel(tfsave.Options{FunctionCall: true})
	if err != nil {
		t.Fatal(err)
	}
	rt := openRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := rt.Load(ctx, "v2dtypes/", runtimes.Files(files))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	inputs := v2DTypesInputs()
	inputs[5] = tensor.New("fp16_in", []int64{2, 2}, []float32{1, 2, 3, 4})
	_, err = m.Predict(ctx, inputs)
	if err == nil || !strings.Contains(err.Error(), `"fp16_in"`) || !strings.Contains(err.Error(), "data_type FLOAT, model expects FP16") {
		t.Errorf("FLOAT for FP16: %v", err)
	}
}
