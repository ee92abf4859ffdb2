package tensorflow

import (
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// Ops TensorFlow.js does not have, each in a graph built for it, with
// hand-derived expected values (from TensorFlow's op definitions).

// TestPassThroughOps: PreventGradient and BatchMatMulV3 (Ta = Tb = Tout).
func TestPassThroughOps(t *testing.T) {
	runCase(t, tfsave.Options{}, graphCase{name: "ops", build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{-1, 2, 2})
		w := tfsave.ConstOf[float32](b, "w", []int64{2, 2}, 1, 2, 3, 4)
		return map[string]string{"x": x}, map[string]string{
			"prevent": b.Op("PreventGradient", []string{x}, map[string]any{"message": "no gradient"}),
			"bmm":     b.Op("BatchMatMulV3", []string{x, w}, map[string]any{"Ta": tensor.Float, "Tb": tensor.Float, "Tout": tensor.Float}),
			"bmm_adj": b.Op("BatchMatMulV3", []string{x, w}, map[string]any{"Ta": tensor.Float, "Tb": tensor.Float, "Tout": tensor.Float, "adj_x": true, "adj_y": true}),
		}
	}, feed: []tensor.Tensor{named("x", f32([]int64{1, 2, 2}, 1, 0, -1, 2))},
		want: map[string]tensor.Tensor{
			"prevent": f32([]int64{1, 2, 2}, 1, 0, -1, 2),
			// [[1,0],[-1,2]] . [[1,2],[3,4]] = [[1,2],[5,6]]
			"bmm": f32([]int64{1, 2, 2}, 1, 2, 5, 6),
			// x^T . w^T = [[1,-1],[0,2]] . [[1,3],[2,4]] = [[-1,-1],[4,8]]
			"bmm_adj": f32([]int64{1, 2, 2}, -1, -1, 4, 8),
		}})
}

// TestResourceVariableOps: AssignSubVariableOp lowers a counter on each
// call (100 - 3k) when calls share state (levelModel; without the opt-out
// every call answers k = 1: TestPerCallStateValues), VarIsInitializedOp
// answers true for a restored variable, and DestroyResourceOp (run after
// the read) changes nothing the call returns.
func TestResourceVariableOps(t *testing.T) {
	m := loadShared(t, levelModel(t), driver.Config{})
	for k := int32(1); k <= 3; k++ {
		got, err := predictNamed(t, m, named("x", f32([]int64{2}, 1, -2)))
		if err != nil {
			t.Fatal(err)
		}
		s := 2.5 - 0.25*float32(k)
		checkFlowOut(t, "level", got["level"], nil, []int32{100 - 3*k})
		checkFlowOut(t, "scaled", got["scaled"], []int64{2}, []float32{s, -2 * s})
		checkFlowOut(t, "initialized", got["initialized"], nil, []int32{1})
	}
}

// TestControlTrigger: a ControlTrigger whose control input is a TF1 cond's
// untaken pivot is not dead (TensorFlow's rule), so a node waiting on it
// runs on both branches, while the same node waiting on the pivot itself
// is dead when the branch is not taken.
func TestControlTrigger(t *testing.T) {
	b := tfsave.NewBuilder()
	x := b.Placeholder("x", tensor.Float, []int64{-1, 1})
	flag := b.Placeholder("flag", tensor.Int32, []int64{})
	pred := b.OpNamed("Greater", "Greater", []string{flag, tfsave.ConstOf[int32](b, "Greater/y", []int64{}, 0)}, nil)
	merges := tf1Cond(b, "cond", pred, func(c tf1CondCtx) []string {
		return []string{b.OpNamed("cond/mul", "Mul", []string{c.in("mul", x), c.konst("mul/y", scalarF32(2))}, nil)}
	}, func(c tf1CondCtx) []string {
		return []string{b.OpNamed("cond/add", "Add", []string{c.in("add", x), c.konst("add/y", scalarF32(1))}, nil)}
	})
	trigger := b.OpNamed("trigger", "ControlTrigger", []string{"^cond/switch_t"}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x, "flag": flag}, map[string]string{
		"y":         merges[0],
		"triggered": b.OpNamed("after_trigger", "Identity", []string{x, "^" + trigger}, nil),
	})
	m := loadFiles(t, tf1Files(t, b), driver.Config{})
	for _, tc := range []struct {
		flag int32
		y    float32
	}{{1, 3}, {0, 2.5}} {
		got, err := predictNamed(t, m, named("x", f32([]int64{1, 1}, 1.5)), named("flag", i32([]int64{}, tc.flag)))
		if err != nil {
			t.Fatalf("flag %d: %v", tc.flag, err)
		}
		checkFlowOut(t, "y", got["y"], []int64{1, 1}, []float32{tc.y})
		checkFlowOut(t, "triggered", got["triggered"], []int64{1, 1}, []float32{1.5})
	}
	// Without the trigger the node dies with the untaken pivot.
	b2 := tfsave.NewBuilder()
	x2 := b2.Placeholder("x", tensor.Float, []int64{-1, 1})
	flag2 := b2.Placeholder("flag", tensor.Int32, []int64{})
	pred2 := b2.OpNamed("Greater", "Greater", []string{flag2, tfsave.ConstOf[int32](b2, "Greater/y", []int64{}, 0)}, nil)
	tf1Cond(b2, "cond", pred2, func(c tf1CondCtx) []string { return []string{c.in("id", x2)} }, func(c tf1CondCtx) []string { return []string{c.in("id", x2)} })
	b2.Signature(tfsave.ServingSignature, map[string]string{"x": x2, "flag": flag2}, map[string]string{
		"pivoted": b2.OpNamed("after_pivot", "Identity", []string{x2, "^cond/switch_t"}, nil),
	})
	m2 := loadFiles(t, tf1Files(t, b2), driver.Config{})
	if _, err := predictNamed(t, m2, named("x", f32([]int64{1, 1}, 1.5)), named("flag", i32([]int64{}, 0))); err == nil || !strings.Contains(err.Error(), "dead") {
		t.Errorf("a node waiting on the untaken pivot: error %v, want a dead output", err)
	}
}

// TestTF1RefLoopVariable runs a TF1 loop whose loop variable is a
// VariableV2 ref, as while_loop builds for a ref loop var: RefEnter,
// RefMerge, RefSwitch, RefIdentity in the body, RefNextIteration and
// RefExit; a second variable sums the ref's value: acc = n * 1.5, and the
// ref comes out unchanged.
func TestTF1RefLoopVariable(t *testing.T) {
	b := tfsave.NewBuilderWith(tfsave.Options{Variables: tfsave.RefVariables})
	n := b.Placeholder("n", tensor.Int32, []int64{})
	w := b.Variable("w", scalarF32(1.5))
	frame := "while/while_context"
	enter := func(name, op, x string, constant bool) string {
		return b.OpNamed(name, op, []string{x}, map[string]any{"frame_name": frame, "is_constant": constant, "parallel_iterations": 10})
	}
	ei := enter("while/Enter", "Enter", tfsave.ConstOf[int32](b, "Const", []int64{}, 0), false)
	ew := enter("while/Enter_1", "RefEnter", w.Handle, false)
	ea := enter("while/Enter_2", "Enter", tfsave.ConstOf[float32](b, "Const_1", []int64{}, 0), false)
	mi := b.OpNamed("while/Merge", "Merge", []string{ei, ei}, nil)
	mw := b.OpNamed("while/Merge_1", "RefMerge", []string{ew, ew}, nil)
	ma := b.OpNamed("while/Merge_2", "Merge", []string{ea, ea}, nil)
	less := b.OpNamed("while/Less", "Less", []string{mi, enter("while/Less/Enter", "Enter", n, true)}, nil)
	lc := b.OpNamed("while/LoopCond", "LoopCond", []string{less}, nil)
	si := strings.TrimSuffix(b.OpNamed("while/Switch", "Switch", []string{mi, lc}, nil), ":0")
	sw := strings.TrimSuffix(b.OpNamed("while/Switch_1", "RefSwitch", []string{mw, lc}, nil), ":0")
	sa := strings.TrimSuffix(b.OpNamed("while/Switch_2", "Switch", []string{ma, lc}, nil), ":0")
	ii := b.OpNamed("while/Identity", "Identity", []string{si + ":1"}, nil)
	iw := b.OpNamed("while/Identity_1", "RefIdentity", []string{sw + ":1"}, nil)
	ia := b.OpNamed("while/Identity_2", "Identity", []string{sa + ":1"}, nil)
	one := constCtl(b, "while/add/y", "while/Identity", scalarI32(1))
	b.UpdateInput("while/Merge", 1, b.OpNamed("while/NextIteration", "NextIteration", []string{b.OpNamed("while/add", "AddV2", []string{ii, one}, nil)}, nil))
	b.UpdateInput("while/Merge_1", 1, b.OpNamed("while/NextIteration_1", "RefNextIteration", []string{iw}, nil))
	b.UpdateInput("while/Merge_2", 1, b.OpNamed("while/NextIteration_2", "NextIteration", []string{b.OpNamed("while/add_1", "AddV2", []string{ia, iw}, nil)}, nil))
	b.OpNamed("while/Exit", "Exit", []string{si}, nil)
	xw := b.OpNamed("while/Exit_1", "RefExit", []string{sw}, nil)
	xa := b.OpNamed("while/Exit_2", "Exit", []string{sa}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"n": n}, map[string]string{"w": xw, "acc": xa})
	m := loadFiles(t, tf1Files(t, b), driver.Config{})
	for _, tc := range []struct {
		n   int32
		acc float32
	}{{4, 6}, {1, 1.5}, {0, 0}} {
		got, err := predictNamed(t, m, named("n", i32([]int64{}, tc.n)))
		if err != nil {
			t.Fatalf("n=%d: %v", tc.n, err)
		}
		checkFlowOut(t, "w", got["w"], nil, []float32{1.5})
		checkFlowOut(t, "acc", got["acc"], nil, []float32{tc.acc})
	}
}

// TestPartitionedCall calls a library function (x+x, k*k) with the
// stateless PartitionedCall, nested in a StatefulPartitionedCall's
// function, as tf.function exports of stateless bodies do.
func TestPartitionedCall(t *testing.T) {
	ins, outs := []arg{{"x", f32t}, {"k", i32t}}, []arg{{"y", f32t}, {"z", i32t}}
	inner := funcDef("inner_fn", ins, outs, []string{"add:z:0", "sq:z:0"}, fnode("add", "AddV2", f32t, "x", "x"), fnode("sq", "Mul", i32t, "k", "k"))
	call := func(name, op, fn string, in ...string) *ndpb.NodeDef {
		return &ndpb.NodeDef{Name: name, Op: op, Input: in, Attr: map[string]*apb.AttrValue{
			"Tin": typeListAttr(f32t, i32t), "Tout": typeListAttr(f32t, i32t), "f": funcAttr(fn)}}
	}
	outer := funcDef("outer_fn", ins, outs, []string{"pc:output:0", "pc:output:1"}, call("pc", "PartitionedCall", "inner_fn", "x", "k"))
	files := controlFlowModel(t, map[string]tensor.DType{"x": tensor.Float, "k": tensor.Int32},
		map[string]string{"y": "direct:0", "z": "nested:1"}, []*fpb.FunctionDef{inner, outer},
		call("direct", "PartitionedCall", "inner_fn", "x", "k"), call("nested", "StatefulPartitionedCall", "outer_fn", "x", "k"))
	m := loadFiles(t, files, driver.Config{})
	got, err := predictNamed(t, m, named("x", f32([]int64{1, 2}, 1.5, -2)), named("k", i32([]int64{}, -3)))
	if err != nil {
		t.Fatal(err)
	}
	checkFlowOut(t, "y", got["y"], []int64{1, 2}, []float32{3, -4})
	checkFlowOut(t, "z", got["z"], nil, []int32{9})
}
