package tensorflow

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// counterModel loads the counter (restored as 1, each call adds 1 and
// returns the new value) with the shared-state opt-out, whose calls see
// each other's counts.
func counterModel(t *testing.T, opts tfsave.Options, cfg driver.Config) *runtimes.Model {
	t.Helper()
	files, err := tfsave.CounterModel(opts, 1)
	if err != nil {
		t.Fatal(err)
	}
	return loadShared(t, files, cfg)
}

// concurrentCounts calls the counter model from several goroutines and
// returns every value it returned.
func concurrentCounts(t *testing.T, m *runtimes.Model, goroutines, perG int) []int32 {
	t.Helper()
	in := []tensor.Tensor{tensor.New("input_1", []int64{1}, []float32{0})}
	var mu sync.Mutex
	var got []int32
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range perG {
				out, err := m.Predict(context.Background(), in)
				if err != nil {
					t.Error(err)
					return
				}
				v, _ := tensor.Data[int32](out[0])
				mu.Lock()
				got = append(got, v[0])
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// With the shared-state opt-out, calls run one at a time: concurrent
// calls count 2, 3, ... with no count lost or repeated.
func TestSharedStateConcurrent(t *testing.T) {
	for name, opts := range map[string]tfsave.Options{"main": {}, "function": {FunctionCall: true}} {
		t.Run(name, func(t *testing.T) {
			m := counterModel(t, opts, driver.Config{})
			if !m.Stateful() {
				t.Fatal("the counter model does not report stateful to the portable layer")
			}
			got := concurrentCounts(t, m, 8, 50)
			slices.Sort(got)
			for i, v := range got {
				if v != int32(i+2) {
					t.Fatalf("sorted results[%d] = %d, want %d: calls were not serialised (%v)", i, v, i+2, got)
				}
			}
		})
	}
}

// model_reset_probability gives a shared-state model back its load-time
// state before a call with that chance.
func TestSharedStateReset(t *testing.T) {
	m := counterModel(t, tfsave.Options{FunctionCall: true}, driver.Config{ModelResetProbability: 0.5})
	got := concurrentCounts(t, m, 4, 100)
	if len(got) != 400 {
		t.Fatalf("%d results, want 400 (lost requests)", len(got))
	}
	twos := 0
	for _, v := range got {
		if v < 2 || v > 401 {
			t.Fatalf("counter value %d out of range", v)
		}
		if v == 2 {
			twos++
		}
	}
	// Each call resets first with probability 1/2, so about half return 2.
	if twos < 100 || twos > 300 {
		t.Fatalf("%d of 400 calls returned the reset value 2, want about 200", twos)
	}
}

func TestTfsaveModelsLoad(t *testing.T) {
	for name, opts := range map[string]tfsave.Options{"tf2": {}, "tf2-function": {FunctionCall: true}, "tf1": {Variables: tfsave.RefVariables}} {
		for model, mk := range map[string]func(tfsave.Options) (map[string][]byte, error){"pctr": tfsave.PCTRModel, "pcvr": tfsave.PCVRModel} {
			t.Run(name+"/"+model, func(t *testing.T) {
				files, err := mk(opts)
				if err != nil {
					t.Fatal(err)
				}
				m := loadFiles(t, files, driver.Config{})
				var in []tensor.Tensor
				for _, spec := range m.Signature().Inputs {
					shape := append([]int64{}, spec.Shape...)
					shape[0] = 3
					n, _ := tensor.NumElements(shape, 0)
					in = append(in, tensor.Tensor{Name: spec.Name, Shape: shape, Data: tensor.MakeData(spec.DType, int(n))})
				}
				out, err := m.Predict(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				p, _ := tensor.Data[float32](out[0])
				if len(p) != 3 || p[0] <= 0 || p[0] >= 1 || p[0] != p[1] {
					t.Fatalf("prediction %v, want three equal probabilities", p)
				}
			})
		}
	}
}
