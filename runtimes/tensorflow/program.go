package tensorflow

import (
	"context"
	"fmt"
	"sync"
)

// state is one call's values: vals[i] is slot i's tensor, either a shared
// constant or owned[i], a buffer reused from call to call.
type state struct {
	vals  []*dense
	owned []dense
	// ctx is the call's context, for steps that loop (While); nil means
	// context.Background.
	ctx context.Context
}

func (p *program) newState() *state {
	s := &state{vals: make([]*dense, len(p.types)), owned: make([]dense, len(p.types))}
	for i := range s.vals {
		if c := p.consts[i]; c != nil {
			s.vals[i] = c
		} else {
			s.vals[i] = &s.owned[i]
		}
	}
	return s
}

// run executes the schedule. A kernel panic (a bug, or input the kernel did
// not anticipate) becomes an error naming the op.
func (p *program) run(s *state) (err error) {
	i := 0
	defer func() {
		if r := recover(); r != nil {
			st := &p.steps[i]
			err = &OpError{Op: st.op, Node: st.node, Err: fmt.Errorf("kernel panicked: %v", r)}
		}
	}()
	for i = range p.steps {
		st := &p.steps[i]
		var e error
		if st.runCtx != nil {
			ctx := s.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			e = st.runCtx(ctx, s.vals)
		} else {
			e = st.run(s.vals)
		}
		if e != nil {
			return &OpError{Op: st.op, Node: st.node, Err: e}
		}
	}
	return nil
}

// finish folds constants and drops steps whose results nothing needs.
// Steps that read variables the program never assigns are folded too (the
// values restored at load are constants for serving).
func (p *program) finish() error { return p.finishWith(map[*variable]bool{}) }

// finishWith finishes p and the programs its If and While steps run
// (which no variable the whole program assigns may be folded in).
func (p *program) finishWith(written map[*variable]bool) error {
	p.stateful = p.collectWrites(written)
	for _, st := range p.steps {
		for _, sub := range st.subs {
			if err := sub.finishWith(written); err != nil {
				return err
			}
		}
	}
	kept := p.steps[:0]
	scratch := make([]*dense, len(p.types))
	for _, st := range p.steps {
		foldable := st.pure
		if st.readVar != nil && !written[st.readVar] && st.readVar.value != nil && (st.op == "ReadVariableOp" || st.op == "VariableV2" || st.op == "Variable") {
			foldable = true
		}
		for _, in := range st.ins {
			if p.consts[in] == nil {
				foldable = false
			}
		}
		if !foldable || len(st.outs) == 0 {
			kept = append(kept, st)
			continue
		}
		for i := range scratch {
			scratch[i] = p.consts[i]
		}
		for _, o := range st.outs {
			scratch[o] = &dense{}
		}
		if err := runFold(st, scratch); err != nil {
			return err
		}
		for _, o := range st.outs {
			p.consts[o] = scratch[o]
		}
	}
	p.steps = kept
	if !noFusion {
		p.fuse()
	}
	return nil
}

// collectWrites adds the variables p's steps, and those of the programs
// they run, assign to written, and reports whether there are any.
func (p *program) collectWrites(written map[*variable]bool) bool {
	any := false
	for _, st := range p.steps {
		if st.writes != nil {
			written[st.writes] = true
			any = true
		}
		for _, sub := range st.subs {
			any = sub.collectWrites(written) || any
		}
	}
	return any
}

// noFusion turns the fusion pass off (tests compare both).
var noFusion = false

func runFold(st step, vals []*dense) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &OpError{Op: st.op, Node: st.node, Err: fmt.Errorf("kernel panicked on constants: %v", r)}
		}
	}()
	if e := st.run(vals); e != nil {
		return &OpError{Op: st.op, Node: st.node, Err: e}
	}
	return nil
}

// pool hands out per-call states of a program.
type statePool struct {
	p    *program
	pool sync.Pool
}

func newStatePool(p *program) *statePool {
	sp := &statePool{p: p}
	sp.pool.New = func() any { return p.newState() }
	return sp
}

func (sp *statePool) get() *state  { return sp.pool.Get().(*state) }
func (sp *statePool) put(s *state) { sp.pool.Put(s) }
