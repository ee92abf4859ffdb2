package tensorflow

import (
	"context"
	"fmt"
	"sort"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// Per-sequence state. The compiled programs bind each variable by pointer,
// so a sequence's variables are swapped in around its call: under mu, the
// shared values are set aside, the sequence's values put in place, the call
// run, the sequence's new values taken back and the shared ones restored.
// Variable values are never written in place (variable.assign and the
// Assign*VariableOp kernels replace them), so a swap moves pointers and a
// sequence's tensors are never seen by another's call. Calls of one model
// are therefore serialised across sequences, as its shared-state calls are.

var _ driver.SequenceModel = (*model)(nil)

// seqState is one sequence's copy of the model's variables, aligned with
// model.vars.
type seqState struct {
	vals []*dense
}

// keepInitialState records the variables and their values after the restore
// and init ops ran at load.
func (m *model) keepInitialState(vars *varStore) {
	m.vars = make([]*variable, 0, len(vars.vars))
	for _, v := range vars.vars {
		m.vars = append(m.vars, v)
	}
	sort.Slice(m.vars, func(i, j int) bool { return m.vars[i].name < m.vars[j].name })
	m.initial = m.snapshot()
}

func (m *model) snapshot() []*dense {
	vals := make([]*dense, len(m.vars))
	for i, v := range m.vars {
		vals[i] = v.value
	}
	return vals
}

func (m *model) setValues(vals []*dense) {
	for i, v := range m.vars {
		v.value = vals[i]
	}
}

// NewSequenceState runs the restore op on the values the model had after
// load, so that a variable the checkpoint does not hold (one the init op
// set) starts from its load-time value too, never from another sequence's.
func (m *model) NewSequenceState() (any, error) {
	if !m.stateful {
		return nil, fmt.Errorf("the model assigns no variables: it has no state to keep per sequence")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	shared := m.snapshot()
	defer m.setValues(shared)
	m.setValues(m.initial)
	if m.restore != nil {
		if err := m.restore.run(m.restore.newState()); err != nil {
			return nil, fmt.Errorf("restoring a new sequence's variables from the checkpoint: %w", err)
		}
	}
	return &seqState{vals: m.snapshot()}, nil
}

// PredictSequence runs serving_default on the sequence's variables.
func (m *model) PredictSequence(ctx context.Context, st any, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	ss, ok := st.(*seqState)
	if !ok || len(ss.vals) != len(m.vars) {
		return nil, fmt.Errorf("sequence state of type %T is not this model's", st)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	shared := m.snapshot()
	defer m.setValues(shared)
	m.setValues(ss.vals)
	out, err := m.serveOnce(ctx, inputs)
	// Keep what the call assigned even when it failed later on, as the
	// shared state does.
	ss.vals = m.snapshot()
	return out, err
}
