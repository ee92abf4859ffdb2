package tensorflow

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// TF1 control flow (tf.compat.v1 graphs, control_flow_v2 off) is made of
// primitive ops in the main graph instead of functions:
//
//   - tf.cond: Switch(data, pred) forwards data to output 1 when pred is
//     true, else to output 0; the other output is dead. A node with a dead
//     input (data or control) does not run and its outputs are dead;
//     Merge, the exception, forwards its first live input and its index.
//     deadTensor marks a dead slot at run time; only steps downstream of a
//     Switch (the compiler's mayDie slots) check for it, so graphs without
//     Switch run exactly as before.
//   - tf.while_loop: a frame (the nodes between Enter(frame_name=F) and
//     Exit) iterates. As TensorFlow's functionalize_control_flow pass does,
//     each frame becomes at load a loop step with two sub-programs, like
//     the functional While: loop variables are the Merges fed by an Enter
//     and a NextIteration, cond is the LoopCond's input, body computes the
//     NextIteration inputs from the Switch:1 values, loop invariants are
//     the Enters with is_constant, and each Exit is a variable's final
//     value. Nested frames are compiled inside the body that holds them.

// deadTensor is the value of a dead slot. Kernels never see it: a step with
// a dead input is skipped.
var deadTensor = &dense{}

// tf1FrameOps are the loop ops that are compiled only as part of their
// frame (reached through its Exit).
var tf1FrameOps = map[string]bool{
	"Enter": true, "RefEnter": true, "Exit": true, "RefExit": true,
	"NextIteration": true, "RefNextIteration": true, "LoopCond": true,
}

func isMerge(op string) bool  { return op == "Merge" || op == "RefMerge" }
func isSwitch(op string) bool { return op == "Switch" || op == "RefSwitch" }
func isExit(op string) bool   { return op == "Exit" || op == "RefExit" }
func isEnter(op string) bool  { return op == "Enter" || op == "RefEnter" }
func isNextIteration(op string) bool {
	return op == "NextIteration" || op == "RefNextIteration"
}

// deadState is what the compiler of one program knows about dead tensors.
type deadState struct {
	// mayDie marks slots that can hold deadTensor at run time.
	mayDie map[int]bool
}

func (c *compiler) slotMayDie(s int) bool { return c.dead.mayDie[s] }

func (c *compiler) markMayDie(slots ...int) {
	if c.dead.mayDie == nil {
		c.dead.mayDie = map[int]bool{}
	}
	for _, s := range slots {
		c.dead.mayDie[s] = true
	}
}

// ctlGuards returns the slots whose deadness makes a control edge from
// node name dead (nil when it is never dead).
func (sc *scope) ctlGuards(name string) []int { return sc.ctl[name] }

func (sc *scope) setCtl(name string, guards []int) {
	if len(guards) == 0 {
		return
	}
	if sc.ctl == nil {
		sc.ctl = map[string][]int{}
	}
	sc.ctl[name] = guards
}

func addGuards(dst []int, src ...int) []int {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

// guardNode applies dead-tensor semantics to node nd, whose build emitted
// steps from index from on and returned outs: with guards (slots whose
// deadness kills the node), each step is skipped, its outputs dead, when a
// guard is dead; a node that emitted no step (Identity, Const, NoOp) gets a
// gate step when a control input could kill it. It returns the node's
// outputs and records the guards of a control edge from it.
func (c *compiler) guardNode(sc *scope, nd *ndpb.NodeDef, from int, ins, outs, guards []int) []int {
	if nd.Op != "ControlTrigger" && c.constDead(guards) {
		// Dead on every call (the untaken side of a Switch whose pred is
		// known at load, as Keras's learning phase is): no step runs.
		p := c.prog
		p.steps = p.steps[:from]
		dead := make([]int, len(outs))
		for i, o := range outs {
			dead[i] = newSlot(p, p.types[o], deadTensor)
		}
		c.markMayDie(dead...)
		sc.setCtl(nd.Name, guards)
		return dead
	}
	if (isSwitch(nd.Op) || isMerge(nd.Op)) && len(guards) > 0 && len(c.prog.steps) == from {
		// Resolved at load (pred known, one live input) into aliases: a
		// dead input or control input must still kill it.
		outs = c.gate(nd, outs, guards)
		c.markMayDie(outs...)
	}
	switch {
	case isSwitch(nd.Op):
		// Its outputs may die whatever its inputs; a control edge from it
		// is dead only when an input is.
		c.wrapSteps(from, guards)
		sc.setCtl(nd.Name, guards)
		return outs
	case isMerge(nd.Op):
		c.wrapSteps(from, guards)
		if len(outs) > 0 && (len(guards) > 0 || allMayDie(c, ins)) {
			c.markMayDie(outs...)
			sc.setCtl(nd.Name, outs[:1])
		}
		return outs
	case nd.Op == "ControlTrigger":
		return outs // never dead
	}
	if len(guards) == 0 {
		return outs
	}
	if len(outs) == 0 {
		c.wrapSteps(from, guards)
		sc.setCtl(nd.Name, guards)
		return outs
	}
	if len(c.prog.steps) > from {
		c.wrapSteps(from, guards)
	} else if !(len(outs) == 1 && len(guards) == 1 && outs[0] == guards[0]) {
		outs = c.gate(nd, outs, guards)
	}
	c.markMayDie(outs...)
	sc.setCtl(nd.Name, outs[:1])
	return outs
}

// constDead reports whether a slot of guards is dead at load.
func (c *compiler) constDead(guards []int) bool {
	for _, g := range guards {
		if c.prog.consts[g] == deadTensor {
			return true
		}
	}
	return false
}

func allMayDie(c *compiler, slots []int) bool {
	for _, s := range slots {
		if !c.slotMayDie(s) {
			return false
		}
	}
	return len(slots) > 0
}

// wrapSteps makes the steps from index from on dead-aware: when a guard
// is dead the step does not run and its outputs are dead. Each output has a
// shadow slot holding the state's own buffer, which the output gets back
// when the step runs again after a dead call.
func (c *compiler) wrapSteps(from int, guards []int) {
	if len(guards) == 0 {
		return
	}
	p := c.prog
	for i := from; i < len(p.steps); i++ {
		outs := p.steps[i].outs
		shadows := make([]int, len(outs))
		for j, o := range outs {
			shadows[j] = newSlot(p, p.types[o], nil)
		}
		st := &p.steps[i]
		st.pure, st.readVar, st.fuse = false, nil, nil
		st.deadAware = true
		dead := func(v []*dense) bool {
			for _, g := range guards {
				if v[g] == deadTensor {
					for _, o := range outs {
						v[o] = deadTensor
					}
					return true
				}
			}
			for j, o := range outs {
				if v[o] == deadTensor {
					v[o] = v[shadows[j]]
				}
			}
			return false
		}
		if run := st.run; run != nil {
			st.run = func(v []*dense) error {
				if dead(v) {
					return nil
				}
				return run(v)
			}
		}
		if run := st.runCtx; run != nil {
			st.runCtx = func(ctx context.Context, v []*dense) error {
				if dead(v) {
					return nil
				}
				return run(ctx, v)
			}
		}
	}
}

// gate emits a step copying outs to new slots, dead when a guard is.
func (c *compiler) gate(nd *ndpb.NodeDef, outs, guards []int) []int {
	p := c.prog
	gated := make([]int, len(outs))
	for i, o := range outs {
		gated[i] = newSlot(p, p.types[o], nil)
	}
	c.emit(nd, outs, gated, func(v []*dense) error {
		for _, g := range guards {
			if v[g] == deadTensor {
				for _, o := range gated {
					v[o] = deadTensor
				}
				return nil
			}
		}
		for i, o := range outs {
			v[gated[i]] = v[o]
		}
		return nil
	}, false)
	return gated
}

// buildSwitch emits Switch(data, pred): data goes to output 1 when pred is
// true, to output 0 otherwise, and the other output is dead.
func (c *compiler) buildSwitch(nd *ndpb.NodeDef, ins []int) ([]int, error) {
	if len(ins) != 2 {
		return nil, fmt.Errorf("takes 2 inputs (data, pred), has %d", len(ins))
	}
	p := c.prog
	if p.types[ins[1]] != dtBool {
		return nil, fmt.Errorf("pred is %s, want bool", dtypeName(p.types[ins[1]]))
	}
	data, pred := ins[0], ins[1]
	if pc := p.consts[pred]; pc != nil {
		// pred known at load: the taken output is data itself and the
		// other is dead on every call, so the branch not taken compiles to
		// nothing and the taken one runs without dead checks.
		if pc.dt != dtBool || len(pc.shape) != 0 {
			return nil, fmt.Errorf("pred must be a bool scalar, is %s", pc)
		}
		dead := newSlot(p, p.types[data], deadTensor)
		c.markMayDie(dead)
		if pc.b[0] {
			return []int{dead, data}, nil
		}
		return []int{data, dead}, nil
	}
	f, t := newSlot(p, p.types[data], nil), newSlot(p, p.types[data], nil)
	c.emit(nd, ins, []int{f, t}, func(v []*dense) error {
		pv := v[pred]
		if pv.dt != dtBool || len(pv.shape) != 0 {
			return fmt.Errorf("pred must be a bool scalar, is %s", pv)
		}
		if pv.b[0] {
			v[f], v[t] = deadTensor, v[data]
		} else {
			v[f], v[t] = v[data], deadTensor
		}
		return nil
	}, false)
	c.markMayDie(f, t)
	return []int{f, t}, nil
}

// buildMerge emits Merge: its output is its first live input, and
// value_index that input's index; with every input dead both are dead.
func (c *compiler) buildMerge(nd *ndpb.NodeDef, ins []int) ([]int, error) {
	if len(ins) == 0 {
		return nil, fmt.Errorf("takes at least 1 input, has none")
	}
	p := c.prog
	dt := p.types[ins[0]]
	for i, s := range ins {
		if p.types[s] != dt {
			return nil, fmt.Errorf("input %d is %s, input 0 %s", i, dtypeName(p.types[s]), dtypeName(dt))
		}
	}
	// Inputs dead at load never win; with one live input left that is
	// never dead, the Merge is that input.
	var live []int
	for i, s := range ins {
		if p.consts[s] != deadTensor {
			live = append(live, i)
		}
	}
	switch {
	case len(live) == 0:
		out, idx := newSlot(p, dt, deadTensor), newSlot(p, dtInt32, deadTensor)
		c.markMayDie(out, idx)
		return []int{out, idx}, nil
	case len(live) == 1 && !c.slotMayDie(ins[live[0]]):
		idx := &dense{}
		alloc[int32](idx, dtInt32, nil)[0] = int32(live[0])
		return []int{ins[live[0]], newSlot(p, dtInt32, idx)}, nil
	}
	out, idx, idxShadow := newSlot(p, dt, nil), newSlot(p, dtInt32, nil), newSlot(p, dtInt32, nil)
	c.emit(nd, ins, []int{out, idx}, func(v []*dense) error {
		for _, i := range live {
			s := ins[i]
			if v[s] == deadTensor {
				continue
			}
			v[out] = v[s]
			if v[idx] == deadTensor {
				v[idx] = v[idxShadow]
			}
			alloc[int32](v[idx], dtInt32, nil)[0] = int32(i)
			return nil
		}
		v[out], v[idx] = deadTensor, deadTensor
		return nil
	}, false)
	return []int{out, idx}, nil
}

// frameIndex maps the main graph's loop structure: the Enters of each
// frame and the data consumers of each node.
type frameIndex struct {
	enters    map[string][]*ndpb.NodeDef
	consumers map[string][]consumer
	// building holds the frames being compiled, so a frame reaching its
	// own Exit fails instead of recursing.
	building map[string]bool
	depth    int
}

type consumer struct {
	nd  *ndpb.NodeDef
	out int // output of the producer it reads
}

func newFrameIndex(nodes map[string]*ndpb.NodeDef) *frameIndex {
	fi := &frameIndex{enters: map[string][]*ndpb.NodeDef{}, consumers: map[string][]consumer{}, building: map[string]bool{}}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names) // deterministic loop-variable order and errors
	for _, n := range names {
		nd := nodes[n]
		if isEnter(nd.Op) {
			f := attrs(nd.Attr).s("frame_name")
			fi.enters[f] = append(fi.enters[f], nd)
		}
		for _, in := range nd.Input {
			if strings.HasPrefix(in, "^") {
				continue
			}
			src, idx, err := splitTensorName(in)
			if err != nil {
				continue
			}
			fi.consumers[src] = append(fi.consumers[src], consumer{nd, idx})
		}
	}
	return fi
}

// dataInput returns nd's first data input as (node, output index).
func dataInput(nd *ndpb.NodeDef, i int) (string, int, bool) {
	k := 0
	for _, in := range nd.Input {
		if strings.HasPrefix(in, "^") {
			continue
		}
		if k == i {
			n, idx, err := splitTensorName(in)
			return n, idx, err == nil
		}
		k++
	}
	return "", 0, false
}

// loopVar is one variable of a TF1 while loop.
type loopVar struct {
	enter, merge, sw, next *ndpb.NodeDef
	exits                  []*ndpb.NodeDef
}

// buildFrameOp compiles a TF1 loop op reached from outside its loop: an
// Exit compiles its whole loop; any other loop op is an error, since only
// Exits leave a frame.
func (c *compiler) buildFrameOp(sc *scope, nd *ndpb.NodeDef) ([]int, error) {
	if sc.fn != nil {
		return nil, fmt.Errorf("%w: TF1 loop op in function %s: TF1 control flow is supported in the main graph only", ErrBadGraph, sc.name)
	}
	if !isExit(nd.Op) {
		what := "its frame"
		if isEnter(nd.Op) {
			what = fmt.Sprintf("frame %q", attrs(nd.Attr).s("frame_name"))
		}
		return nil, fmt.Errorf("%w: %s is used outside %s: only an Exit may leave a while loop", ErrBadGraph, sc.where(nd.Name), what)
	}
	return c.buildLoop(sc, nd)
}

// loopMerge reports whether Merge nd is a while loop's (one input is a
// NextIteration): it may only be compiled as part of its loop.
func loopMerge(sc *scope, nd *ndpb.NodeDef) bool {
	for _, in := range nd.Input {
		n, _, _ := splitTensorName(strings.TrimPrefix(in, "^"))
		if src, ok := sc.nodes[n]; ok && isNextIteration(src.Op) {
			return true
		}
	}
	return false
}

// findLoop gathers the loop whose Exit is exit: its frame's variables (in
// Enter name order), invariants and LoopCond.
func findLoop(sc *scope, fi *frameIndex, exit *ndpb.NodeDef) (frame string, vars []loopVar, invariants []*ndpb.NodeDef, loopCond *ndpb.NodeDef, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: while loop of Exit %s: %s", ErrBadGraph, sc.where(exit.Name), fmt.Sprintf(format, args...))
	}
	node := func(name string) *ndpb.NodeDef { return sc.nodes[name] }
	swName, swOut, ok := dataInput(exit, 0)
	sw := node(swName)
	if !ok || sw == nil || !isSwitch(sw.Op) || swOut != 0 {
		return "", nil, nil, nil, bad("input is not output 0 of a Switch")
	}
	mName, _, _ := dataInput(sw, 0)
	m := node(mName)
	if m == nil || !isMerge(m.Op) {
		return "", nil, nil, nil, bad("Switch %s: data input is not a Merge", swName)
	}
	var enter *ndpb.NodeDef
	for i := range 2 {
		n, _, _ := dataInput(m, i)
		if e := node(n); e != nil && isEnter(e.Op) {
			enter = e
		}
	}
	if enter == nil {
		return "", nil, nil, nil, bad("Merge %s has no Enter input", mName)
	}
	frame = attrs(enter.Attr).s("frame_name")
	lcName, _, _ := dataInput(sw, 1)
	loopCond = node(lcName)
	if loopCond == nil || loopCond.Op != "LoopCond" {
		return "", nil, nil, nil, bad("Switch %s: pred is not a LoopCond", swName)
	}
	for _, e := range fi.enters[frame] {
		if attrs(e.Attr).b("is_constant") {
			invariants = append(invariants, e)
			continue
		}
		v := loopVar{enter: e}
		for _, cs := range fi.consumers[e.Name] {
			if isMerge(cs.nd.Op) {
				if v.merge != nil && v.merge != cs.nd {
					return "", nil, nil, nil, bad("Enter %s (frame %q) feeds two Merges", e.Name, frame)
				}
				v.merge = cs.nd
			}
		}
		if v.merge == nil {
			return "", nil, nil, nil, bad("Enter %s (frame %q) feeds no Merge", e.Name, frame)
		}
		if n := len(dataInputs(v.merge)); n != 2 {
			return "", nil, nil, nil, bad("Merge %s has %d inputs, want Enter and NextIteration", v.merge.Name, n)
		}
		for i := range 2 {
			n, _, _ := dataInput(v.merge, i)
			if src := node(n); src != nil && isNextIteration(src.Op) {
				v.next = src
			} else if src != e {
				return "", nil, nil, nil, bad("Merge %s: input %d is neither its Enter nor a NextIteration", v.merge.Name, i)
			}
		}
		if v.next == nil {
			return "", nil, nil, nil, bad("Merge %s has no NextIteration input", v.merge.Name)
		}
		for _, cs := range fi.consumers[v.merge.Name] {
			if isSwitch(cs.nd.Op) && cs.out == 0 {
				if p, _, _ := dataInput(cs.nd, 1); p == loopCond.Name {
					v.sw = cs.nd
				}
			}
		}
		if v.sw == nil {
			return "", nil, nil, nil, bad("Merge %s (frame %q) has no Switch on LoopCond %s: mismatched frames?", v.merge.Name, frame, loopCond.Name)
		}
		for _, cs := range fi.consumers[v.sw.Name] {
			if isExit(cs.nd.Op) && cs.out == 0 {
				v.exits = append(v.exits, cs.nd)
			}
		}
		vars = append(vars, v)
	}
	found := false
	for _, v := range vars {
		found = found || v.sw == sw
	}
	if !found {
		return "", nil, nil, nil, bad("Switch %s is not a loop variable's of frame %q", swName, frame)
	}
	return frame, vars, invariants, loopCond, nil
}

func dataInputs(nd *ndpb.NodeDef) []string {
	var ins []string
	for _, in := range nd.Input {
		if !strings.HasPrefix(in, "^") {
			ins = append(ins, in)
		}
	}
	return ins
}

// maxLoopNesting bounds how deeply TF1 loops nest.
const maxLoopNesting = 64

// buildLoop compiles the while loop of Exit nd into one loop step and
// returns nd's output; the loop's other Exits are recorded as done.
func (c *compiler) buildLoop(sc *scope, nd *ndpb.NodeDef) ([]int, error) {
	if c.frames == nil {
		c.frames = newFrameIndex(sc.nodes)
	}
	fi := c.frames
	frame, vars, invariants, loopCond, err := findLoop(sc, fi, nd)
	if err != nil {
		return nil, err
	}
	if fi.building[frame] {
		return nil, fmt.Errorf("%w: while loop frame %q reaches its own Exit %s from inside", ErrBadGraph, frame, sc.where(nd.Name))
	}
	if fi.depth >= maxLoopNesting {
		return nil, fmt.Errorf("%w: while loops nested deeper than %d", ErrBadGraph, maxLoopNesting)
	}
	fi.building[frame] = true
	fi.depth++
	defer func() { delete(fi.building, frame); fi.depth-- }()

	// Initial values and invariants, in the enclosing scope.
	p := c.prog
	var ins, guards []int
	enterInput := func(e *ndpb.NodeDef) (int, error) {
		in := dataInputs(e)
		if len(in) != 1 {
			return 0, &OpError{Op: e.Op, Node: sc.where(e.Name), Err: fmt.Errorf("%w: takes 1 input, has %d", ErrBadGraph, len(in))}
		}
		s, err := c.ref(sc, in[0])
		if err != nil {
			return 0, err
		}
		if c.slotMayDie(s) {
			guards = addGuards(guards, s)
		}
		for _, ctl := range e.Input {
			if name, ok := strings.CutPrefix(ctl, "^"); ok {
				if _, err := c.node(sc, name); err != nil {
					return 0, err
				}
				guards = addGuards(guards, sc.ctlGuards(name)...)
			}
		}
		return s, nil
	}
	for _, v := range vars {
		s, err := enterInput(v.enter)
		if err != nil {
			return nil, err
		}
		ins = append(ins, s)
	}
	for _, e := range invariants {
		s, err := enterInput(e)
		if err != nil {
			return nil, err
		}
		ins = append(ins, s)
	}
	if c.constDead(guards) {
		// In a branch not taken whatever the inputs: the loop never runs.
		return c.deadExits(sc, nd, vars, ins)
	}
	types := make([]dtype, len(ins))
	consts := make([]*dense, len(ins))
	for i, s := range ins {
		types[i] = p.types[s]
		if i >= len(vars) {
			consts[i] = p.consts[s] // invariants known at load stay constants
		}
	}

	condC, condSc, err := c.loopCompiler(sc, vars, invariants, types, consts)
	if err != nil {
		return nil, err
	}
	lcIn := dataInputs(loopCond)
	if len(lcIn) != 1 {
		return nil, &OpError{Op: loopCond.Op, Node: sc.where(loopCond.Name), Err: fmt.Errorf("%w: takes 1 input, has %d", ErrBadGraph, len(lcIn))}
	}
	// A missing op in cond does not stop compiling body: the load error
	// lists every missing op.
	var missingErr error
	pred, err := condC.ref(condSc, lcIn[0])
	switch {
	case isMissingOp(err):
		missingErr = err
	case err != nil:
		return nil, err
	default:
		if dt := condC.prog.types[pred]; dt != dtBool {
			return nil, &OpError{Op: loopCond.Op, Node: sc.where(loopCond.Name), Err: fmt.Errorf("input is %s, want bool", dtypeName(dt))}
		}
		condC.prog.fetches = []int{pred}
	}
	bodyC, bodySc, err := c.loopCompiler(sc, vars, invariants, types, consts)
	if err != nil {
		return nil, err
	}
	for i, v := range vars {
		in := dataInputs(v.next)
		if len(in) != 1 {
			return nil, &OpError{Op: v.next.Op, Node: sc.where(v.next.Name), Err: fmt.Errorf("%w: takes 1 input, has %d", ErrBadGraph, len(in))}
		}
		s, err := bodyC.ref(bodySc, in[0])
		if isMissingOp(err) {
			missingErr = cmp.Or(missingErr, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if got := bodyC.prog.types[s]; got != types[i] {
			return nil, &OpError{Op: v.next.Op, Node: sc.where(v.next.Name), Err: fmt.Errorf("%w: next value is %s, the loop variable (Enter %s) %s", ErrBadGraph, dtypeName(got), v.enter.Name, dtypeName(types[i]))}
		}
		bodyC.prog.fetches = append(bodyC.prog.fetches, s)
	}
	if missingErr != nil {
		return nil, missingErr
	}
	cond := &subProgram{fn: "cond of frame " + frame, prog: condC.prog, states: newStatePool(condC.prog)}
	body := &subProgram{fn: "body of frame " + frame, prog: bodyC.prog, states: newStatePool(bodyC.prog)}

	outs := make([]int, len(vars))
	for i := range vars {
		outs[i] = newSlot(p, types[i], nil)
	}
	loop := &loopStep{ins: ins, outs: outs, vars: len(vars), cond: cond, body: body, limit: maxWhileIterations, loopCond: loopCond.Name}
	from := len(p.steps)
	st := c.emit(nd, ins, outs, nil, false)
	st.op = "while loop (TF1)"
	st.node = sc.where(frame)
	st.runCtx, st.subs = loop.run, []*program{cond.prog, body.prog}
	if len(guards) > 0 {
		c.wrapSteps(from, guards)
		c.markMayDie(outs...)
	}
	return c.setExits(sc, nd, vars, outs, len(guards) > 0)
}

// loopStep runs a TF1 loop: cond and body over the loop variables (the
// first vars of ins) and the invariants (the rest), as the functional
// While does, bounded by limit iterations and the call's context.
type loopStep struct {
	ins, outs  []int
	vars       int
	cond, body *subProgram
	limit      int
	loopCond   string // for errors
}

func (l *loopStep) run(ctx context.Context, v []*dense) error {
	loop := make([]*dense, len(l.ins))
	for i, s := range l.ins {
		loop[i] = v[s]
	}
	for iter := 0; ; iter++ {
		if iter%64 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("loop stopped after %d iterations: %w", iter, err)
			}
		}
		res, err := l.cond.run(ctx, loop)
		if err != nil {
			return fmt.Errorf("iteration %d: %w", iter, err)
		}
		if r := res[0]; len(r.shape) != 0 || len(r.b) != 1 {
			return fmt.Errorf("iteration %d: LoopCond %s: input must be a bool scalar, is %s", iter, l.loopCond, r)
		} else if !r.b[0] {
			break
		}
		if iter >= l.limit {
			return fmt.Errorf("loop did not end after %d iterations (%s is still true)", l.limit, l.loopCond)
		}
		next, err := l.body.run(ctx, loop)
		if err != nil {
			return fmt.Errorf("iteration %d: %w", iter, err)
		}
		copy(loop[:l.vars], next)
	}
	for i, o := range l.outs {
		v[o] = loop[i]
	}
	return nil
}

// loopCompiler returns a compiler and scope for the cond or body program
// of a loop: a program over the loop variables (the Merge and Switch:1
// outputs) and the invariants (the constant Enters), whose types are
// types; invariants with a non-nil entry in consts are constants.
func (c *compiler) loopCompiler(sc *scope, vars []loopVar, invariants []*ndpb.NodeDef, types []dtype, consts []*dense) (*compiler, *scope, error) {
	if c.subFuncs == nil {
		c.subFuncs = new(int)
	}
	if *c.subFuncs++; *c.subFuncs > maxControlFlowFuncs {
		return nil, nil, fmt.Errorf("%w: more than %d loop and If/While functions to compile", ErrBadGraph, maxControlFlowFuncs)
	}
	if c.missing.nodes == nil { // shared with the sub-compiler
		c.missing.nodes, c.missing.seen = map[string][]string{}, map[string]bool{}
	}
	sub := &compiler{lib: c.lib, ops: c.ops, vars: c.vars, ck: c.ck, feeds: map[string]int{}, prog: &program{},
		refVar: map[int]*variable{}, missing: c.missing, files: c.files, depth: c.depth, subFuncs: c.subFuncs, frames: c.frames}
	sub.prog.par = c.prog.intraop() // the body's MatMuls honour num_intraop_threads
	inner := &scope{name: sc.name, nodes: sc.nodes, done: map[string][]int{}, visiting: map[string]bool{}, depth: sc.depth}
	args := make([]int, len(types))
	for i, dt := range types {
		args[i] = newSlot(sub.prog, dt, consts[i])
	}
	sub.prog.feeds = args
	for i, v := range vars {
		// Inside the loop, Switch:0 (the Exit's way out) is dead.
		dead := newSlot(sub.prog, types[i], deadTensor)
		sub.markMayDie(dead)
		inner.done[v.enter.Name] = []int{args[i]}
		inner.done[v.merge.Name] = []int{args[i]}
		inner.done[v.sw.Name] = []int{dead, args[i]}
	}
	for i, e := range invariants {
		inner.done[e.Name] = []int{args[len(vars)+i]}
	}
	return sub, inner, nil
}

// deadExits gives every Exit of a loop that never runs a dead slot.
func (c *compiler) deadExits(sc *scope, nd *ndpb.NodeDef, vars []loopVar, ins []int) ([]int, error) {
	outs := make([]int, len(vars))
	for i := range vars {
		outs[i] = newSlot(c.prog, c.prog.types[ins[i]], deadTensor)
	}
	c.markMayDie(outs...)
	return c.setExits(sc, nd, vars, outs, true)
}

// setExits records the loop's outputs as its Exits' and returns nd's.
func (c *compiler) setExits(sc *scope, nd *ndpb.NodeDef, vars []loopVar, outs []int, mayDie bool) ([]int, error) {
	var mine []int
	for i, v := range vars {
		for _, x := range v.exits {
			o := []int{outs[i]}
			if x == nd {
				mine = o
			} else {
				sc.done[x.Name] = o
			}
			if mayDie {
				sc.setCtl(x.Name, o)
			}
		}
	}
	if mine == nil {
		return nil, fmt.Errorf("%w: Exit %s is not one of its loop's", ErrBadGraph, sc.where(nd.Name))
	}
	return mine, nil
}
