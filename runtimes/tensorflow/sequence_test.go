package tensorflow

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// runningSumModel loads the running sum (restored as 1000), its calls
// outside sequences sharing one state when shared (the opt-out).
func runningSumModel(t *testing.T, opts tfsave.Options, shared bool) *runtimes.Model {
	t.Helper()
	files, err := tfsave.RunningSumModel(opts, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if shared {
		return loadShared(t, files, driver.Config{})
	}
	return loadFiles(t, files, driver.Config{})
}

// stateModes are the two ways calls outside sequences run: each on the
// state after load (the default), or on one shared state (the opt-out).
var stateModes = map[string]bool{"per-call": false, "shared": true}

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

// Two interleaved sequences and the calls outside sequences each keep
// their own sum, each starting from the checkpoint's value; outside
// sequences, only the shared-state opt-out keeps one.
func TestSequencesKeepSeparateVariables(t *testing.T) {
	for name, opts := range map[string]tfsave.Options{"main": {}, "function": {FunctionCall: true}} {
		for mode, shared := range stateModes {
			t.Run(name+"/"+mode, func(t *testing.T) {
				m := runningSumModel(t, opts, shared)
				if !m.Stateful() || !m.SupportsSequences() {
					t.Fatal("the running-sum model is not stateful with sequences")
				}
				a, err := m.NewSequenceState()
				if err != nil {
					t.Fatal(err)
				}
				if got := sumStep(t, m, nil, 5); got != 1005 {
					t.Fatalf("outside sequences: %v, want 1005", got)
				}
				b, err := m.NewSequenceState()
				if err != nil {
					t.Fatal(err)
				}
				outside := float32(1001) // the checkpoint's 1000 + 1
				if shared {
					outside = 1006 // + the first call's 5
				}
				steps := []struct {
					st   any
					x    float32
					want float32
				}{{a, 1, 1001}, {b, 10, 1010}, {a, 2, 1003}, {b, 20, 1030}, {nil, 1, outside}, {a, 3, 1006}, {b, 30, 1060}}
				for i, s := range steps {
					if got := sumStep(t, m, s.st, s.x); got != s.want {
						t.Fatalf("step %d: %v, want %v", i, got, s.want)
					}
				}
				// A sequence started after others ran starts from the
				// checkpoint.
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
}

// Many goroutines drive many interleaved sequences at once, each sequence
// by one goroutine at a time (as the sequence manager serialises them),
// while others call outside sequences: nobody loses an update or sees
// another's sum (run under -race).
func TestSequencesConcurrent(t *testing.T) {
	for name, opts := range map[string]tfsave.Options{"main": {}, "function": {FunctionCall: true}} {
		for mode, shared := range stateModes {
			t.Run(name+"/"+mode, func(t *testing.T) { sequencesConcurrent(t, opts, shared) })
		}
	}
}

func sequencesConcurrent(t *testing.T, opts tfsave.Options, shared bool) {
	m := runningSumModel(t, opts, shared)
	const workers, perWorker, steps = 8, 6, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// Each worker starts its sequences while others run
			// and interleaves its calls across them.
			states := make([]any, perWorker)
			for i := range states {
				var err error
				if states[i], err = m.NewSequenceState(); err != nil {
					t.Error(err)
					return
				}
			}
			sums := make([]float32, perWorker)
			for i := range sums {
				sums[i] = 1000
			}
			for step := range steps {
				for i, st := range states {
					x := float32(w*100 + i*10 + step%3 + 1)
					out, err := m.PredictSequence(context.Background(), st, []tensor.Tensor{tensor.New("x", []int64{1}, []float32{x})})
					if err != nil {
						t.Error(err)
						return
					}
					sums[i] += x
					if got, _ := tensor.Data[float32](out[0]); got[0] != sums[i] {
						t.Errorf("worker %d sequence %d step %d: %v, want %v", w, i, step, got[0], sums[i])
						return
					}
				}
			}
		})
	}
	// Calls outside sequences run alongside, untouched by them:
	// each from the checkpoint, or adding to the shared state.
	wg.Go(func() {
		for k := range steps {
			out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1}, []float32{1})})
			if err != nil {
				t.Error(err)
				return
			}
			want := float32(1001)
			if shared {
				want += float32(k)
			}
			if got, _ := tensor.Data[float32](out[0]); got[0] != want {
				t.Errorf("call %d outside sequences: %v, want %v", k, got[0], want)
				return
			}
		}
	})
	wg.Wait()
	want := float32(1000)
	if shared {
		want += steps
	}
	if got := sumStep(t, m, nil, 0); got != want {
		t.Errorf("outside sequences: %v, want %v", got, want)
	}
}

// Calls of two sequences of one model are inside the serving program at
// the same time: the hook, called by each variable step a sequence's call
// runs, holds each call until both are in. Were calls serialised across
// sequences, the first would never see the second and the test would fail
// at its hang guard.
func TestSequenceCallsOverlap(t *testing.T) {
	m := runningSumModel(t, tfsave.Options{}, false)
	a, err := m.NewSequenceState()
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.NewSequenceState()
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		inside  int
		both    = make(chan struct{})
		timeout = time.After(30 * time.Second) // a hang guard only
		failed  bool
	)
	varEnvHook = func() {
		mu.Lock()
		inside++
		if inside == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-timeout:
			mu.Lock()
			failed = true
			mu.Unlock()
		}
	}
	defer func() { varEnvHook = nil }()
	var wg sync.WaitGroup
	results := make([]float32, 2)
	for i, st := range []any{a, b} {
		wg.Go(func() {
			out, err := m.PredictSequence(context.Background(), st, []tensor.Tensor{tensor.New("x", []int64{1}, []float32{float32(i + 1)})})
			if err != nil {
				t.Error(err)
				return
			}
			v, _ := tensor.Data[float32](out[0])
			results[i] = v[0]
		})
	}
	wg.Wait()
	if inside < 2 {
		t.Fatalf("the hook saw %d variable steps of sequence calls, want at least 2", inside)
	}
	if failed {
		t.Fatal("the two sequences' calls were never inside the program at the same time: calls of different sequences are serialised")
	}
	if results[0] != 1001 || results[1] != 1002 {
		t.Fatalf("sums %v, want [1001 1002]", results)
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

// TF1 ref variables (VariableV2 read by its output, Assign) keep separate
// values per sequence too: sum = Assign(v, v + x).
func TestSequencesRefVariables(t *testing.T) {
	for mode, shared := range stateModes {
		t.Run(mode, func(t *testing.T) {
			m := loadFiles(t, refRunningSum(t), driver.Config{})
			if shared {
				m = loadShared(t, refRunningSum(t), driver.Config{})
			}
			if !m.SupportsSequences() {
				t.Fatal("the ref-variable running sum does not support sequences")
			}
			a, err := m.NewSequenceState()
			if err != nil {
				t.Fatal(err)
			}
			c, err := m.NewSequenceState()
			if err != nil {
				t.Fatal(err)
			}
			outside := float32(1001)
			if shared {
				outside = 1006
			}
			steps := []struct {
				st   any
				x    float32
				want float32
			}{{a, 1, 1001}, {c, 10, 1010}, {nil, 5, 1005}, {a, 2, 1003}, {c, 20, 1030}, {nil, 1, outside}}
			for i, s := range steps {
				if got := sumStep(t, m, s.st, s.x); got != s.want {
					t.Fatalf("step %d: %v, want %v", i, got, s.want)
				}
			}
		})
	}
}
