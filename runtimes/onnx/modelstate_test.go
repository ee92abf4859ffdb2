//go:build cgo

package onnx

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// No state crosses requests: outside a sequence, a state pair (sum_in /
// sum_out of running_sum.onnx) carries nothing from one call to the next.
// An absent state input is zeros on every call, a state the caller feeds
// is used by that call alone, and sequences keep theirs apart from both.
// ONNX models have no shared state to opt into.
//
// Verified to fail with the mechanism removed: with withZeroStates feeding
// an absent state input the previous call's state output instead of
// zeros, the second call answers 10, not 5.
func TestNoStateCrossesRequests(t *testing.T) {
	requireLibrary(t)
	m := loadModel(t, openRuntime(t, driver.Config{}), "running_sum.onnx")
	ctx := context.Background()
	x := func(v float32) []tensor.Tensor { return []tensor.Tensor{tensor.New("x", []int64{1}, []float32{v})} }
	call := func(in []tensor.Tensor) (sum, sumOut float32) {
		t.Helper()
		out, err := m.Predict(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 2 || out[1].Name != "sum_out" {
			t.Fatalf("outputs %+v, want sum and sum_out", out)
		}
		return out[0].Data.([]float32)[0], out[1].Data.([]float32)[0]
	}
	for i := range 4 {
		if s, so := call(x(5)); s != 5 || so != 5 {
			t.Fatalf("call %d without state: sum %v sum_out %v, want 5 and 5 (zeros + 5 on every call)", i, s, so)
		}
	}
	// A fed state serves its call only.
	if s, _ := call(append(x(5), tensor.New("sum_in", []int64{1}, []float32{100}))); s != 105 {
		t.Fatalf("call with state 100: sum %v, want 105", s)
	}
	if s, _ := call(x(5)); s != 5 {
		t.Fatalf("call after a fed state: sum %v, want 5", s)
	}
	// Sequences keep their state between their own calls only.
	a, err := m.NewSequenceState()
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float32{1, 2, 3} {
		out, err := m.PredictSequence(ctx, a, x(1))
		if err != nil {
			t.Fatal(err)
		}
		if got := sumOf(t, out, 1); got != want {
			t.Fatalf("sequence call %d: %v, want %v", i, got, want)
		}
		if s, _ := call(x(5)); s != 5 {
			t.Fatalf("call between sequence calls: sum %v, want 5", s)
		}
	}
	// And concurrently.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 20 {
				out, err := m.Predict(ctx, x(float32(g)))
				if err != nil {
					t.Error(err)
					return
				}
				if got := out[0].Data.([]float32)[0]; got != float32(g) {
					t.Errorf("concurrent call with x = %d: sum %v, want %d", g, got, g)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := m.ShareState(); err == nil || !strings.Contains(err.Error(), "keeps no state shared by calls") {
		t.Fatalf("ShareState: %v, want an error: ONNX models have no shared state", err)
	}
}
