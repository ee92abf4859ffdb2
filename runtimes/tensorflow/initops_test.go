package tensorflow

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tenpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// int32Vector is a Const node of an INT32 vector.
func int32Vector(name string, v ...int32) *ndpb.NodeDef {
	return &ndpb.NodeDef{Name: name, Op: "Const", Attr: map[string]*apb.AttrValue{
		"dtype": typeAttr(tpb.DataType_DT_INT32),
		"value": {Value: &apb.AttrValue_Tensor{Tensor: &tenpb.TensorProto{Dtype: tpb.DataType_DT_INT32,
			TensorShape: &shpb.TensorShapeProto{Dim: []*shpb.TensorShapeProto_Dim{{Size: int64(len(v))}}}, IntVal: v}}},
	}}
}

// randomNode is a random op of FLOAT values of shape node shape (and the
// stateless forms' seed inputs).
func randomNode(name, op, shape string, extra ...string) *ndpb.NodeDef {
	return &ndpb.NodeDef{Name: name, Op: op, Input: append([]string{shape}, extra...), Attr: map[string]*apb.AttrValue{
		"dtype": typeAttr(tpb.DataType_DT_FLOAT), "T": typeAttr(tpb.DataType_DT_INT32),
	}}
}

// randomInitModel is y = x·w (x FLOAT [-1,2], w [2,1] = [2,3] in the
// checkpoint) whose variable initializer draws w from op (a random op, as
// Keras and tf.compat.v1 initializers do), with a TF1 main op that runs
// the initializers (tf.compat.v1.saved_model.main_op.main_op()).
func randomInitModel(t *testing.T, vars tfsave.VariableStyle, op string) driver.Files {
	t.Helper()
	b := tfsave.NewBuilderWith(tfsave.Options{Variables: vars})
	x := b.Placeholder("x", tensor.Float, []int64{-1, 2})
	w := b.Variable("w", f32([]int64{2, 1}, 2, 3))
	y := b.Op("MatMul", []string{x, w.Value}, nil)
	b.Signature("serving_default", map[string]string{"x": x}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return editGraph(t, files, func(mg *cpb.MetaGraphDef) {
		initName := ""
		for _, nd := range mg.GraphDef.Node {
			switch {
			case nd.Name == "w/initial_value" || nd.Name == "w/Initializer/initial_value":
				*nd = *randomNode(nd.Name, op, "w/shape")
				if strings.HasPrefix(op, "Stateless") {
					nd.Input = append(nd.Input, "w/seed")
					nd.Attr["Tseed"] = typeAttr(tpb.DataType_DT_INT32)
				}
			case nd.Op == "NoOp" && strings.HasPrefix(nd.Name, "init"):
				initName = nd.Name
			}
		}
		if initName == "" {
			t.Fatal("no init NoOp in the graph")
		}
		mg.GraphDef.Node = append(mg.GraphDef.Node, int32Vector("w/shape", 2, 1), int32Vector("w/seed", 1, 2))
		if mg.CollectionDef == nil {
			mg.CollectionDef = map[string]*cpb.CollectionDef{}
		}
		mg.CollectionDef["saved_model_main_op"] = &cpb.CollectionDef{Kind: &cpb.CollectionDef_NodeList_{NodeList: &cpb.CollectionDef_NodeList{Value: []string{initName}}}}
	})
}

// A main op that initializes variables the checkpoint restored, from
// random ops, is skipped: the model loads and computes with the
// checkpoint's values (TF1 ref and resource variables, every random op).
func TestRestoredVariableInitializersSkipped(t *testing.T) {
	for _, vars := range []tfsave.VariableStyle{tfsave.RefVariables, tfsave.ResourceVariables} {
		for _, op := range []string{"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"} {
			m := loadFiles(t, randomInitModel(t, vars, op), driver.Config{})
			out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1, 2}, []float32{1, 1})})
			if err != nil {
				t.Fatalf("%v %s: %v", vars, op, err)
			}
			if y, _ := tensor.Data[float32](out[0]); len(y) != 1 || y[0] != 5 {
				t.Errorf("%v %s: y = %v, want [5] (the checkpoint's w, not the initializer's)", vars, op, y)
			}
		}
	}
}

// randomServingModel serves the random ops themselves (as an initializer
// of a variable that is not in the checkpoint would run them): outputs
// u, n, tn of shape [4000] and the stateless su (seed [1,2]).
func randomServingModel(t *testing.T) driver.Files {
	t.Helper()
	b := tfsave.NewBuilder()
	x := b.Placeholder("x", tensor.Float, []int64{1})
	b.Signature("serving_default", map[string]string{"x": x}, map[string]string{"x_out": b.Op("Identity", []string{x}, nil)})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return editGraph(t, files, func(mg *cpb.MetaGraphDef) {
		su := randomNode("su", "StatelessRandomUniform", "shape", "seed")
		su.Attr["Tseed"] = typeAttr(tpb.DataType_DT_INT32)
		mg.GraphDef.Node = append(mg.GraphDef.Node, int32Vector("shape", 4000), int32Vector("seed", 1, 2),
			randomNode("u", "RandomUniform", "shape"), randomNode("n", "RandomStandardNormal", "shape"), randomNode("tn", "TruncatedNormal", "shape"), su)
		sig := mg.SignatureDef["serving_default"]
		for _, name := range []string{"u", "n", "tn", "su"} {
			sig.Outputs[name] = &cpb.TensorInfo{Encoding: &cpb.TensorInfo_Name{Name: name + ":0"}, Dtype: tpb.DataType_DT_FLOAT,
				TensorShape: &shpb.TensorShapeProto{Dim: []*shpb.TensorShapeProto_Dim{{Size: 4000}}}}
		}
	})
}

// The random ops' kernels: the shape asked for, values of the right
// distribution (bounds, and means within generous limits), fresh values on
// every call for the stateful ops (never folded into constants), the same
// values for the same seed for the stateless ones.
func TestRandomOpKernels(t *testing.T) {
	m := loadFiles(t, randomServingModel(t), driver.Config{})
	run := func() map[string][]float32 {
		t.Helper()
		out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1}, []float32{0})})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]float32{}
		for i, spec := range m.Signature().Outputs {
			v, _ := tensor.Data[float32](out[i])
			if spec.Aliases[0] != "x_out" && !slices.Equal(out[i].Shape, []int64{4000}) {
				t.Fatalf("%s: shape %v, want [4000]", spec.Aliases[0], out[i].Shape)
			}
			got[spec.Aliases[0]] = v
		}
		return got
	}
	mean := func(v []float32) float64 {
		s := 0.0
		for _, x := range v {
			s += float64(x)
		}
		return s / float64(len(v))
	}
	a, b := run(), run()
	for _, name := range []string{"u", "su"} {
		for i, x := range a[name] {
			if x < 0 || x >= 1 {
				t.Fatalf("%s[%d] = %v, outside [0, 1)", name, i, x)
			}
		}
		if mu := mean(a[name]); math.Abs(mu-0.5) > 0.05 {
			t.Errorf("%s: mean %v, want about 0.5", name, mu)
		}
	}
	for _, x := range a["tn"] {
		if math.Abs(float64(x)) > 2 {
			t.Fatalf("tn holds %v, beyond two standard deviations", x)
		}
	}
	for _, name := range []string{"n", "tn"} {
		if mu := mean(a[name]); math.Abs(mu) > 0.1 {
			t.Errorf("%s: mean %v, want about 0", name, mu)
		}
	}
	for _, name := range []string{"u", "n", "tn"} {
		if slices.Equal(a[name], b[name]) {
			t.Errorf("%s: two calls gave the same values (folded into a constant?)", name)
		}
	}
	if !slices.Equal(a["su"], b["su"]) {
		t.Error("su: the same seed gave other values")
	}
}
