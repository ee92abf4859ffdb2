//go:build pytorch && cgo

package pytorch_test

import (
	"context"
	"strings"
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

// The state argument of running_sum.pt (sum_in) as a caller sees it:
// outside a sequence, without it the call starts from initial_state(), with
// it the given state is used, and both outputs are returned; inside one, a
// client may not feed it, and a refused call leaves the sum alone.
// Interleaved, parallel and closed sequences are the conformance suite's
// (TestConformance).
func TestSequenceStateInput(t *testing.T) {
	m := load(t, openRuntime(t), "running_sum.pt")
	ctx := context.Background()
	x := func(v float32) []tensor.Tensor { return []tensor.Tensor{tensor.New("x", []int64{1}, []float32{v})} }
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
	a, err := m.NewSequenceState()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := m.PredictSequence(ctx, a, x(6)); err != nil || ptSum(t, out, 1) != 6 {
		t.Fatalf("first sequence call: %v %v, want the sum 6", out, err)
	}
	_, err = m.PredictSequence(ctx, a, append(x(1), tensor.New("sum_in", []int64{1}, []float32{10})))
	if err == nil || !strings.Contains(err.Error(), "sum_in") {
		t.Fatalf("sequence call feeding sum_in: %v, want an error naming the state argument", err)
	}
	if out, err := m.PredictSequence(ctx, a, x(0)); err != nil || ptSum(t, out, 1) != 6 {
		t.Fatalf("after the refused call: %v %v, want the sum unchanged at 6", out, err)
	}
}

// A model without the convention has no sequence state, and the error
// names the convention (the conformance suite's Sequences/NoState checks
// the type and the path).
func TestSequenceStateRefused(t *testing.T) {
	m := load(t, openRuntime(t), "affine_v1.pt")
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
