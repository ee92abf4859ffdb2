package tensorflow

import (
	"context"
	"fmt"
	"slices"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// Per-sequence state. Each sequence has its own varEnv, a copy of the
// model's variable values; a call of the sequence carries the env in its
// context and the variable steps of the one compiled program resolve each
// variable to the env's entry (variables.go). Calls of different sequences
// therefore run in parallel, and never touch the shared values, which the
// model's non-sequence calls use under mu. Calls of one sequence are
// serialised by the sequence manager (package sequence), which owns the env.
//
// Starting a sequence copies the load-time values (pointers: values are
// never written in place) and runs the restore op on the copy.

var _ driver.SequenceModel = (*model)(nil)

// seqState is one sequence's state: its variable values.
type seqState struct {
	env varEnv
}

// keepInitialState records the variables and their values after the restore
// and init ops ran at load. It numbers the variables serving uses at run
// time (used) first, so that a call's own table holds those alone: the
// weights a model only reads were folded into constants and need no entry,
// however many there are.
func (m *model) keepInitialState(vars *varStore, used map[*variable]bool) {
	m.vars = append([]*variable(nil), vars.order...)
	slices.SortStableFunc(m.vars, func(a, b *variable) int {
		switch {
		case used[a] == used[b]:
			return 0
		case used[a]:
			return -1
		}
		return 1
	})
	m.initial = make([]*dense, len(m.vars))
	for i, v := range m.vars {
		v.idx = i
		m.initial[i] = v.value
	}
	vars.order = m.vars
	m.callVars = len(used)
}

// NewSequenceState runs the restore op on a copy of the values the model
// had after load, so that a variable the checkpoint does not hold (one the
// init op set) starts from its load-time value too, never from another
// sequence's.
func (m *model) NewSequenceState() (any, error) {
	if !m.stateful {
		return nil, fmt.Errorf("the model assigns no variables: it has no state to keep per sequence")
	}
	ss := &seqState{env: varEnv{vals: append([]*dense(nil), m.initial...)}}
	if m.restore != nil {
		s := m.restore.newState()
		s.ctx = withVarEnv(context.Background(), &ss.env)
		if err := m.restore.run(s); err != nil {
			return nil, fmt.Errorf("restoring a new sequence's variables from the checkpoint: %w", err)
		}
	}
	return ss, nil
}

// PredictSequence runs serving_default on the sequence's variables. What
// a call assigned is kept even when it failed later on, as the shared state
// does.
func (m *model) PredictSequence(ctx context.Context, st any, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	ss, ok := st.(*seqState)
	if !ok || len(ss.env.vals) != len(m.vars) {
		return nil, fmt.Errorf("sequence state of type %T is not this model's", st)
	}
	return m.serveOnce(withVarEnv(ctx, &ss.env), inputs)
}
