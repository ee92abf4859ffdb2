//go:build pytorch && cgo

package pytorch_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/tensor"
)

func ptSum(t *testing.T, out []tensor.Tensor, wantOutputs int) float32 {
	t.Helper()
	if len(out) != wantOutputs {
		t.Fatalf("outputs %+v, want %d", out, wantOutputs)
	}
	return out[0].Data.([]float32)[0]
}

// Two interleaved sequences of running_sum.pt (state argument sum_in,
// initial_state() zeros, the new state returned last) keep their own sums;
// the state output is hidden from a sequence's answer.
func TestSequencesKeepSeparateState(t *testing.T) {
	m := load(t, openRuntime(t), "running_sum.pt")
	if !m.SupportsSequences() || !m.Stateful() {
		t.Fatalf("running_sum.pt: SupportsSequences %v Stateful %v, want both", m.SupportsSequences(), m.Stateful())
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
		if got := ptSum(t, out, 1); got != s.want {
			t.Fatalf("step %d: sum %v, want %v", i, got, s.want)
		}
	}
	// Outside a sequence: without the state it starts from initial_state(),
	// with it the given state is used; both outputs are returned.
	out, err := m.Predict(ctx, x(5))
	if err != nil {
		t.Fatal(err)
	}
	if got := ptSum(t, out, 2); got != 5 {
		t.Fatalf("Predict without state: sum %v, want 5", got)
	}
	out, err = m.Predict(ctx, append(x(5), tensor.New("sum_in", []int64{1}, []float32{10})))
	if err != nil {
		t.Fatal(err)
	}
	if got := ptSum(t, out, 2); got != 15 {
		t.Fatalf("Predict with state 10: sum %v, want 15", got)
	}
	// The client may not feed a sequence's state.
	_, err = m.PredictSequence(ctx, a, append(x(1), tensor.New("sum_in", []int64{1}, []float32{10})))
	if err == nil || !strings.Contains(err.Error(), "sum_in") {
		t.Fatalf("sequence call feeding sum_in: %v, want an error naming the state argument", err)
	}
	if out, err := m.PredictSequence(ctx, a, x(0)); err != nil || ptSum(t, out, 1) != 6 {
		t.Fatalf("after the refused call: %v %v, want the sum unchanged at 6", out, err)
	}
}

// Different sequences run at once (under -race: no shared memory).
func TestSequencesInParallel(t *testing.T) {
	m := load(t, openRuntime(t), "running_sum.pt")
	const sequences, steps = 4, 20
	var wg sync.WaitGroup
	for s := range sequences {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := m.NewSequenceState()
			if err != nil {
				t.Error(err)
				return
			}
			for i := 1; i <= steps; i++ {
				out, err := m.PredictSequence(context.Background(), st, []tensor.Tensor{tensor.New("x", []int64{1}, []float32{float32(s + 1)})})
				if err != nil {
					t.Error(err)
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
}

// A model without the convention has no sequence state.
func TestSequenceStateRefused(t *testing.T) {
	m := load(t, openRuntime(t), "affine_v1.pt")
	if m.Stateful() {
		t.Error("affine_v1.pt is stateful")
	}
	if _, err := m.NewSequenceState(); err == nil || !strings.Contains(err.Error(), "no state") || !strings.Contains(err.Error(), "initial_state()") {
		t.Fatalf("NewSequenceState of affine_v1.pt: %v, want an error naming the convention", err)
	}
}

// initial_state() must give one tensor per state argument.
func TestSequenceInitialStateChecked(t *testing.T) {
	m := load(t, openRuntime(t), "bad_initial_state.pt")
	_, err := m.NewSequenceState()
	if err == nil || !strings.Contains(err.Error(), "initial_state() returned 1 tensors, want 2") || !strings.Contains(err.Error(), "bad_initial_state.pt") {
		t.Fatalf("NewSequenceState: %v, want an error naming the model and the counts", err)
	}
}
