//go:build pytorch && cgo

package pytorch

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// State convention (doc.go): forward()'s arguments named "<name>_in" are
// the state; the module exports initial_state(), returning their initial
// values in argument order; forward() returns a tuple whose last elements
// are the new states, in the same order.
const stateInSuffix = "_in"

var _ driver.SequenceModel = (*model)(nil)

// findStates marks the state arguments optional (the server feeds them) and
// records their positions; only a module with initial_state() and a fixed
// argument list has any.
func (m *model) findStates() {
	if C.pt_has_initial_state(m.c) == 0 || len(m.sig.Inputs) == 0 {
		return
	}
	for i, in := range m.sig.Inputs {
		if base, ok := strings.CutSuffix(in.Name, stateInSuffix); ok && base != "" {
			m.sig.Inputs[i].Optional = true
			m.states = append(m.states, i)
		}
	}
}

// Stateful reports whether the model has state arguments: its calls are
// never merged with others.
func (m *model) Stateful() bool { return len(m.states) > 0 }

// initialState runs initial_state() and checks it gives one tensor per
// state argument.
func (m *model) initialState() ([]tensor.Tensor, error) {
	if len(m.states) == 0 {
		return nil, fmt.Errorf("pytorch: the model has no state: forward() has no argument %q, or the module exports no initial_state() (the state convention)", "<name>"+stateInSuffix)
	}
	var out C.pt_outputs
	var kind C.int32_t
	if err := takeError(C.pt_initial_state(m.c, &out, &kind)); err != nil {
		if kind == C.PT_ERR_OUTPUT {
			return nil, fmt.Errorf("%w: pytorch: unsupported initial_state() output: %w", driver.ErrInvalidOutput, err)
		}
		return nil, fmt.Errorf("pytorch: initial_state() failed: %w", shimError(summarize(err.Error())))
	}
	defer C.pt_free_outputs(&out)
	vals, err := copyOutputs(&out)
	if err != nil {
		return nil, err
	}
	if len(vals) != len(m.states) {
		return nil, fmt.Errorf("%w: pytorch: initial_state() returned %d tensors, want %d (one per forward() argument named *%s)", driver.ErrInvalidOutput, len(vals), len(m.states), stateInSuffix)
	}
	for i, s := range m.states {
		vals[i].Name = m.sig.Inputs[s].Name
		if vals[i].Len() == 0 {
			return nil, fmt.Errorf("%w: pytorch: initial_state() gave %q no elements", driver.ErrInvalidOutput, vals[i].Name)
		}
	}
	return vals, nil
}

// withStates puts vals at the state positions of inputs (a copy).
func (m *model) withStates(inputs, vals []tensor.Tensor) []tensor.Tensor {
	full := slices.Clone(inputs)
	for i, s := range m.states {
		full[s] = vals[i]
	}
	return full
}

// absentStates reports whether every state input is absent (nil Data).
func (m *model) absentStates(inputs []tensor.Tensor) bool {
	for _, s := range m.states {
		if s >= len(inputs) || inputs[s].Data != nil {
			return false
		}
	}
	return true
}

type seqState struct {
	vals []tensor.Tensor
}

// NewSequenceState runs initial_state().
func (m *model) NewSequenceState() (any, error) {
	vals, err := m.initialState()
	if err != nil {
		return nil, err
	}
	return &seqState{vals: vals}, nil
}

// PredictSequence feeds the sequence's state and keeps the last outputs as
// its next state, leaving them out of the answer. libtorch runs calls of
// different sequences in parallel, as it runs any calls.
func (m *model) PredictSequence(ctx context.Context, st any, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	ss, ok := st.(*seqState)
	if !ok || len(ss.vals) != len(m.states) {
		return nil, fmt.Errorf("pytorch: sequence state of type %T is not this model's", st)
	}
	if !m.absentStates(inputs) {
		return nil, fmt.Errorf("%w: pytorch: a sequence's request gives the inputs other than the state (%s), which the server feeds", driver.ErrInvalidInput, m.stateNames())
	}
	out, err := m.Predict(ctx, m.withStates(inputs, ss.vals))
	if err != nil {
		return nil, err
	}
	k := len(m.states)
	if len(out) < k {
		return nil, fmt.Errorf("%w: pytorch: forward() returned %d tensors, want at least %d (the new states last)", driver.ErrInvalidOutput, len(out), k)
	}
	next := slices.Clone(out[len(out)-k:])
	for i := range next {
		next[i].Name = ss.vals[i].Name
	}
	ss.vals = next
	return out[:len(out)-k], nil
}

func (m *model) stateNames() string {
	names := make([]string, len(m.states))
	for i, s := range m.states {
		names[i] = m.sig.Inputs[s].Name
	}
	return strings.Join(names, ", ")
}
