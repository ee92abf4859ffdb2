package tensorflow

import (
	"context"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

func runningSumModel(t *testing.T, opts tfsave.Options) *runtimes.Model {
	t.Helper()
	files, err := tfsave.RunningSumModel(opts, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return loadFiles(t, files, driver.Config{})
}

func sumStep(t *testing.T, m *runtimes.Model, st any, x float32) float32 {
	t.Helper()
	in := []tensor.Tensor{tensor.New("x", []int64{1}, []float32{x})}
	var out []tensor.Tensor
	var err error
	if st == nil {
		out, err = m.Predict(context.Background(), in)
	} else {
		out, err = m.PredictSequence(context.Background(), st, in)
	}
	if err != nil {
		t.Fatal(err)
	}
	v, _ := tensor.Data[float32](out[0])
	return v[0]
}

// Two interleaved sequences and the shared state each keep their own sum,
// each starting from the checkpoint's value.
func TestSequencesKeepSeparateVariables(t *testing.T) {
	for name, opts := range map[string]tfsave.Options{"main": {}, "function": {FunctionCall: true}} {
		t.Run(name, func(t *testing.T) {
			m := runningSumModel(t, opts)
			if !m.Stateful() || !m.SupportsSequences() {
				t.Fatal("the running-sum model is not stateful with sequences")
			}
			a, err := m.NewSequenceState()
			if err != nil {
				t.Fatal(err)
			}
			if got := sumStep(t, m, nil, 5); got != 1005 {
				t.Fatalf("shared state: %v, want 1005", got)
			}
			b, err := m.NewSequenceState()
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				st   any
				x    float32
				want float32
			}{{a, 1, 1001}, {b, 10, 1010}, {a, 2, 1003}, {b, 20, 1030}, {nil, 1, 1006}, {a, 3, 1006}, {b, 30, 1060}}
			for i, s := range steps {
				if got := sumStep(t, m, s.st, s.x); got != s.want {
					t.Fatalf("step %d: %v, want %v", i, got, s.want)
				}
			}
			// A sequence started after others ran starts from the checkpoint.
			c, err := m.NewSequenceState()
			if err != nil {
				t.Fatal(err)
			}
			if got := sumStep(t, m, c, 0); got != 1000 {
				t.Fatalf("new sequence after others: %v, want 1000 (the checkpoint)", got)
			}
		})
	}
}

// Concurrent calls on different sequences neither lose updates nor mix
// states (run under -race).
func TestSequencesConcurrent(t *testing.T) {
	m := runningSumModel(t, tfsave.Options{})
	states := make([]any, 4)
	for i := range states {
		var err error
		if states[i], err = m.NewSequenceState(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i, st := range states {
		wg.Go(func() {
			for range 50 {
				if _, err := m.PredictSequence(context.Background(), st, []tensor.Tensor{tensor.New("x", []int64{1}, []float32{float32(i + 1)})}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, st := range states {
		if got, want := sumStep(t, m, st, 0), float32(1000+50*(i+1)); got != want {
			t.Errorf("sequence %d: %v, want %v", i, got, want)
		}
	}
}

func TestSequenceStateOfAStatelessModelIsRefused(t *testing.T) {
	files, err := tfsave.AffineModel(tfsave.Options{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := loadFiles(t, files, driver.Config{})
	if _, err := m.NewSequenceState(); err == nil {
		t.Fatal("a model without variables it assigns got a sequence state")
	}
}
