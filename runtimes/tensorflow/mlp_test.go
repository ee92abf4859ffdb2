package tensorflow

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

func loadFiles(t testing.TB, files driver.Files, cfg driver.Config) *runtimes.Model {
	t.Helper()
	rt := runtimes.NewRuntime(Name, cfg, New(cfg))
	m, err := rt.Load(context.Background(), "test_model/", files)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// mlpReference computes the benchmark MLP in float64 from the contract's
// definition (not from the model files).
func mlpReference(x []float32, batch int) []float64 {
	out := make([]float64, batch)
	for b := range batch {
		h := make([]float64, 16)
		for j := range 16 {
			s := 0.1 * math.Cos(float64(j))
			for i := range 8 {
				s += float64(x[b*8+i]) * float64(float32(0.5*math.Sin(float64(i*16+j))))
			}
			h[j] = max(s, 0)
		}
		y := 0.05
		for j := range 16 {
			y += h[j] * float64(float32(0.5*math.Sin(float64(100+j))))
		}
		out[b] = 1 / (1 + math.Exp(-y))
	}
	return out
}

func mlpModels(t testing.TB) map[string]driver.Files {
	t.Helper()
	models := map[string]driver.Files{}
	for name, opts := range map[string]tfsave.Options{
		"tf2-main":     {},
		"tf2-function": {FunctionCall: true},
		"tf1":          {Variables: tfsave.RefVariables},
	} {
		files, err := tfsave.MLP(opts)
		if err != nil {
			t.Skipf("tfsave.MLP not available yet: %v", err)
		}
		models[name] = files
	}
	return models
}

func TestMLP(t *testing.T) {
	for name, files := range mlpModels(t) {
		t.Run(name, func(t *testing.T) {
			m := loadFiles(t, files, driver.Config{})
			for _, batch := range []int{1, 3, 64, 1025} {
				x := tfsave.MLPInput(batch)
				out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{int64(batch), 8}, x)})
				if err != nil {
					t.Fatal(err)
				}
				got, _ := tensor.Data[float32](out[0])
				want := mlpReference(x, batch)
				if len(got) != batch || tensor.FormatShape(out[0].Shape) != fmt.Sprintf("[%d,1]", batch) {
					t.Fatalf("batch %d: output shape %v", batch, out[0].Shape)
				}
				for i := range want {
					// float32 math against a float64 reference.
					if math.Abs(float64(got[i])-want[i]) > 1e-6 {
						t.Fatalf("batch %d row %d: %v, want %v", batch, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// BenchmarkMLP runs the team's benchmark MLP (8-16-1) at batch 1, 64 and
// 1024, directly on the backend model and through the portable
// *runtimes.Model.
func BenchmarkMLP(b *testing.B) {
	files, err := tfsave.MLP(tfsave.Options{FunctionCall: true})
	if err != nil {
		b.Skip(err)
	}
	bm, err := New(driver.Config{}).Load(context.Background(), files)
	if err != nil {
		b.Fatal(err)
	}
	m := loadFiles(b, files, driver.Config{})
	for _, batch := range []int{1, 64, 1024} {
		in := []tensor.Tensor{tensor.New("x", []int64{int64(batch), 8}, tfsave.MLPInput(batch))}
		b.Run(fmt.Sprintf("backend/batch%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bm.Predict(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("model/batch%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Predict(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReferencePCVR runs the reference pcvr model (TF2 Keras export
// with variables) at batch 1 and 64.
func BenchmarkReferencePCVR(b *testing.B) {
	m := loadRef(b, pcvrDir, driver.Config{})
	for _, batch := range []int{1, 64} {
		var in []tensor.Tensor
		for _, spec := range m.Signature().Inputs {
			if spec.DType == tensor.Double {
				x := make([]float64, 0, batch*10)
				for range batch {
					x = append(x, pcvrRow...)
				}
				in = append(in, tensor.New(spec.Name, []int64{int64(batch), 10}, x))
			} else {
				in = append(in, tensor.New(spec.Name, []int64{int64(batch), 1}, make([]int64, batch)))
			}
		}
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Predict(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFusionExact checks the fused MatMul+BiasAdd+Relu kernel is used and
// computes bit for bit what the separate kernels compute.
func TestFusionExact(t *testing.T) {
	files, err := tfsave.MLP(tfsave.Options{FunctionCall: true})
	if err != nil {
		t.Fatal(err)
	}
	load := func(fusion bool) *model {
		noFusion = !fusion
		defer func() { noFusion = false }()
		m, err := load(files, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fused, plain := load(true), load(false)
	ops := func(m *model) []string {
		var s []string
		for _, st := range m.serve.steps {
			s = append(s, st.op)
		}
		return s
	}
	if got := fmt.Sprint(ops(fused)); got != "[MatMul+BiasAdd+Relu MatMul+BiasAdd Sigmoid]" {
		t.Errorf("fused schedule %s", got)
	}
	if got := fmt.Sprint(ops(plain)); got != "[MatMul BiasAdd Relu MatMul BiasAdd Sigmoid]" {
		t.Errorf("plain schedule %s", got)
	}
	for _, batch := range []int{1, 3, 4, 7, 64, 1001} {
		x := tfsave.MLPInput(batch)
		for i := range x {
			x[i] = x[i]*3 - 1.2 // negative pre-activations too
		}
		in := []tensor.Tensor{tensor.New("x", []int64{int64(batch), 8}, x)}
		a, err := fused.Predict(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := plain.Predict(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(a[0].Data) != fmt.Sprint(b[0].Data) {
			t.Fatalf("batch %d: fused %v, plain %v", batch, a[0].Data, b[0].Data)
		}
	}
}
