//go:build cgo

package onnx

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

func sumOf(t *testing.T, out []tensor.Tensor, wantOutputs int) float32 {
	t.Helper()
	if len(out) != wantOutputs || out[0].Name != "sum" {
		t.Fatalf("outputs %+v, want %d starting with sum", out, wantOutputs)
	}
	return out[0].Data.([]float32)[0]
}

// Two interleaved sequences of running_sum.onnx keep their own sums, and
// the state output sum_out is hidden from a sequence's answer.
func TestSequencesKeepSeparateState(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "running_sum.onnx")
	if !m.SupportsSequences() || !m.Stateful() {
		t.Fatalf("running_sum.onnx: SupportsSequences %v Stateful %v, want both", m.SupportsSequences(), m.Stateful())
	}
	ctx := context.Background()
	a, err := m.NewSequenceState()
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.NewSequenceState()
	if err != nil {
		t.Fatal(err)
	}
	x := func(v float32) []tensor.Tensor { return []tensor.Tensor{tensor.New("x", []int64{1}, []float32{v})} }
	steps := []struct {
		st   any
		x    float32
		want float32
	}{{a, 1, 1}, {b, 100, 100}, {a, 2, 3}, {b, 200, 300}, {a, 3, 6}}
	for i, s := range steps {
		out, err := m.PredictSequence(ctx, s.st, x(s.x))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := sumOf(t, out, 1); got != s.want {
			t.Fatalf("step %d: sum %v, want %v", i, got, s.want)
		}
	}
	// Outside a sequence the state input is optional: absent, it starts
	// from zeros; given, it is used; both outputs are returned.
	out, err := m.Predict(ctx, x(5))
	if err != nil {
		t.Fatal(err)
	}
	if got := sumOf(t, out, 2); got != 5 {
		t.Fatalf("Predict without state: sum %v, want 5", got)
	}
	out, err = m.Predict(ctx, append(x(5), tensor.New("sum_in", []int64{1}, []float32{10})))
	if err != nil {
		t.Fatal(err)
	}
	if got := sumOf(t, out, 2); got != 15 || out[1].Name != "sum_out" {
		t.Fatalf("Predict with state 10: %+v, want sum 15 and sum_out", out)
	}
	// A sequence's state is the server's: a client may not feed it.
	_, err = m.PredictSequence(ctx, a, append(x(1), tensor.New("sum_in", []int64{1}, []float32{10})))
	if err == nil || !strings.Contains(err.Error(), `"sum_in" is the sequence's state`) {
		t.Fatalf("sequence call feeding sum_in: %v, want an error naming the state input", err)
	}
	if out, err := m.PredictSequence(ctx, a, x(0)); err != nil || sumOf(t, out, 1) != 6 {
		t.Fatalf("after the refused call: %v %v, want the sum unchanged at 6", out, err)
	}
}

// Different sequences run at once (under -race: no shared memory).
func TestSequencesInParallel(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "running_sum.onnx")
	const sequences, steps = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, sequences)
	for s := range sequences {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := m.NewSequenceState()
			if err != nil {
				errs <- err
				return
			}
			for i := 1; i <= steps; i++ {
				out, err := m.PredictSequence(context.Background(), st, []tensor.Tensor{tensor.New("x", []int64{1}, []float32{float32(s + 1)})})
				if err != nil {
					errs <- err
					return
				}
				if got, want := out[0].Data.([]float32)[0], float32(i*(s+1)); got != want {
					t.Errorf("sequence %d step %d: sum %v, want %v", s, i, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestSequenceStateRefused(t *testing.T) {
	requireLibrary(t)
	rt := openRuntime(t, driver.Config{})
	// A state of dynamic shape cannot start from zeros; the pair stays a
	// plain (required) input and output.
	m := loadModel(t, rt, "dynamic_state.onnx")
	_, err := m.NewSequenceState()
	if err == nil || !strings.Contains(err.Error(), `"sum_in"`) || !strings.Contains(err.Error(), "dynamic shape [-1]") || !strings.Contains(err.Error(), "test/dynamic_state.onnx") {
		t.Fatalf("NewSequenceState of dynamic_state.onnx: %v, want an error naming the model, the input and its shape", err)
	}
	if m.Signature().Inputs[1].Optional {
		t.Error("dynamic_state.onnx: sum_in is optional, want required (it is no state)")
	}
	// No pair at all: no state.
	m = loadModel(t, rt, "affine_v1.onnx")
	if m.Stateful() {
		t.Error("affine_v1.onnx is stateful")
	}
	if _, err := m.NewSequenceState(); err == nil || !strings.Contains(err.Error(), "no state") {
		t.Fatalf("NewSequenceState of affine_v1.onnx: %v, want an error saying it has no state", err)
	}
}

// BenchmarkRunningSum compares a sequence call with a plain call of the
// same model (state given by the caller).
func BenchmarkRunningSum(b *testing.B) {
	requireLibrary(b)
	m := loadModel(b, openRuntime(b, driver.Config{NumIntraopThreads: 1}), "running_sum.onnx")
	ctx := context.Background()
	x := []tensor.Tensor{tensor.New("x", []int64{1}, []float32{1})}
	b.Run("sequence", func(b *testing.B) {
		st, err := m.NewSequenceState()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := m.PredictSequence(ctx, st, x); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		in := append(slices.Clone(x), tensor.New("sum_in", []int64{1}, []float32{0}))
		for b.Loop() {
			if _, err := m.Predict(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}
