package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

// runningSumPath is the model path the sequence subtests load the
// running-sum fixture under.
const runningSumPath = "conformance/running_sum/"

// testSequences runs the sequence subtests on the running-sum fixture.
func (s *suite) testSequences(t *testing.T) {
	for _, c := range []struct {
		name string
		test func(*suite, *testing.T)
	}{
		{"Interleaved", (*suite).testSequencesInterleaved},
		{"Parallel", (*suite).testSequencesParallel},
		{"BadInput", (*suite).testSequenceBadInput},
		{"NoState", (*suite).testSequenceNoState},
		{"Close", (*suite).testSequenceClose},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(s, t) })
	}
}

// sumInput is the running-sum model's input: x, FLOAT [1].
func sumInput(v float32) []tensor.Tensor {
	return []tensor.Tensor{tensor.New("x", []int64{1}, []float32{v})}
}

// sumOf returns the running sum an answer carries: its first output, FLOAT
// [1]. In a sequence the answer must be that output alone (the state
// outputs are the runtime's, hidden from the caller).
func sumOf(out []tensor.Tensor, inSequence bool) (float32, error) {
	if len(out) == 0 || (inSequence && len(out) != 1) {
		return 0, fmt.Errorf("%d outputs (%s), want the sum alone in a sequence, first outside", len(out), describe(out))
	}
	v, ok := out[0].Data.([]float32)
	if !ok || len(v) != 1 {
		return 0, fmt.Errorf("first output %s, want FLOAT [1]", describe(out[:1]))
	}
	return v[0], nil
}

// step runs one call of the running-sum model, in the sequence of state st
// (outside sequences when st is nil), and returns the sum it answered.
func step(m *runtimes.Model, st any, x float32) (float32, error) {
	var out []tensor.Tensor
	err := noPanic(func() error {
		var err error
		if st == nil {
			out, err = m.Predict(context.Background(), sumInput(x))
		} else {
			out, err = m.PredictSequence(context.Background(), st, sumInput(x))
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return sumOf(out, st != nil)
}

func newState(t *testing.T, m *runtimes.Model) any {
	t.Helper()
	var st any
	if err := noPanic(func() error {
		var err error
		st, err = m.NewSequenceState()
		return err
	}); err != nil {
		t.Fatalf("NewSequenceState: %v", err)
	}
	return st
}

// testSequencesInterleaved: two interleaved sequences keep their own sums,
// a call outside sequences starts from the initial state and disturbs
// neither, and a sequence started after others ran starts from the initial
// state too.
func (s *suite) testSequencesInterleaved(t *testing.T) {
	m := s.load(t, runningSumPath, s.fx.RunningSum)
	if !m.SupportsSequences() || !m.Stateful() {
		t.Fatalf("running-sum fixture: SupportsSequences %v, Stateful %v; want both", m.SupportsSequences(), m.Stateful())
	}
	s0 := s.fx.RunningSumStart
	a, b := newState(t, m), newState(t, m)
	steps := []struct {
		seq  string
		st   any
		x    float32
		want float32
	}{
		{"a", a, 1, s0 + 1}, {"b", b, 100, s0 + 100}, {"a", a, 2, s0 + 3},
		{"outside", nil, 5, s0 + 5},
		{"b", b, 200, s0 + 300}, {"a", a, 3, s0 + 6},
		{"outside", nil, 7, s0 + 7},
		{"a", a, 0, s0 + 6},
	}
	for i, st := range steps {
		got, err := step(m, st.st, st.x)
		if err != nil {
			t.Fatalf("step %d (%s, x=%v): %v", i, st.seq, st.x, err)
		}
		if got != st.want {
			t.Fatalf("step %d (%s, x=%v): sum %v, want %v", i, st.seq, st.x, got, st.want)
		}
	}
	c := newState(t, m)
	if got, err := step(m, c, 0); err != nil || got != s0 {
		t.Fatalf("a sequence started after others: sum %v (%v), want the initial %v", got, err, s0)
	}
}

// testSequencesParallel: different sequences run at once, each driven by
// one goroutine (as the sequence manager serialises a sequence's calls);
// none sees another's sum (run with -race).
func (s *suite) testSequencesParallel(t *testing.T) {
	m := s.load(t, runningSumPath, s.fx.RunningSum)
	const sequences, steps = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, sequences)
	for q := range sequences {
		wg.Go(func() {
			var st any
			if err := noPanic(func() error {
				var err error
				st, err = m.NewSequenceState()
				return err
			}); err != nil {
				errs <- fmt.Errorf("sequence %d: NewSequenceState: %w", q, err)
				return
			}
			x := float32(q + 1)
			for i := 1; i <= steps; i++ {
				got, err := step(m, st, x)
				if err != nil {
					errs <- fmt.Errorf("sequence %d step %d: %w", q, i, err)
					return
				}
				if want := s.fx.RunningSumStart + float32(i)*x; got != want {
					errs <- fmt.Errorf("sequence %d step %d: sum %v, want %v", q, i, got, want)
					return
				}
			}
		})
	}
	if !waitGroup(&wg) {
		t.Fatalf("sequences did not finish within %v", waitLimit)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testSequenceBadInput: a sequence call with inputs that do not fit is a
// typed error naming the model path, never a panic, and leaves the
// sequence's sum as it was.
func (s *suite) testSequenceBadInput(t *testing.T) {
	m := s.load(t, runningSumPath, s.fx.RunningSum)
	positional := m.Signature().Positional
	st := newState(t, m)
	if got, err := step(m, st, 4); err != nil || got != s.fx.RunningSumStart+4 {
		t.Fatalf("first step: sum %v (%v), want %v", got, err, s.fx.RunningSumStart+4)
	}
	for _, c := range []struct {
		desc   string
		inputs []tensor.Tensor
	}{
		{"no inputs", nil},
		{"nil data", []tensor.Tensor{{Name: "x", Shape: []int64{1}}}},
		{"content count mismatch", []tensor.Tensor{tensor.New("x", []int64{1}, []float32{1, 2})}},
		{"unsupported Go data", []tensor.Tensor{{Name: "x", Shape: []int64{1}, Data: []string{"1"}}}},
		// A positional runtime may convert another dtype (torch promotes
		// DOUBLE + FLOAT); a named one must refuse it.
		{"wrong dtype", []tensor.Tensor{tensor.New("x", []int64{1}, []float64{1})}},
	} {
		if positional && c.desc == "wrong dtype" {
			continue
		}
		var out []tensor.Tensor
		err := noPanic(func() error {
			var err error
			out, err = m.PredictSequence(context.Background(), st, c.inputs)
			return err
		})
		if isPanic(err) {
			t.Fatalf("%s: %v", c.desc, err)
		}
		if err == nil {
			t.Fatalf("%s: PredictSequence succeeded with %s, want INPUT_PARSING", c.desc, describe(out))
		}
		if typ := inferr.TypeOf(err); typ != inferr.InputParsing && !(positional && typ == inferr.ModelExecution) {
			t.Errorf("%s: error type %v (%v), want INPUT_PARSING", c.desc, typ, err)
		}
		if !strings.Contains(err.Error(), runningSumPath) {
			t.Errorf("%s: error %q does not name the model path %q", c.desc, err, runningSumPath)
		}
	}
	if got, err := step(m, st, 0); err != nil || got != s.fx.RunningSumStart+4 {
		t.Fatalf("after the refused calls: sum %v (%v), want it unchanged at %v", got, err, s.fx.RunningSumStart+4)
	}
}

// testSequenceNoState: a model without state (the affine fixture) is not
// stateful, and asking it for a sequence state is a MODEL_EXECUTION error
// naming the model path.
func (s *suite) testSequenceNoState(t *testing.T) {
	m := s.load(t, affineV1Path, s.fx.AffineV1)
	if m.Stateful() {
		t.Error("the affine fixture is stateful")
	}
	var st any
	err := noPanic(func() error {
		var err error
		st, err = m.NewSequenceState()
		return err
	})
	if err == nil {
		t.Fatalf("NewSequenceState of a model without state gave %v, want an error", st)
	}
	if isPanic(err) || inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), affineV1Path) {
		t.Fatalf("NewSequenceState of a model without state: %v (type %v), want MODEL_EXECUTION naming %q", err, inferr.TypeOf(err), affineV1Path)
	}
}

// testSequenceClose: after Close, a new sequence state and a call in an
// existing sequence are MODEL_NOT_FOUND (runtimes.ErrClosed) naming the
// model path.
func (s *suite) testSequenceClose(t *testing.T) {
	m := s.load(t, runningSumPath, s.fx.RunningSum)
	st := newState(t, m)
	if _, err := step(m, st, 1); err != nil {
		t.Fatalf("step before Close: %v", err)
	}
	if err := noPanic(m.Close); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := step(m, st, 1)
	checkClosed(t, "PredictSequence after Close", err)
	err = noPanic(func() error {
		_, err := m.NewSequenceState()
		return err
	})
	checkClosed(t, "NewSequenceState after Close", err)
}

func checkClosed(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, runtimes.ErrClosed) || inferr.TypeOf(err) != inferr.ModelNotFound {
		t.Fatalf("%s: %v (type %v), want MODEL_NOT_FOUND from runtimes.ErrClosed", what, err, inferr.TypeOf(err))
	}
	if !strings.Contains(err.Error(), runningSumPath) {
		t.Errorf("%s: %q does not name the model path", what, err)
	}
}
