package tensorflow

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tenpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// No state crosses requests: a model that assigns variables, called
// outside a sequence, answers every call as a freshly loaded model does.
//
// Each test here was seen to fail with its mechanism removed: with
// model.Predict running the per-call branch on the shared values instead
// of a table of its own (serveOnce(ctx, ...) without loadTimeEnv), every
// answer after the first is the accumulated one (TestNoStateCrossesRequests,
// TestPerCallStateValues, TestReferenceStateful "ordinary model", the
// per-call cases of the sequence tests); with the model's lock taken on
// that branch, TestPerCallStateCallsOverlap stops at its hang guard; with
// a table made for a model that assigns nothing, TestStatelessModelHasNoTable
// counts its allocations.

// loadShared loads files with the shared-state opt-out
// (shared_state_models), as B&A serves every model.
func loadShared(t testing.TB, files driver.Files, cfg driver.Config) *runtimes.Model {
	t.Helper()
	m := loadFiles(t, files, cfg)
	if err := m.ShareState(); err != nil {
		t.Fatal(err)
	}
	return m
}

// refRunningSum is the running sum with TF1 ref variables: sum =
// Assign(v, v + x), v restored as 1000 (VariableV2, Assign).
func refRunningSum(t testing.TB) driver.Files {
	t.Helper()
	b := tfsave.NewBuilderWith(tfsave.Options{Variables: tfsave.RefVariables})
	v := b.Variable("running_sum", tensor.New("", []int64{1}, []float32{1000}))
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{1})
	add := b.OpNamed("add", "AddV2", []string{v.Handle, x}, nil)
	assign := b.OpNamed("assign_sum", "Assign", []string{v.Handle, add}, nil)
	y := b.OpNamed("sum", "Identity", []string{assign}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"sum": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// levelModel lowers two resource variables on each call
// (AssignSubVariableOp, int32 and float) and reads VarIsInitializedOp: x
// FLOAT [-1] gives level (100 - 3k after k calls sharing state), scaled
// (x * (2.5 - 0.25k)) and initialized (1).
func levelModel(t testing.TB) driver.Files {
	t.Helper()
	b := tfsave.NewBuilder()
	level := b.Variable("level", tensor.New("", []int64{}, []int32{100}))
	scale := b.Variable("scale", tensor.New("", []int64{}, []float32{2.5}))
	x := b.Placeholder("x", tensor.Float, []int64{-1})
	sub := b.OpNamed("AssignSubVariableOp", "AssignSubVariableOp", []string{level.Handle, tfsave.ConstOf[int32](b, "three", []int64{}, 3)}, nil)
	read := b.OpNamed("ReadVariableOp", "ReadVariableOp", []string{level.Handle, "^" + sub}, map[string]any{"dtype": tensor.Int32})
	fsub := b.OpNamed("AssignSubVariableOp_1", "AssignSubVariableOp", []string{scale.Handle, tfsave.ConstOf[float32](b, "quarter", []int64{}, 0.25)}, nil)
	fread := b.OpNamed("ReadVariableOp_1", "ReadVariableOp", []string{scale.Handle, "^" + fsub}, map[string]any{"dtype": tensor.Float})
	init := b.OpNamed("VarIsInitializedOp", "VarIsInitializedOp", []string{level.Handle}, nil)
	destroy := b.OpNamed("DestroyResourceOp", "DestroyResourceOp", []string{scale.Handle, "^" + strings.TrimSuffix(fread, ":0")}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{
		"level":       b.OpNamed("level_out", "Identity", []string{read}, nil),
		"scaled":      b.OpNamed("scaled", "Mul", []string{x, fread}, nil),
		"initialized": b.OpNamed("init_out", "Cast", []string{init, "^" + destroy}, map[string]any{"DstT": tensor.Int32}),
	})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// whileAssignModel assigns a variable inside a While body: each of n
// iterations adds 1 to w (restored as 0) and adds w's new value to acc, so
// a fresh model answers acc = n(n+1)/2 and a shared one keeps counting.
func whileAssignModel(t testing.TB) driver.Files {
	t.Helper()
	rt := tpb.DataType_DT_RESOURCE
	vars := []arg{{"i", i32t}, {"n", i32t}, {"w", rt}, {"acc", f32t}}
	cond := funcDef("w_cond", vars, []arg{{"more", bt}}, []string{"less:z:0"}, fnode("less", "Less", i32t, "i", "n"))
	oneF := float32Const("one_f", 1)
	assign := &ndpb.NodeDef{Name: "inc", Op: "AssignAddVariableOp", Input: []string{"w", "one_f:output:0"}, Attr: map[string]*apb.AttrValue{"dtype": typeAttr(f32t)}}
	read := &ndpb.NodeDef{Name: "rd", Op: "ReadVariableOp", Input: []string{"w", "^inc"}, Attr: map[string]*apb.AttrValue{"dtype": typeAttr(f32t)}}
	body := funcDef("w_body", vars, vars, []string{"next:z:0", "n", "w", "sum:z:0"},
		int32Const("one", 1), fnode("next", "AddV2", i32t, "i", "one:output:0"), oneF, assign, read, fnode("sum", "AddV2", f32t, "acc", "rd:value:0"))
	var handle string
	loop := &ndpb.NodeDef{Name: "loop", Op: "While", Input: []string{"zero", "n", "HANDLE", "acc0"}, Attr: map[string]*apb.AttrValue{
		"T": typeListAttr(i32t, i32t, rt, f32t), "cond": funcAttr("w_cond"), "body": funcAttr("w_body"),
	}}
	zero := &ndpb.NodeDef{Name: "zero", Op: "Const", Attr: int32Const("", 0).Attr}
	acc0 := float32Const("acc0", 0)
	return controlFlowModelWith(t, func(b *tfsave.Builder) {
		v := b.Variable("w", f32([]int64{}, 0))
		handle = strings.TrimSuffix(v.Handle, ":0")
		loop.Input[2] = handle
	}, map[string]tensor.DType{"n": tensor.Int32}, map[string]string{"acc": "loop:3"}, []*fpb.FunctionDef{cond, body}, zero, acc0, loop)
}

// condReadModel reads the resource variable w (1.5) inside a TF1 cond
// branch, a ReadVariableOp guarded by the branch's pivot (which cannot be
// folded at load): y = flag > 0 ? w : 0. With counter, it also counts its
// calls in a second variable (c), which makes it stateful.
func condReadModel(t testing.TB, counter bool) driver.Files {
	t.Helper()
	b := tfsave.NewBuilder()
	flag := b.Placeholder("flag", tensor.Int32, []int64{})
	w := b.Variable("w", scalarF32(1.5))
	pred := b.OpNamed("Greater", "Greater", []string{flag, tfsave.ConstOf[int32](b, "Greater/y", []int64{}, 0)}, nil)
	merges := tf1Cond(b, "cond", pred, func(c tf1CondCtx) []string {
		return []string{b.OpNamed("cond/read", "ReadVariableOp", []string{w.Handle, "^" + c.pivot}, map[string]any{"dtype": tensor.Float})}
	}, func(c tf1CondCtx) []string {
		return []string{c.konst("zero", scalarF32(0))}
	})
	outs := map[string]string{"y": merges[0]}
	if counter {
		cnt := b.Variable("cnt", scalarF32(0))
		inc := b.OpNamed("inc", "AssignAddVariableOp", []string{cnt.Handle, tfsave.ConstOf[float32](b, "one", []int64{}, 1)}, nil)
		outs["c"] = b.OpNamed("read_cnt", "ReadVariableOp", []string{cnt.Handle, "^" + inc}, map[string]any{"dtype": tensor.Float})
	}
	b.Signature(tfsave.ServingSignature, map[string]string{"flag": flag}, outs)
	return tf1Files(t, b)
}

// A variable read only by a step that cannot be folded (guarded by a TF1
// cond's pivot) keeps its value, and, in a stateful model, its entry in
// each call's table. Before, the stateless model dropped the value at load
// ("read before it is initialized") and the stateful one had no entry for
// it (index out of range).
func TestVariableReadUnderTF1Cond(t *testing.T) {
	for _, counter := range []bool{false, true} {
		m := loadFiles(t, condReadModel(t, counter), driver.Config{})
		for _, flag := range []int32{1, 0, 1} {
			got, err := predictNamed(t, m, named("flag", i32([]int64{}, flag)))
			if err != nil {
				t.Fatalf("counter %v, flag %d: %v", counter, flag, err)
			}
			want := float32(0)
			if flag > 0 {
				want = 1.5
			}
			checkFlowOut(t, fmt.Sprintf("counter %v, flag %d: y", counter, flag), got["y"], nil, []float32{want})
			if counter {
				checkFlowOut(t, "c", got["c"], nil, []float32{1})
			}
		}
	}
}

// float32Const is a Const node holding the float32 scalar v.
func float32Const(name string, v float32) *ndpb.NodeDef {
	return &ndpb.NodeDef{Name: name, Op: "Const", Attr: map[string]*apb.AttrValue{
		"dtype": typeAttr(f32t),
		"value": {Value: &apb.AttrValue_Tensor{Tensor: &tenpb.TensorProto{Dtype: f32t, TensorShape: &shpb.TensorShapeProto{}, FloatVal: []float32{v}}}},
	}}
}

// statefulCase is a model that assigns variables and an input to call it
// with (the call number k, from 1, varies it).
type statefulCase struct {
	name  string
	files func(testing.TB) driver.Files
	input func(k int) []tensor.Tensor
}

func statefulCases() []statefulCase {
	tfsaveModel := func(mk func() (map[string][]byte, error)) func(testing.TB) driver.Files {
		return func(t testing.TB) driver.Files {
			files, err := mk()
			if err != nil {
				t.Fatal(err)
			}
			return files
		}
	}
	counterIn := func(int) []tensor.Tensor { return []tensor.Tensor{tensor.New("input_1", []int64{1}, []float32{0})} }
	sumIn := func(k int) []tensor.Tensor {
		return []tensor.Tensor{tensor.New("x", []int64{1}, []float32{float32(k)})}
	}
	return []statefulCase{
		{"resource AssignAdd, main graph", tfsaveModel(func() (map[string][]byte, error) { return tfsave.CounterModel(tfsave.Options{}, 1) }), counterIn},
		{"resource AssignAdd, function call", tfsaveModel(func() (map[string][]byte, error) {
			return tfsave.CounterModel(tfsave.Options{FunctionCall: true}, 1)
		}), counterIn},
		{"resource AssignAdd, traced saver", tfsaveModel(func() (map[string][]byte, error) {
			return tfsave.RunningSumModel(tfsave.Options{FunctionCall: true, TracedSaver: true}, 7)
		}), sumIn},
		{"resource AssignSub and VarIsInitialized", levelModel, func(k int) []tensor.Tensor {
			return []tensor.Tensor{tensor.New("x", []int64{2}, []float32{float32(k), -2})}
		}},
		{"resource AssignAdd in a While body", whileAssignModel, func(k int) []tensor.Tensor {
			return []tensor.Tensor{tensor.New("n", []int64{}, []int32{int32(k%3 + 2)})}
		}},
		{"TF1 ref VariableV2 and Assign", refRunningSum, sumIn},
		{"resource read under a TF1 cond guard", func(t testing.TB) driver.Files { return condReadModel(t, true) }, func(k int) []tensor.Tensor {
			return []tensor.Tensor{tensor.New("flag", []int64{}, []int32{int32(k % 2)})}
		}},
	}
}

// freshAnswer is what a freshly loaded model answers to in.
func freshAnswer(t *testing.T, files driver.Files, in []tensor.Tensor) []tensor.Tensor {
	t.Helper()
	out, err := loadFiles(t, files, driver.Config{}).Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTensors(a, b []tensor.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || fmt.Sprint(a[i].Shape) != fmt.Sprint(b[i].Shape) || !reflect.DeepEqual(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func TestNoStateCrossesRequests(t *testing.T) {
	for _, tc := range statefulCases() {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files(t)
			m := loadFiles(t, files, driver.Config{})
			if !m.Stateful() {
				t.Fatal("the model does not report stateful: it assigns no variables")
			}
			const calls = 6
			want := make([][]tensor.Tensor, calls+1)
			for k := 1; k <= calls; k++ {
				want[k] = freshAnswer(t, files, tc.input(k))
			}
			// One after another, then from many goroutines at once.
			for k := 1; k <= calls; k++ {
				out, err := m.Predict(context.Background(), tc.input(k))
				if err != nil {
					t.Fatal(err)
				}
				if !sameTensors(out, want[k]) {
					t.Fatalf("call %d answered %v, a freshly loaded model %v: state crossed requests", k, out, want[k])
				}
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for r := range 20 {
						k := 1 + (g+r)%calls
						out, err := m.Predict(context.Background(), tc.input(k))
						if err != nil {
							t.Error(err)
							return
						}
						if !sameTensors(out, want[k]) {
							t.Errorf("concurrent call (input %d) answered %v, want %v", k, out, want[k])
							return
						}
					}
				})
			}
			wg.Wait()
			// The opt-out keeps B&A's shared state: the same calls see each
			// other's assignments (so the case above would have seen them).
			sh := loadShared(t, files, driver.Config{})
			first, err := sh.Predict(context.Background(), tc.input(1))
			if err != nil {
				t.Fatal(err)
			}
			second, err := sh.Predict(context.Background(), tc.input(1))
			if err != nil {
				t.Fatal(err)
			}
			if !sameTensors(first, want[1]) || sameTensors(second, want[1]) {
				t.Fatalf("shared state: answers %v then %v to the same input, want %v then something else", first, second, want[1])
			}
		})
	}
}

// The counter, the level and the While models answer what a fresh model
// computes by hand, so the fresh answers above are not a shared mistake.
func TestPerCallStateValues(t *testing.T) {
	m := loadFiles(t, levelModel(t), driver.Config{})
	for range 3 {
		got, err := predictNamed(t, m, named("x", f32([]int64{2}, 1, -2)))
		if err != nil {
			t.Fatal(err)
		}
		checkFlowOut(t, "level", got["level"], nil, []int32{97})
		checkFlowOut(t, "scaled", got["scaled"], []int64{2}, []float32{2.25, -4.5})
		checkFlowOut(t, "initialized", got["initialized"], nil, []int32{1})
	}
	w := loadFiles(t, whileAssignModel(t), driver.Config{})
	sw := loadShared(t, whileAssignModel(t), driver.Config{})
	for k, want := range []float32{6, 6, 6} { // 1+2+3, every call
		got, err := predictNamed(t, w, named("n", i32([]int64{}, 3)))
		if err != nil {
			t.Fatal(err)
		}
		checkFlowOut(t, "acc", got["acc"], nil, []float32{want})
		// Shared: w goes on from 3k: (3k+1)+(3k+2)+(3k+3).
		got, err = predictNamed(t, sw, named("n", i32([]int64{}, 3)))
		if err != nil {
			t.Fatal(err)
		}
		checkFlowOut(t, "shared acc", got["acc"], nil, []float32{float32(9*k + 6)})
	}
}

// Calls with tables of their own take no lock: two calls are inside the
// serving program at the same time (the hook holds each until both are
// in). Serialised calls would never meet, and the test would stop at its
// hang guard.
func TestPerCallStateCallsOverlap(t *testing.T) {
	files, err := tfsave.RunningSumModel(tfsave.Options{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	m := loadFiles(t, files, driver.Config{})
	var (
		mu      sync.Mutex
		inside  int
		both    = make(chan struct{})
		timeout = time.After(30 * time.Second) // a hang guard only
		failed  bool
	)
	varEnvHook = func() {
		mu.Lock()
		inside++
		if inside == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-timeout:
			mu.Lock()
			failed = true
			mu.Unlock()
		}
	}
	defer func() { varEnvHook = nil }()
	var wg sync.WaitGroup
	results := make([]float32, 2)
	for i := range results {
		wg.Go(func() {
			out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1}, []float32{float32(i + 1)})})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = out[0].Data.([]float32)[0]
		})
	}
	wg.Wait()
	if failed {
		t.Fatal("two calls were never inside the program at the same time: per-call state is serialised")
	}
	if results[0] != 1001 || results[1] != 1002 {
		t.Fatalf("sums %v, want [1001 1002]: each call from the checkpoint's 1000", results)
	}
}

// A model that assigns no variable pays nothing for the isolation: its
// Predict allocates exactly what running the program does (no table, no
// context). With a table made for it, Predict would allocate at least the
// table and the context carrying it.
func TestStatelessModelHasNoTable(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops states at random: allocation counts vary")
	}
	files, err := tfsave.MLP(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dm, err := New(driver.Config{}).Load(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	m := dm.(*model)
	if m.Stateful() {
		t.Fatal("the MLP reports stateful")
	}
	in := []tensor.Tensor{tensor.New("x", []int64{1, 8}, make([]float32, 8))}
	ctx := context.Background()
	predict := testing.AllocsPerRun(200, func() {
		if _, err := m.Predict(ctx, in); err != nil {
			t.Fatal(err)
		}
	})
	plain := testing.AllocsPerRun(200, func() {
		if _, err := m.serveOnce(ctx, in); err != nil {
			t.Fatal(err)
		}
	})
	if predict != plain {
		t.Fatalf("Predict allocates %v per call, running the program %v: a model without state pays for a table", predict, plain)
	}
}

// The opt-out is refused for a model without state.
func TestShareStateRefusedWithoutState(t *testing.T) {
	files, err := tfsave.AffineModel(tfsave.Options{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	err = loadFiles(t, files, driver.Config{}).ShareState()
	if err == nil || !strings.Contains(err.Error(), "assigns no variables") {
		t.Fatalf("ShareState on the affine model: %v, want an error saying it assigns no variables", err)
	}
}
