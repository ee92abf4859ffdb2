//go:build cgo

package onnx

import (
	"context"
	"slices"
	"strings"
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

// The state pair of running_sum.onnx (sum_in, sum_out) as a caller sees
// it: optional outside a sequence (absent, it starts from zeros; given, it
// is used; both outputs are returned), the server's inside one (a client
// may not feed it, and a refused call leaves the sum alone). Interleaved,
// parallel and closed sequences are the conformance suite's (TestConformance).
func TestSequenceStateInput(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "running_sum.onnx")
	ctx := context.Background()
	x := func(v float32) []tensor.Tensor { return []tensor.Tensor{tensor.New("x", []int64{1}, []float32{v})} }
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
	a, err := m.NewSequenceState()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := m.PredictSequence(ctx, a, x(6)); err != nil || sumOf(t, out, 1) != 6 {
		t.Fatalf("first sequence call: %v %v, want the sum 6", out, err)
	}
	_, err = m.PredictSequence(ctx, a, append(x(1), tensor.New("sum_in", []int64{1}, []float32{10})))
	if err == nil || !strings.Contains(err.Error(), `"sum_in" is the sequence's state`) {
		t.Fatalf("sequence call feeding sum_in: %v, want an error naming the state input", err)
	}
	if out, err := m.PredictSequence(ctx, a, x(0)); err != nil || sumOf(t, out, 1) != 6 {
		t.Fatalf("after the refused call: %v %v, want the sum unchanged at 6", out, err)
	}
}

// A state of dynamic shape cannot start from zeros; the pair stays a plain
// (required) input and output. (A model without the pair has no state: the
// conformance suite's Sequences/NoState.)
func TestSequenceStateRefused(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "dynamic_state.onnx")
	_, err := m.NewSequenceState()
	if err == nil || !strings.Contains(err.Error(), `"sum_in"`) || !strings.Contains(err.Error(), "dynamic shape [-1]") || !strings.Contains(err.Error(), "test/dynamic_state.onnx") {
		t.Fatalf("NewSequenceState of dynamic_state.onnx: %v, want an error naming the model, the input and its shape", err)
	}
	if m.Signature().Inputs[1].Optional {
		t.Error("dynamic_state.onnx: sum_in is optional, want required (it is no state)")
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
