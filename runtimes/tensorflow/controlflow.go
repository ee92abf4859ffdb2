package tensorflow

import (
	"context"
	"errors"
	"fmt"

	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// Functional control flow (If, StatelessIf, While, StatelessWhile) cannot be
// inlined like a call: which function runs, and how often, depends on
// values. Each branch, cond and body function is compiled once, at load,
// into its own program (its arguments are the program's feeds, its results
// its fetches), which the If or While step runs at call time with a state
// from the program's own pool.

// maxWhileIterations bounds the iterations of one While, so that a loop
// whose condition never turns false fails with an error instead of hanging
// the call. TensorFlow has no such bound; loops in exported models (RNN
// time steps, tf.range-driven loops) run far fewer iterations.
var maxWhileIterations = 1_000_000

// maxControlFlowFuncs bounds the If/While functions one program compiles:
// each branch is compiled for each If that runs it, so nested Ifs compile
// exponentially many, and a function whose If calls itself would never
// stop.
const maxControlFlowFuncs = 10000

// subProgram is a library function compiled for an If or While step.
type subProgram struct {
	fn     string
	prog   *program
	states *statePool
}

// compileFunc compiles function fname, called by node nd of scope sc with
// arguments of types in, into its own program. Arguments with a non-nil
// entry in consts are bound to that constant: resource handles must be
// known when a function is compiled (ReadVariableOp resolves its variable
// then), as in Keras RNN loops, which pass their weights' handles in.
func (c *compiler) compileFunc(sc *scope, nd *ndpb.NodeDef, fname string, in []dtype, consts []*dense) (*subProgram, error) {
	if fname == "" {
		return nil, fmt.Errorf("%w: names no function", ErrBadGraph)
	}
	if c.subFuncs == nil {
		c.subFuncs = new(int)
	}
	if *c.subFuncs++; *c.subFuncs > maxControlFlowFuncs {
		return nil, fmt.Errorf("%w: more than %d If/While functions to compile (each If compiles both branches, so nested Ifs multiply them)", ErrBadGraph, maxControlFlowFuncs)
	}
	if c.missing.nodes == nil { // shared with the sub-compiler below
		c.missing.nodes, c.missing.seen = map[string][]string{}, map[string]bool{}
	}
	// The function shares the caller's MatMul settings (num_intraop_threads,
	// fused_multiply_add), set after compiling.
	sub := &compiler{lib: c.lib, ops: c.ops, vars: c.vars, ck: c.ck, feeds: map[string]int{}, prog: &program{par: c.prog.intraop()},
		refVar: map[int]*variable{}, missing: c.missing, files: c.files, depth: c.depth, subFuncs: c.subFuncs}
	args := make([]int, len(in))
	for i, dt := range in {
		args[i] = newSlot(sub.prog, dt, consts[i])
	}
	sub.prog.feeds = args
	outs, err := sub.call(sc, nd, fname, args)
	if err != nil {
		return nil, err
	}
	sub.prog.fetches = outs
	// finish runs with the caller's program (program.finish), which knows
	// every variable any program assigns.
	return &subProgram{fn: fname, prog: sub.prog, states: newStatePool(sub.prog)}, nil
}

// run runs the function on args and returns its results, copied out of
// the state (which goes back to the pool).
func (sp *subProgram) run(ctx context.Context, args []*dense) ([]*dense, error) {
	s := sp.states.get()
	defer sp.states.put(s)
	s.ctx = ctx
	defer func() { s.ctx = nil }()
	for i, f := range sp.prog.feeds {
		if sp.prog.consts[f] == nil {
			s.vals[f] = args[i]
		}
	}
	err := sp.prog.run(s)
	var res []*dense
	if err == nil {
		res = make([]*dense, len(sp.prog.fetches))
		for i, f := range sp.prog.fetches {
			if s.vals[f] == deadTensor {
				err = fmt.Errorf("result %d is dead: a TF1 Switch did not take the branch computing it", i)
				break
			}
			res[i] = s.vals[f].clone()
		}
	}
	// Drop the references to the caller's tensors before pooling.
	for _, f := range sp.prog.feeds {
		if sp.prog.consts[f] == nil {
			s.vals[f] = &s.owned[f]
		}
	}
	if err != nil {
		return nil, fmt.Errorf("function %s: %w", sp.fn, err)
	}
	return res, nil
}

// controlFlow builds an If/StatelessIf or While/StatelessWhile step.
func (c *compiler) controlFlow(sc *scope, nd *ndpb.NodeDef, a attrs, ins []int) ([]int, error) {
	p := c.prog
	types := make([]dtype, len(ins))
	consts := make([]*dense, len(ins))  // If arguments known at load
	handles := make([]*dense, len(ins)) // resource handles known at load
	for i, s := range ins {
		types[i] = p.types[s]
		consts[i] = p.consts[s]
		if types[i] == dtResource {
			handles[i] = p.consts[s]
		}
	}
	var outTypes []dtype
	switch nd.Op {
	case "If", "StatelessIf":
		if len(ins) < 1 {
			return nil, fmt.Errorf("takes a condition input, has none")
		}
		then, err := c.compileFunc(sc, nd, a.fn("then_branch"), types[1:], consts[1:])
		if err != nil {
			return nil, funcErr("then_branch", err)
		}
		els, err := c.compileFunc(sc, nd, a.fn("else_branch"), types[1:], consts[1:])
		if err != nil {
			return nil, funcErr("else_branch", err)
		}
		outTypes = append(outTypes, a.list("Tout").GetType()...)
		for _, br := range []*subProgram{then, els} {
			if err := checkResults(br, outTypes); err != nil {
				return nil, err
			}
		}
		outs := make([]int, len(outTypes))
		for i, dt := range outTypes {
			outs[i] = newSlot(p, dt, nil)
		}
		cond, args := ins[0], ins[1:]
		run := func(ctx context.Context, vals []*dense) error {
			taken, err := truth(vals[cond])
			if err != nil {
				return fmt.Errorf("condition: %w", err)
			}
			br := els
			if taken {
				br = then
			}
			in := make([]*dense, len(args))
			for i, s := range args {
				in[i] = vals[s]
			}
			res, err := br.run(ctx, in)
			if err != nil {
				return err
			}
			for i, o := range outs {
				vals[o] = res[i]
			}
			return nil
		}
		st := c.emit(nd, ins, outs, nil, false)
		st.runCtx, st.subs = run, []*program{then.prog, els.prog}
		return outs, nil
	case "While", "StatelessWhile":
		cond, err := c.compileFunc(sc, nd, a.fn("cond"), types, handles)
		if err != nil {
			return nil, funcErr("cond", err)
		}
		body, err := c.compileFunc(sc, nd, a.fn("body"), types, handles)
		if err != nil {
			return nil, funcErr("body", err)
		}
		if len(cond.prog.fetches) != 1 {
			return nil, fmt.Errorf("%w: cond function %s returns %d tensors, want 1", ErrBadGraph, cond.fn, len(cond.prog.fetches))
		}
		if err := checkResults(body, types); err != nil {
			return nil, err
		}
		// A handle bound at load must stay the loop's: the body passes it
		// on unchanged.
		for i, h := range handles {
			if f := body.prog.fetches[i]; h != nil && f != body.prog.feeds[i] && body.prog.consts[f] != h {
				return nil, fmt.Errorf("body function %s changes resource loop variable %d, which the runtime needs fixed at load", body.fn, i)
			}
		}
		outs := make([]int, len(types))
		for i, dt := range types {
			outs[i] = newSlot(p, dt, nil)
		}
		limit := maxWhileIterations
		run := func(ctx context.Context, vals []*dense) error {
			loop := make([]*dense, len(ins))
			for i, s := range ins {
				loop[i] = vals[s]
			}
			for iter := 0; ; iter++ {
				if iter%64 == 0 {
					if err := ctx.Err(); err != nil {
						return fmt.Errorf("loop stopped after %d iterations: %w", iter, err)
					}
				}
				res, err := cond.run(ctx, loop)
				if err != nil {
					return fmt.Errorf("iteration %d: %w", iter, err)
				}
				more, err := truth(res[0])
				if err != nil {
					return fmt.Errorf("iteration %d: cond function %s: %w", iter, cond.fn, err)
				}
				if !more {
					break
				}
				if iter >= limit {
					return fmt.Errorf("loop did not end after %d iterations (cond function %s is still true)", limit, cond.fn)
				}
				if loop, err = body.run(ctx, loop); err != nil {
					return fmt.Errorf("iteration %d: %w", iter, err)
				}
			}
			for i, o := range outs {
				vals[o] = loop[i]
			}
			return nil
		}
		st := c.emit(nd, ins, outs, nil, false)
		st.runCtx, st.subs = run, []*program{cond.prog, body.prog}
		return outs, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnsupportedOp, nd.Op)
}

// funcErr names the function attribute at fault, except for an error of
// a node inside the function, which names its node path already (and a
// missing kernel must be reported for that node, not for the If or While).
func funcErr(attr string, err error) error {
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return fmt.Errorf("%s: %w", attr, err)
}

// checkResults checks that a function returns tensors of the types want.
func checkResults(sp *subProgram, want []dtype) error {
	if len(sp.prog.fetches) != len(want) {
		return fmt.Errorf("%w: function %s returns %d tensors, want %d", ErrBadGraph, sp.fn, len(sp.prog.fetches), len(want))
	}
	for i, f := range sp.prog.fetches {
		if got := sp.prog.types[f]; got != want[i] {
			return fmt.Errorf("%w: function %s returns %s as result %d, want %s", ErrBadGraph, sp.fn, dtypeName(got), i, dtypeName(want[i]))
		}
	}
	return nil
}

// truth converts a condition to a bool as TensorFlow does: a scalar is
// true when it is non-zero (a string when non-empty); a tensor of any
// other shape is true when it has elements.
func truth(t *dense) (bool, error) {
	if len(t.shape) != 0 {
		return t.elemCount() > 0, nil
	}
	switch t.dt {
	case dtBool:
		return t.b[0], nil
	case dtFloat:
		return t.f32[0] != 0, nil
	case dtDouble:
		return t.f64[0] != 0, nil
	case dtInt32:
		return t.i32[0] != 0, nil
	case dtInt64:
		return t.i64[0] != 0, nil
	case dtInt16:
		return t.i16[0] != 0, nil
	case dtInt8:
		return t.i8[0] != 0, nil
	case dtUint8:
		return t.u8[0] != 0, nil
	case dtString:
		return t.s[0] != "", nil
	}
	return false, fmt.Errorf("condition of dtype %s", dtypeName(t.dt))
}
