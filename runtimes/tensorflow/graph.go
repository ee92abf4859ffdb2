package tensorflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
)

// kernel runs one step on the call's value slots.
type kernel func(v []*dense) error

// step is one kernel of a compiled program.
type step struct {
	op, node string
	ins      []int
	outs     []int
	run      kernel
	// pure steps depend only on their inputs: with constant inputs they are
	// folded at load.
	pure bool
	// readVar is set for ReadVariableOp/VariableV2 steps: foldable when the
	// program never assigns the variable.
	readVar *variable
	// writes lists the variables the step assigns.
	writes *variable
	// usesVar is the variable whose value the step reads or assigns at run
	// time (emitVar). Unlike readVar, it stays when the step cannot be
	// folded (a TF1 cond's guarded read, wrapSteps), so that the variable
	// keeps its value and its entry in a call's table.
	usesVar *variable
	// fuse describes steps the fusion pass may merge (MatMul, BiasAdd,
	// Relu).
	fuse *fusable
	// subs are the programs an If or While step runs (controlflow.go);
	// such a step has runCtx, which gets the call's context, instead of run.
	subs   []*program
	runCtx func(ctx context.Context, v []*dense) error
	// batchDims is a GatherV2's batch_dims (external.go checks it).
	batchDims int64
	// deadAware: wrapSteps made the step skip on a dead TF1 tensor
	// (external.go does not rewrite such a step).
	deadAware bool
}

// program is a compiled subgraph: a flat schedule of kernels over value
// slots. Slots with a non-nil consts entry hold load-time constants shared
// by every call.
type program struct {
	steps    []step
	consts   []*dense
	types    []dtype
	feeds    []int // slot of each fed tensor
	fetches  []int // slot of each fetched tensor
	stateful bool  // assigns variables
	par      *intraop
}

// scope is a graph being compiled: the main graph or one call of a
// function (its own node namespace, arguments bound to caller slots).
type scope struct {
	name     string // for errors: "" for the main graph, else the function call path
	fn       *fpb.FunctionDef
	nodes    map[string]*ndpb.NodeDef
	args     map[string]int
	done     map[string][]int
	visiting map[string]bool
	depth    int
	// ctl holds, for nodes a dead tensor can kill, the slots whose
	// deadness makes a control edge from the node dead (tf1control.go).
	ctl map[string][]int
}

const maxCallDepth = 64

// maxGraphDepth bounds the longest dependency chain compiled (the compiler
// recurses along it), so a hostile graph cannot exhaust the stack.
const maxGraphDepth = 20000

type compiler struct {
	cur   *scope // scope of the node being built (for step names)
	depth int    // recursion depth of node, bounded by maxGraphDepth
	lib   map[string]*fpb.FunctionDef
	ops   map[string]*opb.OpDef
	vars  *varStore
	ck    *checkpoint
	feeds map[string]int // main-graph "node:idx" -> slot
	prog  *program
	// refVar maps the output slot of a VariableV2 step to its variable (the
	// ref that Assign takes).
	refVar map[int]*variable
	// missing gathers every op without a kernel the fetches need.
	missing missingOps
	// subFuncs counts the If/While functions compiled, shared with the
	// compilers of those functions (controlflow.go).
	subFuncs *int
	// files are the model's files, by path relative to its root, for
	// ReadFile (the loader feeds asset paths as "assets/<name>"); nil when
	// the program may read none (serving).
	files map[string][]byte
	// dead tracks the slots that may be dead (TF1 Switch/Merge); frames
	// indexes TF1 while loops, shared with the loops' sub-compilers.
	dead   deadState
	frames *frameIndex
	// skipRestoredInits: the init op's compiler, where a random
	// initializer of a variable the checkpoint restored is skipped, its
	// value never compiled (skipRestoredAssign).
	skipRestoredInits bool
}

func newCompiler(g *graphDef, vars *varStore, ck *checkpoint) *compiler {
	return &compiler{lib: g.lib, ops: g.ops, vars: vars, ck: ck, feeds: map[string]int{}, prog: &program{}, refVar: map[int]*variable{},
		missing: missingOps{failed: map[failedKey]error{}}}
}

// graphDef is what the compilers share of the parsed MetaGraph: the
// function library and the op definitions.
type graphDef struct {
	lib map[string]*fpb.FunctionDef
	ops map[string]*opb.OpDef
}

func newSlot(p *program, dt dtype, c *dense) int {
	p.types = append(p.types, dt)
	p.consts = append(p.consts, c)
	return len(p.types) - 1
}

// splitTensorName splits "node:1" into ("node", 1); "node" is output 0.
func splitTensorName(name string) (string, int, error) {
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return name, 0, nil
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("%w: bad tensor name %q", ErrBadGraph, name)
	}
	return name[:i], n, nil
}

// feed makes the main-graph tensor name an input of the program.
func (c *compiler) feed(name string, dt dtype) int {
	node, idx, _ := splitTensorName(name)
	slot := newSlot(c.prog, dt, nil)
	c.feeds[node+":"+strconv.Itoa(idx)] = slot
	c.prog.feeds = append(c.prog.feeds, slot)
	return slot
}

// feedConst binds a main-graph tensor to a constant.
func (c *compiler) feedConst(name string, t *dense) {
	node, idx, _ := splitTensorName(name)
	c.feeds[node+":"+strconv.Itoa(idx)] = newSlot(c.prog, t.dt, t)
}

// fetch compiles what the main-graph tensor name needs and makes it an
// output of the program.
func (c *compiler) fetch(main *scope, name string) error {
	slot, err := c.ref(main, name)
	if err != nil {
		return err
	}
	c.prog.fetches = append(c.prog.fetches, slot)
	return nil
}

// target compiles a node for its side effects (the restore op).
func (c *compiler) target(main *scope, node string) error {
	if _, ok := main.nodes[node]; !ok {
		return fmt.Errorf("%w: node %q not found", ErrBadGraph, node)
	}
	_, err := c.node(main, node)
	return err
}

// ref resolves an input reference in scope sc to a slot.
func (c *compiler) ref(sc *scope, ref string) (int, error) {
	if sc.fn == nil {
		node, idx, err := splitTensorName(ref)
		if err != nil {
			return 0, err
		}
		if s, ok := c.feeds[node+":"+strconv.Itoa(idx)]; ok {
			return s, nil
		}
		outs, err := c.node(sc, node)
		if err != nil {
			return 0, err
		}
		if idx >= len(outs) {
			return 0, fmt.Errorf("%w: %q: node has %d outputs", ErrBadGraph, ref, len(outs))
		}
		return outs[idx], nil
	}
	parts := strings.Split(ref, ":")
	switch len(parts) {
	case 1:
		if s, ok := sc.args[ref]; ok {
			return s, nil
		}
		outs, err := c.node(sc, ref)
		if err != nil {
			return 0, err
		}
		if len(outs) == 0 {
			return 0, fmt.Errorf("%w: %s: %q has no outputs", ErrBadGraph, sc.name, ref)
		}
		return outs[0], nil
	case 3:
		idx, err := strconv.Atoi(parts[2])
		if err != nil || idx < 0 {
			return 0, fmt.Errorf("%w: %s: bad input %q", ErrBadGraph, sc.name, ref)
		}
		nd, ok := sc.nodes[parts[0]]
		if !ok {
			return 0, fmt.Errorf("%w: %s: input %q names no node", ErrBadGraph, sc.name, ref)
		}
		outs, err := c.node(sc, parts[0])
		if err != nil {
			return 0, err
		}
		flat, err := c.outputIndex(nd, parts[1], idx)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: input %q: %v", ErrBadGraph, sc.name, ref, err)
		}
		if flat >= len(outs) {
			return 0, fmt.Errorf("%w: %s: input %q: node has %d outputs", ErrBadGraph, sc.name, ref, len(outs))
		}
		return outs[flat], nil
	}
	return 0, fmt.Errorf("%w: %s: bad input %q", ErrBadGraph, sc.name, ref)
}

// outputIndex maps a function-body reference "node:arg:idx" to the flat
// output index, from the op's (or called function's) output args.
func (c *compiler) outputIndex(nd *ndpb.NodeDef, arg string, idx int) (int, error) {
	var args []*opb.OpDef_ArgDef
	if fn, ok := c.lib[nd.Op]; ok {
		args = fn.Signature.GetOutputArg()
	} else if od, ok := c.ops[nd.Op]; ok {
		args = od.OutputArg
	} else {
		// Unknown OpDef: every op we run with several outputs has one list
		// output arg, so the index is flat already.
		return idx, nil
	}
	a := attrs(nd.Attr)
	off := 0
	for _, ad := range args {
		n := 1
		switch {
		case ad.NumberAttr != "":
			n = int(a.i(ad.NumberAttr, 0))
		case ad.TypeListAttr != "":
			n = len(a.list(ad.TypeListAttr).GetType())
		}
		if ad.Name == arg {
			if idx >= n {
				return 0, fmt.Errorf("output %s has %d tensors", arg, n)
			}
			return off + idx, nil
		}
		off += n
	}
	return 0, fmt.Errorf("op %s has no output %q", nd.Op, arg)
}

func (sc *scope) where(node string) string {
	if sc.name == "" {
		return node
	}
	return sc.name + "/" + node
}

// node compiles a node (after what it depends on) and returns its output
// slots. Nodes are compiled once per scope.
func (c *compiler) node(sc *scope, name string) ([]int, error) {
	if outs, ok := sc.done[name]; ok {
		return outs, nil
	}
	nd, ok := sc.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s: input names no node %q", ErrBadGraph, sc.name, name)
	}
	if sc.visiting[name] {
		return nil, fmt.Errorf("%w: cycle through node %s", ErrBadGraph, sc.where(name))
	}
	if c.depth >= maxGraphDepth {
		return nil, fmt.Errorf("%w: dependency chain longer than %d nodes at %s", ErrBadGraph, maxGraphDepth, sc.where(name))
	}
	c.depth++
	defer func() { c.depth-- }()
	sc.visiting[name] = true
	defer delete(sc.visiting, name)

	if err, ok := c.missing.failed[failedKey{sc, name}]; ok {
		return nil, err
	}
	if c.skipRestoredInits && (nd.Op == "Assign" || nd.Op == "AssignVariableOp") {
		outs, skipped, err := c.skipRestoredAssign(sc, nd)
		if err != nil {
			return nil, err
		}
		if skipped {
			sc.done[name] = outs
			return outs, nil
		}
	}
	// PlaceholderWithDefault that is not fed is its default.
	var ins, guards []int
	var inErr error
	// A TF1 loop's nodes are compiled with their loop, from its Exit.
	frameOp := tf1FrameOps[nd.Op] || (isMerge(nd.Op) && loopMerge(sc, nd))
	for _, in := range nd.Input {
		if frameOp {
			break
		}
		var s int
		var err error
		control := strings.HasPrefix(in, "^") // an order dependency, not an input
		if control {
			if _, err = c.node(sc, in[1:]); err == nil {
				guards = addGuards(guards, sc.ctlGuards(in[1:])...)
			}
		} else if s, err = c.ref(sc, in); err == nil && c.slotMayDie(s) && !isMerge(nd.Op) {
			guards = addGuards(guards, s)
		}
		if err != nil {
			if !errors.Is(err, ErrUnsupportedOp) {
				return nil, err
			}
			// Go on with the other inputs: the load error lists every
			// missing op at once.
			inErr = cmp.Or(inErr, err)
			continue
		}
		if !control {
			ins = append(ins, s)
		}
	}
	if inErr != nil {
		c.missing.failed[failedKey{sc, name}] = inErr
		return nil, inErr
	}
	c.cur = sc
	from := len(c.prog.steps)
	outs, err := c.build(sc, nd, ins)
	if err != nil {
		var oe *OpError
		if !isOpError(err, &oe) {
			err = &OpError{Op: nd.Op, Node: sc.where(nd.Name), Err: err}
		}
		if c.missing.record(nd.Op, sc.where(nd.Name), err) {
			c.missing.failed[failedKey{sc, name}] = err
		}
		return nil, err
	}
	outs = c.guardNode(sc, nd, from, ins, outs, guards)
	sc.done[name] = outs
	return outs, nil
}

func isOpError(err error, target **OpError) bool {
	e, ok := err.(*OpError)
	if ok {
		*target = e
	}
	return ok
}

// build emits the steps of one node whose inputs are compiled.
func (c *compiler) build(sc *scope, nd *ndpb.NodeDef, ins []int) ([]int, error) {
	a := c.withDefaults(nd)
	p := c.prog
	switch nd.Op {
	case "NoOp", "ControlTrigger":
		return nil, nil
	case "Switch", "RefSwitch":
		return c.buildSwitch(nd, ins)
	case "Merge", "RefMerge":
		if loopMerge(sc, nd) {
			return c.buildFrameOp(sc, nd)
		}
		return c.buildMerge(nd, ins)
	case "Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration", "LoopCond":
		return c.buildFrameOp(sc, nd)
	case "Identity", "StopGradient", "Snapshot", "PreventGradient", "RefIdentity":
		if len(ins) != 1 {
			return nil, fmt.Errorf("takes 1 input, has %d", len(ins))
		}
		if v, ok := c.refVar[ins[0]]; ok && nd.Op == "RefIdentity" {
			c.refVar[ins[0]] = v
		}
		return ins, nil
	case "IdentityN":
		return ins, nil
	case "Const":
		t, err := decodeConst(a)
		if err != nil {
			return nil, err
		}
		return []int{newSlot(p, t.dt, t)}, nil
	case "Placeholder":
		return nil, fmt.Errorf("placeholder %s is not fed", sc.where(nd.Name))
	case "PlaceholderWithDefault":
		if len(ins) != 1 {
			return nil, fmt.Errorf("takes 1 input, has %d", len(ins))
		}
		return ins, nil
	case "PartitionedCall", "StatefulPartitionedCall":
		return c.call(sc, nd, a.fn("f"), ins)
	case "VarHandleOp":
		dt, err := a.typ("dtype")
		if err != nil {
			return nil, err
		}
		v := c.vars.get(variableKey(a, nd), dt)
		return []int{newSlot(p, dtResource, &dense{dt: dtResource, shape: []int64{}, res: v})}, nil
	case "VariableV2", "Variable":
		dt, err := a.typ("dtype")
		if err != nil {
			return nil, err
		}
		v := c.vars.get(variableKey(a, nd), dt)
		out := newSlot(p, dt, nil)
		c.refVar[out] = v
		// A ref variable's output is both its value and the ref Assign
		// takes: before the restore assigns it, it holds an empty tensor of
		// no dtype (kernels reject it), which Assign ignores.
		c.emitVar(nd, ins, []int{out}, v, func(val **dense, vals []*dense) error {
			if *val == nil {
				vals[out] = &dense{}
				return nil
			}
			vals[out] = *val
			return nil
		}).readVar = v
		return []int{out}, nil
	case "Assign":
		if len(ins) != 2 {
			return nil, fmt.Errorf("takes 2 inputs, has %d", len(ins))
		}
		v, ok := c.refVar[ins[0]]
		if !ok {
			return nil, fmt.Errorf("input 0 is not a variable")
		}
		val := ins[1]
		out := newSlot(p, p.types[val], nil)
		c.emitVar(nd, ins, []int{out}, v, func(dst **dense, vals []*dense) error {
			if err := v.assignTo(dst, vals[val]); err != nil {
				return err
			}
			vals[out] = *dst
			return nil
		}).writes = v
		return []int{out}, nil
	case "ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "ResourceGather", "DestroyResourceOp", "VarIsInitializedOp":
		return c.resourceOp(nd, a, ins)
	case "RestoreV2":
		return c.restoreV2(nd, a, ins)
	case "ReadFile":
		return c.readFile(nd, ins)
	case "If", "StatelessIf", "While", "StatelessWhile":
		return c.controlFlow(sc, nd, a, ins)
	case "RandomUniform", "RandomStandardNormal", "TruncatedNormal", "StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal",
		"StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2":
		return c.buildRandom(nd, a, ins)
	}
	if fn, ok := c.lib[nd.Op]; ok {
		return c.call(sc, nd, fn.Signature.GetName(), ins)
	}
	b, ok := builders[nd.Op]
	if !ok {
		return nil, fmt.Errorf("%w %q: the TensorFlow runtime has no kernel for it", ErrUnsupportedOp, nd.Op)
	}
	n := &nodeCtx{c: c, nd: nd, a: a, ins: ins}
	for _, s := range ins {
		n.inTypes = append(n.inTypes, p.types[s])
	}
	run, err := b(n)
	if err != nil {
		return nil, err
	}
	st := c.emit(nd, ins, n.outs, run, true)
	st.fuse = n.fuse
	if nd.Op == "GatherV2" {
		st.batchDims = a.i("batch_dims", 0)
	}
	return n.outs, nil
}

// nodeCtx is what a kernel builder sees: the node, its attributes, input
// slots and types. The builder allocates output slots with out and returns
// the kernel.
type nodeCtx struct {
	c       *compiler
	nd      *ndpb.NodeDef
	a       attrs
	ins     []int
	inTypes []dtype
	outs    []int
	fuse    *fusable
}

type builder func(n *nodeCtx) (kernel, error)

// out allocates the node's next output slot.
func (n *nodeCtx) out(dt dtype) int {
	s := newSlot(n.c.prog, dt, nil)
	n.outs = append(n.outs, s)
	return s
}

// constIn returns input i's constant value, or nil if it is computed.
func (n *nodeCtx) constIn(i int) *dense { return n.c.prog.consts[n.ins[i]] }

func (n *nodeCtx) wantInputs(k int) error {
	if len(n.ins) != k {
		return fmt.Errorf("takes %d inputs, has %d", k, len(n.ins))
	}
	return nil
}

// variableKey names a variable's storage as TensorFlow's resource manager
// does: container/shared_name, or container/node name when shared_name is
// empty.
func variableKey(a attrs, nd *ndpb.NodeDef) string {
	if name := a.s("shared_name"); name != "" {
		return a.s("container") + "/" + name
	}
	return a.s("container") + "/" + nd.Name
}

func (c *compiler) emit(nd *ndpb.NodeDef, ins, outs []int, run kernel, pure bool) *step {
	name := nd.Name
	if c.cur != nil {
		name = c.cur.where(nd.Name)
	}
	c.prog.steps = append(c.prog.steps, step{op: nd.Op, node: name, ins: ins, outs: outs, run: run, pure: pure})
	return &c.prog.steps[len(c.prog.steps)-1]
}

// withDefaults returns the node's attributes with the OpDef's defaults for
// attributes the exporter stripped.
func (c *compiler) withDefaults(nd *ndpb.NodeDef) attrs {
	od, ok := c.ops[nd.Op]
	if !ok {
		return attrs(nd.Attr)
	}
	var a attrs
	for _, ad := range od.Attr {
		if _, set := nd.Attr[ad.Name]; !set && ad.DefaultValue != nil {
			if a == nil {
				a = make(attrs, len(nd.Attr)+len(od.Attr))
				for k, v := range nd.Attr {
					a[k] = v
				}
			}
			a[ad.Name] = ad.DefaultValue
		}
	}
	if a == nil {
		return attrs(nd.Attr)
	}
	return a
}

// call inlines a function call: the callee's body is compiled in a new
// scope whose arguments are the caller's input slots.
func (c *compiler) call(sc *scope, nd *ndpb.NodeDef, fname string, ins []int) ([]int, error) {
	fn, ok := c.lib[fname]
	if !ok {
		return nil, fmt.Errorf("%w: calls function %q, which is not in the library", ErrBadGraph, fname)
	}
	if sc.depth >= maxCallDepth {
		return nil, fmt.Errorf("%w: function calls nested deeper than %d (recursion?)", ErrBadGraph, maxCallDepth)
	}
	sig := fn.Signature
	if len(sig.GetInputArg()) != len(ins) {
		return nil, fmt.Errorf("%w: function %s takes %d arguments, the call passes %d", ErrBadGraph, fname, len(sig.GetInputArg()), len(ins))
	}
	name := sc.where(nd.Name) + "{" + fname + "}"
	if sc.depth >= 4 {
		// Keep error messages readable under deep nesting.
		name = ".../" + nd.Name + "{" + fname + "}"
	}
	inner := &scope{
		name:     name,
		fn:       fn,
		nodes:    make(map[string]*ndpb.NodeDef, len(fn.NodeDef)),
		args:     make(map[string]int, len(ins)),
		done:     map[string][]int{},
		visiting: map[string]bool{},
		depth:    sc.depth + 1,
	}
	for _, n := range fn.NodeDef {
		inner.nodes[n.Name] = n
	}
	for i, arg := range sig.InputArg {
		inner.args[arg.Name] = ins[i]
	}
	outs := make([]int, 0, len(sig.GetOutputArg()))
	var outErr error
	for _, arg := range sig.GetOutputArg() {
		r, ok := fn.Ret[arg.Name]
		if !ok {
			return nil, fmt.Errorf("%w: function %s returns no %q", ErrBadGraph, fname, arg.Name)
		}
		s, err := c.ref(inner, r)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedOp) {
				return nil, err
			}
			outErr = cmp.Or(outErr, err) // the other outputs may lack ops too
			continue
		}
		outs = append(outs, s)
	}
	if outErr != nil {
		return nil, outErr
	}
	// Stateful nodes the function must run even when no output needs them.
	for _, arg := range sig.GetControlOutput() {
		if r, ok := fn.ControlRet[arg]; ok {
			if _, err := c.node(inner, r); err != nil {
				return nil, err
			}
		}
	}
	return outs, nil
}

// readFile reads a file of the model (an asset, by the path the loader
// fed) when the step runs: as in TensorFlow, a missing file fails only the
// run that reads it. Only the loader's restore and init programs may read
// files; serving reads none.
func (c *compiler) readFile(nd *ndpb.NodeDef, ins []int) ([]int, error) {
	if len(ins) != 1 {
		return nil, fmt.Errorf("takes 1 input, has %d", len(ins))
	}
	if c.files == nil {
		return nil, fmt.Errorf("%w \"ReadFile\": serving may not read files; only the init op may read the model's assets", ErrUnsupportedOp)
	}
	files := c.files
	in := ins[0]
	out := newSlot(c.prog, dtString, nil)
	c.emit(nd, ins, []int{out}, func(vals []*dense) error {
		t := vals[in]
		if t.dt != dtString || len(t.s) != 1 {
			return fmt.Errorf("filename is %s, want a string scalar", t)
		}
		data, ok := files[t.s[0]]
		if !ok {
			return fmt.Errorf("%s: file not found among the model's files", t.s[0])
		}
		vals[out] = &dense{dt: dtString, shape: []int64{}, s: []string{string(data)}}
		return nil
	}, false)
	return []int{out}, nil
}
