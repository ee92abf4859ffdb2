//go:build pytorch && cgo

package pytorch_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/tensor"
)

// No state crosses requests. A module cannot keep state between calls: one
// whose forward() or initial_state() mutates what the frozen module holds
// is refused at load, whether freezing keeps the mutated attribute (an int,
// a buffer) or folds it into a constant (a list or dict of tensors, whose
// element forward() writes in place). What loads answers every call as a
// freshly loaded model does; a state argument outside a sequence serves
// its call alone. PyTorch has no shared state to opt into.
//
// Verified to fail with the mechanism removed: without the shim's
// find_constant_writes, stateful_list.pt and stateful_dict.pt load and
// answer 1, 2, 3 (and 2, 4, 6) to the same input, and
// stateful_initial_state.pt starts each sequence one higher.
func TestNoStateCrossesRequests(t *testing.T) {
	rt := openRuntime(t)
	ctx := context.Background()
	for _, tc := range []struct{ file, want string }{
		{"stateful.pt", "attributes remain after freezing (count)"},
		{"stateful_buffer.pt", "attributes remain after freezing (total)"},
		{"stateful_list.pt", "forward() writes in place (aten::add_) into a tensor the frozen module holds"},
		{"stateful_dict.pt", "forward() writes in place (aten::add_) into a tensor the frozen module holds"},
		{"stateful_initial_state.pt", "initial_state() writes in place (aten::add_)"},
	} {
		t.Run("refused "+tc.file, func(t *testing.T) {
			m, err := rt.Load(ctx, "models/"+tc.file, readTestdata(t, tc.file))
			if err == nil {
				defer m.Close()
				var got []any
				for range 3 {
					out, err := m.Predict(ctx, []tensor.Tensor{tensor.New("x", []int64{1}, []float32{1})})
					if err != nil {
						t.Fatalf("loaded; want it refused (a call failed: %v)", err)
					}
					got = append(got, out[0].Data)
				}
				t.Fatalf("loaded and answered %v to the same input; want it refused", got)
			}
			if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "models/"+tc.file) {
				t.Fatalf("error %v (%s), want MODEL_EXECUTION naming the model and %q", err, inferr.TypeOf(err), tc.want)
			}
		})
	}

	t.Run("list weights and in-place writes to its own values", func(t *testing.T) {
		m := load(t, rt, "list_weights.pt")
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for range 10 {
					x := float32(g)
					out, err := m.Predict(ctx, []tensor.Tensor{tensor.New("x", []int64{1}, []float32{x})})
					if err != nil {
						t.Error(err)
						return
					}
					if y := out[0].Data.([]float32)[0]; y != (x+1)*2+1 {
						t.Errorf("x = %v: %v, want %v", x, y, (x+1)*2+1)
						return
					}
				}
			})
		}
		wg.Wait()
	})

	t.Run("state argument outside a sequence", func(t *testing.T) {
		m := load(t, rt, "running_sum.pt")
		sum := func(in ...tensor.Tensor) float32 {
			t.Helper()
			out, err := m.Predict(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			return out[0].Data.([]float32)[0]
		}
		x := tensor.New("x", []int64{1}, []float32{5})
		for i := range 3 {
			if got := sum(x); got != 5 {
				t.Fatalf("call %d without state: %v, want 5 (initial_state() + 5 every call)", i, got)
			}
		}
		if got := sum(x, tensor.New("sum_in", []int64{1}, []float32{100})); got != 105 {
			t.Fatalf("with state 100: %v, want 105", got)
		}
		if got := sum(x); got != 5 {
			t.Fatalf("after a fed state: %v, want 5", got)
		}
		st, err := m.NewSequenceState()
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []float32{5, 10} {
			out, err := m.PredictSequence(ctx, st, []tensor.Tensor{x})
			if err != nil {
				t.Fatal(err)
			}
			if got := out[0].Data.([]float32)[0]; got != want {
				t.Fatalf("sequence call %d: %v, want %v", i, got, want)
			}
			if got := sum(x); got != 5 {
				t.Fatalf("between sequence calls: %v, want 5", got)
			}
		}
		if err := m.ShareState(); err == nil || !strings.Contains(err.Error(), "keeps no state shared by calls") {
			t.Fatalf("ShareState: %v, want an error: PyTorch models have no shared state", err)
		}
	})
}
