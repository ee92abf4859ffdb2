package tensorflow

import (
	"context"
	"fmt"
	"strings"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// variable is a TensorFlow variable (TF2 resource or TF1 ref). value is
// its shared value: the one the load-time programs (restore, init) and
// folding see, and the shared-state opt-out's calls use; a call with a
// table of its own (every other serving call: per call, or per sequence)
// uses entry idx of its varEnv. Values are replaced, never written in
// place, so a reader keeps a consistent tensor and tables may share
// unchanged tensors (copy on write).
type variable struct {
	name  string
	idx   int // position in varStore.order and in a varEnv
	dt    dtype
	value *dense
}

// varEnv is a table of the model's variable values, indexed by
// variable.idx: one sequence's (sequence.go), or one call's outside
// sequences (model.Predict). A call carries it in its context
// (withVarEnv), so the same compiled program serves every table, and calls
// on different tables run in parallel: each call reads and replaces only
// its own table's entries.
type varEnv struct {
	vals []*dense
}

type varEnvKey struct{}

// withVarEnv returns ctx carrying env: the variable steps of a call run
// with it use env's values instead of the shared ones.
func withVarEnv(ctx context.Context, env *varEnv) context.Context {
	return context.WithValue(ctx, varEnvKey{}, env)
}

// varEnvHook, when set (by tests only), is called by every variable step
// that runs on a table of its call (a sequence's or a call's own): it lets
// a test see calls inside the program at the same time.
var varEnvHook func()

// slot returns where v's value lives for the call with context ctx: the
// entry of the call's varEnv, or the shared value when there is none.
func (v *variable) slot(ctx context.Context) **dense {
	if ctx != nil {
		if env, ok := ctx.Value(varEnvKey{}).(*varEnv); ok {
			if varEnvHook != nil {
				varEnvHook()
			}
			return &env.vals[v.idx]
		}
	}
	return &v.value
}

// assignTo replaces the value at dst (a slot of v) with a copy of t, or
// with t itself when t is a restored checkpoint tensor, which nothing
// writes.
func (v *variable) assignTo(dst **dense, t *dense) error {
	if t.dt != v.dt {
		return fmt.Errorf("variable %s is %s, assigned a %s", v.name, dtypeName(v.dt), dtypeName(t.dt))
	}
	if t.restored {
		*dst = t
		return nil
	}
	*dst = t.clone()
	return nil
}

// varStore holds a model's variables by container/shared_name.
type varStore struct {
	vars  map[string]*variable
	order []*variable // by idx
}

func newVarStore() *varStore { return &varStore{vars: map[string]*variable{}} }

func (s *varStore) get(key string, dt dtype) *variable {
	if v, ok := s.vars[key]; ok {
		return v
	}
	v := &variable{name: key, idx: len(s.order), dt: baseType(dt)}
	s.vars[key] = v
	s.order = append(s.order, v)
	return v
}

// varKernel is a kernel of a step that reads or assigns a variable; val
// is where the variable's value lives for this call.
type varKernel func(val **dense, vals []*dense) error

// emitVar emits a step over variable v: run (used at load and when folding)
// works on the shared value, runCtx on the value in the call's table, if
// any.
func (c *compiler) emitVar(nd *ndpb.NodeDef, ins, outs []int, v *variable, k varKernel) *step {
	st := c.emit(nd, ins, outs, func(vals []*dense) error { return k(&v.value, vals) }, false)
	st.runCtx = func(ctx context.Context, vals []*dense) error { return k(v.slot(ctx), vals) }
	st.usesVar = v
	return st
}

// resourceVar returns the variable a resource input names; the handle must
// be known at load (a VarHandleOp, possibly passed through calls).
func (n *nodeCtx) resourceVar(i int) (*variable, error) {
	t := n.constIn(i)
	if t == nil || t.dt != dtResource || t.res == nil {
		return nil, fmt.Errorf("input %d is not a variable handle known at load time", i)
	}
	return t.res, nil
}

func (c *compiler) resourceOp(nd *ndpb.NodeDef, a attrs, ins []int) ([]int, error) {
	n := &nodeCtx{c: c, nd: nd, a: a, ins: ins}
	if len(ins) < 1 {
		return nil, fmt.Errorf("takes a resource input")
	}
	v, err := n.resourceVar(0)
	if err != nil {
		return nil, err
	}
	switch nd.Op {
	case "ReadVariableOp":
		out := n.out(v.dt)
		c.emitVar(nd, ins, n.outs, v, func(val **dense, vals []*dense) error {
			if *val == nil {
				return fmt.Errorf("variable %s is read before it is initialized", v.name)
			}
			vals[out] = *val
			return nil
		}).readVar = v
	case "VarIsInitializedOp":
		out := n.out(dtBool)
		c.emitVar(nd, ins, n.outs, v, func(val **dense, vals []*dense) error {
			o := vals[out]
			o.dt = dtBool
			o.setShape(nil)
			o.b = append(o.b[:0], *val != nil)
			return nil
		}).readVar = v
	case "DestroyResourceOp":
		c.emit(nd, ins, nil, func([]*dense) error { return nil }, false)
	case "AssignVariableOp":
		if err := n.wantInputs(2); err != nil {
			return nil, err
		}
		val := ins[1]
		c.emitVar(nd, ins, nil, v, func(dst **dense, vals []*dense) error { return v.assignTo(dst, vals[val]) }).writes = v
	case "AssignAddVariableOp", "AssignSubVariableOp":
		if err := n.wantInputs(2); err != nil {
			return nil, err
		}
		val := ins[1]
		sub := nd.Op == "AssignSubVariableOp"
		var upd func(dst, old, d *dense) error
		switch v.dt {
		case dtFloat:
			upd = accumulate[float32]
		case dtDouble:
			upd = accumulate[float64]
		case dtInt32:
			upd = accumulate[int32]
		case dtInt64:
			upd = accumulate[int64]
		default:
			return nil, fmt.Errorf("variables of dtype %s are not supported", dtypeName(v.dt))
		}
		c.emitVar(nd, ins, nil, v, func(cur **dense, vals []*dense) error {
			if *cur == nil {
				return fmt.Errorf("variable %s is updated before it is initialized", v.name)
			}
			d := vals[val]
			if d.dt != v.dt {
				return fmt.Errorf("variable %s is %s, the update is %s", v.name, dtypeName(v.dt), dtypeName(d.dt))
			}
			if sub {
				d = d.clone()
				negateInPlace(d)
			}
			nv := &dense{}
			if err := upd(nv, *cur, d); err != nil {
				return fmt.Errorf("variable %s: %w", v.name, err)
			}
			*cur = nv
			return nil
		}).writes = v
	case "ResourceGather":
		if err := n.wantInputs(2); err != nil {
			return nil, err
		}
		if n.a.i("batch_dims", 0) != 0 {
			return nil, fmt.Errorf("batch_dims != 0 is not supported")
		}
		g, err := gatherFunc(v.dt, n.inTypes2(c)[1])
		if err != nil {
			return nil, err
		}
		idx := ins[1]
		out := n.out(v.dt)
		c.emitVar(nd, ins, n.outs, v, func(val **dense, vals []*dense) error {
			if *val == nil {
				return fmt.Errorf("variable %s is read before it is initialized", v.name)
			}
			return g(vals[out], *val, vals[idx], 0)
		}).readVar = v
	}
	return n.outs, nil
}

func (n *nodeCtx) inTypes2(c *compiler) []dtype {
	ts := make([]dtype, len(n.ins))
	for i, s := range n.ins {
		ts[i] = c.prog.types[s]
	}
	return ts
}

func accumulate[T elem](dst, old, d *dense) error {
	a, b := data[T](old), data[T](d)
	if len(b) != len(a) && len(b) != 1 {
		return fmt.Errorf("update has shape %v, variable %v", d.shape, old.shape)
	}
	o := alloc[T](dst, old.dt, old.shape)
	for i := range o {
		if len(b) == 1 {
			o[i] = a[i] + b[0]
		} else {
			o[i] = a[i] + b[i]
		}
	}
	return nil
}

func negateInPlace(t *dense) {
	for i := range t.f32 {
		t.f32[i] = -t.f32[i]
	}
	for i := range t.f64 {
		t.f64[i] = -t.f64[i]
	}
	for i := range t.i32 {
		t.i32[i] = -t.i32[i]
	}
	for i := range t.i64 {
		t.i64[i] = -t.i64[i]
	}
}

// restoreV2 reads named tensors from the checkpoint. Names must be
// constants; slices are not supported.
func (c *compiler) restoreV2(nd *ndpb.NodeDef, a attrs, ins []int) ([]int, error) {
	n := &nodeCtx{c: c, nd: nd, a: a, ins: ins}
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	names, slices := n.constIn(1), n.constIn(2)
	if names == nil || names.dt != dtString || slices == nil || slices.dt != dtString {
		return nil, fmt.Errorf("tensor_names and shape_and_slices must be string constants")
	}
	dts := a.list("dtypes").GetType()
	if len(names.s) != len(dts) || len(slices.s) != len(dts) {
		return nil, fmt.Errorf("%d tensor names, %d slices, %d dtypes", len(names.s), len(slices.s), len(dts))
	}
	for i, sl := range slices.s {
		if sl != "" {
			return nil, fmt.Errorf("tensor %q: restoring slices (%q) is not supported", names.s[i], sl)
		}
	}
	if c.ck == nil && len(dts) > 0 {
		return nil, fmt.Errorf("%w: the model restores variables but has no variables/variables.index", ErrCorruptCheckpoint)
	}
	outs := make([]int, len(dts))
	for i, dt := range dts {
		outs[i] = n.out(dt)
	}
	ck := c.ck
	keys := append([]string(nil), names.s...)
	cache := make([]*dense, len(keys))
	c.emit(nd, ins, outs, func(vals []*dense) error {
		for i, k := range keys {
			if cache[i] == nil {
				t, err := ck.read(k, dts[i])
				if err != nil {
					return err
				}
				t.restored = true
				cache[i] = t
			}
			vals[outs[i]] = cache[i]
		}
		return nil
	}, false)
	return outs, nil
}

func decodeConst(a attrs) (*dense, error) {
	v, ok := a["value"].GetValue().(*apb.AttrValue_Tensor)
	if !ok {
		return nil, fmt.Errorf("%w: Const has no tensor value", ErrBadGraph)
	}
	t, err := decodeTensorProto(v.Tensor)
	if err != nil {
		return nil, fmt.Errorf("%w: constant: %v", ErrBadGraph, err)
	}
	if dt, err := a.typ("dtype"); err == nil && dt != t.dt {
		return nil, fmt.Errorf("%w: constant is %s, its dtype attribute says %s", ErrBadGraph, dtypeName(t.dt), dtypeName(dt))
	}
	return t, nil
}

// skipRestoredAssign decides, in the init op, whether an Assign or
// AssignVariableOp is a random initializer of a variable the checkpoint
// restored: its value is drawn by a random op (RandomUniform,
// TruncatedNormal, ..., as Keras and tf.compat.v1 initializers draw them).
// Such an assignment would only replace the trained value with noise
// (tf.compat.v1's main_op runs global_variables_initializer; with
// main_op_with_restore the restore runs again after it), so it is skipped
// and its value never compiled: the variable keeps the checkpoint's value.
// Any other assignment in the init op runs, as in TensorFlow. outs are the
// skipped node's outputs (Assign's ref, which is the variable).
func (c *compiler) skipRestoredAssign(sc *scope, nd *ndpb.NodeDef) (outs []int, skipped bool, err error) {
	if len(nd.Input) < 2 || nd.Input[0] == "" || nd.Input[0][0] == '^' || !drawsRandom(sc, nd.Input[1]) {
		return nil, false, nil
	}
	s, err := c.ref(sc, nd.Input[0])
	if err != nil {
		return nil, false, err
	}
	var v *variable
	if nd.Op == "Assign" {
		v = c.refVar[s]
	} else if t := c.prog.consts[s]; t != nil && t.dt == dtResource {
		v = t.res
	}
	if v == nil || v.value == nil || !v.value.restored {
		return nil, false, nil
	}
	if nd.Op == "Assign" {
		return []int{s}, true, nil
	}
	return nil, true, nil
}

// maxRandomWalk bounds the nodes drawsRandom visits.
const maxRandomWalk = 4096

// drawsRandom reports whether the value of input (a tensor of scope sc)
// depends, through data inputs, on a random op.
func drawsRandom(sc *scope, input string) bool {
	seen := map[string]bool{}
	stack := []string{input}
	for len(stack) > 0 && len(seen) < maxRandomWalk {
		in := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if strings.HasPrefix(in, "^") {
			continue
		}
		name, _, _ := splitTensorName(in)
		if seen[name] {
			continue
		}
		seen[name] = true
		nd, ok := sc.nodes[name]
		if !ok {
			continue
		}
		if _, ok := randomOps[nd.Op]; ok {
			return true
		}
		stack = append(stack, nd.Input...)
	}
	return false
}
