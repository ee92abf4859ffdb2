//go:build cgo

package onnx

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// State convention: a graph input "<name>_in" and a graph output
// "<name>_out" of the same element type and shape are one state. ONNX has no
// variables, so stateful exports (RNN/LSTM hidden states, streaming models)
// carry their state as such an input and output pair, and OpenVINO's
// MakeStateful transformation turns exactly such a pair into a ReadValue/
// Assign state. The state must have a fixed shape: a sequence starts from
// zeros of it.
const (
	stateInSuffix  = "_in"
	stateOutSuffix = "_out"
)

var _ driver.SequenceModel = (*model)(nil)

// stateSlot is one state pair: the positions of its input and output.
type stateSlot struct {
	input, output int
}

// findStates pairs the state inputs with their outputs. A pair whose input
// has no fixed shape is not a state the runtime can start from zeros:
// problem names it, and it is left a plain input.
func findStates(sig driver.Signature) (slots []stateSlot, problem string) {
	for i, in := range sig.Inputs {
		base, ok := strings.CutSuffix(in.Name, stateInSuffix)
		if !ok || base == "" {
			continue
		}
		o := slices.IndexFunc(sig.Outputs, func(s driver.TensorSpec) bool { return s.Name == base+stateOutSuffix })
		if o < 0 {
			continue
		}
		out := sig.Outputs[o]
		why := ""
		switch n, fixed := elements(in.Shape); {
		case in.Shape == nil:
			why = "has no declared shape"
		case len(in.Shape) == 0:
			why = "is a scalar (onnxruntime_go cannot feed rank-0 tensors)"
		case !fixed:
			why = fmt.Sprintf("has the dynamic shape %v", in.Shape)
		case n > tensor.DefaultMaxElements:
			why = fmt.Sprintf("has %d elements, more than the %d a tensor may have", n, tensor.DefaultMaxElements)
		case in.DType == tensor.Bytes:
			why = "is STRING"
		case out.DType != in.DType || !slices.Equal(out.Shape, in.Shape):
			why = fmt.Sprintf("is %v %v but output %q is %v %v", in.DType, in.Shape, out.Name, out.DType, out.Shape)
		}
		if why != "" {
			if problem == "" {
				problem = fmt.Sprintf("state input %q (fed back from output %q) %s; a state needs a fixed shape, dtype and size that the output keeps, since a sequence starts from zeros of it", in.Name, out.Name, why)
			}
			continue
		}
		slots = append(slots, stateSlot{input: i, output: o})
	}
	return slots, problem
}

// elements is the element count of a shape and whether every dimension is
// fixed.
func elements(shape []int64) (int64, bool) {
	n := int64(1)
	for _, d := range shape {
		if d < 1 {
			return 0, false
		}
		if n > tensor.DefaultMaxElements/d {
			return tensor.DefaultMaxElements + 1, true
		}
		n *= d
	}
	return n, true
}

// Stateful reports whether the model has state pairs: its calls are never
// merged with others (each carries its own state).
func (m *model) Stateful() bool { return len(m.states) > 0 || m.stateProblem != "" }

// zeroState is the initial value of state slot s.
func (m *model) zeroState(s stateSlot) tensor.Tensor {
	spec := m.sig.Inputs[s.input]
	n, _ := elements(spec.Shape)
	return tensor.Tensor{Name: spec.Name, Shape: slices.Clone(spec.Shape), Data: tensor.MakeData(spec.DType, int(n))}
}

// withZeroStates fills absent state inputs (nil Data: they are optional in
// the signature) with zeros, so a call outside a sequence starts from the
// initial state. inputs is not modified.
func (m *model) withZeroStates(inputs []tensor.Tensor) []tensor.Tensor {
	var filled []tensor.Tensor
	for _, s := range m.states {
		if inputs[s.input].Data != nil {
			continue
		}
		if filled == nil {
			filled = slices.Clone(inputs)
		}
		filled[s.input] = m.zeroState(s)
	}
	if filled == nil {
		return inputs
	}
	return filled
}

// seqState is one sequence's state values, aligned with model.states.
type seqState struct {
	vals []tensor.Tensor
}

// NewSequenceState returns zeros of every state input.
func (m *model) NewSequenceState() (any, error) {
	if m.stateProblem != "" {
		return nil, fmt.Errorf("onnx: %s", m.stateProblem)
	}
	if len(m.states) == 0 {
		return nil, fmt.Errorf("onnx: the model has no state: no input %q fed back from an output %q (the state convention)", "<name>"+stateInSuffix, "<name>"+stateOutSuffix)
	}
	st := &seqState{vals: make([]tensor.Tensor, len(m.states))}
	for i, s := range m.states {
		st.vals[i] = m.zeroState(s)
	}
	return st, nil
}

// PredictSequence feeds the sequence's state to the state inputs and keeps
// the state outputs as its next state; they are left out of the answer
// (the state is the server's, as OpenVINO's model states are). Calls of
// different sequences run in parallel: ONNX Runtime's Run is thread-safe
// and the states share no memory.
func (m *model) PredictSequence(ctx context.Context, st any, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	ss, ok := st.(*seqState)
	if !ok || len(ss.vals) != len(m.states) {
		return nil, fmt.Errorf("onnx: sequence state of type %T is not this model's", st)
	}
	full := slices.Clone(inputs)
	for i, s := range m.states {
		if full[s.input].Data != nil {
			return nil, fmt.Errorf("%w: onnx: input %q is the sequence's state, which the server feeds: leave it out", driver.ErrInvalidInput, m.inputNames[s.input])
		}
		full[s.input] = ss.vals[i]
	}
	out, err := m.Predict(ctx, full)
	if err != nil {
		return nil, err
	}
	next := make([]tensor.Tensor, len(m.states))
	hidden := make([]bool, len(out))
	for i, s := range m.states {
		v := out[s.output]
		want := m.sig.Inputs[s.input]
		if v.DType() != want.DType || !slices.Equal(v.Shape, want.Shape) {
			return nil, fmt.Errorf("%w: onnx: state output %q is %v %v, want %v %v like input %q", driver.ErrInvalidOutput, v.Name, v.DType(), v.Shape, want.DType, want.Shape, want.Name)
		}
		v.Name = want.Name
		next[i] = v
		hidden[s.output] = true
	}
	// Only a call that succeeded moves the sequence on.
	ss.vals = next
	answer := make([]tensor.Tensor, 0, len(out)-len(m.states))
	for i, t := range out {
		if !hidden[i] {
			answer = append(answer, t)
		}
	}
	return answer, nil
}
