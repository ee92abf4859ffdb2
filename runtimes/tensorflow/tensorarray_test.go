package tensorflow

import (
	"context"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// dynamicRNNFiles rebuilds, node for node, the frozen graph TF 1.15's
// tf.compat.v1.nn.dynamic_rnn(BasicLSTMCell(units, forget_bias=1.0), x,
// dtype=tf.float32) emits (tensorflow/python/ops/rnn.py, rnn_cell_impl.py,
// control_flow_ops.py, tensor_array_ops.py): x [batch, steps, features]
// transposed to time-major, unstacked into an input TensorArray
// (TensorArrayScatterV3 over Range(0, steps)); zero states from Fill; a
// TF1 while loop with maximum_iterations=steps (an iteration counter and
// LogicalAnd in the condition) and loop bound min(steps, max(1, steps)),
// whose body reads the input at time (TensorArrayReadV3), runs the cell
// (concat [x_t, h] . kernel + bias, split into i, j, f, o; c = c*sigmoid(f
// + 1) + sigmoid(i)*tanh(j); h = tanh(c)*sigmoid(o)) and writes h to the
// output TensorArray (TensorArrayWriteV3 threading its flow); after the
// loop the outputs are gathered (TensorArraySizeV3, Range,
// TensorArrayGatherV3) and transposed back to batch-major. Outputs: "seq"
// (rnn/transpose_1), "c" and "h" (the final state's Exits).
func dynamicRNNFiles(t testing.TB, features, units int, kernel, bias tensor.Tensor) driver.Files {
	b := tfsave.NewBuilder()
	i32c := func(name string, v ...int32) string {
		if len(v) == 1 {
			return tfsave.ConstOf(b, name, []int64{}, v...)
		}
		return tfsave.ConstOf(b, name, []int64{int64(len(v))}, v...)
	}
	x := b.OpNamed("Placeholder", "Placeholder", nil, map[string]any{"dtype": tensor.Float, "shape": tfsave.Shape{-1, -1, int64(features)}})
	// _transpose_batch_time(x): perm concat([1, 0], range(2, rank)).
	transposeBT := func(in, suf string) string {
		rng := b.OpNamed("rnn/range"+suf, "Range", []string{i32c("rnn/range"+suf+"/start", 2), i32c("rnn/Rank"+suf, 3), i32c("rnn/range"+suf+"/delta", 1)}, nil)
		perm := b.OpNamed("rnn/concat"+suf, "ConcatV2", []string{i32c("rnn/concat"+suf+"/values_0", 1, 0), rng, i32c("rnn/concat"+suf+"/axis", 0)}, nil)
		return b.OpNamed("rnn/transpose"+suf, "Transpose", []string{in, perm}, nil)
	}
	xt := transposeBT(x, "")
	vec := func(name string, v int32) string { return tfsave.ConstOf(b, name, []int64{1}, v) }
	dim := func(name, shapeName, shapeOf string, i int32) string {
		shape := b.OpNamed(shapeName, "Shape", []string{shapeOf}, nil)
		return b.OpNamed(name, "StridedSlice", []string{shape, vec(name+"/stack", i), vec(name+"/stack_1", i+1), vec(name+"/stack_2", 1)},
			map[string]any{"shrink_axis_mask": 1})
	}
	batch := dim("rnn/strided_slice", "rnn/Shape", xt, 1)
	// cell.zero_state(batch, float32): zeros(concat([batch], [units])).
	zeros := func(suf string) string {
		sc := "rnn/BasicLSTMCellZeroState"
		shape := b.OpNamed(sc+"/concat"+suf, "ConcatV2", []string{
			b.OpNamed(sc+"/ExpandDims"+suf, "ExpandDims", []string{batch, i32c(sc+"/ExpandDims"+suf+"/dim", 0)}, nil),
			tfsave.ConstOf(b, sc+"/Const"+suf, []int64{1}, int32(units)), i32c(sc+"/concat"+suf+"/axis", 0)}, nil)
		return b.OpNamed(sc+"/zeros"+suf, "Fill", []string{shape, tfsave.ConstOf[float32](b, sc+"/zeros"+suf+"/Const", []int64{}, 0)}, nil)
	}
	c0, h0 := zeros(""), zeros("_1")
	steps := dim("rnn/strided_slice_1", "rnn/Shape_1", xt, 0)
	time := i32c("rnn/time", 0)
	outTA := b.OpNamed("rnn/TensorArray", "TensorArrayV3", []string{steps}, map[string]any{
		"dtype": tensor.Float, "element_shape": tfsave.Shape{-1, int64(units)}, "identical_element_shapes": true,
		"tensor_array_name": "rnn/dynamic_rnn/output_0"})
	inTA := b.OpNamed("rnn/TensorArray_1", "TensorArrayV3", []string{steps}, map[string]any{
		"dtype": tensor.Float, "element_shape": tfsave.Shape{-1, int64(features)}, "identical_element_shapes": true,
		"tensor_array_name": "rnn/dynamic_rnn/input_0"})
	outH, inH := strings.TrimSuffix(outTA, ":0"), strings.TrimSuffix(inTA, ":0")
	// input_ta.unstack(x): scatter over range(0, shape(x)[0]).
	unstackN := dim("rnn/TensorArrayUnstack/strided_slice", "rnn/TensorArrayUnstack/Shape", xt, 0)
	unstackRange := b.OpNamed("rnn/TensorArrayUnstack/range", "Range", []string{i32c("rnn/TensorArrayUnstack/range/start", 0), unstackN, i32c("rnn/TensorArrayUnstack/range/delta", 1)}, nil)
	scatter := b.OpNamed("rnn/TensorArrayUnstack/TensorArrayScatter/TensorArrayScatterV3", "TensorArrayScatterV3",
		[]string{inTA, unstackRange, xt, inH + ":1"}, map[string]any{"_class": []string{"loc:@rnn/transpose"}})
	bound := b.OpNamed("rnn/Minimum", "Minimum", []string{steps, b.OpNamed("rnn/Maximum", "Maximum", []string{i32c("rnn/Maximum/x", 1), steps}, nil)}, nil)
	counter := i32c("rnn/while/iteration_counter", 0)
	kernelC := b.OpNamed("rnn/basic_lstm_cell/kernel", "Const", nil, map[string]any{"value": kernel, "dtype": tensor.Float})
	kernelR := b.OpNamed("rnn/basic_lstm_cell/kernel/read", "Identity", []string{kernelC}, nil)
	biasC := b.OpNamed("rnn/basic_lstm_cell/bias", "Const", nil, map[string]any{"value": bias, "dtype": tensor.Float})
	biasR := b.OpNamed("rnn/basic_lstm_cell/bias/read", "Identity", []string{biasC}, nil)
	exits := tf1While(b, "rnn/while", []string{counter, time, outH + ":1", c0, h0}, func(w *tf1Loop, v []string) string {
		less := b.OpNamed("rnn/while/Less", "Less", []string{v[0], w.invariant("Less", steps)}, nil)
		less1 := b.OpNamed("rnn/while/Less_1", "Less", []string{v[1], w.invariant("Less_1", bound)}, nil)
		return b.OpNamed("rnn/while/LogicalAnd", "LogicalAnd", []string{less, less1}, nil)
	}, func(w *tf1Loop, v []string) []string {
		s := "rnn/while/basic_lstm_cell/"
		xIn := b.OpNamed("rnn/while/TensorArrayReadV3", "TensorArrayReadV3",
			[]string{w.invariant("TensorArrayReadV3", inTA), v[1], b.OpNamed("rnn/while/TensorArrayReadV3/Enter_1", "Enter", []string{scatter},
				map[string]any{"frame_name": w.frame, "is_constant": true, "parallel_iterations": 10})}, map[string]any{"dtype": tensor.Float})
		cat := b.OpNamed(s+"concat", "ConcatV2", []string{xIn, v[4], w.bodyConst("basic_lstm_cell/concat/axis", scalarI32(1))}, nil)
		mm := b.OpNamed(s+"MatMul", "MatMul", []string{cat, w.invariant("basic_lstm_cell/MatMul", kernelR)}, nil)
		ba := b.OpNamed(s+"BiasAdd", "BiasAdd", []string{mm, w.invariant("basic_lstm_cell/BiasAdd", biasR)}, nil)
		split := strings.TrimSuffix(b.OpNamed(s+"split", "Split", []string{w.bodyConst("basic_lstm_cell/Const", scalarI32(1)), ba}, map[string]any{"num_split": 4}), ":0")
		gate := func(k int) string { return split + ":" + itoa(k) }
		forget := b.OpNamed(s+"Add", "Add", []string{gate(2), w.bodyConst("basic_lstm_cell/Const_1", scalarF32(1))}, nil)
		keep := b.OpNamed(s+"Mul", "Mul", []string{v[3], b.OpNamed(s+"Sigmoid", "Sigmoid", []string{forget}, nil)}, nil)
		write := b.OpNamed(s+"Mul_1", "Mul", []string{b.OpNamed(s+"Sigmoid_1", "Sigmoid", []string{gate(0)}, nil), b.OpNamed(s+"Tanh", "Tanh", []string{gate(1)}, nil)}, nil)
		c := b.OpNamed(s+"Add_1", "Add", []string{keep, write}, nil)
		h := b.OpNamed(s+"Mul_2", "Mul", []string{b.OpNamed(s+"Tanh_1", "Tanh", []string{c}, nil), b.OpNamed(s+"Sigmoid_2", "Sigmoid", []string{gate(3)}, nil)}, nil)
		flow := b.OpNamed("rnn/while/TensorArrayWrite/TensorArrayWriteV3", "TensorArrayWriteV3",
			[]string{w.invariant("TensorArrayWrite/TensorArrayWriteV3", outTA), v[1], h, v[2]}, map[string]any{"_class": []string{"loc:@" + strings.TrimSuffix(h, ":0")}})
		return []string{
			b.OpNamed("rnn/while/add_1", "AddV2", []string{v[0], w.bodyConst("add_1/y", scalarI32(1))}, nil),
			b.OpNamed("rnn/while/add", "AddV2", []string{v[1], w.bodyConst("add/y", scalarI32(1))}, nil),
			flow, c, h,
		}
	})
	size := b.OpNamed("rnn/TensorArrayStack/TensorArraySizeV3", "TensorArraySizeV3", []string{outTA, exits[2]}, nil)
	stackRange := b.OpNamed("rnn/TensorArrayStack/range", "Range", []string{i32c("rnn/TensorArrayStack/range/start", 0), size, i32c("rnn/TensorArrayStack/range/delta", 1)}, nil)
	stacked := b.OpNamed("rnn/TensorArrayStack/TensorArrayGatherV3", "TensorArrayGatherV3", []string{outTA, stackRange, exits[2]},
		map[string]any{"dtype": tensor.Float, "element_shape": tfsave.Shape{-1, int64(units)}})
	seq := transposeBT(stacked, "_1")
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"seq": seq, "c": exits[3], "h": exits[4]})
	return tf1Files(t, b)
}

// basicLSTM is BasicLSTMCell run by dynamic_rnn, in float32 with one
// rounding per op in TensorFlow's order (the concat's MatMul accumulating
// in index order, BiasAdd, Add of forget_bias, Eigen's Sigmoid), from zero
// states: the expected values derived from rnn_cell_impl.py's definition.
func basicLSTM(x tensor.Tensor, features, units int, kernel, bias []float32) (seq, c, h []float32) {
	batch, steps := int(x.Shape[0]), int(x.Shape[1])
	xs := x.Data.([]float32)
	c, h = make([]float32, batch*units), make([]float32, batch*units)
	seq = make([]float32, batch*steps*units)
	sig := sigmoid32 // Eigen's formula, checked by TestSigmoidEigen
	tanh32 := func(v float32) float32 { return float32(math.Tanh(float64(v))) }
	for t := range steps {
		for r := range batch {
			in := append(append([]float32(nil), xs[(r*steps+t)*features:(r*steps+t+1)*features]...), h[r*units:(r+1)*units]...)
			gates := make([]float32, 4*units)
			for j := range gates {
				var s float32
				for k, v := range in {
					s += v * kernel[k*4*units+j]
				}
				gates[j] = s + bias[j]
			}
			for u := range units {
				i, jj, f, o := gates[u], gates[units+u], gates[2*units+u], gates[3*units+u]
				cu := c[r*units+u]*sig(f+1) + sig(i)*tanh32(jj)
				c[r*units+u] = cu
				h[r*units+u] = tanh32(cu) * sig(o)
				seq[(r*steps+t)*units+u] = h[r*units+u]
			}
		}
	}
	return seq, c, h
}

// lstmWeights are the test's BasicLSTMCell weights: kernel [features +
// units, 4*units] (gates i, j, f, o), bias [4*units].
func lstmWeights(features, units int) (kernel, bias tensor.Tensor) {
	return f32([]int64{int64(features + units), int64(4 * units)}, pseudo((features+units)*4*units, 11, 0.7)...),
		f32([]int64{int64(4 * units)}, pseudo(4*units, 12, 0.4)...)
}

// TestOracleTF1DynamicRNN runs the rebuilt dynamic_rnn/BasicLSTMCell
// export on a one-row batch and a batch of 3 against the float32
// definition, tfjs-converter's graph executor (its TensorArray ops) and
// tfjs-layers' LSTM given the same weights (gates reordered to Keras's i,
// f, c, o; forget_bias folded into the f bias; sigmoid recurrent
// activation).
func TestOracleTF1DynamicRNN(t *testing.T) {
	const features, units, steps = 3, 4, 5
	kernel, bias := lstmWeights(features, units)
	files := dynamicRNNFiles(t, features, units, kernel, bias)
	m := loadFiles(t, files, driver.Config{})
	kv, bv := kernel.Data.([]float32), bias.Data.([]float32)
	// Keras LSTM weights: kernel [features, 4u], recurrent [u, 4u], bias
	// [4u], gate blocks i, f, c(=j), o.
	order := []int{0, 2, 1, 3}
	kk, rk, kb := make([]float32, features*4*units), make([]float32, units*4*units), make([]float32, 4*units)
	for g, src := range order {
		for u := range units {
			for k := range features + units {
				w := kv[k*4*units+src*units+u]
				if k < features {
					kk[k*4*units+g*units+u] = w
				} else {
					rk[(k-features)*4*units+g*units+u] = w
				}
			}
			kb[g*units+u] = bv[src*units+u]
			if src == 2 {
				kb[g*units+u] += 1 // forget_bias
			}
		}
	}
	for _, batch := range []int{1, 3} {
		x := f32([]int64{int64(batch), steps, features}, pseudo(batch*steps*features, uint32(20+batch), 2)...)
		got, err := predictNamed(t, m, named("x", x))
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		seq, c, h := basicLSTM(x, features, units, kv, bv)
		what := "batch " + itoa(batch) + " "
		compareOracle(t, what+"seq vs definition", got["seq"], f32([]int64{int64(batch), steps, units}, seq...), 0, 0)
		compareOracle(t, what+"c vs definition", got["c"], f32([]int64{int64(batch), units}, c...), 0, 0)
		compareOracle(t, what+"h vs definition", got["h"], f32([]int64{int64(batch), units}, h...), 0, 0)
		want := tfjsGraph(t, files, map[string]tensor.Tensor{"Placeholder:0": x}, []string{"rnn/transpose_1:0", "rnn/while/Exit_3:0", "rnn/while/Exit_4:0"})
		// tfjs's Sigmoid is 1/(1+e^-x): last-bit differences through 5
		// steps, 1e-5 relative or, for outputs near zero, 1e-7 absolute
		// (a few ulps of the O(1) values they cancel from).
		compareOracle(t, what+"seq vs tfjs graph", got["seq"], want[0], 1e-5, 1e-7)
		compareOracle(t, what+"c vs tfjs graph", got["c"], want[1], 1e-5, 1e-7)
		compareOracle(t, what+"h vs tfjs graph", got["h"], want[2], 1e-5, 1e-7)
		layers := tfjsLayers(t, []jsLayer{{Fn: "lstm", Config: map[string]any{
			"units": units, "recurrentActivation": "sigmoid", "returnSequences": true, "inputShape": []int{steps, features},
			"kernelInitializer": "zeros", "recurrentInitializer": "zeros",
		}, Weights: []jsTensor{
			toJS(t, f32([]int64{features, 4 * units}, kk...)), toJS(t, f32([]int64{units, 4 * units}, rk...)), toJS(t, f32([]int64{4 * units}, kb...)),
		}}}, x)
		// Keras adds x.W and h.U separately and forget_bias into the bias:
		// other float32 roundings, carried through 5 steps.
		compareOracle(t, what+"seq vs tfjs-layers", got["seq"], layers, 1e-5, 1e-6)
	}
}

// taOps is a graph over a fed x [2,2] using every TensorArray op: scatter
// x's rows to elements 2 and 0 of a size-3 array, read element 2 and write
// it plus 10 to element 1, gather all and the size; a dynamic array
// written at index 2 (size 3); x's 4 values split into pieces of 3 and 1
// and concatenated back; Range in int32, descending and float32.
func taOps(b *tfsave.Builder) (map[string]string, map[string]string) {
	ins, outs := taOpsTFJS(b)
	// tfjs's TensorArrayConcatV3 has no lengths output.
	outs["concat_lengths"] = strings.TrimSuffix(outs["concat"], ":0") + ":1"
	return ins, outs
}

// taOpsTFJS is taOps without the outputs tfjs lacks.
func taOpsTFJS(b *tfsave.Builder) (map[string]string, map[string]string) {
	x := b.Placeholder("x", tensor.Float, []int64{-1, 2})
	i32c := func(name string, shape []int64, v ...int32) string { return tfsave.ConstOf(b, name, shape, v...) }
	// Element 2 is read twice: TensorFlow (and tfjs) allow it only with
	// clear_after_read false.
	ta := b.OpNamed("ta", "TensorArrayV3", []string{i32c("ta/size", nil, 3)}, map[string]any{"dtype": tensor.Float, "clear_after_read": false})
	f1 := b.OpNamed("scatter", "TensorArrayScatterV3", []string{ta, i32c("scatter/idx", []int64{2}, 2, 0), x, "ta:1"}, nil)
	r := b.OpNamed("read", "TensorArrayReadV3", []string{ta, i32c("read/i", nil, 2), f1}, map[string]any{"dtype": tensor.Float})
	ten := tfsave.ConstOf[float32](b, "ten", []int64{}, 10)
	f2 := b.OpNamed("write", "TensorArrayWriteV3", []string{ta, i32c("write/i", nil, 1), b.OpNamed("plus10", "AddV2", []string{r, ten}, nil), f1}, nil)
	all := b.OpNamed("gather", "TensorArrayGatherV3", []string{ta, i32c("gather/idx", []int64{3}, 0, 1, 2), f2}, map[string]any{"dtype": tensor.Float})
	some := b.OpNamed("gather2", "TensorArrayGatherV3", []string{ta, i32c("gather2/idx", []int64{2}, 2, 2), f2},
		map[string]any{"dtype": tensor.Float, "element_shape": tfsave.Shape{2}})
	size := b.OpNamed("size", "TensorArraySizeV3", []string{ta, f2}, nil)
	dyn := b.OpNamed("dyn", "TensorArrayV3", []string{i32c("dyn/size", nil, 0)}, map[string]any{"dtype": tensor.Float, "dynamic_size": true})
	// (Its own value: tfjs's close disposes the tensors written.)
	df := b.OpNamed("dyn/write", "TensorArrayWriteV3", []string{dyn, i32c("dyn/i", nil, 2), b.OpNamed("dyn/neg", "Neg", []string{r}, nil), "dyn:1"}, nil)
	dsize := b.OpNamed("dyn/size_out", "TensorArraySizeV3", []string{dyn, df}, nil)
	rng := func(name string, dt tensor.DType, start, limit, delta float64) string {
		c := func(s string, v float64) string {
			if dt == tensor.Float {
				return tfsave.ConstOf(b, name+"/"+s, []int64{}, float32(v))
			}
			return tfsave.ConstOf(b, name+"/"+s, []int64{}, int32(v))
		}
		return b.OpNamed(name, "Range", []string{c("start", start), c("limit", limit), c("delta", delta)}, map[string]any{"Tidx": dt})
	}
	// Split x's 4 values into pieces of 3 and 1, then concat them back.
	// (tfjs's split needs an element_shape: [-1], vectors of any length;
	// element 0 is read twice.)
	spl := b.OpNamed("spl", "TensorArrayV3", []string{i32c("spl/size", nil, 2)}, map[string]any{"dtype": tensor.Float, "element_shape": tfsave.Shape{-1}, "clear_after_read": false})
	flat := b.OpNamed("flat", "Reshape", []string{x, i32c("flat/shape", []int64{1}, 4)}, nil)
	sf := b.OpNamed("spl/split", "TensorArraySplitV3", []string{spl, flat, tfsave.ConstOf[int64](b, "spl/lengths", []int64{2}, 3, 1), "spl:1"}, nil)
	first := b.OpNamed("spl/read", "TensorArrayReadV3", []string{spl, i32c("spl/i", nil, 0), sf}, map[string]any{"dtype": tensor.Float})
	cat := strings.TrimSuffix(b.OpNamed("spl/concat", "TensorArrayConcatV3", []string{spl, sf}, map[string]any{"dtype": tensor.Float}), ":0")
	// Closed after its size is taken; an output waits for the close.
	closeTA := b.OpNamed("dyn/close", "TensorArrayCloseV3", []string{dyn, "^" + strings.TrimSuffix(dsize, ":0")}, nil)
	r3 := rng("range", tensor.Int32, 1, 10, 3)
	return map[string]string{"x": x}, map[string]string{
		"split_first": first, "concat": cat + ":0",
		"read": r, "gather": all, "gather_twice": some, "size": size, "dyn_size": dsize,
		"range": b.OpNamed("after_close", "Identity", []string{r3, "^" + closeTA}, nil), "range_down": rng("range_down", tensor.Int32, 5, 0, -2),
		"range_f": rng("range_f", tensor.Float, 0.5, 2, 0.4), "range_empty": b.Op("Shape", []string{rng("range_e", tensor.Int32, 3, 3, 1)}, nil),
	}
}

func TestTensorArrayOps(t *testing.T) {
	x := f32([]int64{2, 2}, 1, 2, 3, 4)
	runCase(t, tfsave.Options{}, graphCase{name: "ops", build: taOps, feed: []tensor.Tensor{named("x", x)},
		want: map[string]tensor.Tensor{
			"split_first":    f32([]int64{3}, 1, 2, 3),
			"concat":         f32([]int64{4}, 1, 2, 3, 4),
			"concat_lengths": i64([]int64{2}, 3, 1),
			"read":           f32([]int64{2}, 1, 2),
			"gather":         f32([]int64{3, 2}, 3, 4, 11, 12, 1, 2),
			"gather_twice":   f32([]int64{2, 2}, 1, 2, 1, 2),
			"size":           i32([]int64{}, 3),
			"dyn_size":       i32([]int64{}, 3),
			"range":          i32([]int64{3}, 1, 4, 7),
			"range_down":     i32([]int64{3}, 5, 3, 1),
			// float32 accumulation, as TensorFlow's RangeOp: 0.5+0.4 =
			// 0.9f, +0.4f = 1.3f (1.29999995), +0.4f = 1.6999999f.
			"range_f":     f32([]int64{4}, 0.5, 0.9, float32(float32(0.9)+float32(0.4)), float32(float32(float32(0.9)+float32(0.4))+float32(0.4))),
			"range_empty": i32([]int64{1}, 0),
		}})
	// Unwritten elements of a fully defined element shape read as zeros.
	runCase(t, tfsave.Options{}, graphCase{name: "zeros", build: func(b *tfsave.Builder) (map[string]string, map[string]string) {
		x := b.Placeholder("x", tensor.Float, []int64{2})
		ta := b.OpNamed("ta", "TensorArrayV3", []string{tfsave.ConstOf[int32](b, "n", []int64{}, 3)},
			map[string]any{"dtype": tensor.Float, "element_shape": tfsave.Shape{2}})
		f := b.OpNamed("w", "TensorArrayWriteV3", []string{ta, tfsave.ConstOf[int32](b, "i", []int64{}, 1), x, "ta:1"}, nil)
		return map[string]string{"x": x}, map[string]string{
			"all": b.OpNamed("g", "TensorArrayGatherV3", []string{ta, tfsave.ConstOf[int32](b, "idx", []int64{3}, 0, 1, 2), f}, map[string]any{"dtype": tensor.Float}),
		}
	}, feed: []tensor.Tensor{named("x", f32([]int64{2}, 5, 6))}, want: map[string]tensor.Tensor{"all": f32([]int64{3, 2}, 0, 0, 5, 6, 0, 0)}})
}

// TestOracleTensorArray: taOps on tfjs-converter's TensorArray ops.
func TestOracleTensorArray(t *testing.T) {
	runOracleCases(t, []oracleCase{{name: "ops", build: taOpsTFJS, feed: map[string]tensor.Tensor{"x": f32([]int64{2, 2}, 1.5, -2, 3.25, 4)}}})
}

func TestTensorArrayErrors(t *testing.T) {
	x := f32([]int64{2, 2}, 1, 2, 3, 4)
	i32s := func(b *tfsave.Builder, name string, v int32) string { return tfsave.ConstOf(b, name, []int64{}, v) }
	newTA := func(b *tfsave.Builder, name string, size int32, attrs map[string]any) string {
		a := map[string]any{"dtype": tensor.Float}
		for k, v := range attrs {
			a[k] = v
		}
		return b.OpNamed(name, "TensorArrayV3", []string{i32s(b, name+"/size", size)}, a)
	}
	write := func(b *tfsave.Builder, name, ta string, i int32, v, flow string) string {
		return b.OpNamed(name, "TensorArrayWriteV3", []string{ta, i32s(b, name+"/i", i), v, flow}, nil)
	}
	size := func(b *tfsave.Builder, ta, flow string) string {
		return b.OpNamed("size", "TensorArraySizeV3", []string{ta, flow}, nil)
	}
	rng := func(b *tfsave.Builder, start, limit, delta int32) string {
		return b.Op("Range", []string{i32s(b, "s", start), i32s(b, "l", limit), i32s(b, "d", delta)}, nil)
	}
	cases := []struct {
		name  string
		build func(b *tfsave.Builder, x string) string
		want  string
	}{
		{"write twice", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 2, nil)
			return size(b, ta, write(b, "w2", ta, 0, x, write(b, "w1", ta, 0, x, "ta:1")))
		}, "index 0 was already written to"},
		{"write past the end", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 2, nil)
			return size(b, ta, write(b, "w", ta, 2, x, "ta:1"))
		}, "index 2 is out of range for a TensorArray of size 2 (dynamic_size is false)"},
		{"dynamic write too far", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 0, map[string]any{"dynamic_size": true})
			return size(b, ta, write(b, "w", ta, 1<<30, x, "ta:1"))
		}, "index 1073741824 is out of range [0, 1048576)"},
		{"write wrong shape", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 2, map[string]any{"element_shape": tfsave.Shape{3}})
			return size(b, ta, write(b, "w", ta, 0, x, "ta:1"))
		}, "value for index 0 does not match the TensorArray's element_shape"},
		{"read unwritten, shape unknown", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 2, nil)
			return b.OpNamed("r", "TensorArrayReadV3", []string{ta, i32s(b, "i", 1), write(b, "w", ta, 0, x, "ta:1")}, map[string]any{"dtype": tensor.Float})
		}, "index 1 was not written to and the element shape"},
		{"negative size", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", -1, nil)
			return size(b, ta, write(b, "w", ta, 0, x, "ta:1"))
		}, "size -1 is out of range [0, 1048576]"},
		{"huge size", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 1<<30, nil)
			return size(b, ta, write(b, "w", ta, 0, x, "ta:1"))
		}, "size 1073741824 is out of range [0, 1048576]"},
		{"scatter shape", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 3, nil)
			f := b.OpNamed("sc", "TensorArrayScatterV3", []string{ta, tfsave.ConstOf[int32](b, "idx", []int64{3}, 0, 1, 2), x, "ta:1"}, nil)
			return size(b, ta, f)
		}, "value has shape [2 2]; 3 indices need a first dimension of 3"},
		{"flow of another array", func(b *tfsave.Builder, x string) string {
			ta, other := newTA(b, "ta", 2, nil), newTA(b, "other", 2, nil)
			return size(b, ta, write(b, "w", other, 0, x, "other:1"))
		}, "flow_in is not a flow of this TensorArray"},
		{"split lengths sum", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 2, nil)
			return size(b, ta, b.OpNamed("sp", "TensorArraySplitV3", []string{ta, x, tfsave.ConstOf[int64](b, "l", []int64{2}, 1, 2), "ta:1"}, nil))
		}, "lengths [1 2] add up to 3, value's first dimension is 2"},
		{"split count", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 3, nil)
			return size(b, ta, b.OpNamed("sp", "TensorArraySplitV3", []string{ta, x, tfsave.ConstOf[int64](b, "l", []int64{2}, 1, 1), "ta:1"}, nil))
		}, "size 3 is not the number of lengths 2, and dynamic_size is false"},
		{"concat mismatch", func(b *tfsave.Builder, x string) string {
			ta := newTA(b, "ta", 2, nil)
			f := write(b, "w1", ta, 1, b.Op("Reshape", []string{x, tfsave.ConstOf[int32](b, "s", []int64{2}, 1, 4)}, nil), write(b, "w0", ta, 0, x, "ta:1"))
			return b.OpNamed("cat", "TensorArrayConcatV3", []string{ta, f}, map[string]any{"dtype": tensor.Float})
		}, "element 1 does not match the others past its first dimension"},
		{"range delta 0", func(b *tfsave.Builder, x string) string { return rng(b, 0, 5, 0) }, "delta must not be 0"},
		{"range direction", func(b *tfsave.Builder, x string) string { return rng(b, 5, 0, 1) }, "start 5 is larger than limit 0 with delta 1 > 0"},
		{"range huge", func(b *tfsave.Builder, x string) string { return rng(b, -2147483648, 2147483647, 1) }, "more than 268435456 elements"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := seqError(t, x, c.build)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "(node ") || inferr.TypeOf(err) != inferr.ModelExecution {
				t.Errorf("error %v is not a MODEL_EXECUTION error naming the node", err)
			}
		})
	}
}

// TestTensorArrayConcurrentCalls runs the dynamic_rnn model from 8
// goroutines at once, each with its own batch: every call must get its
// own arrays (an array shared between calls would mix their writes or fail
// with "already written").
func TestTensorArrayConcurrentCalls(t *testing.T) {
	const features, units, steps = 3, 4, 5
	kernel, bias := lstmWeights(features, units)
	m := loadFiles(t, dynamicRNNFiles(t, features, units, kernel, bias), driver.Config{})
	inputs := make([]tensor.Tensor, 8)
	want := make([]tensor.Tensor, len(inputs))
	for i := range inputs {
		inputs[i] = f32([]int64{int64(1 + i%3), steps, features}, pseudo((1+i%3)*steps*features, uint32(100+i), 2)...)
		got, err := predictNamed(t, m, named("x", inputs[i]))
		if err != nil {
			t.Fatal(err)
		}
		want[i] = got["seq"]
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 20 {
				i := (g + k) % len(inputs)
				got, err := m.Predict(context.Background(), []tensor.Tensor{named("x", inputs[i])})
				if err != nil {
					t.Error(err)
					return
				}
				for _, o := range got {
					if o.Name == "rnn/transpose_1:0" && !reflect.DeepEqual(o.Data, want[i].Data) {
						t.Errorf("goroutine %d call %d: input %d answered %v, alone %v", g, k, i, o.Data, want[i].Data)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
