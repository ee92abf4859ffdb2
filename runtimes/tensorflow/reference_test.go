package tensorflow

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// readModelDir reads a model made by real TensorFlow from the reference
// models directory (testhelp.ReferenceModels: the tests skip when
// INFERBID_REFERENCE_MODELS is unset, and fail when a model is missing from
// the directory it names).
func readModelDir(t testing.TB, dir string) driver.Files {
	t.Helper()
	root := filepath.Join(testhelp.ReferenceModels(t), dir)
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("reference model %s: %v", dir, err)
	}
	files := driver.Files{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func loadRef(t testing.TB, dir string, cfg driver.Config) *runtimes.Model {
	t.Helper()
	files := readModelDir(t, dir)
	rt := runtimes.NewRuntime(Name, cfg, New(cfg))
	m, err := rt.Load(context.Background(), dir, files)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func closeRel(got, want float64) bool {
	return math.Abs(got-want) <= 1e-6*math.Abs(want)
}

func checkFloats(t *testing.T, out tensor.Tensor, want []float64) {
	t.Helper()
	got, ok := tensor.Data[float32](out)
	if !ok {
		t.Fatalf("output %q is %s, want FLOAT", out.Name, out.DType())
	}
	if len(got) != len(want) {
		t.Fatalf("output %q has %d values %v, want %d", out.Name, len(got), got, len(want))
	}
	for i := range want {
		t.Logf("output %q[%d] = %.17g, reference %.17g", out.Name, i, float64(got[i]), want[i])
		if !closeRel(float64(got[i]), want[i]) {
			t.Errorf("output %q[%d] = %.17g, want %.17g (1e-6 relative)", out.Name, i, float64(got[i]), want[i])
		}
	}
}

var pcvrRow = []float64{0.32, 0.12, 0.98, 0.32, 0.12, 0.98, 0.32, 0.12, 0.98, 0.11}

func TestReferencePCVR(t *testing.T) {
	for _, dir := range []string{"bidding-auction-servers/tensorflow/pcvr", "bidding-auction-servers/tensorflow/frozen_pcvr"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m := loadRef(t, dir, driver.Config{})
			sig := m.Signature()
			if len(sig.Inputs) != 7 || len(sig.Outputs) != 1 {
				t.Fatalf("signature has %d inputs and %d outputs, want 7 and 1", len(sig.Inputs), len(sig.Outputs))
			}
			var in []tensor.Tensor
			for _, spec := range sig.Inputs {
				switch spec.DType {
				case tensor.Double:
					in = append(in, tensor.New(spec.Name, []int64{1, 10}, append([]float64(nil), pcvrRow...)))
				case tensor.Int64:
					in = append(in, tensor.New(spec.Aliases[0], []int64{1, 1}, []int64{7}))
				default:
					t.Fatalf("unexpected input %+v", spec)
				}
			}
			out, err := m.Predict(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if out[0].Name != sig.Outputs[0].Name {
				t.Errorf("output named %q, want %q", out[0].Name, sig.Outputs[0].Name)
			}
			checkFloats(t, out[0], []float64{0.011748060584068299})
		})
	}
}

func TestReferenceFrozenPCVRTwoRows(t *testing.T) {
	m := loadRef(t, "bidding-auction-servers/tensorflow/frozen_pcvr", driver.Config{})
	var in []tensor.Tensor
	for _, spec := range m.Signature().Inputs {
		if spec.DType == tensor.Double {
			in = append(in, tensor.New(spec.Name, []int64{2, 10}, append(append([]float64(nil), pcvrRow...), pcvrRow...)))
		} else {
			in = append(in, tensor.New(spec.Name, []int64{2, 1}, []int64{7, 3}))
		}
	}
	out, err := m.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := tensor.FormatShape(out[0].Shape); got != "[2,1]" {
		t.Errorf("output shape %s, want [2,1]", got)
	}
	checkFloats(t, out[0], []float64{0.011748060584068299, 0.10649197548627854})
}

func TestReferenceSimple(t *testing.T) {
	m := loadRef(t, "bidding-auction-servers/tensorflow/simple", driver.Config{})
	sig := m.Signature()
	if len(sig.Inputs) != 1 || sig.Inputs[0].Name != "serving_default_double1:0" || sig.Inputs[0].DType != tensor.Double {
		t.Fatalf("inputs %+v", sig.Inputs)
	}
	if len(sig.Outputs) != 1 || sig.Outputs[0].Name != "PartitionedCall:0" {
		t.Fatalf("outputs %+v", sig.Outputs)
	}
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("double1", []int64{2, 1}, []float64{0.5, -3})})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tensor.Data[float32](out[0])
	if len(got) != 2 || got[0] <= 0 || got[0] >= 1 || got[1] <= 0 || got[1] >= 1 {
		t.Fatalf("simple model output %v, want two sigmoid values in (0,1)", got)
	}
}

// B&A's stateful model (a counter restored as 1; each call adds 1 and
// returns it) answers 2 to every call as an ordinary model: no call sees
// another's count. It counts within a sequence, and across calls only
// with the shared-state opt-out, as B&A serves it (2, 3, 4, ...), where
// model_reset_probability applies.
func TestReferenceStateful(t *testing.T) {
	const dir = "bidding-auction-servers/tensorflow/stateful"
	in := []tensor.Tensor{tensor.New("input_1", []int64{1}, []float32{1})}
	// answers checks that successive calls return want[0], want[1], ...
	answers := func(t *testing.T, call func() ([]tensor.Tensor, error), want ...int32) {
		t.Helper()
		for i, w := range want {
			out, err := call()
			if err != nil {
				t.Fatal(err)
			}
			got, ok := tensor.Data[int32](out[0])
			if !ok || len(got) != 1 || got[0] != w || len(out[0].Shape) != 0 {
				t.Fatalf("call %d returned %v shape %v, want scalar %d", i+1, out[0].Data, out[0].Shape, w)
			}
		}
	}
	t.Run("ordinary model", func(t *testing.T) {
		m := loadRef(t, dir, driver.Config{})
		if !m.Stateful() {
			t.Fatal("the stateful reference model does not report stateful")
		}
		answers(t, func() ([]tensor.Tensor, error) { return m.Predict(context.Background(), in) }, 2, 2, 2, 2, 2, 2)
	})
	t.Run("sequences", func(t *testing.T) {
		m := loadRef(t, dir, driver.Config{})
		a, err := m.NewSequenceState()
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.NewSequenceState()
		if err != nil {
			t.Fatal(err)
		}
		inA := func() ([]tensor.Tensor, error) { return m.PredictSequence(context.Background(), a, in) }
		answers(t, inA, 2, 3, 4)
		answers(t, func() ([]tensor.Tensor, error) { return m.PredictSequence(context.Background(), b, in) }, 2, 3)
		answers(t, func() ([]tensor.Tensor, error) { return m.Predict(context.Background(), in) }, 2)
		answers(t, inA, 5)
	})
	t.Run("shared state counts", func(t *testing.T) {
		m := loadRef(t, dir, driver.Config{})
		if err := m.ShareState(); err != nil {
			t.Fatal(err)
		}
		answers(t, func() ([]tensor.Tensor, error) { return m.Predict(context.Background(), in) }, 2, 3, 4, 5, 6, 7)
	})
	t.Run("shared state reset every call", func(t *testing.T) {
		m := loadRef(t, dir, driver.Config{ModelResetProbability: 1})
		if err := m.ShareState(); err != nil {
			t.Fatal(err)
		}
		answers(t, func() ([]tensor.Tensor, error) { return m.Predict(context.Background(), in) }, 2, 2, 2, 2)
	})
}

func TestReferenceHalfPlusTwo(t *testing.T) {
	m := loadRef(t, "tensorflow-serving/half_plus_two", driver.Config{})
	sig := m.Signature()
	if len(sig.Inputs) != 1 || sig.Inputs[0].Name != "x:0" || len(sig.Outputs) != 1 || sig.Outputs[0].Name != "y:0" {
		t.Fatalf("signature %+v", sig)
	}
	xs := []float32{0, 1, 2, 5, -3.5}
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{5, 1}, xs)})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, len(xs))
	for i, x := range xs {
		want[i] = 0.5*float64(x) + 2
	}
	checkFloats(t, out[0], want)
}

// TestReferenceFrozenWithoutVariables: as in TensorFlow, a model with no
// variables/variables.index skips the restore; a frozen model still serves.
func TestReferenceFrozenWithoutVariables(t *testing.T) {
	files := readModelDir(t, "bidding-auction-servers/tensorflow/frozen_pcvr")
	delete(files, "variables/variables.index")
	delete(files, "variables/variables.data-00000-of-00001")
	m := loadFiles(t, files, driver.Config{})
	var in []tensor.Tensor
	for _, spec := range m.Signature().Inputs {
		if spec.DType == tensor.Double {
			in = append(in, tensor.New(spec.Name, []int64{1, 10}, append([]float64(nil), pcvrRow...)))
		} else {
			in = append(in, tensor.New(spec.Name, []int64{1, 1}, []int64{7}))
		}
	}
	out, err := m.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkFloats(t, out[0], []float64{0.011748060584068299})
}

// half_plus_two names assets/foo.txt in its asset_file_def, and its init
// op assigns the file's name (not its contents) to a variable: as in
// TensorFlow, nothing reads the file, so the model loads and answers
// without it.
func TestReferenceMissingAssetUnread(t *testing.T) {
	files := readModelDir(t, "tensorflow-serving/half_plus_two")
	if _, ok := files["assets/foo.txt"]; !ok {
		t.Fatal("reference half_plus_two has no assets/foo.txt")
	}
	delete(files, "assets/foo.txt")
	m := loadFiles(t, files, driver.Config{})
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2, 1}, []float32{1, -4})})
	if err != nil {
		t.Fatal(err)
	}
	checkFloats(t, out[0], []float64{2.5, 0})
}
