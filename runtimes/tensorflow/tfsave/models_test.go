//lint:file-ignore SA1019 the tests check method_name, which the writer sets as TensorFlow does (write.go)

package tfsave

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	functionpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	protopb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/tensor"
)

var allOptions = []Options{
	{},
	{FunctionCall: true},
	{Variables: RefVariables},
	{Variables: RefVariables, FunctionCall: true},
	{FunctionCall: true, TracedSaver: true},
}

func optName(o Options) string {
	s := "resource"
	if o.Variables == RefVariables {
		s = "ref"
	}
	if o.FunctionCall {
		s += "+function"
	}
	if o.TracedSaver {
		s += "+traced"
	}
	return s
}

const (
	dtFloat  = typespb.DataType_DT_FLOAT
	dtDouble = typespb.DataType_DT_DOUBLE
	dtInt64  = typespb.DataType_DT_INT64
)

// The expected values below are computed from the formulas in the team
// contract and the package docs, in float64 from float32-rounded weights,
// not from the graphs under test.

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func wantWeight(seed, scale float64, i int) float64 {
	return float64(float32(scale * math.Sin(seed+0.7*float64(i))))
}

func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9+1e-6*math.Abs(want)
}

func checkFloats(t *testing.T, what string, got *tval, wantShape []int64, want []float64) {
	t.Helper()
	if fmt.Sprint(got.shape) != fmt.Sprint(wantShape) {
		t.Errorf("%s: shape %v, want %v", what, got.shape, wantShape)
	}
	if len(got.f) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got.f), len(want))
	}
	for i := range want {
		if !closeTo(got.f[i], want[i]) {
			t.Errorf("%s[%d] = %v, want %v", what, i, got.f[i], want[i])
		}
	}
}

func TestMLP(t *testing.T) {
	const batch = 3
	x := make([]float64, batch*8)
	for b := 0; b < batch; b++ {
		for i := 0; i < 8; i++ {
			x[b*8+i] = float64(float32((b*8+i)%10) / 10)
		}
	}
	want := make([]float64, batch)
	for b := 0; b < batch; b++ {
		y := float64(float32(0.05))
		for j := 0; j < 16; j++ {
			h := float64(float32(0.1 * math.Cos(float64(j))))
			for i := 0; i < 8; i++ {
				h += x[b*8+i] * float64(float32(0.5*math.Sin(float64(i*16+j))))
			}
			y += math.Max(h, 0) * float64(float32(0.5*math.Sin(float64(100+j))))
		}
		want[b] = sigmoid(y)
	}
	for _, o := range allOptions {
		t.Run(optName(o), func(t *testing.T) {
			files, err := MLP(o)
			if err != nil {
				t.Fatal(err)
			}
			m := loadEval(t, files)
			out := m.predict(ServingSignature, map[string]*tval{"x": floats(dtFloat, []int64{batch, 8}, x...)})
			checkFloats(t, "y", out["y"], []int64{batch, 1}, want)
			sig := m.meta.SignatureDef[ServingSignature]
			if got := sig.Inputs["x"].GetName(); got != "serving_default_x:0" {
				t.Errorf("input tensor %q", got)
			}
			checkShapeProto(t, "x", sig.Inputs["x"], []int64{-1, 8})
			checkShapeProto(t, "y", sig.Outputs["y"], []int64{-1, 1})
			// Functions that take resource handles are stateful; TF1 variables
			// reach them as plain values.
			wantOut := "y:0"
			if o.FunctionCall && o.Variables == ResourceVariables {
				wantOut = "StatefulPartitionedCall:0"
			} else if o.FunctionCall {
				wantOut = "PartitionedCall:0"
			}
			if got := sig.Outputs["y"].GetName(); got != wantOut {
				t.Errorf("output tensor %q, want %q", got, wantOut)
			}
			for _, op := range []string{"MatMul", "BiasAdd", "Relu", "Sigmoid", "RestoreV2"} {
				if m.ranOps[op] == 0 {
					t.Errorf("op %s never ran", op)
				}
			}
		})
	}
}

func checkShapeProto(t *testing.T, what string, ti *protopb.TensorInfo, want []int64) {
	t.Helper()
	var got []int64
	for _, d := range ti.GetTensorShape().GetDim() {
		got = append(got, d.Size)
	}
	if ti.GetTensorShape().GetUnknownRank() || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: signature shape %v (unknown rank %v), want %v", what, got, ti.GetTensorShape().GetUnknownRank(), want)
	}
}

func TestAffineAndFixtures(t *testing.T) {
	x := []float64{-1.5, 0, 2, 3.25, -0.125, 7}
	for _, o := range allOptions {
		fx, err := BuildConformanceModels(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name  string
			files map[string][]byte
			a, b  float64
		}{{"v1", fx.AffineV1, 2, 1}, {"v2", fx.AffineV2, 3, -1}} {
			t.Run(optName(o)+"/affine_"+c.name, func(t *testing.T) {
				m := loadEval(t, c.files)
				out := m.predict(ServingSignature, map[string]*tval{"x": floats(dtFloat, []int64{2, 3}, x...)})
				want := make([]float64, len(x))
				for i, v := range x {
					want[i] = c.a*v + c.b
				}
				checkFloats(t, "y", out["y"], []int64{2, 3}, want)
				if m.ranOps["RestoreV2"] == 0 {
					t.Error("variables were not restored through RestoreV2")
				}
			})
		}
		t.Run(optName(o)+"/all_dtypes", func(t *testing.T) {
			m := loadEval(t, fx.AllDTypes)
			sig := m.meta.SignatureDef[ServingSignature]
			if len(sig.Inputs) != 6 || len(sig.Outputs) != 6 {
				t.Fatalf("%d inputs, %d outputs", len(sig.Inputs), len(sig.Outputs))
			}
			in := map[string]*tval{}
			for _, d := range tensor.DTypes {
				key := strings.ToLower(d.String())
				dt, _ := DataType(d)
				if ti := sig.Inputs[key+"_in"]; ti == nil || ti.Dtype != dt {
					t.Fatalf("input %s_in: %v", key, ti)
				}
				checkShapeProto(t, key+"_in", sig.Inputs[key+"_in"], []int64{-1, 2})
				checkShapeProto(t, key+"_out", sig.Outputs[key+"_out"], []int64{-1, 2})
				if d == tensor.Float || d == tensor.Double {
					in[key+"_in"] = floats(dt, []int64{2, 2}, 1.5, -2, 0, 1e-3)
				} else {
					in[key+"_in"] = ints(dt, []int64{2, 2}, -7, 0, 5, 100)
				}
			}
			out := m.predict(ServingSignature, in)
			for _, d := range tensor.DTypes {
				key := strings.ToLower(d.String())
				got, want := out[key+"_out"], in[key+"_in"]
				if fmt.Sprint(got.f, got.i, got.shape) != fmt.Sprint(want.f, want.i, want.shape) {
					t.Errorf("%s: got %v %v, want %v %v", key, got.f, got.i, want.f, want.i)
				}
			}
		})
	}
	fx, err := BuildConformanceModels(Options{FunctionCall: true, TracedSaver: true})
	if err != nil || len(fx.AllDTypes) == 0 || len(fx.AffineV1) == 0 || len(fx.AffineV2) == 0 {
		t.Fatalf("BuildConformanceModels: %v, or empty files", err)
	}
}

func TestPCTR(t *testing.T) {
	adIDs, pubIDs := []int64{0, 99, 42}, []int64{49, 0, 7}
	dense := []float64{0.1, -0.2, 0.3, 0.5, 1, -1, 0, 0, 0, 0, 0, 0, 2, 1, 0.5, 0.25, -3, 0.75}
	for i := range dense {
		dense[i] = float64(float32(dense[i]))
	}
	want := make([]float64, 3)
	for r := 0; r < 3; r++ {
		var feat []float64
		for k := 0; k < 4; k++ {
			feat = append(feat, wantWeight(1, 0.5, int(adIDs[r])*4+k))
		}
		for k := 0; k < 4; k++ {
			feat = append(feat, wantWeight(2, 0.5, int(pubIDs[r])*4+k))
		}
		feat = append(feat, dense[r*6:(r+1)*6]...)
		y := wantWeight(6, 0.1, 0)
		for j := 0; j < 16; j++ {
			h := wantWeight(4, 0.1, j)
			for i, f := range feat {
				h += f * wantWeight(3, 0.4, i*16+j)
			}
			y += math.Max(h, 0) * wantWeight(5, 0.5, j)
		}
		want[r] = sigmoid(y)
	}
	for _, o := range allOptions {
		t.Run(optName(o), func(t *testing.T) {
			files, err := PCTRModel(o)
			if err != nil {
				t.Fatal(err)
			}
			m := loadEval(t, files)
			out := m.predict(ServingSignature, map[string]*tval{
				"ad_id":        ints(dtInt64, []int64{3, 1}, adIDs...),
				"publisher_id": ints(dtInt64, []int64{3, 1}, pubIDs...),
				"dense":        floats(dtFloat, []int64{3, 6}, dense...),
			})
			checkFloats(t, "pctr", out["pctr"], []int64{3, 1}, want)
			sig := m.meta.SignatureDef[ServingSignature]
			checkShapeProto(t, "pctr", sig.Outputs["pctr"], []int64{-1, 1})
			if o.Variables == ResourceVariables && m.ranOps["ResourceGather"] == 0 {
				t.Error("ResourceGather never ran")
			}
		})
	}
}

func TestPCVR(t *testing.T) {
	camp, country := []int64{63, 5}, []int64{0, 31}
	feats := []float64{0.32, 0.12, 0.98, -0.5, 1.25, 0, 1, 2, 3, 4}
	want := make([]float64, 2)
	for r := 0; r < 2; r++ {
		var feat []float64
		for k := 0; k < 4; k++ {
			feat = append(feat, wantWeight(11, 0.5, int(camp[r])*4+k))
		}
		for k := 0; k < 3; k++ {
			feat = append(feat, wantWeight(12, 0.5, int(country[r])*3+k))
		}
		for _, f := range feats[r*5 : (r+1)*5] {
			feat = append(feat, float64(float32(f)))
		}
		y := wantWeight(16, 0.1, 0)
		for j := 0; j < 8; j++ {
			h := wantWeight(14, 0.1, j)
			for i, f := range feat {
				h += f * wantWeight(13, 0.4, i*8+j)
			}
			y += math.Max(h, 0) * wantWeight(15, 0.6, j)
		}
		want[r] = sigmoid(y)
	}
	for _, o := range allOptions {
		t.Run(optName(o), func(t *testing.T) {
			files, err := PCVRModel(o)
			if err != nil {
				t.Fatal(err)
			}
			m := loadEval(t, files)
			// The interpreter keeps DOUBLE in float64, so round through
			// float32 only at the Cast: feed values already float32-exact.
			in := make([]float64, len(feats))
			for i, f := range feats {
				in[i] = float64(float32(f))
			}
			out := m.predict(ServingSignature, map[string]*tval{
				"campaign_id": ints(dtInt64, []int64{2, 1}, camp...),
				"country_id":  ints(dtInt64, []int64{2, 1}, country...),
				"features":    floats(dtDouble, []int64{2, 5}, in...),
			})
			checkFloats(t, "pcvr", out["pcvr"], []int64{2, 1}, want)
			sig := m.meta.SignatureDef[ServingSignature]
			checkShapeProto(t, "features", sig.Inputs["features"], []int64{-1, 5})
			checkShapeProto(t, "pcvr", sig.Outputs["pcvr"], []int64{-1, 1})
		})
	}
}

func TestCounter(t *testing.T) {
	for _, o := range allOptions {
		t.Run(optName(o), func(t *testing.T) {
			files, err := CounterModel(o, 1)
			if o.Variables == RefVariables {
				if err == nil {
					t.Fatal("CounterModel with ref variables: no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := loadEval(t, files)
			for want := int64(2); want <= 4; want++ {
				out := m.predict(ServingSignature, map[string]*tval{"input_1": floats(dtFloat, []int64{2}, 1, 2)})
				got := out["output_1"]
				if got.dtype != typespb.DataType_DT_INT32 || len(got.shape) != 0 || len(got.i) != 1 || got.i[0] != want {
					t.Fatalf("call %d: got %v %v %v, want INT32 scalar %d", want-1, got.dtype, got.shape, got.i, want)
				}
			}
			sig := m.meta.SignatureDef[ServingSignature]
			if o.FunctionCall && sig.Outputs["output_1"].GetName() != "StatefulPartitionedCall:0" {
				t.Errorf("output tensor %q", sig.Outputs["output_1"].GetName())
			}
			if m.ranOps["AssignAddVariableOp"] != 3 {
				t.Errorf("AssignAddVariableOp ran %d times, want 3", m.ranOps["AssignAddVariableOp"])
			}
		})
	}
}

// TestStructure checks what every model writes against TensorFlow's
// conventions, for every option.
func TestStructure(t *testing.T) {
	models := map[string]func(Options) (map[string][]byte, error){
		"mlp": MLP, "pctr": PCTRModel, "pcvr": PCVRModel, "all_dtypes": AllDTypesModel,
		"affine": func(o Options) (map[string][]byte, error) { return AffineModel(o, 2, 1) },
	}
	for name, gen := range models {
		for _, o := range allOptions {
			t.Run(name+"/"+optName(o), func(t *testing.T) {
				files, err := gen(o)
				if err != nil {
					t.Fatal(err)
				}
				again, err := gen(o)
				if err != nil {
					t.Fatal(err)
				}
				for p := range files {
					if !bytes.Equal(files[p], again[p]) {
						t.Errorf("%s differs between two runs", p)
					}
				}
				checkStructure(t, files, o)
			})
		}
	}
}

func checkStructure(t *testing.T, files map[string][]byte, o Options) {
	t.Helper()
	sm := savedModelOf(t, files)
	if sm.SavedModelSchemaVersion != 1 {
		t.Fatalf("schema %d, %d meta graphs", sm.SavedModelSchemaVersion, len(sm.MetaGraphs))
	}
	mg := sm.MetaGraphs[0]
	if fmt.Sprint(mg.MetaInfoDef.Tags) != "[serve]" {
		t.Errorf("tags %v", mg.MetaInfoDef.Tags)
	}
	nodes := map[string]string{}
	used := map[string]bool{}
	for _, n := range mg.GraphDef.Node {
		nodes[n.Name] = n.Op
		used[n.Op] = true
	}
	for _, n := range mg.GraphDef.Node {
		control := false
		for _, in := range n.Input {
			if strings.HasPrefix(in, "^") {
				control = true
			} else if control {
				t.Errorf("node %q: data input %q after a control input", n.Name, in)
			}
			src := strings.TrimPrefix(in, "^")
			if i := strings.LastIndexByte(src, ':'); i >= 0 {
				src = src[:i]
			}
			if _, ok := nodes[src]; !ok {
				t.Errorf("node %q: input %q names no node", n.Name, in)
			}
		}
	}
	for _, f := range mg.GraphDef.GetLibrary().GetFunction() {
		for _, n := range f.NodeDef {
			used[n.Op] = true
		}
	}
	listed := map[string]bool{}
	var prev string
	for _, op := range mg.MetaInfoDef.StrippedOpList.Op {
		if op.Name <= prev {
			t.Errorf("stripped_op_list not sorted: %q after %q", op.Name, prev)
		}
		prev = op.Name
		listed[op.Name] = true
		if !used[op.Name] {
			t.Errorf("stripped_op_list lists unused op %s", op.Name)
		}
	}
	for op := range used {
		if !listed[op] {
			t.Errorf("op %s used but not in stripped_op_list", op)
		}
	}
	if o.FunctionCall && len(mg.GraphDef.GetLibrary().GetFunction()) == 0 {
		t.Error("FunctionCall model has no function library")
	}
	for key, sig := range mg.SignatureDef {
		if key == InitOpSignature {
			if !o.FunctionCall || nodes[sig.Outputs[key].GetName()] != "NoOp" {
				t.Errorf("init op signature %v", sig)
			}
			continue
		}
		if sig.MethodName != PredictMethod {
			t.Errorf("signature %s method %q", key, sig.MethodName)
		}
		for _, m := range []map[string]*protopb.TensorInfo{sig.Inputs, sig.Outputs} {
			for k, ti := range m {
				name := ti.GetName()
				i := strings.LastIndexByte(name, ':')
				if i < 0 {
					t.Errorf("signature %s %s: tensor name %q has no :index", key, k, name)
					continue
				}
				if _, ok := nodes[name[:i]]; !ok {
					t.Errorf("signature %s %s: tensor %q names no node", key, k, name)
				}
			}
		}
	}
	sd := mg.SaverDef
	_, hasIndex := files[VariablesIndex]
	if sd == nil {
		if hasIndex && !o.FunctionCall {
			t.Error("checkpoint written but no SaverDef")
		}
		if o.TracedSaver {
			t.Error("TracedSaver model without SaverDef")
		}
		return
	}
	byName := map[string]*nodepb.NodeDef{}
	for _, n := range mg.GraphDef.Node {
		byName[n.Name] = n
	}
	var names [][]byte
	var dtypes []typespb.DataType
	var assigns int
	if o.TracedSaver {
		if sd.FilenameTensorName != "saver_filename:0" || byName["saver_filename"].GetOp() != "Placeholder" {
			t.Errorf("SaverDef filename %q", sd.FilenameTensorName)
		}
		rc := byName[sd.RestoreOpName]
		if rc.GetOp() != "StatefulPartitionedCall" || rc.Input[0] != "saver_filename" {
			t.Fatalf("restore op %q: %v", sd.RestoreOpName, rc)
		}
		if sc := byName[strings.TrimSuffix(sd.SaveTensorName, ":0")]; sc.GetOp() != "StatefulPartitionedCall" {
			t.Errorf("save tensor %q: %v", sd.SaveTensorName, sc)
		}
		var fn *functionpb.FunctionDef
		for _, f := range mg.GraphDef.Library.Function {
			if f.Signature.Name == rc.Attr["f"].GetFunc().GetName() {
				fn = f
			}
		}
		if fn == nil {
			t.Fatalf("restore function %q missing", rc.Attr["f"].GetFunc().GetName())
		}
		for _, n := range fn.NodeDef {
			switch {
			case n.Name == "RestoreV2/tensor_names":
				names = n.Attr["value"].GetTensor().StringVal
			case n.Op == "RestoreV2":
				dtypes = n.Attr["dtypes"].GetList().GetType()
			case n.Op == "AssignVariableOp":
				assigns++
			}
		}
		if assigns != len(fn.ControlRet) {
			t.Errorf("%d assignments, %d control returns", assigns, len(fn.ControlRet))
		}
	} else {
		want := &protopb.SaverDef{FilenameTensorName: "save/Const:0", SaveTensorName: "save/Identity:0", RestoreOpName: "save/restore_all",
			MaxToKeep: 5, Sharded: true, KeepCheckpointEveryNHours: 10000, Version: protopb.SaverDef_V2}
		if !proto.Equal(sd, want) {
			t.Errorf("SaverDef %v, want %v", sd, want)
		}
		// The restore op reaches one RestoreV2 whose names and dtypes are
		// the checkpoint's entries.
		rv := byName["save/RestoreV2"]
		if rv.GetOp() != "RestoreV2" || rv.Input[0] != "save/Const" {
			t.Fatalf("save/RestoreV2: %v", rv)
		}
		names = byName["save/RestoreV2/tensor_names"].Attr["value"].GetTensor().StringVal
		dtypes = rv.Attr["dtypes"].GetList().GetType()
		assigns = len(byName["save/restore_shard"].Input)
	}
	_, _, entries := readBundle(t, files[VariablesIndex])
	byKey := map[string]*protopb.BundleEntryProto{}
	for _, e := range entries {
		byKey[e.key] = e.entry
	}
	if len(names) != len(dtypes) {
		t.Fatalf("%d names, %d dtypes", len(names), len(dtypes))
	}
	for i, n := range names {
		e := byKey[string(n)]
		if e == nil || e.Dtype != dtypes[i] {
			t.Errorf("restore %q (%s): checkpoint entry %v", n, dtypes[i], e)
		}
		delete(byKey, string(n))
	}
	delete(byKey, ObjectGraphKey)
	if len(byKey) != 0 {
		t.Errorf("checkpoint entries never restored: %v", byKey)
	}
	vars := len(names)
	for _, n := range names {
		if string(n) == ObjectGraphKey {
			vars--
		}
	}
	if assigns != vars {
		t.Errorf("restore assigns %d variables, checkpoint has %d", assigns, vars)
	}
}

func TestBuilderErrors(t *testing.T) {
	f32 := tensor.New("", []int64{2}, []float32{1, 2})
	cases := map[string]func(b *Builder){
		"unknown op":    func(b *Builder) { b.Op("NoSuchOp", nil, nil) },
		"no node":       func(b *Builder) { b.Op("Relu", []string{"missing:0"}, nil) },
		"bad index":     func(b *Builder) { b.Op("Relu", []string{b.Const("c", f32) + "x"}, nil) },
		"output range":  func(b *Builder) { b.Op("Relu", []string{nodeName(b.Const("c", f32)) + ":3"}, nil) },
		"type mismatch": func(b *Builder) { b.Op("AddV2", []string{b.Const("c", f32), ConstOf[int32](b, "i", nil, 1, 2)}, nil) },
		"arity":         func(b *Builder) { b.Op("MatMul", []string{b.Const("c", f32)}, nil) },
		"missing attr":  func(b *Builder) { b.Op("Placeholder", nil, nil) },
		"unknown attr":  func(b *Builder) { b.Op("Relu", []string{b.Const("c", f32)}, map[string]any{"bogus": 1}) },
		"bad attr type": func(b *Builder) { b.Op("Relu", []string{b.Const("c", f32)}, map[string]any{"T": struct{}{}}) },
		"duplicate":     func(b *Builder) { b.Const("c", f32); b.Const("c", f32) },
		"bad name":      func(b *Builder) { b.Const("a:b", f32) },
		"control":       func(b *Builder) { b.Op("NoOp", []string{"^missing"}, nil) },
		"ref needed":    func(b *Builder) { b.Op("Assign", []string{b.Const("c", f32), b.Const("d", f32)}, nil) },
		"bad tensor":    func(b *Builder) { b.Const("c", tensor.New("", []int64{3}, []float32{1})) },
		"bad variable":  func(b *Builder) { b.Variable("v", tensor.Tensor{Shape: []int64{1}, Data: []string{"x"}}) },
		"saver scope":   func(b *Builder) { b.Variable("save/v", f32) },
		"signature":     func(b *Builder) { b.Signature("s", map[string]string{"x": "nope:0"}, nil) },
		"signature dup": func(b *Builder) { b.Signature("s", nil, nil); b.Signature("s", nil, nil) },
		"placeholder":   func(b *Builder) { b.Placeholder("p", tensor.Invalid, nil) },
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			b := NewBuilder()
			build(b)
			if b.Err() == nil {
				t.Fatal("no error recorded")
			}
			if _, err := b.Files(); err == nil {
				t.Fatal("Files succeeded after an error")
			}
		})
	}
	b := NewBuilder()
	x := b.Placeholder("x", tensor.Float, []int64{-1})
	b.Signature(ServingSignature, map[string]string{"x": x}, map[string]string{"y": x})
	if _, err := b.Files(); err != nil {
		t.Fatal(err)
	}
	b.Op("Relu", []string{x}, nil)
	if b.Err() == nil {
		t.Error("adding a node after Files: no error")
	}
}

// TestOpInference checks that attrs the OpDef derives from inputs are filled
// in, and that the returned names follow TensorFlow's.
func TestOpInference(t *testing.T) {
	b := NewBuilder()
	x := b.Placeholder("x", tensor.Double, []int64{-1, 2})
	y := b.Placeholder("y", tensor.Double, []int64{-1, 3})
	axis := ConstOf[int64](b, "", []int64{}, 1)
	c := b.Op("ConcatV2", []string{x, y, axis}, nil)
	c2 := b.Op("ConcatV2", []string{x, x, x, axis}, nil)
	u := b.Op("Unpack", []string{c}, map[string]any{"num": 2, "axis": 0})
	if c != "ConcatV2:0" || c2 != "ConcatV2_1:0" || axis != "Const:0" || u != "Unpack:0" {
		t.Errorf("names %q %q %q %q", c, c2, axis, u)
	}
	n := b.byName["ConcatV2_1"].def
	if n.Attr["N"].GetI() != 3 || n.Attr["T"].GetType() != dtDouble || n.Attr["Tidx"].GetType() != dtInt64 {
		t.Errorf("inferred attrs %v", n.Attr)
	}
	if got := b.tensorShape(c); fmt.Sprint(got) != "[-1 5]" {
		t.Errorf("concat shape %v", got)
	}
	if _, err := b.tensorDType(Output("Unpack", 1)); err != nil {
		t.Errorf("Unpack:1: %v", err)
	}
	if _, err := b.tensorDType(Output("Unpack", 2)); err == nil {
		t.Error("Unpack:2 exists")
	}
	if name, idx, err := outputArg(b.byName["Unpack"], 1); err != nil || name != "output" || idx != 1 {
		t.Errorf("outputArg = %q %d %v", name, idx, err)
	}
	if got := b.byName["Unpack"].def.Attr["T"].GetType(); got != dtDouble {
		t.Errorf("Unpack T = %s", got)
	}
}

func BenchmarkMLPFiles(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := MLP(Options{FunctionCall: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPCTRFiles(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := PCTRModel(Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPlaceholderWithDefault(t *testing.T) {
	for _, o := range allOptions {
		t.Run(optName(o), func(t *testing.T) {
			b := NewBuilderWith(o)
			x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, 2})
			s := b.PlaceholderWithDefault("serving_default_scale", tensor.New("", []int64{}, []float32{3}), []int64{})
			y := b.OpNamed("y", "Mul", []string{x, s}, nil)
			b.Signature(ServingSignature, map[string]string{"x": x, "scale": s}, map[string]string{"y": y})
			files, err := b.Files()
			if err != nil {
				t.Fatal(err)
			}
			m := loadEval(t, files)
			out := m.predict(ServingSignature, map[string]*tval{"x": floats(dtFloat, []int64{1, 2}, 1, -2)})
			checkFloats(t, "y (default)", out["y"], []int64{1, 2}, []float64{3, -6})
			out = m.predict(ServingSignature, map[string]*tval{"x": floats(dtFloat, []int64{1, 2}, 1, -2), "scale": floats(dtFloat, []int64{}, 0.5)})
			checkFloats(t, "y (fed)", out["y"], []int64{1, 2}, []float64{0.5, -1})
			checkShapeProto(t, "scale", m.meta.SignatureDef[ServingSignature].Inputs["scale"], nil)
			checkStructure(t, files, o)
		})
	}
}

// TestSeveralSignatures shares nodes between two signatures and passes a
// placeholder straight through, in every layout.
func TestSeveralSignatures(t *testing.T) {
	for _, o := range allOptions {
		t.Run(optName(o), func(t *testing.T) {
			b := NewBuilderWith(o)
			x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1})
			w := b.Variable("w", tensor.New("", []int64{}, []float32{4}))
			wx := b.Op("Mul", []string{x, w.Value}, nil)
			b.Signature(ServingSignature, map[string]string{"x": x}, map[string]string{"wx": wx, "same": x})
			b.SignatureWithMethod("plus_one", "tensorflow/serving/regress", map[string]string{"x": x},
				map[string]string{"out": b.Op("AddV2", []string{wx, ConstOf[float32](b, "one", []int64{}, 1)}, nil)})
			files, err := b.Files()
			if err != nil {
				t.Fatal(err)
			}
			m := loadEval(t, files)
			in := map[string]*tval{"x": floats(dtFloat, []int64{2}, 1, -2)}
			out := m.predict(ServingSignature, in)
			checkFloats(t, "wx", out["wx"], []int64{2}, []float64{4, -8})
			checkFloats(t, "same", out["same"], []int64{2}, []float64{1, -2})
			out = m.predict("plus_one", in)
			checkFloats(t, "out", out["out"], []int64{2}, []float64{5, -7})
			if got := m.meta.SignatureDef["plus_one"].MethodName; got != "tensorflow/serving/regress" {
				t.Errorf("method %q", got)
			}
			if len(m.meta.SignatureDef) != 2+btoi(o.FunctionCall) {
				t.Errorf("%d signatures", len(m.meta.SignatureDef))
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
