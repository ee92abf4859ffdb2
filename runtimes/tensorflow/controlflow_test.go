package tensorflow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	tenpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// The control-flow models are built by tfsave (placeholders, signature,
// one Identity per output) and then given a function library and an If or
// While node by hand, written as TensorFlow 2 exports them: tf.cond and
// tf.while_loop in a tf.function become StatelessIf/StatelessWhile nodes
// whose branches, cond and body are library functions, with function-body
// references "node:output_arg:index".

type arg struct {
	name string
	dt   dtype
}

func typeAttr(dt dtype) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_Type{Type: dt}} }

func typeListAttr(dts ...dtype) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_List{List: &apb.AttrValue_ListValue{Type: dts}}}
}

func funcAttr(name string) *apb.AttrValue {
	return &apb.AttrValue{Value: &apb.AttrValue_Func{Func: &apb.NameAttrList{Name: name}}}
}

// fnode is a function-body node; T is set from dt when dt is not 0.
func fnode(name, op string, dt dtype, in ...string) *ndpb.NodeDef {
	nd := &ndpb.NodeDef{Name: name, Op: op, Input: in, Attr: map[string]*apb.AttrValue{}}
	if dt != 0 {
		nd.Attr["T"] = typeAttr(dt)
	}
	return nd
}

// int32Const is a function-body Const node holding scalar v.
func int32Const(name string, v int32) *ndpb.NodeDef {
	return &ndpb.NodeDef{Name: name, Op: "Const", Attr: map[string]*apb.AttrValue{
		"dtype": typeAttr(tpb.DataType_DT_INT32),
		"value": {Value: &apb.AttrValue_Tensor{Tensor: &tenpb.TensorProto{Dtype: tpb.DataType_DT_INT32, TensorShape: &shpb.TensorShapeProto{}, IntVal: []int32{v}}}},
	}}
}

// funcDef is a library function; ret maps each output arg to its tensor.
func funcDef(name string, ins, outs []arg, ret []string, nodes ...*ndpb.NodeDef) *fpb.FunctionDef {
	sig := &opb.OpDef{Name: name}
	for _, a := range ins {
		sig.InputArg = append(sig.InputArg, &opb.OpDef_ArgDef{Name: a.name, Type: a.dt})
	}
	r := map[string]string{}
	for i, a := range outs {
		sig.OutputArg = append(sig.OutputArg, &opb.OpDef_ArgDef{Name: a.name, Type: a.dt})
		r[a.name] = ret[i]
	}
	return &fpb.FunctionDef{Signature: sig, NodeDef: nodes, Ret: r}
}

// controlFlowModel builds a model with inputs ins (signature key = node
// name) and one output per entry of outs, each an Identity whose input is
// then rewired to the named tensor of the node that edit adds.
func controlFlowModel(t testing.TB, ins map[string]tensor.DType, outs map[string]string, fns []*fpb.FunctionDef, nodes ...*ndpb.NodeDef) driver.Files {
	t.Helper()
	return controlFlowModelWith(t, nil, ins, outs, fns, nodes...)
}

// controlFlowModelWith is controlFlowModel with setup run on the builder
// first (to add variables).
func controlFlowModelWith(t testing.TB, setup func(b *tfsave.Builder), ins map[string]tensor.DType, outs map[string]string, fns []*fpb.FunctionDef, nodes ...*ndpb.NodeDef) driver.Files {
	t.Helper()
	b := tfsave.NewBuilder()
	if setup != nil {
		setup(b)
	}
	inNames := map[string]string{}
	var first string
	for _, key := range sortedKeys(ins) {
		inNames[key] = b.Placeholder(key, ins[key], nil)
		first = inNames[key]
	}
	outNames := map[string]string{}
	for key := range outs {
		outNames[key] = b.OpNamed("out_"+key, "Identity", []string{first}, nil)
	}
	b.Signature(tfsave.ServingSignature, inNames, outNames)
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	sm := &cpb.SavedModel{}
	if err := proto.Unmarshal(files["saved_model.pb"], sm); err != nil {
		t.Fatal(err)
	}
	func(mg *cpb.MetaGraphDef) {
		g := mg.GraphDef
		if g.Library == nil {
			g.Library = &fpb.FunctionDefLibrary{}
		}
		g.Library.Function = append(g.Library.Function, fns...)
		g.Node = append(g.Node, nodes...)
		for _, nd := range g.Node {
			if key, ok := strings.CutPrefix(nd.Name, "out_"); ok && nd.Op == "Identity" {
				nd.Input = []string{outs[key]}
				nd.Attr["T"] = typeAttr(mg.SignatureDef["serving_default"].Outputs[key].Dtype)
			}
		}
	}(sm.MetaGraphs[0])
	if files["saved_model.pb"], err = proto.Marshal(sm); err != nil {
		t.Fatal(err)
	}
	return files
}

// predictNamed runs m on named inputs and returns the outputs by key.
func predictNamed(t *testing.T, m *runtimes.Model, ins ...tensor.Tensor) (map[string]tensor.Tensor, error) {
	t.Helper()
	out, err := m.Predict(context.Background(), ins)
	if err != nil {
		return nil, err
	}
	res := map[string]tensor.Tensor{}
	for i, spec := range m.Signature().Outputs {
		res[spec.Aliases[0]] = out[i]
	}
	return res, nil
}

func checkFlowOut(t *testing.T, what string, got tensor.Tensor, shape []int64, data any) {
	t.Helper()
	if len(got.Shape) != len(shape) || (len(shape) > 0 && !reflect.DeepEqual(got.Shape, shape)) {
		t.Errorf("%s: shape %v, want %v", what, got.Shape, shape)
	}
	if !reflect.DeepEqual(got.Data, data) {
		t.Errorf("%s: %v, want %v", what, got.Data, data)
	}
}

var (
	f32t = tpb.DataType_DT_FLOAT
	i32t = tpb.DataType_DT_INT32
	bt   = tpb.DataType_DT_BOOL
)

// TestIf runs StatelessIf and If on both branches: then_branch returns
// (x+x, k), else_branch (-x, k*k), two outputs of different dtypes. The
// condition is the bool 0 < flag (serving inputs cannot be bool), and an
// If on the int32 flag itself checks TensorFlow's non-bool conditions.
func TestIf(t *testing.T) {
	ins, outs := []arg{{"x", f32t}, {"k", i32t}}, []arg{{"y", f32t}, {"z", i32t}}
	then := funcDef("then_fn", ins, outs, []string{"add:z:0", "k"}, fnode("add", "AddV2", f32t, "x", "x"))
	els := funcDef("else_fn", ins, outs, []string{"neg:y:0", "sq:z:0"}, fnode("neg", "Neg", f32t, "x"), fnode("sq", "Mul", i32t, "k", "k"))
	zero := &ndpb.NodeDef{Name: "zero", Op: "Const", Attr: int32Const("", 0).Attr}
	isSet := fnode("is_set", "Less", i32t, "zero", "flag")
	for _, tc := range []struct{ op, cond string }{{"StatelessIf", "is_set"}, {"If", "is_set"}, {"StatelessIf", "flag"}} {
		op, tcond := tc.op, bt
		if tc.cond == "flag" {
			tcond = i32t
		}
		ifNode := &ndpb.NodeDef{Name: "cond", Op: op, Input: []string{tc.cond, "x", "k"}, Attr: map[string]*apb.AttrValue{
			"Tcond": typeAttr(tcond), "Tin": typeListAttr(f32t, i32t), "Tout": typeListAttr(f32t, i32t),
			"then_branch": funcAttr("then_fn"), "else_branch": funcAttr("else_fn"),
		}}
		files := controlFlowModel(t, map[string]tensor.DType{"flag": tensor.Int32, "x": tensor.Float, "k": tensor.Int32},
			map[string]string{"y": "cond:0", "z": "cond:1"}, []*fpb.FunctionDef{then, els}, zero, isSet, ifNode)
		m := loadFiles(t, files, driver.Config{})
		x, k := named("x", f32([]int64{1, 2}, 1.5, -2)), named("k", i32([]int64{}, 3))
		for _, flag := range []bool{true, false} {
			got, err := predictNamed(t, m, named("flag", i32([]int64{}, map[bool]int32{true: 7, false: 0}[flag])), x, k)
			if err != nil {
				t.Fatalf("%s flag=%v: %v", op, flag, err)
			}
			if flag {
				checkFlowOut(t, op+" then y", got["y"], []int64{1, 2}, []float32{3, -4})
				checkFlowOut(t, op+" then z", got["z"], nil, []int32{3})
			} else {
				checkFlowOut(t, op+" else y", got["y"], []int64{1, 2}, []float32{-1.5, 2})
				checkFlowOut(t, op+" else z", got["z"], nil, []int32{9})
			}
		}
	}
}

// sumLoop is a While over (i, n, acc): while i < n { acc += body(i); i++ }.
func sumLoop(t testing.TB, op string, body *fpb.FunctionDef, extra ...*fpb.FunctionDef) driver.Files {
	vars := []arg{{"i", i32t}, {"n", i32t}, {"acc", i32t}}
	cond := funcDef("loop_cond", vars, []arg{{"more", bt}}, []string{"less:z:0"}, fnode("less", "Less", i32t, "i", "n"))
	zero := &ndpb.NodeDef{Name: "zero", Op: "Const", Attr: int32Const("", 0).Attr}
	loop := &ndpb.NodeDef{Name: "loop", Op: op, Input: []string{"zero", "n", "zero"}, Attr: map[string]*apb.AttrValue{
		"T": typeListAttr(i32t, i32t, i32t), "cond": funcAttr("loop_cond"), "body": funcAttr(body.Signature.Name),
		"parallel_iterations": {Value: &apb.AttrValue_I{I: 10}},
	}}
	return controlFlowModel(t, map[string]tensor.DType{"n": tensor.Int32},
		map[string]string{"i": "loop:0", "n": "loop:1", "acc": "loop:2"}, append([]*fpb.FunctionDef{cond, body}, extra...), zero, loop)
}

func checkSum(t *testing.T, files driver.Files, n int32, want int32) {
	t.Helper()
	m := loadFiles(t, files, driver.Config{})
	got, err := predictNamed(t, m, named("n", i32([]int64{}, n)))
	if err != nil {
		t.Fatalf("n=%d: %v", n, err)
	}
	checkFlowOut(t, "i", got["i"], nil, []int32{max(n, 0)})
	checkFlowOut(t, "n", got["n"], nil, []int32{n})
	checkFlowOut(t, "acc", got["acc"], nil, []int32{want})
}

// TestWhileSum sums 0..n-1 with StatelessWhile and While, including a
// loop that runs no iteration.
func TestWhileSum(t *testing.T) {
	vars := []arg{{"i", i32t}, {"n", i32t}, {"acc", i32t}}
	body := funcDef("loop_body", vars, vars, []string{"next:z:0", "n", "sum:z:0"},
		int32Const("one", 1), fnode("next", "AddV2", i32t, "i", "one:output:0"), fnode("sum", "AddV2", i32t, "acc", "i"))
	for _, op := range []string{"StatelessWhile", "While"} {
		files := sumLoop(t, op, body)
		checkSum(t, files, 10, 45)
		checkSum(t, files, 1, 0)
		checkSum(t, files, 0, 0)
		checkSum(t, files, -3, 0)
	}
}

// TestWhileLoopInvariant carries a fed float vector w through the loop
// unchanged while acc += w n times.
func TestWhileLoopInvariant(t *testing.T) {
	vars := []arg{{"i", i32t}, {"n", i32t}, {"w", f32t}, {"acc", f32t}}
	cond := funcDef("inv_cond", vars, []arg{{"more", bt}}, []string{"less:z:0"}, fnode("less", "Less", i32t, "i", "n"))
	body := funcDef("inv_body", vars, vars, []string{"next:z:0", "n", "w", "sum:z:0"},
		int32Const("one", 1), fnode("next", "AddV2", i32t, "i", "one:output:0"), fnode("sum", "AddV2", f32t, "acc", "w"))
	loop := &ndpb.NodeDef{Name: "loop", Op: "StatelessWhile", Input: []string{"i0", "n", "w", "acc0"}, Attr: map[string]*apb.AttrValue{
		"T": typeListAttr(i32t, i32t, f32t, f32t), "cond": funcAttr("inv_cond"), "body": funcAttr("inv_body"),
	}}
	files := controlFlowModel(t, map[string]tensor.DType{"i0": tensor.Int32, "n": tensor.Int32, "w": tensor.Float, "acc0": tensor.Float},
		map[string]string{"w": "loop:2", "acc": "loop:3"}, []*fpb.FunctionDef{cond, body}, loop)
	m := loadFiles(t, files, driver.Config{})
	got, err := predictNamed(t, m, named("i0", i32([]int64{}, 0)), named("n", i32([]int64{}, 4)),
		named("w", f32([]int64{1, 3}, 0.5, -1, 0.25)), named("acc0", f32([]int64{1, 3}, 1, 1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	checkFlowOut(t, "w", got["w"], []int64{1, 3}, []float32{0.5, -1, 0.25})
	checkFlowOut(t, "acc", got["acc"], []int64{1, 3}, []float32{3, -3, 2})
}

// TestWhileNestedIf runs a StatelessIf inside the While body: acc += i
// while i < 3, acc -= i after, so n=6 gives 0+1+2-3-4-5 = -9.
func TestWhileNestedIf(t *testing.T) {
	vars := []arg{{"i", i32t}, {"n", i32t}, {"acc", i32t}}
	ab := []arg{{"acc", i32t}, {"i", i32t}}
	add := funcDef("add_fn", ab, []arg{{"r", i32t}}, []string{"s:z:0"}, fnode("s", "AddV2", i32t, "acc", "i"))
	sub := funcDef("sub_fn", ab, []arg{{"r", i32t}}, []string{"s:z:0"}, fnode("s", "Sub", i32t, "acc", "i"))
	ifNode := &ndpb.NodeDef{Name: "pick", Op: "StatelessIf", Input: []string{"early:z:0", "acc", "i"}, Attr: map[string]*apb.AttrValue{
		"Tcond": typeAttr(bt), "Tin": typeListAttr(i32t, i32t), "Tout": typeListAttr(i32t),
		"then_branch": funcAttr("add_fn"), "else_branch": funcAttr("sub_fn"),
	}}
	body := funcDef("nested_body", vars, vars, []string{"next:z:0", "n", "pick:output:0"},
		int32Const("one", 1), int32Const("three", 3), fnode("next", "AddV2", i32t, "i", "one:output:0"),
		fnode("early", "Less", i32t, "i", "three:output:0"), ifNode)
	files := sumLoop(t, "StatelessWhile", body, add, sub)
	checkSum(t, files, 6, -9)
	checkSum(t, files, 2, 1)
}

// TestWhileNeverEnds checks that a loop whose body leaves its condition
// true fails the call with an error instead of hanging.
func TestWhileNeverEnds(t *testing.T) {
	vars := []arg{{"i", i32t}, {"n", i32t}, {"acc", i32t}}
	body := funcDef("stuck_body", vars, vars, []string{"i", "n", "acc"})
	files := sumLoop(t, "StatelessWhile", body)
	m := loadFiles(t, files, driver.Config{})
	_, err := predictNamed(t, m, named("n", i32([]int64{}, 5)))
	if err == nil {
		t.Fatal("a loop that never ends returned")
	}
	t.Log(err)
	for _, want := range []string{"StatelessWhile", "loop", "did not end after", "loop_cond"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// cancelAfter is a context whose Err turns to Canceled at its n-th call,
// so a test can cancel a call in the middle of a loop without timing.
type cancelAfter struct {
	context.Context
	calls, n int
}

func (c *cancelAfter) Err() error {
	c.calls++
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

// TestWhileStopsWithCall checks that a loop that never ends stops when the
// call's context ends, before the iteration bound.
func TestWhileStopsWithCall(t *testing.T) {
	vars := []arg{{"i", i32t}, {"n", i32t}, {"acc", i32t}}
	body := funcDef("stuck_body", vars, vars, []string{"i", "n", "acc"})
	m := loadFiles(t, sumLoop(t, "StatelessWhile", body), driver.Config{})
	ctx := &cancelAfter{Context: context.Background(), n: 5}
	_, err := m.Predict(ctx, []tensor.Tensor{named("n", i32([]int64{}, 5))})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "loop stopped after") || strings.Contains(err.Error(), "did not end after") {
		t.Errorf("error %q does not say the loop stopped with the call", err)
	}
}

// TestControlFlowMissingOp checks that an op without a kernel inside a
// branch is reported by the load error for the node inside the function
// (with the other missing ops), not as a missing If.
func TestControlFlowMissingOp(t *testing.T) {
	ins, outs := []arg{{"x", f32t}}, []arg{{"y", f32t}}
	then := funcDef("then_fn", ins, outs, []string{"odd:y:0"}, fnode("odd", "ZetaOp", f32t, "x"))
	els := funcDef("else_fn", ins, outs, []string{"neg:y:0"}, fnode("neg", "Neg", f32t, "x"))
	ifNode := &ndpb.NodeDef{Name: "pick", Op: "StatelessIf", Input: []string{"is_set", "x"}, Attr: map[string]*apb.AttrValue{
		"Tcond": typeAttr(bt), "Tin": typeListAttr(f32t), "Tout": typeListAttr(f32t),
		"then_branch": funcAttr("then_fn"), "else_branch": funcAttr("else_fn"),
	}}
	zero := &ndpb.NodeDef{Name: "zero", Op: "Const", Attr: int32Const("", 0).Attr}
	files := controlFlowModel(t, map[string]tensor.DType{"flag": tensor.Int32, "x": tensor.Float},
		map[string]string{"y": "pick:0", "z": "other:0"}, []*fpb.FunctionDef{then, els},
		zero, fnode("is_set", "Less", i32t, "zero", "flag"), fnode("other", "AlphaOp", f32t, "x"), ifNode)
	err := loadErr(t, files)
	if !errors.Is(err, ErrUnsupportedOp) {
		t.Fatalf("error %v, want ErrUnsupportedOp", err)
	}
	msg := err.Error()
	for _, want := range []string{"needs 2 ops", "AlphaOp", "ZetaOp (1 node: pick{then_fn}/odd)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "StatelessIf") {
		t.Errorf("error %q lists the If as missing", msg)
	}
}

// TestControlFlowReadsVariable passes a resource variable's handle into a
// While (as a loop variable, as Keras RNN loops pass their weights) and an
// If, whose functions read it: acc += w n times, then y = acc*w if flag.
func TestControlFlowReadsVariable(t *testing.T) {
	rt := tpb.DataType_DT_RESOURCE
	vars := []arg{{"i", i32t}, {"n", i32t}, {"w", rt}, {"acc", f32t}}
	read := func(name string) *ndpb.NodeDef {
		return &ndpb.NodeDef{Name: name, Op: "ReadVariableOp", Input: []string{"w"}, Attr: map[string]*apb.AttrValue{"dtype": typeAttr(f32t)}}
	}
	cond := funcDef("var_cond", vars, []arg{{"more", bt}}, []string{"less:z:0"}, fnode("less", "Less", i32t, "i", "n"))
	body := funcDef("var_body", vars, vars, []string{"next:z:0", "n", "w", "sum:z:0"},
		int32Const("one", 1), fnode("next", "AddV2", i32t, "i", "one:output:0"), read("rd"), fnode("sum", "AddV2", f32t, "acc", "rd:value:0"))
	ab := []arg{{"w", rt}, {"x", f32t}}
	then := funcDef("scale_fn", ab, []arg{{"y", f32t}}, []string{"mul:z:0"}, read("rd"), fnode("mul", "Mul", f32t, "x", "rd:value:0"))
	els := funcDef("keep_fn", ab, []arg{{"y", f32t}}, []string{"x"})
	var handle string
	setup := func(b *tfsave.Builder) {
		v := b.Variable("w", f32([]int64{3}, 1, 2, 3))
		handle, _, _ = splitTensorName(v.Handle)
	}
	loop := &ndpb.NodeDef{Name: "loop", Op: "StatelessWhile", Input: []string{"i0", "n", "HANDLE", "acc0"}, Attr: map[string]*apb.AttrValue{
		"T": typeListAttr(i32t, i32t, rt, f32t), "cond": funcAttr("var_cond"), "body": funcAttr("var_body"),
	}}
	ifNode := &ndpb.NodeDef{Name: "pick", Op: "If", Input: []string{"is_set", "HANDLE", "loop:3"}, Attr: map[string]*apb.AttrValue{
		"Tcond": typeAttr(bt), "Tin": typeListAttr(rt, f32t), "Tout": typeListAttr(f32t),
		"then_branch": funcAttr("scale_fn"), "else_branch": funcAttr("keep_fn"),
	}}
	zero := &ndpb.NodeDef{Name: "zero", Op: "Const", Attr: int32Const("", 0).Attr}
	files := controlFlowModelWith(t, func(b *tfsave.Builder) {
		setup(b)
		loop.Input[2], ifNode.Input[1] = handle, handle
	}, map[string]tensor.DType{"i0": tensor.Int32, "n": tensor.Int32, "acc0": tensor.Float, "flag": tensor.Int32},
		map[string]string{"acc": "loop:3", "y": "pick:0"}, []*fpb.FunctionDef{cond, body, then, els},
		zero, fnode("is_set", "Less", i32t, "zero", "flag"), loop, ifNode)
	m := loadFiles(t, files, driver.Config{})
	for _, flag := range []int32{1, 0} {
		got, err := predictNamed(t, m, named("i0", i32([]int64{}, 0)), named("n", i32([]int64{}, 2)),
			named("acc0", f32([]int64{3}, 0.5, 0.5, 0.5)), named("flag", i32([]int64{}, flag)))
		if err != nil {
			t.Fatal(err)
		}
		checkFlowOut(t, "acc", got["acc"], []int64{3}, []float32{2.5, 4.5, 6.5})
		if flag == 1 {
			checkFlowOut(t, "y", got["y"], []int64{3}, []float32{2.5, 9, 19.5})
		} else {
			checkFlowOut(t, "y", got["y"], []int64{3}, []float32{2.5, 4.5, 6.5})
		}
	}
}

// BenchmarkWhileSum measures a While of 1000 iterations (sum of 0..999):
// per iteration, a cond and a body program run and the loop variables are
// copied out of the body's state.
func BenchmarkWhileSum(b *testing.B) {
	vars := []arg{{"i", i32t}, {"n", i32t}, {"acc", i32t}}
	body := funcDef("loop_body", vars, vars, []string{"next:z:0", "n", "sum:z:0"},
		int32Const("one", 1), fnode("next", "AddV2", i32t, "i", "one:output:0"), fnode("sum", "AddV2", i32t, "acc", "i"))
	m := loadFiles(b, sumLoop(b, "StatelessWhile", body), driver.Config{})
	in := []tensor.Tensor{named("n", i32([]int64{}, 1000))}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Predict(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// ifChain is a model whose If calls f0, whose If calls f1 (both
// branches), and so on to f<depth-1>, and then rec_fn if recursive.
func ifChain(t *testing.T, depth int, last string) driver.Files {
	ins, outs := []arg{{"x", f32t}}, []arg{{"y", f32t}}
	ifTo := func(name, fn string, cond string, tcond dtype) *ndpb.NodeDef {
		return &ndpb.NodeDef{Name: name, Op: "StatelessIf", Input: []string{cond, "x"}, Attr: map[string]*apb.AttrValue{
			"Tcond": typeAttr(tcond), "Tin": typeListAttr(f32t), "Tout": typeListAttr(f32t),
			"then_branch": funcAttr(fn), "else_branch": funcAttr(fn),
		}}
	}
	var fns []*fpb.FunctionDef
	for i := range depth {
		next := fmt.Sprintf("f%d", i+1)
		if i == depth-1 {
			next = last
		}
		fns = append(fns, funcDef(fmt.Sprintf("f%d", i), ins, outs, []string{"again:output:0"},
			fnode("pos", "Less", f32t, "x", "x"), ifTo("again", next, "pos:z:0", bt)))
	}
	fns = append(fns, funcDef("leaf_fn", ins, outs, []string{"x"}))
	return controlFlowModel(t, map[string]tensor.DType{"flag": tensor.Int32, "x": tensor.Float},
		map[string]string{"y": "top:0"}, fns, ifTo("top", "f0", "flag", i32t))
}

// TestIfNesting checks that nested Ifs load and run, and that Ifs that
// would compile exponentially many branch instances (each If compiles both
// branches, each holding an If) or recurse fail the load with an error
// instead of compiling forever.
func TestIfNesting(t *testing.T) {
	m := loadFiles(t, ifChain(t, 5, "leaf_fn"), driver.Config{})
	got, err := predictNamed(t, m, named("flag", i32([]int64{}, 1)), named("x", f32([]int64{2}, 1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	checkFlowOut(t, "y", got["y"], []int64{2}, []float32{1, 2})

	err = loadErr(t, ifChain(t, 40, "leaf_fn"))
	if !errors.Is(err, ErrBadGraph) || !strings.Contains(err.Error(), "If/While functions") {
		t.Errorf("40 nested Ifs: error %v, want ErrBadGraph about too many If/While functions", err)
	}
	err = loadErr(t, ifChain(t, 1, "f0"))
	if !errors.Is(err, ErrBadGraph) || !strings.Contains(err.Error(), "recursion?") {
		t.Errorf("recursive If: error %v, want ErrBadGraph about recursion", err)
	}
}
