package tensorflow

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// The oracle: TensorFlow.js 4.22.0 (the TensorFlow team's JavaScript
// implementation, CPU backend; scripts/install-tfjs.sh puts it in
// .cache/tfjs), run by node on testdata/tfjs_oracle.js. A graph test builds
// a SavedModel with tfsave, runs it on this runtime, and runs the same
// GraphDef as a tfjs graph model, written as tfjs-converter writes one
// (model.json whose modelTopology is the frozen GraphDef in protobuf's
// JSON form, every Const's value moved into weightsManifest and a weight
// shard), through GraphModel.executeAsync. A layers test builds the Keras
// layers with tfjs-layers and the same weights.

// tfjsVersion is the version scripts/install-tfjs.sh pins; the op-coverage
// table in doc.go names it.
const tfjsVersion = "4.22.0"

// tfjsSkipTag starts the message of a test skipped for want of the oracle.
const tfjsSkipTag = "TensorFlow.js oracle not installed"

// tfjsOracle returns the node binary, the NODE_PATH and the script, or
// skips the test (fails it under INFERBID_REQUIRE_REFERENCE=1, as CI sets)
// when node or .cache/tfjs is missing.
func tfjsOracle(t testing.TB) (node, nodePath, script string) {
	t.Helper()
	root := testhelp.ModuleRoot(t)
	nodePath = filepath.Join(root, ".cache", "tfjs", "node_modules")
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not on PATH"
	default:
		for _, pkg := range []string{"tfjs-core", "tfjs-backend-cpu", "tfjs-converter", "tfjs-layers"} {
			raw, err := os.ReadFile(filepath.Join(nodePath, "@tensorflow", pkg, "package.json"))
			var meta struct{ Version string }
			if err == nil {
				err = json.Unmarshal(raw, &meta)
			}
			if err != nil || meta.Version != tfjsVersion {
				missing = fmt.Sprintf("@tensorflow/%s@%s is not in %s", pkg, tfjsVersion, nodePath)
				break
			}
		}
	}
	if missing != "" {
		msg := fmt.Sprintf("%s: %s; run make deps-tfjs (scripts/install-tfjs.sh) to compare this runtime with TensorFlow.js", tfjsSkipTag, missing)
		if os.Getenv(testhelp.EnvRequireReference) == "1" {
			t.Fatalf("%s=1: %s", testhelp.EnvRequireReference, msg)
		}
		t.Skip(msg)
	}
	return node, nodePath, filepath.Join(root, "runtimes", "tensorflow", "testdata", "tfjs_oracle.js")
}

// jsTensor is a tensor as tfjs_oracle.js reads and writes it.
type jsTensor struct {
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Data  []any   `json:"data"`
}

func jsNumber(v float64) any {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	return v
}

// toJS converts a float32, int32 or bool tensor (the dtypes tfjs computes
// in; int64 is narrowed to int32 as tfjs-converter does).
func toJS(t testing.TB, x tensor.Tensor) jsTensor {
	t.Helper()
	out := jsTensor{Shape: append([]int64{}, x.Shape...)}
	switch d := x.Data.(type) {
	case []float32:
		out.DType = "float32"
		for _, v := range d {
			out.Data = append(out.Data, jsNumber(float64(v)))
		}
	case []int32:
		out.DType = "int32"
		for _, v := range d {
			out.Data = append(out.Data, v)
		}
	case []int64:
		out.DType = "int32"
		for _, v := range d {
			out.Data = append(out.Data, v)
		}
	case []bool:
		out.DType = "bool"
		for _, v := range d {
			out.Data = append(out.Data, v)
		}
	default:
		t.Fatalf("tfjs oracle: dtype %s has no tfjs counterpart", x.DType())
	}
	if out.Data == nil {
		out.Data = []any{}
	}
	return out
}

// fromJS converts an answer of tfjs_oracle.js to a tensor.
func fromJS(t testing.TB, x jsTensor) tensor.Tensor {
	t.Helper()
	num := func(v any) float64 {
		switch v := v.(type) {
		case float64:
			return v
		case string:
			switch v {
			case "NaN":
				return math.NaN()
			case "Infinity":
				return math.Inf(1)
			case "-Infinity":
				return math.Inf(-1)
			}
		case bool:
			if v {
				return 1
			}
			return 0
		}
		t.Fatalf("tfjs oracle: bad number %v", v)
		return 0
	}
	switch x.DType {
	case "float32":
		d := make([]float32, len(x.Data))
		for i, v := range x.Data {
			d[i] = float32(num(v))
		}
		return tensor.New("", x.Shape, d)
	case "int32", "bool":
		d := make([]int32, len(x.Data))
		for i, v := range x.Data {
			d[i] = int32(num(v))
		}
		return tensor.New("", x.Shape, d)
	}
	t.Fatalf("tfjs oracle: answer of dtype %q", x.DType)
	return tensor.Tensor{}
}

// runTFJS writes req to a file in dir and runs the oracle script on it.
func runTFJS(t testing.TB, dir string, req map[string]any) []tensor.Tensor {
	t.Helper()
	node, nodePath, script := tfjsOracle(t)
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	reqPath := filepath.Join(dir, "request.json")
	if err := os.WriteFile(reqPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// A hang guard only: a run takes about a second.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, reqPath)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tfjs oracle: %v\n%s", err, stderr.String())
	}
	var ans struct{ Outputs []jsTensor }
	if err := json.Unmarshal(stdout.Bytes(), &ans); err != nil {
		t.Fatalf("tfjs oracle: answer %q: %v", stdout.String(), err)
	}
	outs := make([]tensor.Tensor, len(ans.Outputs))
	for i, o := range ans.Outputs {
		outs[i] = fromJS(t, o)
	}
	return outs
}

// nodeOf is the node name of a tensor name "node:i" (or "^node").
func nodeOf(name string) string {
	name = strings.TrimPrefix(name, "^")
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		return name[:i]
	}
	return name
}

// writeTFJSGraphModel writes g, pruned to what outputs need, as a tfjs
// graph model in dir the way tfjs-converter does: every main-graph Const's
// value goes into the weights (float32, int32 (int64 narrowed), bool), the
// node keeps its name, op and dtype.
func writeTFJSGraphModel(t testing.TB, dir string, g *gpb.GraphDef, outputs []string) {
	t.Helper()
	byName := map[string]*ndpb.NodeDef{}
	for _, n := range g.Node {
		byName[n.Name] = n
	}
	keep := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if keep[name] {
			return
		}
		n, ok := byName[name]
		if !ok {
			t.Fatalf("tfjs model: no node %q", name)
		}
		keep[name] = true
		for _, in := range n.Input {
			visit(nodeOf(in))
		}
	}
	for _, o := range outputs {
		visit(nodeOf(o))
	}
	pruned := &gpb.GraphDef{Versions: g.Versions, Library: g.Library}
	type weightSpec struct {
		Name  string  `json:"name"`
		Shape []int64 `json:"shape"`
		DType string  `json:"dtype"`
	}
	specs := []weightSpec{}
	var data bytes.Buffer
	addWeight := func(n *ndpb.NodeDef) {
		v, err := decodeTensorProto(n.Attr["value"].GetTensor())
		if err != nil {
			t.Fatalf("tfjs model: const %s: %v", n.Name, err)
		}
		spec := weightSpec{Name: n.Name, Shape: append([]int64{}, v.shape...)}
		switch v.dt {
		case dtFloat:
			spec.DType = "float32"
			err = binary.Write(&data, binary.LittleEndian, v.f32)
		case dtInt32:
			spec.DType = "int32"
			err = binary.Write(&data, binary.LittleEndian, v.i32)
		case dtInt64:
			spec.DType = "int32"
			for _, x := range v.i64 {
				if x != int64(int32(x)) {
					t.Fatalf("tfjs model: const %s: int64 %d does not fit tfjs's int32", n.Name, x)
				}
				err = binary.Write(&data, binary.LittleEndian, int32(x))
			}
		case dtBool:
			spec.DType = "bool"
			err = binary.Write(&data, binary.LittleEndian, v.b)
		default:
			t.Fatalf("tfjs model: const %s of dtype %s has no tfjs weight dtype", n.Name, dtypeName(v.dt))
		}
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
		delete(n.Attr, "value")
	}
	for _, n := range g.Node {
		if !keep[n.Name] {
			continue
		}
		n = proto.Clone(n).(*ndpb.NodeDef)
		pruned.Node = append(pruned.Node, n)
		if n.Op == "Const" {
			addWeight(n)
		}
	}
	// Constants inside library functions (While bodies, If branches) are
	// weights too: tfjs's function executors look them up by node name.
	if pruned.Library != nil {
		pruned.Library = proto.Clone(pruned.Library).(*fpb.FunctionDefLibrary)
		for _, f := range pruned.Library.Function {
			for _, n := range f.NodeDef {
				if n.Op != "Const" {
					continue
				}
				if keep[n.Name] {
					t.Fatalf("tfjs model: const %s of function %s has a main-graph node's name (tfjs keys weights by node name)", n.Name, f.Signature.GetName())
				}
				keep[n.Name] = true
				addWeight(n)
			}
		}
	}
	topo, err := protojson.Marshal(pruned)
	if err != nil {
		t.Fatal(err)
	}
	const shard = "group1-shard1of1.bin"
	model := map[string]any{
		"format":          "graph-model",
		"generatedBy":     "inferbid oracle_test.go",
		"convertedBy":     "inferbid oracle_test.go",
		"modelTopology":   json.RawMessage(topo),
		"weightsManifest": []any{map[string]any{"paths": []string{shard}, "weights": specs}},
	}
	raw, err := json.MarshalIndent(model, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shard), data.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tfjsGraph runs the serving graph of files on tfjs-converter: feed maps
// tensor names ("x:0") to values, and the answer follows outputs.
func tfjsGraph(t testing.TB, files driver.Files, feed map[string]tensor.Tensor, outputs []string) []tensor.Tensor {
	t.Helper()
	tfjsOracle(t)
	sm := &cpb.SavedModel{}
	if err := proto.Unmarshal(files["saved_model.pb"], sm); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTFJSGraphModel(t, dir, sm.MetaGraphs[0].GraphDef, outputs)
	inputs := map[string]jsTensor{}
	for name, v := range feed {
		inputs[nodeOf(name)] = toJS(t, v)
	}
	return runTFJS(t, dir, map[string]any{"mode": "graph", "model": dir, "inputs": inputs, "outputs": outputs})
}

// oracleCase is a graph whose outputs this runtime and tfjs must agree on.
type oracleCase struct {
	name  string
	build func(b *tfsave.Builder) (ins, outs map[string]string)
	feed  map[string]tensor.Tensor // by signature key
	// tol is the relative float tolerance; 0 means 1e-6 (a few float32
	// ulps). Ints, bools and shapes are compared exactly.
	tol float64
	// atol, when set, also accepts an absolute difference up to it: for
	// sums whose terms cancel (convolutions, pooling), where float32
	// accumulation in another order (tfjs's, TensorFlow's and ours all
	// differ) moves a near-zero result by n*max|term|*2^-24 or so.
	atol float64
}

// checkOracle runs oc on this runtime and on tfjs and compares.
func checkOracle(t *testing.T, oc oracleCase) {
	t.Helper()
	b := tfsave.NewBuilder()
	ins, outs := oc.build(b)
	b.Signature(tfsave.ServingSignature, ins, outs)
	files, err := b.Files()
	if err != nil {
		t.Fatalf("tfsave: %v", err)
	}
	m := loadFiles(t, files, driver.Config{})
	var feed []tensor.Tensor
	jsFeed := map[string]tensor.Tensor{}
	for key, v := range oc.feed {
		feed = append(feed, named(key, v))
		jsFeed[ins[key]] = v
	}
	got, err := m.Predict(context.Background(), feed)
	if err != nil {
		t.Fatalf("this runtime: %v", err)
	}
	var keys, names []string
	for _, spec := range m.Signature().Outputs {
		keys = append(keys, spec.Aliases[0])
		names = append(names, outs[spec.Aliases[0]])
	}
	want := tfjsGraph(t, files, jsFeed, names)
	for i, key := range keys {
		compareOracle(t, key, got[i], want[i], oc.tol, oc.atol)
	}
}

// compareOracle compares this runtime's answer with tfjs's: shapes and
// integers exactly (int64 and bool answers as tfjs's int32), floats within
// tol relative (1e-6 when 0) or atol absolute, NaN only with NaN.
func compareOracle(t testing.TB, what string, got, want tensor.Tensor, tol, atol float64) {
	t.Helper()
	if tol == 0 {
		tol = 1e-6
	}
	if len(got.Shape) != len(want.Shape) || (len(got.Shape) > 0 && !reflect.DeepEqual(got.Shape, want.Shape)) {
		t.Errorf("%s: shape %v, TensorFlow.js %v", what, got.Shape, want.Shape)
		return
	}
	switch g := got.Data.(type) {
	case []float32:
		w, ok := want.Data.([]float32)
		if !ok {
			t.Errorf("%s: dtype float32, TensorFlow.js %s", what, want.DType())
			return
		}
		bad := 0
		for i := range g {
			p, q := float64(g[i]), float64(w[i])
			same := p == q || (math.IsNaN(p) && math.IsNaN(q)) || math.Abs(p-q) <= max(tol*math.Abs(q), atol)
			if !same && bad < 5 {
				t.Errorf("%s[%d]: %v, TensorFlow.js %v", what, i, g[i], w[i])
			}
			if !same {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d elements differ (tolerance %g relative, %g absolute)", what, bad, len(g), tol, atol)
		}
	case []int32, []int64:
		w, ok := want.Data.([]int32)
		if !ok {
			t.Errorf("%s: dtype %s, TensorFlow.js %s", what, got.DType(), want.DType())
			return
		}
		gv := reflect.ValueOf(g)
		for i := range w {
			if gv.Index(i).Int() != int64(w[i]) {
				t.Errorf("%s: %v, TensorFlow.js %v", what, g, w)
				return
			}
		}
	default:
		t.Errorf("%s: dtype %s not compared", what, got.DType())
	}
}

// jsLayer is one tfjs-layers layer: tf.layers[fn](config), then setWeights.
type jsLayer struct {
	Fn      string         `json:"fn"`
	Config  map[string]any `json:"config"`
	Weights []jsTensor     `json:"weights,omitempty"`
}

// tfjsLayers runs x through a tf.sequential of layers on tfjs-layers.
func tfjsLayers(t testing.TB, layers []jsLayer, x tensor.Tensor) tensor.Tensor {
	t.Helper()
	tfjsOracle(t)
	return runTFJS(t, t.TempDir(), map[string]any{"mode": "layers", "layers": layers, "inputs": map[string]jsTensor{"x": toJS(t, x)}})[0]
}
