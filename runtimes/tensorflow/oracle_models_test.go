package tensorflow

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tenpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// Whole Keras-style models, rebuilt as TensorFlow 2 exports them, checked
// against TensorFlow.js: tfjs-layers (Keras semantics, the same weights set
// with setWeights) and, on the frozen graph (variables turned into
// constants as tfjs-converter does), tfjs-converter's graph executor.
//
// The recurrent layers are built as Keras 2.x's standard_lstm and
// standard_gru emit them in a tf.function saved with tf.saved_model.save:
// the batch made time-major by Transpose, unstacked into a TensorList
// (TensorListFromTensor), zero states from Fill, an output TensorList from
// TensorListReserve, and a While whose body reads the step's input with
// TensorListGetItem, computes the cell (MatMul, BiasAdd, Split into gates,
// Sigmoid, Tanh, Mul, AddV2), writes h with TensorListSetItem and counts
// loop_counter and time; its cond is loop_counter < maximum_iterations &&
// time < T. The weights reach the body as loop variables: resource handles
// read with ReadVariableOp in the SavedModel, constants in the frozen graph.

var (
	vart = tpb.DataType_DT_VARIANT
	rest = tpb.DataType_DT_RESOURCE
)

// int32VecConst is a function-body Const holding an int32 vector.
func int32VecConst(name string, v ...int32) *ndpb.NodeDef {
	return &ndpb.NodeDef{Name: name, Op: "Const", Attr: map[string]*apb.AttrValue{
		"dtype": typeAttr(i32t),
		"value": {Value: &apb.AttrValue_Tensor{Tensor: &tenpb.TensorProto{Dtype: i32t,
			TensorShape: &shpb.TensorShapeProto{Dim: []*shpb.TensorShapeProto_Dim{{Size: int64(len(v))}}}, IntVal: v}}},
	}}
}

func withAttrs(nd *ndpb.NodeDef, attrs map[string]*apb.AttrValue) *ndpb.NodeDef {
	for k, v := range attrs {
		nd.Attr[k] = v
	}
	return nd
}

func intAttr(i int64) *apb.AttrValue  { return &apb.AttrValue{Value: &apb.AttrValue_I{I: i}} }
func boolAttr(b bool) *apb.AttrValue  { return &apb.AttrValue{Value: &apb.AttrValue_B{B: b}} }
func strAttr(s string) *apb.AttrValue { return &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(s)}} }

// rnnSpec is one recurrent layer over x [batch, steps, features].
type rnnSpec struct {
	cell            string // "lstm" or "gru" (reset_after=True)
	units, steps    int
	features        int
	kernel, rkernel tensor.Tensor // [features, g*units], [units, g*units]
	bias            tensor.Tensor // lstm [4*units]; gru [2, 3*units]
}

// rnnFiles builds the SavedModel of spec: outputs "last" (the final h,
// [batch, units]) and "seq" (every step's h, [batch, steps, units]).
// frozen makes the weights constants passed to the loop as tensors (what
// tfjs-converter runs); otherwise they are resource variables whose
// handles the loop gets, read in the body.
func rnnFiles(t testing.TB, spec rnnSpec, frozen bool) driver.Files {
	t.Helper()
	b := tfsave.NewBuilder()
	x := b.Placeholder("x", tensor.Float, []int64{-1, int64(spec.steps), int64(spec.features)})
	u := int64(spec.units)
	weight := func(name string, v tensor.Tensor) string {
		if frozen {
			return b.Const(name, v)
		}
		return b.Variable(name, v).Handle
	}
	kernel, rkernel := weight("kernel", spec.kernel), weight("recurrent_kernel", spec.rkernel)
	var bias []string // loop variables after the weights
	if spec.cell == "lstm" {
		bias = []string{weight("bias", spec.bias)}
	} else {
		// standard_gru unstacks the bias before the loop; the body captures
		// input_bias and recurrent_bias as float tensors.
		bv := spec.bias
		if !frozen {
			bv0 := b.Variable("bias", spec.bias)
			bu := tfNode(b.OpNamed("unstack_bias", "Unpack", []string{bv0.Value}, map[string]any{"num": 2}))
			bias = []string{tfsave.Output(bu, 0), tfsave.Output(bu, 1)}
		} else {
			bu := tfNode(b.OpNamed("unstack_bias", "Unpack", []string{b.Const("bias", bv)}, map[string]any{"num": 2}))
			bias = []string{tfsave.Output(bu, 0), tfsave.Output(bu, 1)}
		}
	}
	xt := b.OpNamed("transpose", "Transpose", []string{x, tfsave.ConstOf[int32](b, "perm", []int64{3}, 1, 0, 2)}, nil)
	batch := b.OpNamed("strided_slice", "StridedSlice", []string{b.OpNamed("Shape", "Shape", []string{x}, nil),
		tfsave.ConstOf[int32](b, "ss_begin", []int64{1}, 0), tfsave.ConstOf[int32](b, "ss_end", []int64{1}, 1), tfsave.ConstOf[int32](b, "ss_strides", []int64{1}, 1)},
		map[string]any{"shrink_axis_mask": 1})
	zerosShape := b.OpNamed("zeros/packed", "Pack", []string{batch, tfsave.ConstOf[int32](b, "zeros/packed/1", []int64{}, int32(u))}, nil)
	h0 := b.OpNamed("zeros", "Fill", []string{zerosShape, tfsave.ConstOf[float32](b, "zeros/Const", []int64{}, 0)}, nil)
	inTA := b.OpNamed("TensorArrayUnstack/TensorListFromTensor", "TensorListFromTensor", []string{xt,
		tfsave.ConstOf[int32](b, "TensorArrayUnstack/element_shape", []int64{2}, -1, int32(spec.features))}, nil)
	outShape := tfsave.ConstOf[int32](b, "TensorArrayV2/element_shape", []int64{2}, -1, int32(u))
	outTA := b.OpNamed("TensorArrayV2", "TensorListReserve", []string{outShape, tfsave.ConstOf[int32](b, "TensorArrayV2/num_elements", []int64{}, int32(spec.steps))},
		map[string]any{"element_dtype": tensor.Float})
	zero := tfsave.ConstOf[int32](b, "time", []int64{}, 0)
	maxIter := tfsave.ConstOf[int32](b, "while/maximum_iterations", []int64{}, int32(spec.steps))
	stackBegin := tfsave.ConstOf[int32](b, "strided_slice_2/stack", []int64{1}, -1)
	stackEnd := tfsave.ConstOf[int32](b, "strided_slice_2/stack_1", []int64{1}, 0)
	stackStrides := tfsave.ConstOf[int32](b, "strided_slice_2/stack_2", []int64{1}, 1)
	back := tfsave.ConstOf[int32](b, "transpose_1/perm", []int64{3}, 1, 0, 2)
	// Stand-ins of the right dtype and shape, rewired to the loop's
	// results below (the loop is added to the GraphDef by hand).
	outs := map[string]string{
		"last": b.OpNamed("out_last", "Identity", []string{h0}, nil),
		"seq":  b.OpNamed("out_seq", "Identity", []string{xt}, nil),
	}
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, outs)
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}

	wdt := rest
	if frozen {
		wdt = f32t
	}
	state := []arg{{"h", f32t}}
	if spec.cell == "lstm" {
		state = append(state, arg{"c", f32t})
	}
	vars := []arg{{"loop_counter", i32t}, {"maximum_iterations", i32t}, {"time", i32t}, {"output_ta", vart}}
	vars = append(vars, state...)
	vars = append(vars, arg{"input_ta", vart})
	weights := []arg{{"kernel", wdt}, {"recurrent_kernel", wdt}}
	if spec.cell == "lstm" {
		weights = append(weights, arg{"bias", wdt})
	} else {
		weights = append(weights, arg{"input_bias", f32t}, arg{"recurrent_bias", f32t})
	}
	vars = append(vars, weights...)

	read := func(name, in string) (string, []*ndpb.NodeDef) {
		if frozen {
			return in, nil
		}
		return name + ":value:0", []*ndpb.NodeDef{{Name: name, Op: "ReadVariableOp", Input: []string{in}, Attr: map[string]*apb.AttrValue{"dtype": typeAttr(f32t)}}}
	}
	pf := spec.cell + "_"
	var nodes []*ndpb.NodeDef
	add := func(nd ...*ndpb.NodeDef) { nodes = append(nodes, nd...) }
	add(int32Const(pf+"one", 1), int32Const(pf+"split_dim", 1), int32VecConst(pf+"elem_shape", -1, int32(spec.features)))
	add(withAttrs(fnode(pf+"x_t", "TensorListGetItem", 0, "input_ta", "time", pf+"elem_shape:output:0"), map[string]*apb.AttrValue{"element_dtype": typeAttr(f32t)}))
	k, kn := read(pf+"kernel_read", "kernel")
	rk, rkn := read(pf+"recurrent_kernel_read", "recurrent_kernel")
	add(kn...)
	add(rkn...)
	matmul := func(name, a, bb string) *ndpb.NodeDef {
		return withAttrs(fnode(name, "MatMul", f32t, a, bb), map[string]*apb.AttrValue{"transpose_a": boolAttr(false), "transpose_b": boolAttr(false)})
	}
	biasAdd := func(name, v, bb string) *ndpb.NodeDef {
		return withAttrs(fnode(name, "BiasAdd", f32t, v, bb), map[string]*apb.AttrValue{"data_format": strAttr("NHWC")})
	}
	split := func(name, v string, n int64) *ndpb.NodeDef {
		return withAttrs(fnode(name, "Split", f32t, pf+"split_dim:output:0", v), map[string]*apb.AttrValue{"num_split": intAttr(n)})
	}
	var hNext, cNext string
	if spec.cell == "lstm" {
		bias, bn := read(pf+"bias_read", "bias")
		add(bn...)
		add(matmul(pf+"MatMul", pf+"x_t:item:0", k), matmul(pf+"MatMul_1", "h", rk),
			fnode(pf+"add", "AddV2", f32t, pf+"MatMul:product:0", pf+"MatMul_1:product:0"),
			biasAdd(pf+"BiasAdd", pf+"add:z:0", bias), split(pf+"split", pf+"BiasAdd:output:0", 4),
			fnode(pf+"Sigmoid", "Sigmoid", f32t, pf+"split:output:0"),
			fnode(pf+"Sigmoid_1", "Sigmoid", f32t, pf+"split:output:1"),
			fnode(pf+"mul", "Mul", f32t, pf+"Sigmoid_1:y:0", "c"),
			fnode(pf+"Tanh", "Tanh", f32t, pf+"split:output:2"),
			fnode(pf+"mul_1", "Mul", f32t, pf+"Sigmoid:y:0", pf+"Tanh:y:0"),
			fnode(pf+"add_1", "AddV2", f32t, pf+"mul:z:0", pf+"mul_1:z:0"),
			fnode(pf+"Sigmoid_2", "Sigmoid", f32t, pf+"split:output:3"),
			fnode(pf+"Tanh_1", "Tanh", f32t, pf+"add_1:z:0"),
			fnode(pf+"mul_2", "Mul", f32t, pf+"Sigmoid_2:y:0", pf+"Tanh_1:y:0"))
		hNext, cNext = pf+"mul_2:z:0", pf+"add_1:z:0"
	} else {
		add(matmul(pf+"MatMul", pf+"x_t:item:0", k), biasAdd(pf+"BiasAdd", pf+"MatMul:product:0", "input_bias"),
			split(pf+"split", pf+"BiasAdd:output:0", 3),
			matmul(pf+"MatMul_1", "h", rk), biasAdd(pf+"BiasAdd_1", pf+"MatMul_1:product:0", "recurrent_bias"),
			split(pf+"split_1", pf+"BiasAdd_1:output:0", 3),
			fnode(pf+"add", "AddV2", f32t, pf+"split:output:0", pf+"split_1:output:0"),
			fnode(pf+"Sigmoid", "Sigmoid", f32t, pf+"add:z:0"),
			fnode(pf+"add_1", "AddV2", f32t, pf+"split:output:1", pf+"split_1:output:1"),
			fnode(pf+"Sigmoid_1", "Sigmoid", f32t, pf+"add_1:z:0"),
			fnode(pf+"mul", "Mul", f32t, pf+"Sigmoid_1:y:0", pf+"split_1:output:2"),
			fnode(pf+"add_2", "AddV2", f32t, pf+"split:output:2", pf+"mul:z:0"),
			fnode(pf+"Tanh", "Tanh", f32t, pf+"add_2:z:0"),
			fnode(pf+"mul_1", "Mul", f32t, pf+"Sigmoid:y:0", "h"),
			&ndpb.NodeDef{Name: pf + "sub/x", Op: "Const", Attr: map[string]*apb.AttrValue{"dtype": typeAttr(f32t),
				"value": {Value: &apb.AttrValue_Tensor{Tensor: &tenpb.TensorProto{Dtype: f32t, TensorShape: &shpb.TensorShapeProto{}, FloatVal: []float32{1}}}}}},
			fnode(pf+"sub", "Sub", f32t, pf+"sub/x:output:0", pf+"Sigmoid:y:0"),
			fnode(pf+"mul_2", "Mul", f32t, pf+"sub:z:0", pf+"Tanh:y:0"),
			fnode(pf+"add_3", "AddV2", f32t, pf+"mul_1:z:0", pf+"mul_2:z:0"))
		hNext = pf + "add_3:z:0"
	}
	add(withAttrs(fnode(pf+"TensorListSetItem", "TensorListSetItem", 0, "output_ta", "time", hNext), map[string]*apb.AttrValue{"element_dtype": typeAttr(f32t)}),
		fnode(pf+"time_next", "AddV2", i32t, "time", pf+"one:output:0"),
		fnode(pf+"counter_next", "AddV2", i32t, "loop_counter", pf+"one:output:0"))
	ret := []string{pf + "counter_next:z:0", "maximum_iterations", pf + "time_next:z:0", pf + "TensorListSetItem:output_handle:0", hNext}
	if spec.cell == "lstm" {
		ret = append(ret, cNext)
	}
	ret = append(ret, "input_ta")
	for _, w := range weights {
		ret = append(ret, w.name)
	}
	body := funcDef("__inference_while_body_"+spec.cell, vars, vars, ret, nodes...)
	cond := funcDef("__inference_while_cond_"+spec.cell, vars, []arg{{"identity", bt}}, []string{pf + "and:z:0"},
		int32Const(pf+"steps", int32(spec.steps)),
		fnode(pf+"Less", "Less", i32t, "loop_counter", "maximum_iterations"),
		fnode(pf+"Less_1", "Less", i32t, "time", pf+"steps:output:0"),
		fnode(pf+"and", "LogicalAnd", 0, pf+"Less:z:0", pf+"Less_1:z:0"))

	loopIn := []string{nodeRef(zero), nodeRef(maxIter), nodeRef(zero), nodeRef(outTA), nodeRef(h0)}
	if spec.cell == "lstm" {
		loopIn = append(loopIn, nodeRef(h0))
	}
	loopIn = append(loopIn, nodeRef(inTA), nodeRef(kernel), nodeRef(rkernel))
	for _, bb := range bias {
		loopIn = append(loopIn, nodeRef(bb))
	}
	var types []tpb.DataType
	for _, v := range vars {
		types = append(types, v.dt)
	}
	outIdx := 3 // output_ta among the loop variables
	loop := &ndpb.NodeDef{Name: "while", Op: "While", Input: loopIn, Attr: map[string]*apb.AttrValue{
		"T": typeListAttr(types...), "cond": funcAttr(cond.Signature.Name), "body": funcAttr(body.Signature.Name),
		"parallel_iterations": intAttr(32),
	}}
	stack := &ndpb.NodeDef{Name: "TensorArrayV2Stack/TensorListStack", Op: "TensorListStack",
		Input: []string{"while:" + itoa(outIdx), nodeRef(outShape)}, Attr: map[string]*apb.AttrValue{
			"element_dtype": typeAttr(f32t), "num_elements": intAttr(int64(spec.steps))}}
	last := &ndpb.NodeDef{Name: "strided_slice_2", Op: "StridedSlice",
		Input: []string{"TensorArrayV2Stack/TensorListStack", nodeRef(stackBegin), nodeRef(stackEnd), nodeRef(stackStrides)},
		Attr: map[string]*apb.AttrValue{"T": typeAttr(f32t), "Index": typeAttr(i32t), "shrink_axis_mask": intAttr(1),
			"begin_mask": intAttr(0), "end_mask": intAttr(0), "ellipsis_mask": intAttr(0), "new_axis_mask": intAttr(0)}}
	seq := &ndpb.NodeDef{Name: "transpose_1", Op: "Transpose", Input: []string{"TensorArrayV2Stack/TensorListStack", nodeRef(back)},
		Attr: map[string]*apb.AttrValue{"T": typeAttr(f32t), "Tperm": typeAttr(i32t)}}

	sm := &cpb.SavedModel{}
	if err := proto.Unmarshal(files["saved_model.pb"], sm); err != nil {
		t.Fatal(err)
	}
	g := sm.MetaGraphs[0].GraphDef
	if g.Library == nil {
		g.Library = &fpb.FunctionDefLibrary{}
	}
	g.Library.Function = append(g.Library.Function, cond, body)
	g.Node = append(g.Node, loop, stack, last, seq)
	for _, nd := range g.Node {
		switch nd.Name {
		case "out_last":
			nd.Input = []string{"strided_slice_2"}
		case "out_seq":
			nd.Input = []string{"transpose_1"}
		}
	}
	if files["saved_model.pb"], err = proto.Marshal(sm); err != nil {
		t.Fatal(err)
	}
	return files
}

// nodeRef is a main-graph input naming tensor "node:0" as "node".
func nodeRef(tensorName string) string { return strings.TrimSuffix(tensorName, ":0") }

func itoa(i int) string { return string(rune('0' + i)) }

// pseudo returns n float32 values in [-scale, scale) from a fixed LCG, so
// weights are arbitrary-looking but the same on every run.
func pseudo(n int, seed uint32, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		seed = seed*1664525 + 1013904223
		v[i] = (float32(seed>>8)/float32(1<<24)*2 - 1) * scale
	}
	return v
}

func predictKeys(t *testing.T, files driver.Files, x tensor.Tensor) map[string]tensor.Tensor {
	t.Helper()
	m := loadFiles(t, files, driver.Config{})
	got, err := predictNamed(t, m, named("x", x))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkRNN runs spec on this runtime (SavedModel with variables, and
// frozen: the two must agree exactly) and on tfjs-converter's graph
// executor (frozen), for a one-row batch and a batch of 3.
func checkRNN(t *testing.T, spec rnnSpec, tol float64, layers func(x tensor.Tensor, seq bool) tensor.Tensor) {
	saved, frozen := rnnFiles(t, spec, false), rnnFiles(t, spec, true)
	for _, batch := range []int{1, 3} {
		x := f32([]int64{int64(batch), int64(spec.steps), int64(spec.features)}, pseudo(batch*spec.steps*spec.features, uint32(7+batch), 2)...)
		got := predictKeys(t, saved, x)
		gotFrozen := predictKeys(t, frozen, x)
		for _, key := range []string{"last", "seq"} {
			compareOracle(t, spec.cell+" frozen vs saved "+key, gotFrozen[key], got[key], 0, 0)
		}
		want := tfjsGraph(t, frozen, map[string]tensor.Tensor{"x:0": x}, []string{"out_last:0", "out_seq:0"})
		compareOracle(t, spec.cell+" last vs tfjs graph", got["last"], want[0], tol, 0)
		compareOracle(t, spec.cell+" seq vs tfjs graph", got["seq"], want[1], tol, 0)
		if layers != nil {
			compareOracle(t, spec.cell+" last vs tfjs-layers", got["last"], layers(x, false), tol, 0)
			compareOracle(t, spec.cell+" seq vs tfjs-layers", got["seq"], layers(x, true), tol, 0)
		}
	}
}

// TestOracleKerasLSTM: a Keras LSTM layer (units 5, 4 steps of 3
// features, recurrent_activation sigmoid as Keras 2.x's default) against
// tfjs-layers' LSTM with the same weights and the tfjs graph executor.
func TestOracleKerasLSTM(t *testing.T) {
	const units, steps, features = 5, 4, 3
	spec := rnnSpec{cell: "lstm", units: units, steps: steps, features: features,
		kernel:  f32([]int64{features, 4 * units}, pseudo(features*4*units, 1, 0.8)...),
		rkernel: f32([]int64{units, 4 * units}, pseudo(units*4*units, 2, 0.6)...),
		bias:    f32([]int64{4 * units}, pseudo(4*units, 3, 0.5)...)}
	// Sigmoid differs in its last bits (Eigen's formula here, 1/(1+e^-x)
	// in tfjs) and the differences travel through 4 steps: 1e-5 relative.
	checkRNN(t, spec, 1e-5, func(x tensor.Tensor, seq bool) tensor.Tensor {
		return tfjsLayers(t, []jsLayer{{Fn: "lstm", Config: map[string]any{
			"units": units, "recurrentActivation": "sigmoid", "returnSequences": seq, "inputShape": []int{steps, features},
			// setWeights replaces them; the default orthogonal initializer
			// needs tfjs-core's chained ops, which its Node build lacks.
			"kernelInitializer": "zeros", "recurrentInitializer": "zeros",
		}, Weights: []jsTensor{toJS(t, spec.kernel), toJS(t, spec.rkernel), toJS(t, spec.bias)}}}, x)
	})
}

// TestOracleKerasGRU: a Keras GRU layer with reset_after=True (the TF2
// default; tfjs-layers has only reset_after=False, so the Keras semantics
// are checked against kerasGRU, Keras's standard_gru in float64) and the
// tfjs graph executor on the frozen graph.
func TestOracleKerasGRU(t *testing.T) {
	const units, steps, features = 4, 5, 3
	spec := rnnSpec{cell: "gru", units: units, steps: steps, features: features,
		kernel:  f32([]int64{features, 3 * units}, pseudo(features*3*units, 4, 0.8)...),
		rkernel: f32([]int64{units, 3 * units}, pseudo(units*3*units, 5, 0.6)...),
		bias:    f32([]int64{2, 3 * units}, pseudo(6*units, 6, 0.5)...)}
	checkRNN(t, spec, 1e-5, func(x tensor.Tensor, seq bool) tensor.Tensor { return kerasGRU(spec, x, seq) })
}

// kerasGRU is Keras's standard_gru (reset_after=True) in float64:
// z = sigmoid(x_z + r_z), r = sigmoid(x_r + r_r), hh = tanh(x_h + r*r_h),
// h = z*h + (1-z)*hh, where x_* = x.W + b_in and r_* = h.U + b_rec.
func kerasGRU(spec rnnSpec, x tensor.Tensor, seq bool) tensor.Tensor {
	u, f, n := spec.units, spec.features, int(x.Shape[0])
	w, rw, bias := spec.kernel.Data.([]float32), spec.rkernel.Data.([]float32), spec.bias.Data.([]float32)
	xs := x.Data.([]float32)
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	var outSeq, outLast []float32
	outSeq = make([]float32, n*spec.steps*u)
	for bi := range n {
		h := make([]float64, u)
		for s := range spec.steps {
			mx, mh := make([]float64, 3*u), make([]float64, 3*u)
			for j := range 3 * u {
				mx[j], mh[j] = float64(bias[j]), float64(bias[3*u+j])
				for k := range f {
					mx[j] += float64(xs[(bi*spec.steps+s)*f+k]) * float64(w[k*3*u+j])
				}
				for k := range u {
					mh[j] += h[k] * float64(rw[k*3*u+j])
				}
			}
			next := make([]float64, u)
			for j := range u {
				z := sig(mx[j] + mh[j])
				r := sig(mx[u+j] + mh[u+j])
				hh := math.Tanh(mx[2*u+j] + r*mh[2*u+j])
				next[j] = z*h[j] + (1-z)*hh
				outSeq[(bi*spec.steps+s)*u+j] = float32(next[j])
			}
			h = next
		}
		for j := range u {
			outLast = append(outLast, float32(h[j]))
		}
	}
	if seq {
		return f32([]int64{int64(n), int64(spec.steps), int64(u)}, outSeq...)
	}
	return f32([]int64{int64(n), int64(u)}, outLast...)
}

// cnnFiles builds a small Keras CNN as TF2 exports it: Conv2D 3x3x2x4
// SAME + BiasAdd, BatchNormalization (FusedBatchNormV3, inference,
// epsilon 0.001), Relu, MaxPooling2D 2x2, Flatten (Reshape), Dense 36->3
// (MatMul + BiasAdd) and Softmax. Saved: resource variables with the
// computation in a function called through StatefulPartitionedCall; frozen:
// constants in the main graph, as tfjs-converter leaves it.
func cnnFiles(t testing.TB, w map[string]tensor.Tensor, frozen bool) driver.Files {
	t.Helper()
	b := tfsave.NewBuilderWith(tfsave.Options{FunctionCall: !frozen})
	weight := func(name string) string {
		if frozen {
			return b.Const(name, w[name])
		}
		return b.Variable(name, w[name]).Value
	}
	x := b.Placeholder("x", tensor.Float, []int64{-1, 6, 6, 2})
	conv := b.OpNamed("conv2d/Conv2D", "Conv2D", []string{x, weight("conv2d/kernel")}, convAttrs("SAME", 1, 1, 1, 1))
	conv = b.OpNamed("conv2d/BiasAdd", "BiasAdd", []string{conv, weight("conv2d/bias")}, nil)
	bn := b.OpNamed("batch_normalization/FusedBatchNormV3", "FusedBatchNormV3", []string{conv,
		weight("batch_normalization/gamma"), weight("batch_normalization/beta"),
		weight("batch_normalization/moving_mean"), weight("batch_normalization/moving_variance")},
		map[string]any{"epsilon": float32(0.001), "exponential_avg_factor": float32(1), "is_training": false})
	relu := b.OpNamed("re_lu/Relu", "Relu", []string{bn}, nil)
	pool := b.OpNamed("max_pooling2d/MaxPool", "MaxPool", []string{relu}, poolAttrs("VALID", 2, 2, 2, 2))
	flat := b.OpNamed("flatten/Reshape", "Reshape", []string{pool, tfsave.ConstOf[int32](b, "flatten/Const", []int64{2}, -1, 36)}, nil)
	dense := b.OpNamed("dense/MatMul", "MatMul", []string{flat, weight("dense/kernel")}, nil)
	dense = b.OpNamed("dense/BiasAdd", "BiasAdd", []string{dense, weight("dense/bias")}, nil)
	y := b.OpNamed("dense/Softmax", "Softmax", []string{dense}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y, "logits": dense})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestOracleKerasCNN: the CNN of cnnFiles against tfjs-layers (conv2d,
// batchNormalization, reLU, maxPooling2d, flatten, dense with the same
// weights) and the tfjs graph executor on the frozen graph, one image and
// a batch of 4.
func TestOracleKerasCNN(t *testing.T) {
	w := map[string]tensor.Tensor{
		"conv2d/kernel":                       f32([]int64{3, 3, 2, 4}, pseudo(72, 11, 0.7)...),
		"conv2d/bias":                         f32([]int64{4}, pseudo(4, 12, 0.3)...),
		"batch_normalization/gamma":           f32([]int64{4}, 1.5, 0.75, 1, 2),
		"batch_normalization/beta":            f32([]int64{4}, 0.1, -0.2, 0.3, 0),
		"batch_normalization/moving_mean":     f32([]int64{4}, pseudo(4, 13, 0.5)...),
		"batch_normalization/moving_variance": f32([]int64{4}, 0.5, 1.25, 2, 0.8),
		"dense/kernel":                        f32([]int64{36, 3}, pseudo(108, 14, 0.4)...),
		"dense/bias":                          f32([]int64{3}, 0.05, -0.1, 0.02),
	}
	saved, frozen := cnnFiles(t, w, false), cnnFiles(t, w, true)
	js := func(names ...string) []jsTensor {
		var out []jsTensor
		for _, n := range names {
			out = append(out, toJS(t, w[n]))
		}
		return out
	}
	layers := []jsLayer{
		{Fn: "conv2d", Config: map[string]any{"filters": 4, "kernelSize": 3, "padding": "same", "inputShape": []int{6, 6, 2}, "kernelInitializer": "zeros"},
			Weights: js("conv2d/kernel", "conv2d/bias")},
		{Fn: "batchNormalization", Config: map[string]any{"epsilon": 0.001},
			Weights: js("batch_normalization/gamma", "batch_normalization/beta", "batch_normalization/moving_mean", "batch_normalization/moving_variance")},
		{Fn: "reLU", Config: map[string]any{}},
		{Fn: "maxPooling2d", Config: map[string]any{"poolSize": 2, "strides": 2, "padding": "valid"}},
		{Fn: "flatten", Config: map[string]any{}},
		{Fn: "dense", Config: map[string]any{"units": 3, "activation": "softmax", "kernelInitializer": "zeros"}, Weights: js("dense/kernel", "dense/bias")},
	}
	for _, batch := range []int{1, 4} {
		x := f32([]int64{int64(batch), 6, 6, 2}, pseudo(batch*72, uint32(20+batch), 3)...)
		got := predictKeys(t, saved, x)
		gotFrozen := predictKeys(t, frozen, x)
		for _, key := range []string{"y", "logits"} {
			compareOracle(t, "cnn frozen vs saved "+key, gotFrozen[key], got[key], 0, 0)
		}
		want := tfjsGraph(t, frozen, map[string]tensor.Tensor{"x:0": x}, []string{"dense/Softmax:0", "dense/BiasAdd:0"})
		// Logits agree within 1e-6 relative (measured 2.6e-7); softmax
		// turns their last-bit differences into up to 2.8e-6 relative on
		// probabilities near 0.01 (measured), hence 1e-5 there.
		compareOracle(t, "cnn softmax vs tfjs graph", got["y"], want[0], 1e-5, 0)
		compareOracle(t, "cnn logits vs tfjs graph", got["logits"], want[1], 0, 0)
		compareOracle(t, "cnn softmax vs tfjs-layers", got["y"], tfjsLayers(t, layers, x), 1e-5, 0)
	}
}

// TestOracleControlFlow: the If/StatelessIf (bool and int32 conditions)
// and While/StatelessWhile models of TestIf and TestWhileSum against the
// tfjs graph executor, on both branches and on loops of 0, 1 and 10
// iterations.
func TestOracleControlFlow(t *testing.T) {
	ins, outs := []arg{{"x", f32t}, {"k", i32t}}, []arg{{"y", f32t}, {"z", i32t}}
	then := funcDef("then_fn", ins, outs, []string{"add:z:0", "k"}, fnode("add", "AddV2", f32t, "x", "x"))
	els := funcDef("else_fn", ins, outs, []string{"neg:y:0", "sq:z:0"}, fnode("neg", "Neg", f32t, "x"), fnode("sq", "Mul", i32t, "k", "k"))
	zero := &ndpb.NodeDef{Name: "zero", Op: "Const", Attr: int32Const("", 0).Attr}
	isSet := fnode("is_set", "Less", i32t, "zero", "flag")
	for _, tc := range []struct{ op, cond string }{{"StatelessIf", "is_set"}, {"If", "is_set"}, {"StatelessIf", "flag"}} {
		tcond := bt
		if tc.cond == "flag" {
			tcond = i32t
		}
		ifNode := &ndpb.NodeDef{Name: "cond", Op: tc.op, Input: []string{tc.cond, "x", "k"}, Attr: map[string]*apb.AttrValue{
			"Tcond": typeAttr(tcond), "Tin": typeListAttr(f32t, i32t), "Tout": typeListAttr(f32t, i32t),
			"then_branch": funcAttr("then_fn"), "else_branch": funcAttr("else_fn"),
		}}
		files := controlFlowModel(t, map[string]tensor.DType{"flag": tensor.Int32, "x": tensor.Float, "k": tensor.Int32},
			map[string]string{"y": "cond:0", "z": "cond:1"}, []*fpb.FunctionDef{then, els}, zero, isSet, ifNode)
		m := loadFiles(t, files, driver.Config{})
		x, k := f32([]int64{1, 2}, 1.5, -2), i32([]int64{}, 3)
		for _, flag := range []int32{7, 0} {
			fl := i32([]int64{}, flag)
			got, err := predictNamed(t, m, named("flag", fl), named("x", x), named("k", k))
			if err != nil {
				t.Fatalf("%s flag=%d: %v", tc.op, flag, err)
			}
			want := tfjsGraph(t, files, map[string]tensor.Tensor{"flag:0": fl, "x:0": x, "k:0": k}, []string{"out_y:0", "out_z:0"})
			compareOracle(t, tc.op+" y", got["y"], want[0], 0, 0)
			compareOracle(t, tc.op+" z", got["z"], want[1], 0, 0)
		}
	}
	vars := []arg{{"i", i32t}, {"n", i32t}, {"acc", i32t}}
	body := funcDef("loop_body", vars, vars, []string{"next:z:0", "n", "sum:z:0"},
		int32Const("one", 1), fnode("next", "AddV2", i32t, "i", "one:output:0"), fnode("sum", "AddV2", i32t, "acc", "i"))
	for _, op := range []string{"StatelessWhile", "While"} {
		files := sumLoop(t, op, body)
		m := loadFiles(t, files, driver.Config{})
		for _, n := range []int32{10, 1, 0} {
			nt := i32([]int64{}, n)
			got, err := predictNamed(t, m, named("n", nt))
			if err != nil {
				t.Fatalf("%s n=%d: %v", op, n, err)
			}
			want := tfjsGraph(t, files, map[string]tensor.Tensor{"n:0": nt}, []string{"out_acc:0", "out_i:0"})
			compareOracle(t, op+" acc", got["acc"], want[0], 0, 0)
			compareOracle(t, op+" i", got["i"], want[1], 0, 0)
		}
	}
}
