package tensorflow

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tenpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// The TF1 control-flow models rebuild, node for node, what
// tf.compat.v1.cond and tf.compat.v1.while_loop emit with control flow v2
// off (tensorflow/python/ops/control_flow_ops.py, TF 1.15): node names,
// the Merge back edge, frame_name/is_constant/parallel_iterations, and the
// control inputs that put constants in a branch (^cond/switch_t) or frame
// (^while/Identity for the body, ^while/Merge for the condition). The
// structure was checked against the GraphDef TensorFlow itself printed for
// tf.while_loop(lambda i: i < 10, lambda i: i + 1, [0]), quoted in
// tensorflow/core/grappler/utils/scc_test.cc (TensorFlowLoop), which
// TestTF1WhileTensorFlowGraph rebuilds exactly.

func suffix(i int) string {
	if i == 0 {
		return ""
	}
	return "_" + strconv.Itoa(i)
}

// constCtl adds a Const with a control input, as TF1 puts a constant in a
// branch or frame.
func constCtl(b *tfsave.Builder, name, ctl string, t tensor.Tensor) string {
	return b.OpNamed(name, "Const", []string{"^" + ctl}, map[string]any{"value": t, "dtype": t.DType()})
}

// tf1CondCtx is one branch of a tf1Cond being built.
type tf1CondCtx struct {
	b             *tfsave.Builder
	scope, predID string
	pivot         string // switch_t or switch_f
	out           int    // Switch output the branch reads: 1 true, 0 false
}

// in brings external tensor x into the branch through Switch(x, pred_id)
// named <scope>/<op>/Switch, as CondContext does for each op's input.
func (c tf1CondCtx) in(op, x string) string {
	sw := c.b.OpNamed(c.b.UniqueName(c.scope+"/"+op+"/Switch"), "Switch", []string{x, c.predID}, nil)
	return strings.TrimSuffix(sw, ":0") + ":" + strconv.Itoa(c.out)
}

// konst adds a constant of the branch.
func (c tf1CondCtx) konst(name string, t tensor.Tensor) string {
	return constCtl(c.b, c.scope+"/"+name, c.pivot, t)
}

// tf1Cond adds tf.compat.v1.cond(pred, trueFn, falseFn) under scope and
// returns the Merges (false result first, as TF1 merges them).
func tf1Cond(b *tfsave.Builder, scope, pred string, trueFn, falseFn func(c tf1CondCtx) []string) []string {
	sw := strings.TrimSuffix(b.OpNamed(scope+"/Switch", "Switch", []string{pred, pred}, nil), ":0")
	switchT := b.OpNamed(scope+"/switch_t", "Identity", []string{sw + ":1"}, nil)
	switchF := b.OpNamed(scope+"/switch_f", "Identity", []string{sw + ":0"}, nil)
	predID := b.OpNamed(scope+"/pred_id", "Identity", []string{pred}, nil)
	rt := trueFn(tf1CondCtx{b, scope, predID, strings.TrimSuffix(switchT, ":0"), 1})
	rf := falseFn(tf1CondCtx{b, scope, predID, strings.TrimSuffix(switchF, ":0"), 0})
	merges := make([]string, len(rt))
	for i := range rt {
		merges[i] = b.OpNamed(scope+"/Merge"+suffix(i), "Merge", []string{rf[i], rt[i]}, nil)
	}
	return merges
}

// tf1Loop is a while loop being built.
type tf1Loop struct {
	b            *tfsave.Builder
	scope, frame string
	merge, ident string // pivots: first Merge (condition), first Identity (body)
}

// invariant brings external tensor x into the loop through a constant
// Enter named <scope>/<op>/Enter, as WhileContext does.
func (w *tf1Loop) invariant(op, x string) string {
	return w.b.OpNamed(w.b.UniqueName(w.scope+"/"+op+"/Enter"), "Enter", []string{x},
		map[string]any{"frame_name": w.frame, "is_constant": true, "parallel_iterations": 10})
}

// bodyConst adds a constant of the loop's body.
func (w *tf1Loop) bodyConst(name string, t tensor.Tensor) string {
	return constCtl(w.b, w.scope+"/"+name, w.ident, t)
}

// tf1While adds tf.compat.v1.while_loop(cond, body, inits) under scope and
// returns its Exits.
func tf1While(b *tfsave.Builder, scope string, inits []string, cond func(w *tf1Loop, vars []string) string, body func(w *tf1Loop, vars []string) []string) []string {
	w := &tf1Loop{b: b, scope: scope, frame: scope + "/while_context"}
	n := len(inits)
	merges, idents, switches := make([]string, n), make([]string, n), make([]string, n)
	for i, x := range inits {
		e := b.OpNamed(scope+"/Enter"+suffix(i), "Enter", []string{x},
			map[string]any{"frame_name": w.frame, "is_constant": false, "parallel_iterations": 10})
		merges[i] = b.OpNamed(scope+"/Merge"+suffix(i), "Merge", []string{e, e}, nil)
	}
	w.merge = strings.TrimSuffix(merges[0], ":0")
	loopCond := b.OpNamed(scope+"/LoopCond", "LoopCond", []string{cond(w, merges)}, nil)
	for i := range inits {
		switches[i] = strings.TrimSuffix(b.OpNamed(scope+"/Switch"+suffix(i), "Switch", []string{merges[i], loopCond},
			map[string]any{"_class": []string{"loc:@" + strings.TrimSuffix(merges[i], ":0")}}), ":0")
		idents[i] = b.OpNamed(scope+"/Identity"+suffix(i), "Identity", []string{switches[i] + ":1"}, nil)
	}
	w.ident = strings.TrimSuffix(idents[0], ":0")
	next := body(w, idents)
	exits := make([]string, n)
	for i := range inits {
		ni := b.OpNamed(scope+"/NextIteration"+suffix(i), "NextIteration", []string{next[i]}, nil)
		b.UpdateInput(strings.TrimSuffix(merges[i], ":0"), 1, ni)
	}
	for i := range inits {
		exits[i] = b.OpNamed(scope+"/Exit"+suffix(i), "Exit", []string{switches[i]}, nil)
	}
	return exits
}

func scalarI32(v int32) tensor.Tensor   { return tensor.New("", []int64{}, []int32{v}) }
func scalarF32(v float32) tensor.Tensor { return tensor.New("", []int64{}, []float32{v}) }
func tf1Files(t testing.TB, b *tfsave.Builder) driver.Files {
	t.Helper()
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// tf1CondModel is y = cond(flag > 0, x*2, x+1) with which = the Merge's
// value_index, and untaken = the true branch's product before the Merge
// (dead when flag <= 0) when withDead.
func tf1CondModel(t testing.TB, withDead bool) driver.Files {
	b := tfsave.NewBuilderWith(tfsave.Options{Variables: tfsave.RefVariables})
	x := b.Placeholder("x", tensor.Float, []int64{-1, 1})
	flag := b.Placeholder("flag", tensor.Int32, []int64{})
	pred := b.OpNamed("Greater", "Greater", []string{flag, tfsave.ConstOf[int32](b, "Greater/y", []int64{}, 0)}, nil)
	var product string
	merges := tf1Cond(b, "cond", pred, func(c tf1CondCtx) []string {
		product = b.OpNamed("cond/mul", "Mul", []string{c.in("mul", x), c.konst("mul/y", scalarF32(2))}, nil)
		return []string{product}
	}, func(c tf1CondCtx) []string {
		return []string{b.OpNamed("cond/add", "Add", []string{c.in("add", x), c.konst("add/y", scalarF32(1))}, nil)}
	})
	outs := map[string]string{"y": merges[0], "which": strings.TrimSuffix(merges[0], ":0") + ":1"}
	if withDead {
		outs["untaken"] = product
	}
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x, "flag": flag}, outs)
	return tf1Files(t, b)
}

// TestTF1Cond runs both branches of a TF1 tf.cond on a one-row batch
// [1,1], which keeps its shape, and checks the Merge's value_index (1 when
// its second input, the true branch, is live).
func TestTF1Cond(t *testing.T) {
	m := loadFiles(t, tf1CondModel(t, false), driver.Config{})
	x := named("x", f32([]int64{1, 1}, 1.5))
	for _, tc := range []struct {
		flag  int32
		y     float32
		which int32
	}{{1, 3, 1}, {0, 2.5, 0}, {7, 3, 1}, {-2, 2.5, 0}} {
		got, err := predictNamed(t, m, x, named("flag", i32([]int64{}, tc.flag)))
		if err != nil {
			t.Fatalf("flag %d: %v", tc.flag, err)
		}
		what := "flag " + strconv.Itoa(int(tc.flag))
		checkFlowOut(t, what+" y", got["y"], []int64{1, 1}, []float32{tc.y})
		checkFlowOut(t, what+" which", got["which"], nil, []int32{tc.which})
	}
	got, err := predictNamed(t, m, named("x", f32([]int64{2, 1}, 1.5, -4)), named("flag", i32([]int64{}, 0)))
	if err != nil {
		t.Fatal(err)
	}
	checkFlowOut(t, "batch 2 y", got["y"], []int64{2, 1}, []float32{2.5, -3})
}

// TestTF1CondDeadOutput fetches a branch's tensor before the Merge: live
// when its branch runs, and a clear error naming the output (TensorFlow
// returns no value) when the other branch does. The state that held a dead
// tensor must serve the next call.
func TestTF1CondDeadOutput(t *testing.T) {
	m := loadFiles(t, tf1CondModel(t, true), driver.Config{})
	x := named("x", f32([]int64{1, 1}, 1.5))
	for range 3 {
		got, err := predictNamed(t, m, x, named("flag", i32([]int64{}, 1)))
		if err != nil {
			t.Fatal(err)
		}
		checkFlowOut(t, "untaken (true)", got["untaken"], []int64{1, 1}, []float32{3})
		_, err = predictNamed(t, m, x, named("flag", i32([]int64{}, 0)))
		if err == nil {
			t.Fatal("fetching the untaken branch succeeded")
		}
		if !strings.Contains(err.Error(), "dead") || !strings.Contains(err.Error(), `"cond/mul:0"`) {
			t.Errorf("error %q does not say which output is dead", err)
		}
	}
	t.Log(err0(predictNamed(t, m, x, named("flag", i32([]int64{}, 0)))))
}

func err0[T any](_ T, err error) error { return err }

// countingLoop is while i < n: (i+1, acc*2) from (0, 1): i = n, acc = 2^n
// (n >= 0), with n a loop invariant.
func countingLoop(t testing.TB) driver.Files {
	b := tfsave.NewBuilder()
	n := b.Placeholder("n", tensor.Int32, []int64{})
	exits := tf1While(b, "while", []string{tfsave.ConstOf[int32](b, "Const", []int64{}, 0), tfsave.ConstOf[int32](b, "Const_1", []int64{}, 1)},
		func(w *tf1Loop, v []string) string {
			return b.OpNamed("while/Less", "Less", []string{v[0], w.invariant("Less", n)}, nil)
		}, func(w *tf1Loop, v []string) []string {
			return []string{
				b.OpNamed("while/add", "AddV2", []string{v[0], w.bodyConst("add/y", scalarI32(1))}, nil),
				b.OpNamed("while/mul", "Mul", []string{v[1], w.bodyConst("mul/y", scalarI32(2))}, nil),
			}
		})
	b.Signature(tfsave.ServingSignature, map[string]string{"n": n}, map[string]string{"i": exits[0], "acc": exits[1]})
	return tf1Files(t, b)
}

func TestTF1WhileCounting(t *testing.T) {
	m := loadFiles(t, countingLoop(t), driver.Config{})
	for _, tc := range []struct{ n, i, acc int32 }{{5, 5, 32}, {0, 0, 1}, {-3, 0, 1}, {10, 10, 1024}} {
		got, err := predictNamed(t, m, named("n", i32([]int64{}, tc.n)))
		if err != nil {
			t.Fatalf("n=%d: %v", tc.n, err)
		}
		checkFlowOut(t, "i", got["i"], nil, []int32{tc.i})
		checkFlowOut(t, "acc", got["acc"], nil, []int32{tc.acc})
	}
}

// TestTF1WhileTensorFlowGraph rebuilds exactly the GraphDef TensorFlow
// printed for tf.while_loop(lambda i: tf.less(i, 10), lambda i: tf.add(i,
// 1), [tf.constant(0)]) (scc_test.cc): frame "while/while/", op Add, the
// condition's constant under ^while/Merge. The loop ends at 10.
func TestTF1WhileTensorFlowGraph(t *testing.T) {
	b := tfsave.NewBuilder()
	c := tfsave.ConstOf[int32](b, "Const", []int64{}, 0)
	e := b.OpNamed("while/Enter", "Enter", []string{c}, map[string]any{"frame_name": "while/while/", "is_constant": false, "parallel_iterations": 10})
	mg := b.OpNamed("while/Merge", "Merge", []string{e, e}, nil)
	lessY := constCtl(b, "while/Less/y", "while/Merge", scalarI32(10))
	less := b.OpNamed("while/Less", "Less", []string{mg, lessY}, nil)
	lc := b.OpNamed("while/LoopCond", "LoopCond", []string{less}, nil)
	sw := b.OpNamed("while/Switch", "Switch", []string{mg, lc}, map[string]any{"_class": []string{"loc:@while/Merge"}})
	id := b.OpNamed("while/Identity", "Identity", []string{"while/Switch:1"}, nil)
	addY := constCtl(b, "while/Add/y", "while/Identity", scalarI32(1))
	add := b.OpNamed("while/Add", "Add", []string{id, addY}, nil)
	ni := b.OpNamed("while/NextIteration", "NextIteration", []string{add}, nil)
	b.UpdateInput("while/Merge", 1, ni)
	exit := b.OpNamed("while/Exit", "Exit", []string{sw}, nil)
	// The signature gets an input nothing reads.
	unused := b.Placeholder("unused", tensor.Int32, []int64{})
	b.Signature(tfsave.ServingSignature, map[string]string{"unused": unused}, map[string]string{"r": exit})
	m := loadFiles(t, tf1Files(t, b), driver.Config{})
	got, err := predictNamed(t, m, named("unused", i32([]int64{}, 0)))
	if err != nil {
		t.Fatal(err)
	}
	checkFlowOut(t, "r", got["r"], nil, []int32{10})
}

// tf1WhileBatchModel is TestTF1WhileBatch's model.
func tf1WhileBatchModel(t testing.TB) driver.Files {
	b := tfsave.NewBuilder()
	x := b.Placeholder("x", tensor.Float, []int64{-1, -1})
	decay := b.Placeholder("decay", tensor.Float, []int64{})
	cols := b.OpNamed("strided/GatherV2", "GatherV2", []string{b.OpNamed("Shape", "Shape", []string{x}, nil),
		tfsave.ConstOf[int32](b, "strided/idx", []int64{}, 1), tfsave.ConstOf[int32](b, "strided/axis", []int64{}, 0)}, nil)
	one := tfsave.ConstOf[int32](b, "one", []int64{}, 1)
	first := b.OpNamed("first", "GatherV2", []string{x, tfsave.ConstOf[int32](b, "zero", []int64{}, 0), one}, nil)
	exits := tf1While(b, "while", []string{one, first}, func(w *tf1Loop, v []string) string {
		return b.OpNamed("while/Less", "Less", []string{v[0], w.invariant("Less", cols)}, nil)
	}, func(w *tf1Loop, v []string) []string {
		col := b.OpNamed("while/GatherV2", "GatherV2", []string{w.invariant("GatherV2", x), v[0], w.bodyConst("GatherV2/axis", scalarI32(1))}, nil)
		scaled := b.OpNamed("while/mul", "Mul", []string{v[1], w.invariant("mul", decay)}, nil)
		return []string{
			b.OpNamed("while/add", "AddV2", []string{v[0], w.bodyConst("add/y", scalarI32(1))}, nil),
			b.OpNamed("while/add_1", "AddV2", []string{scaled, col}, nil),
		}
	})
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x, "decay": decay}, map[string]string{"acc": exits[1]})
	return tf1Files(t, b)
}

// TestTF1WhileBatch runs acc = acc*decay + x[:, j] over the columns j >= 1
// of a batch from acc = x[:, 0], with x and decay loop invariants and the
// column count from Shape(x). The expected values are computed here in
// float32, one rounding per Mul and per Add as TensorFlow's kernels do.
func TestTF1WhileBatch(t *testing.T) {
	m := loadFiles(t, tf1WhileBatchModel(t), driver.Config{})
	ref := func(rows [][]float32, d float32) []float32 {
		out := make([]float32, len(rows))
		for r, row := range rows {
			acc := row[0]
			for _, v := range row[1:] {
				acc = float32(acc*d) + v
			}
			out[r] = acc
		}
		return out
	}
	for _, tc := range []struct {
		rows [][]float32
		d    float32
		want []float32 // by hand where exact
	}{
		{[][]float32{{1.5, -2, 0.25, 3}}, 0.5, []float32{2.8125}}, // 1.5 -> -1.25 -> -0.375 -> 2.8125
		{[][]float32{{1.5, -2, 0.25, 3}, {0.1, 0.2, 0.3, 0.4}}, 1, nil},
		{[][]float32{{0.7, 0.3, 0.9}, {1e8, 1, -1e8}, {-3, 4, 5}}, 0.9, nil},
		{[][]float32{{4}}, 0.5, []float32{4}}, // one column: no iteration
	} {
		var flat []float32
		for _, r := range tc.rows {
			flat = append(flat, r...)
		}
		want := tc.want
		if want == nil {
			want = ref(tc.rows, tc.d)
		}
		got, err := predictNamed(t, m, named("x", f32([]int64{int64(len(tc.rows)), int64(len(tc.rows[0]))}, flat...)), named("decay", f32([]int64{}, tc.d)))
		if err != nil {
			t.Fatal(err)
		}
		checkFlowOut(t, "acc", got["acc"], []int64{int64(len(tc.rows))}, want)
	}
	// The 0.1+0.2+0.3+0.4 row in float32: 0.1f+0.2f rounds to 0.3f
	// (0x3E99999A), doubling it is exact (0.6f, 0x3F19999A), and
	// 0.6f+0.4f = 1.0000000298 rounds to 1.
	if r := ref([][]float32{{0.1, 0.2, 0.3, 0.4}}, 1); r[0] != 1 {
		t.Errorf("float32 reference %v, hand-derived 1", r[0])
	}
}

// nestedLoopModel is TestTF1WhileNested's model (acc = n(n-1)/2).
func nestedLoopModel(t testing.TB) driver.Files {
	b := tfsave.NewBuilder()
	n := b.Placeholder("n", tensor.Int32, []int64{})
	zero := tfsave.ConstOf[int32](b, "Const", []int64{}, 0)
	exits := tf1While(b, "while", []string{zero, zero}, func(w *tf1Loop, v []string) string {
		return b.OpNamed("while/Less", "Less", []string{v[0], w.invariant("Less", n)}, nil)
	}, func(outer *tf1Loop, v []string) []string {
		inner := tf1While(b, "while/while", []string{outer.bodyConst("Const", scalarI32(0)), v[1]}, func(w *tf1Loop, u []string) string {
			return b.OpNamed("while/while/Less", "Less", []string{u[0], w.invariant("Less", v[0])}, nil)
		}, func(w *tf1Loop, u []string) []string {
			return []string{
				b.OpNamed("while/while/add", "AddV2", []string{u[0], w.bodyConst("add/y", scalarI32(1))}, nil),
				b.OpNamed("while/while/add_1", "AddV2", []string{u[1], w.bodyConst("add_1/y", scalarI32(1))}, nil),
			}
		})
		return []string{b.OpNamed("while/add", "AddV2", []string{v[0], outer.bodyConst("add/y", scalarI32(1))}, nil), inner[1]}
	})
	b.Signature(tfsave.ServingSignature, map[string]string{"n": n}, map[string]string{"acc": exits[1]})
	return tf1Files(t, b)
}

// TestTF1WhileNested counts with a loop inside a loop: for i < n, for j <
// i, acc++; the inner loop's bound is the outer body's i (an invariant of
// the inner frame) and its acc the outer's. acc = n(n-1)/2.
func TestTF1WhileNested(t *testing.T) {
	m := loadFiles(t, nestedLoopModel(t), driver.Config{})
	for _, tc := range []struct{ n, acc int32 }{{5, 10}, {1, 0}, {0, 0}, {8, 28}} {
		got, err := predictNamed(t, m, named("n", i32([]int64{}, tc.n)))
		if err != nil {
			t.Fatalf("n=%d: %v", tc.n, err)
		}
		checkFlowOut(t, "acc n="+strconv.Itoa(int(tc.n)), got["acc"], nil, []int32{tc.acc})
	}
}

// condInWhileModel is TestTF1CondInWhile's model.
func condInWhileModel(t testing.TB) driver.Files {
	b := tfsave.NewBuilder()
	n := b.Placeholder("n", tensor.Int32, []int64{})
	zero := tfsave.ConstOf[int32](b, "Const", []int64{}, 0)
	exits := tf1While(b, "while", []string{zero, zero}, func(w *tf1Loop, v []string) string {
		return b.OpNamed("while/Less", "Less", []string{v[0], w.invariant("Less", n)}, nil)
	}, func(w *tf1Loop, v []string) []string {
		early := b.OpNamed("while/Less_1", "Less", []string{v[0], w.bodyConst("Less_1/y", scalarI32(3))}, nil)
		picked := tf1Cond(b, "while/cond", early, func(c tf1CondCtx) []string {
			return []string{b.OpNamed("while/cond/add", "AddV2", []string{c.in("add", v[1]), c.in("add", v[0])}, nil)}
		}, func(c tf1CondCtx) []string {
			return []string{b.OpNamed("while/cond/sub", "Sub", []string{c.in("sub", v[1]), c.in("sub", v[0])}, nil)}
		})
		return []string{b.OpNamed("while/add", "AddV2", []string{v[0], w.bodyConst("add/y", scalarI32(1))}, nil), picked[0]}
	})
	b.Signature(tfsave.ServingSignature, map[string]string{"n": n}, map[string]string{"acc": exits[1]})
	return tf1Files(t, b)
}

// TestTF1CondInWhile runs a tf.cond in a loop body: while i < n: acc =
// acc+i if i < 3 else acc-i. For n=6: 0+0+1+2-3-4-5 = -9; n=2: 1.
func TestTF1CondInWhile(t *testing.T) {
	m := loadFiles(t, condInWhileModel(t), driver.Config{})
	for _, tc := range []struct{ n, acc int32 }{{6, -9}, {2, 1}, {0, 0}} {
		got, err := predictNamed(t, m, named("n", i32([]int64{}, tc.n)))
		if err != nil {
			t.Fatalf("n=%d: %v", tc.n, err)
		}
		checkFlowOut(t, "acc n="+strconv.Itoa(int(tc.n)), got["acc"], nil, []int32{tc.acc})
	}
}

// whileInCondModel is TestTF1WhileInCond's model.
func whileInCondModel(t testing.TB) driver.Files {
	b := tfsave.NewBuilder()
	n := b.Placeholder("n", tensor.Int32, []int64{})
	pred := b.OpNamed("Greater", "Greater", []string{n, tfsave.ConstOf[int32](b, "Greater/y", []int64{}, 0)}, nil)
	merges := tf1Cond(b, "cond", pred, func(c tf1CondCtx) []string {
		bound := c.in("Less", n)
		exits := tf1While(b, "cond/while", []string{c.konst("Const", scalarI32(0))}, func(w *tf1Loop, v []string) string {
			return b.OpNamed("cond/while/Less", "Less", []string{v[0], w.invariant("Less", bound)}, nil)
		}, func(w *tf1Loop, v []string) []string {
			return []string{b.OpNamed("cond/while/add", "AddV2", []string{v[0], w.bodyConst("add/y", scalarI32(2))}, nil)}
		})
		return exits
	}, func(c tf1CondCtx) []string {
		return []string{b.OpNamed("cond/Neg", "Neg", []string{c.in("Neg", n)}, nil)}
	})
	b.Signature(tfsave.ServingSignature, map[string]string{"n": n}, map[string]string{"r": merges[0]})
	return tf1Files(t, b)
}

// TestTF1WhileInCond puts a loop in a tf.cond branch: when the branch is
// not taken its Enter is dead, so the loop does not run and the Merge
// takes the other branch.
func TestTF1WhileInCond(t *testing.T) {
	m := loadFiles(t, whileInCondModel(t), driver.Config{})
	for _, tc := range []struct{ n, r int32 }{{5, 6}, {-4, 4}, {4, 4}, {0, 0}} {
		got, err := predictNamed(t, m, named("n", i32([]int64{}, tc.n)))
		if err != nil {
			t.Fatalf("n=%d: %v", tc.n, err)
		}
		checkFlowOut(t, "r n="+strconv.Itoa(int(tc.n)), got["r"], nil, []int32{tc.r})
	}
}

// stuckLoop is while i < n: i (the body never advances).
func stuckLoop(t testing.TB) driver.Files {
	b := tfsave.NewBuilder()
	n := b.Placeholder("n", tensor.Int32, []int64{})
	exits := tf1While(b, "while", []string{tfsave.ConstOf[int32](b, "Const", []int64{}, 0)}, func(w *tf1Loop, v []string) string {
		return b.OpNamed("while/Less", "Less", []string{v[0], w.invariant("Less", n)}, nil)
	}, func(w *tf1Loop, v []string) []string { return v })
	b.Signature(tfsave.ServingSignature, map[string]string{"n": n}, map[string]string{"i": exits[0]})
	return tf1Files(t, b)
}

// TestTF1WhileNeverEnds checks the iteration bound and that a loop stops
// with its call's context.
func TestTF1WhileNeverEnds(t *testing.T) {
	defer func(old int) { maxWhileIterations = old }(maxWhileIterations)
	maxWhileIterations = 1000
	m := loadFiles(t, stuckLoop(t), driver.Config{})
	_, err := predictNamed(t, m, named("n", i32([]int64{}, 5)))
	if err == nil {
		t.Fatal("a loop that never ends returned")
	}
	t.Log(err)
	for _, want := range []string{"did not end after 1000 iterations", "while/LoopCond", "while/while_context"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	ctx := &cancelAfter{Context: context.Background(), n: 3}
	_, err = m.Predict(ctx, []tensor.Tensor{named("n", i32([]int64{}, 5))})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "loop stopped after") {
		t.Fatalf("error %v, want the loop stopped with context.Canceled", err)
	}
}

// editNodes applies edit to the main-graph nodes of files by name.
func editNodes(t *testing.T, files driver.Files, edit func(nodes map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef)) driver.Files {
	t.Helper()
	return editGraph(t, files, func(mg *cpb.MetaGraphDef) {
		nodes := map[string]*ndpb.NodeDef{}
		for _, nd := range mg.GraphDef.Node {
			nodes[nd.Name] = nd
		}
		edit(nodes, mg)
	})
}

// setOutput points the serving signature's output key at tensor.
func setOutput(mg *cpb.MetaGraphDef, key, tensor string) {
	mg.SignatureDef["serving_default"].Outputs[key].Encoding = &cpb.TensorInfo_Name{Name: tensor}
}

// TestTF1MalformedGraphs checks that broken TF1 loops and conds fail the
// load with an error naming the node at fault, never a panic or a hang.
func TestTF1MalformedGraphs(t *testing.T) {
	good := countingLoop(t)
	for _, tc := range []struct {
		name  string
		edit  func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef)
		wants []string
	}{
		{"exit not on a switch", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/Exit"].Input[0] = "while/add"
		}, []string{"while/Exit", "not output 0 of a Switch"}},
		{"exit on switch output 1", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/Exit"].Input[0] = "while/Switch:1"
		}, []string{"while/Exit", "not output 0 of a Switch"}},
		{"next iteration fetched", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			setOutput(mg, "i", "while/NextIteration:0")
		}, []string{"while/NextIteration", "outside"}},
		{"merge fetched", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			setOutput(mg, "i", "while/Merge:0")
		}, []string{"while/Merge", "outside"}},
		{"enter fetched", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			setOutput(mg, "i", "while/Enter:0")
		}, []string{"while/Enter", "outside", "while/while_context"}},
		{"loop cond fetched", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			setOutput(mg, "i", "while/LoopCond:0")
		}, []string{"while/LoopCond", "outside"}},
		{"mismatched frame names", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/Enter_1"].Attr["frame_name"].Value = &apb.AttrValue_S{S: []byte("while/other_context")}
		}, []string{"while/Merge", "outside"}},
		{"merge without enter", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/Merge"].Input[0] = "while/NextIteration"
			setOutput(mg, "acc", "while/Exit:0") // reach the loop from this Merge's Exit
		}, []string{"while/Merge", "no Enter input"}},
		{"merge without next iteration", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/Merge"].Input[1] = "while/add"
		}, []string{"while/Merge", "neither its Enter nor a NextIteration"}},
		{"merge of three", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/Merge"].Input = append(n["while/Merge"].Input, "while/Enter")
		}, []string{"while/Merge", "3 inputs"}},
		{"enter feeding no merge", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			e := proto.Clone(n["while/Enter_1"]).(*ndpb.NodeDef)
			e.Name = "while/Enter_2"
			mg.GraphDef.Node = append(mg.GraphDef.Node, e)
		}, []string{"while/Enter_2", "feeds no Merge"}},
		{"switch not on the loop cond", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/Switch_1"].Input[1] = "while/Less"
		}, []string{"while/Exit", "pred is not a LoopCond"}},
		{"body reaches its own exit", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/add"].Input[0] = "while/Exit"
		}, []string{"while/while_context", "own Exit", "while/Exit"}},
		{"cycle without loop ops", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/mul"].Input[0] = "while/add_2"
			add := proto.Clone(n["while/add"]).(*ndpb.NodeDef)
			add.Name, add.Input[0] = "while/add_2", "while/mul"
			mg.GraphDef.Node = append(mg.GraphDef.Node, add)
		}, []string{"cycle through node", "while/mul"}},
		{"missing ops in cond and body", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			n["while/Less"].Op = "ZetaLess"
			n["while/mul"].Op = "ZetaMul"
		}, []string{"2 ops", "ZetaLess (1 node: while/Less)", "ZetaMul (1 node: while/mul)"}},
		{"tf1 op in a function", func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			mg.GraphDef.Library = &fpb.FunctionDefLibrary{Function: []*fpb.FunctionDef{
				funcDef("tf1_fn", []arg{{"x", i32t}}, []arg{{"y", i32t}}, []string{"ex:output:0"}, fnode("ex", "Exit", i32t, "x")),
			}}
			mg.GraphDef.Node = append(mg.GraphDef.Node, &ndpb.NodeDef{Name: "call", Op: "PartitionedCall", Input: []string{"while/Exit"},
				Attr: map[string]*apb.AttrValue{"Tin": typeListAttr(i32t), "Tout": typeListAttr(i32t), "f": funcAttr("tf1_fn")}})
			setOutput(mg, "i", "call:0")
		}, []string{"tf1_fn", "main graph only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := loadErr(t, editNodes(t, good, tc.edit))
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// The unedited model loads: the edits are what fails.
	loadFiles(t, good, driver.Config{})
}

// TestTF1PredMustBeBool checks a Switch whose pred is not bool (a graph
// TensorFlow itself would refuse) fails the load naming the Switch.
func TestTF1PredMustBeBool(t *testing.T) {
	files := editNodes(t, tf1CondModel(t, false), func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
		n["cond/mul/Switch"].Input[1] = "flag"
	})
	err := loadErr(t, files)
	if !strings.Contains(err.Error(), "cond/mul/Switch") || !strings.Contains(err.Error(), "want bool") {
		t.Errorf("error %q does not name the Switch and its pred", err)
	}
}

// TestTF1RefVariable runs the Ref ops on a TF1 VariableV2 restored from
// the checkpoint (w = 1.5): RefSwitch on its ref output, joined by
// RefMerge (value_index says the branch), and RefEnter bringing it into a
// loop as an invariant: while i < n: acc += w, so acc = n*1.5.
func TestTF1RefVariable(t *testing.T) {
	b := tfsave.NewBuilderWith(tfsave.Options{Variables: tfsave.RefVariables})
	n := b.Placeholder("n", tensor.Int32, []int64{})
	w := b.Variable("w", scalarF32(1.5))
	pred := b.OpNamed("Greater", "Greater", []string{n, tfsave.ConstOf[int32](b, "Greater/y", []int64{}, 2)}, nil)
	sw := strings.TrimSuffix(b.OpNamed("cond/RefSwitch", "RefSwitch", []string{w.Handle, pred}, nil), ":0")
	merged := strings.TrimSuffix(b.OpNamed("cond/RefMerge", "RefMerge", []string{sw + ":0", sw + ":1"}, nil), ":0")
	exits := tf1While(b, "while", []string{tfsave.ConstOf[int32](b, "Const", []int64{}, 0), tfsave.ConstOf[float32](b, "Const_1", []int64{}, 0)},
		func(l *tf1Loop, v []string) string {
			return b.OpNamed("while/Less", "Less", []string{v[0], l.invariant("Less", n)}, nil)
		}, func(l *tf1Loop, v []string) []string {
			ref := b.OpNamed("while/add_1/Enter", "RefEnter", []string{w.Handle},
				map[string]any{"frame_name": l.frame, "is_constant": true, "parallel_iterations": 10})
			return []string{
				b.OpNamed("while/add", "AddV2", []string{v[0], l.bodyConst("add/y", scalarI32(1))}, nil),
				b.OpNamed("while/add_1", "AddV2", []string{v[1], ref}, nil),
			}
		})
	b.Signature(tfsave.ServingSignature, map[string]string{"n": n},
		map[string]string{"w": merged + ":0", "branch": merged + ":1", "acc": exits[1]})
	m := loadFiles(t, tf1Files(t, b), driver.Config{})
	for _, tc := range []struct {
		n      int32
		branch int32
		acc    float32
	}{{4, 1, 6}, {2, 0, 3}, {0, 0, 0}} {
		got, err := predictNamed(t, m, named("n", i32([]int64{}, tc.n)))
		if err != nil {
			t.Fatalf("n=%d: %v", tc.n, err)
		}
		what := "n=" + strconv.Itoa(int(tc.n))
		checkFlowOut(t, what+" w", got["w"], nil, []float32{1.5})
		checkFlowOut(t, what+" branch", got["branch"], nil, []int32{tc.branch})
		checkFlowOut(t, what+" acc", got["acc"], nil, []float32{tc.acc})
	}
}

// TestTF1ConcurrentCalls runs the cond model (both branches and the dead
// output) and the nested loop from several goroutines at once: pooled
// states that held dead tensors must serve the next call correctly.
func TestTF1ConcurrentCalls(t *testing.T) {
	cond := loadFiles(t, tf1CondModel(t, true), driver.Config{})
	const workers, calls = 4, 50
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				for i := range calls {
					flag := int32((w + i) % 2)
					x := float32(w*calls + i)
					out, err := cond.Predict(context.Background(), []tensor.Tensor{named("flag", i32([]int64{}, flag)), named("x", f32([]int64{1, 1}, x))})
					if flag == 0 {
						if err == nil || !strings.Contains(err.Error(), "dead") {
							return errors.New("flag 0: want the dead-output error, got " + strconv.Quote(errString(err)))
						}
						continue
					}
					if err != nil {
						return err
					}
					// Outputs by key order: untaken, which, y.
					if got := out[2].Data.([]float32)[0]; got != 2*x {
						return errors.New("y = " + strconv.FormatFloat(float64(got), 'g', -1, 32) + ", want 2x")
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// BenchmarkTF1WhileSum is BenchmarkWhileSum's loop (1000 iterations,
// acc += i) as a TF1 frame, to compare the two ways of running a loop.
func BenchmarkTF1WhileSum(b *testing.B) {
	bld := tfsave.NewBuilder()
	n := bld.Placeholder("n", tensor.Int32, []int64{})
	zero := tfsave.ConstOf[int32](bld, "Const", []int64{}, 0)
	exits := tf1While(bld, "while", []string{zero, zero}, func(w *tf1Loop, v []string) string {
		return bld.OpNamed("while/Less", "Less", []string{v[0], w.invariant("Less", n)}, nil)
	}, func(w *tf1Loop, v []string) []string {
		return []string{
			bld.OpNamed("while/add", "AddV2", []string{v[0], w.bodyConst("add/y", scalarI32(1))}, nil),
			bld.OpNamed("while/add_1", "AddV2", []string{v[1], v[0]}, nil),
		}
	})
	bld.Signature(tfsave.ServingSignature, map[string]string{"n": n}, map[string]string{"acc": exits[1]})
	m := loadFiles(b, tf1Files(b, bld), driver.Config{})
	in := []tensor.Tensor{named("n", i32([]int64{}, 1000))}
	out, err := m.Predict(context.Background(), in)
	if err != nil || out[0].Data.([]int32)[0] != 499500 {
		b.Fatalf("sum of 0..999: %v, %v", out, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Predict(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// learningPhaseModel is a Keras TF1 export's dropout: a tf.cond on
// keras_learning_phase, a PlaceholderWithDefault the serving signature
// does not feed (training: x*2, standing in for dropout's scaling;
// inference: Identity(x)), then Relu.
func learningPhaseModel(t testing.TB, training bool) driver.Files {
	b := tfsave.NewBuilder()
	x := b.Placeholder("x", tensor.Float, []int64{-1, 2})
	def := b.OpNamed("keras_learning_phase/input", "Const", nil, map[string]any{"dtype": bt,
		"value": &tenpb.TensorProto{Dtype: bt, TensorShape: &shpb.TensorShapeProto{}, BoolVal: []bool{training}}})
	phase := b.OpNamed("keras_learning_phase", "PlaceholderWithDefault", []string{def}, map[string]any{"dtype": bt, "shape": tfsave.Shape{}})
	merges := tf1Cond(b, "dropout/cond", phase, func(c tf1CondCtx) []string {
		return []string{b.OpNamed("dropout/cond/dropout/mul", "Mul", []string{c.in("dropout/mul", x), c.konst("dropout/Const", scalarF32(2))}, nil)}
	}, func(c tf1CondCtx) []string {
		return []string{b.OpNamed("dropout/cond/Identity", "Identity", []string{c.in("Identity", x)}, nil)}
	})
	y := b.OpNamed("dense/Relu", "Relu", []string{merges[0]}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	return tf1Files(t, b)
}

// TestTF1CondKnownAtLoad checks a cond whose pred is known at load (Keras's
// learning phase left at its default): it answers like the same cond
// decided at run time, and compiles to the taken branch alone, with no
// Switch, Merge or dead checks.
func TestTF1CondKnownAtLoad(t *testing.T) {
	x := named("x", f32([]int64{1, 2}, 1.5, -0.25))
	for _, tc := range []struct {
		training bool
		y        []float32
		schedule string
	}{{false, []float32{1.5, 0}, "[Relu]"}, {true, []float32{3, 0}, "[Mul Relu]"}} {
		files := learningPhaseModel(t, tc.training)
		got, err := predictNamed(t, loadFiles(t, files, driver.Config{}), x)
		if err != nil {
			t.Fatal(err)
		}
		checkFlowOut(t, "y", got["y"], []int64{1, 2}, tc.y)
		m, err := load(files, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, st := range m.serve.steps {
			ops = append(ops, st.op)
		}
		if s := "[" + strings.Join(ops, " ") + "]"; s != tc.schedule {
			t.Errorf("training=%v: schedule %s, want %s", tc.training, s, tc.schedule)
		}
	}
}

// TestTF1RewiredGraphs rewires, one at a time, every data input of every
// node of the counting loop and of the cond model to every other node's
// first output, and loads and runs each graph: whatever the wiring, the
// result is an answer or an error, never a panic or a hang (bounded loops).
func TestTF1RewiredGraphs(t *testing.T) {
	defer func(old int) { maxWhileIterations = old }(maxWhileIterations)
	maxWhileIterations = 100
	models := []struct {
		files driver.Files
		in    []tensor.Tensor
	}{
		{countingLoop(t), []tensor.Tensor{named("n", i32([]int64{}, 3))}},
		{tf1CondModel(t, true), []tensor.Tensor{named("x", f32([]int64{1, 1}, 1.5)), named("flag", i32([]int64{}, 1))}},
		{nestedLoopModel(t), []tensor.Tensor{named("n", i32([]int64{}, 3))}},
		{condInWhileModel(t), []tensor.Tensor{named("n", i32([]int64{}, 4))}},
		{whileInCondModel(t), []tensor.Tensor{named("n", i32([]int64{}, 3))}},
	}
	loads, runs := 0, 0
	for _, md := range models {
		var names []string
		editNodes(t, md.files, func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			for _, nd := range mg.GraphDef.Node {
				names = append(names, nd.Name)
			}
		})
		for _, target := range names {
			for i := range 3 {
				for _, src := range names {
					var ok bool
					files := editNodes(t, md.files, func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
						nd := n[target]
						if i < len(nd.Input) && !strings.HasPrefix(nd.Input[i], "^") && src != target {
							nd.Input[i], ok = src, true
						}
					})
					if !ok {
						continue
					}
					loads++
					m, err := New(driver.Config{}).Load(context.Background(), files)
					if err != nil {
						continue
					}
					runs++
					_, _ = m.Predict(context.Background(), md.in)
					m.Close()
				}
			}
		}
	}
	t.Logf("%d rewired graphs, %d loaded and ran", loads, runs)
}

// TestTF1LoopInBranchKnownAtLoad makes whileInCondModel's pred a constant:
// false compiles the loop's branch to nothing (the Enters are dead at
// load), true keeps the loop and drops Neg.
func TestTF1LoopInBranchKnownAtLoad(t *testing.T) {
	for _, tc := range []struct {
		pred     bool
		r        int32
		schedule string
	}{{false, -5, "[Neg]"}, {true, 6, "[while loop (TF1)]"}} {
		files := editNodes(t, whileInCondModel(t), func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
			g := n["Greater"]
			g.Op, g.Input = "Const", nil
			g.Attr = map[string]*apb.AttrValue{"dtype": typeAttr(bt), "value": {Value: &apb.AttrValue_Tensor{Tensor: &tenpb.TensorProto{
				Dtype: bt, TensorShape: &shpb.TensorShapeProto{}, BoolVal: []bool{tc.pred}}}}}
		})
		got, err := predictNamed(t, loadFiles(t, files, driver.Config{}), named("n", i32([]int64{}, 5)))
		if err != nil {
			t.Fatal(err)
		}
		checkFlowOut(t, "r", got["r"], nil, []int32{tc.r})
		m, err := load(files, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, st := range m.serve.steps {
			ops = append(ops, st.op)
		}
		if s := "[" + strings.Join(ops, " ") + "]"; s != tc.schedule {
			t.Errorf("pred %v: schedule %s, want %s", tc.pred, s, tc.schedule)
		}
	}
}

// TestTF1ControlInputKillsResolvedMerge gives the learning-phase model's
// Merge (resolved at load into its live input) a control input from the
// cond on flag: when that cond's true side is dead, so is the Merge, and
// the output is an error; otherwise the value passes.
func TestTF1ControlInputKillsResolvedMerge(t *testing.T) {
	files := editNodes(t, learningPhaseModel(t, false), func(n map[string]*ndpb.NodeDef, mg *cpb.MetaGraphDef) {
		flag := &ndpb.NodeDef{Name: "flag", Op: "Placeholder", Attr: map[string]*apb.AttrValue{"dtype": typeAttr(i32t)}}
		zero := &ndpb.NodeDef{Name: "zero", Op: "Const", Attr: int32Const("", 0).Attr}
		pred := fnode("is_set", "Greater", i32t, "flag", "zero")
		sw := fnode("gate/Switch", "Switch", bt, "is_set", "is_set")
		gateT := fnode("gate/switch_t", "Identity", bt, "gate/Switch:1")
		mg.GraphDef.Node = append(mg.GraphDef.Node, flag, zero, pred, sw, gateT)
		n["dropout/cond/Merge"].Input = append(n["dropout/cond/Merge"].Input, "^gate/switch_t")
		mg.SignatureDef["serving_default"].Inputs["flag"] = &cpb.TensorInfo{Dtype: i32t, Encoding: &cpb.TensorInfo_Name{Name: "flag:0"},
			TensorShape: &shpb.TensorShapeProto{}}
	})
	m := loadFiles(t, files, driver.Config{})
	x := named("x", f32([]int64{1, 2}, 1.5, -0.25))
	got, err := predictNamed(t, m, named("flag", i32([]int64{}, 1)), x)
	if err != nil {
		t.Fatal(err)
	}
	checkFlowOut(t, "y", got["y"], []int64{1, 2}, []float32{1.5, 0})
	if _, err := predictNamed(t, m, named("flag", i32([]int64{}, 0)), x); err == nil || !strings.Contains(err.Error(), "dead") {
		t.Errorf("flag 0: error %v, want the output dead", err)
	}
}
