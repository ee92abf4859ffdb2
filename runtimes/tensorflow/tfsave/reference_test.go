package tfsave

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opdefpb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	protopb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/tensor"
)

// These tests compare the structure of what tfsave writes with SavedModels
// that real TensorFlow wrote (read in place; skipped when
// INFERBID_REFERENCE_MODELS is unset).

// refDir is the directory of the reference SavedModel rel under
// testhelp.ReferenceModels; a model missing from a configured directory
// fails the test.
func refDir(t *testing.T, rel string) string {
	t.Helper()
	d := filepath.Join(testhelp.ReferenceModels(t), rel)
	if _, err := os.Stat(filepath.Join(d, SavedModelFile)); err != nil {
		t.Fatalf("reference model %s: %v", rel, err)
	}
	return d
}

func readDirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestOpDefsMatchTensorFlow compares each op declared in opdefs.go with the
// OpDef TensorFlow recorded in the reference models' stripped_op_list:
// argument names, types and attrs, attribute names, kinds, minimums and
// defaults, and flags (allowed_values are not declared here).
func TestOpDefsMatchTensorFlow(t *testing.T) {
	compared := map[string]bool{}
	for _, dir := range referenceModelDirs(t) {
		sm := readSavedModel(t, dir)
		mg := sm.MetaGraphs[0]
		tfVersion := mg.MetaInfoDef.TensorflowVersion
		for _, ref := range mg.MetaInfoDef.StrippedOpList.Op {
			mine, err := lookupOpDef(ref.Name)
			if err != nil {
				continue
			}
			compared[ref.Name] = true
			for _, diff := range opDefDiff(mine, ref) {
				if newerThanTF1[ref.Name+": "+diff] && strings.HasPrefix(tfVersion, "1.") {
					continue
				}
				t.Errorf("%s (TF %s, %s): %s", ref.Name, tfVersion, filepath.Base(dir), diff)
			}
		}
	}
	t.Logf("compared %d ops with TensorFlow's: %v", len(compared), sortedKeys(compared))
	if len(compared) < 10 {
		t.Errorf("only %d ops compared", len(compared))
	}
}

// newerThanTF1 are the differences between the TF 2.13 op definitions
// declared here and TF 1.14's, where TF changed the op since.
var newerThanTF1 = map[string]bool{
	"MergeV2Checkpoints: attr allow_missing_files not in TF's":                          true,
	"StringJoin: attr N: int min true/0 default <nil>; TF int min true/1 default <nil>": true,
}

func opDefDiff(mine, ref *opdefpb.OpDef) []string {
	var diffs []string
	argDiff := func(kind string, a, b []*opdefpb.OpDef_ArgDef) {
		if len(a) != len(b) {
			diffs = append(diffs, fmt.Sprintf("%d %s args, TF has %d", len(a), kind, len(b)))
			return
		}
		for i := range a {
			x, y := a[i], b[i]
			if x.Name != y.Name || x.Type != y.Type || x.TypeAttr != y.TypeAttr || x.NumberAttr != y.NumberAttr || x.TypeListAttr != y.TypeListAttr || x.IsRef != y.IsRef {
				diffs = append(diffs, fmt.Sprintf("%s arg %d: %v, TF %v", kind, i, argString(x), argString(y)))
			}
		}
	}
	argDiff("input", mine.InputArg, ref.InputArg)
	argDiff("output", mine.OutputArg, ref.OutputArg)
	refAttrs := map[string]*opdefpb.OpDef_AttrDef{}
	for _, a := range ref.Attr {
		refAttrs[a.Name] = a
	}
	mineAttrs := map[string]bool{}
	for _, a := range mine.Attr {
		mineAttrs[a.Name] = true
		r := refAttrs[a.Name]
		if r == nil {
			diffs = append(diffs, fmt.Sprintf("attr %s not in TF's", a.Name))
			continue
		}
		if a.Type != r.Type || a.HasMinimum != r.HasMinimum || a.Minimum != r.Minimum || !proto.Equal(a.DefaultValue, r.DefaultValue) {
			diffs = append(diffs, fmt.Sprintf("attr %s: %s min %v/%d default %v; TF %s min %v/%d default %v",
				a.Name, a.Type, a.HasMinimum, a.Minimum, a.DefaultValue, r.Type, r.HasMinimum, r.Minimum, r.DefaultValue))
		}
	}
	for _, r := range ref.Attr {
		if !mineAttrs[r.Name] {
			diffs = append(diffs, fmt.Sprintf("TF attr %s missing", r.Name))
		}
	}
	if mine.IsStateful != ref.IsStateful || mine.IsCommutative != ref.IsCommutative || mine.AllowsUninitializedInput != ref.AllowsUninitializedInput {
		diffs = append(diffs, fmt.Sprintf("flags stateful/commutative/uninit %v/%v/%v, TF %v/%v/%v",
			mine.IsStateful, mine.IsCommutative, mine.AllowsUninitializedInput, ref.IsStateful, ref.IsCommutative, ref.AllowsUninitializedInput))
	}
	return diffs
}

func argString(a *opdefpb.OpDef_ArgDef) string {
	return fmt.Sprintf("{%s type=%s attr=%s n=%s list=%s ref=%v}", a.Name, a.Type, a.TypeAttr, a.NumberAttr, a.TypeListAttr, a.IsRef)
}

// TestTF1SaverMatchesHalfPlusTwo builds a TF1-style model with the same
// variables as TensorFlow Serving's half_plus_two (TensorFlow 1.14) and
// requires the same SaverDef and, node by node, the same variable, init,
// save and restore nodes: names, ops, inputs and attributes.
func TestTF1SaverMatchesHalfPlusTwo(t *testing.T) {
	dir := refDir(t, "tensorflow-serving/half_plus_two")
	ref := readSavedModel(t, dir).MetaGraphs[0]
	b := NewBuilderWith(Options{Variables: RefVariables})
	for _, name := range []string{"a", "a2", "b", "c", "c2"} {
		b.Variable(name, tensor.New("", []int64{}, []float32{1}))
	}
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	mine := savedModelOf(t, files).MetaGraphs[0]
	if !proto.Equal(mine.SaverDef, ref.SaverDef) {
		t.Errorf("SaverDef\n tfsave %v\n TF     %v", mine.SaverDef, ref.SaverDef)
	}
	mineNodes := map[string]*nodepb.NodeDef{}
	for _, n := range mine.GraphDef.Node {
		mineNodes[n.Name] = n
	}
	compared := 0
	for _, rn := range ref.GraphDef.Node {
		inScope := strings.HasPrefix(rn.Name, "save/") || rn.Name == "init"
		for _, v := range []string{"a", "a2", "b", "c", "c2"} {
			inScope = inScope || rn.Name == v || strings.HasPrefix(rn.Name, v+"/")
		}
		if !inScope {
			continue
		}
		mn := mineNodes[rn.Name]
		if mn == nil {
			t.Errorf("TF node %s (%s) missing", rn.Name, rn.Op)
			continue
		}
		compared++
		if mn.Op != rn.Op || fmt.Sprint(mn.Input) != fmt.Sprint(rn.Input) {
			t.Errorf("node %s: %s %v, TF %s %v", rn.Name, mn.Op, mn.Input, rn.Op, rn.Input)
		}
		for k, rv := range rn.Attr {
			if strings.HasPrefix(k, "_") {
				continue // _output_shapes, _class: annotations
			}
			mv, ok := mn.Attr[k]
			switch {
			case !ok:
				t.Errorf("node %s: attr %s missing", rn.Name, k)
			case k == "value" && (rn.Name == "save/StringJoin/inputs_1" || strings.HasSuffix(rn.Name, "/initial_value")):
				// a random temp name in TF; initial values differ by design
			case !proto.Equal(mv, rv):
				t.Errorf("node %s attr %s: %v, TF %v", rn.Name, k, mv, rv)
			}
		}
		for k := range mn.Attr {
			if rn.Op == "MergeV2Checkpoints" && k == "allow_missing_files" {
				continue // added after TF 1.14
			}
			if _, ok := rn.Attr[k]; !ok {
				t.Errorf("node %s: attr %s not in TF's", rn.Name, k)
			}
		}
	}
	for name := range mineNodes {
		found := false
		for _, rn := range ref.GraphDef.Node {
			found = found || rn.Name == name
		}
		if !found {
			t.Errorf("node %s is not in TF's graph", name)
		}
	}
	if compared < 40 {
		t.Errorf("only %d nodes compared", compared)
	}
	// Same collections for the variables.
	for _, c := range []string{"variables", "trainable_variables"} {
		if mine.CollectionDef[c] == nil || ref.CollectionDef[c] == nil {
			t.Errorf("collection %s: tfsave %v TF %v", c, mine.CollectionDef[c] != nil, ref.CollectionDef[c] != nil)
		}
	}
	// Same file layout.
	refFiles := readDirFiles(t, dir)
	for p := range files {
		if _, ok := refFiles[p]; !ok {
			t.Errorf("tfsave writes %s, TF did not", p)
		}
	}
}

// TestTF2LayoutMatchesStateful builds the counter model as a TF2 export and
// compares it with the stateful reference model TensorFlow 2.13 wrote.
func TestTF2LayoutMatchesStateful(t *testing.T) {
	dir := refDir(t, "bidding-auction-servers/tensorflow/stateful")
	ref := readSavedModel(t, dir).MetaGraphs[0]
	refFiles := readDirFiles(t, dir)
	files, err := CounterModel(Options{FunctionCall: true, TracedSaver: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	mine := savedModelOf(t, files).MetaGraphs[0]

	// File layout.
	if a, b := sortedKeys(files), sortedKeys(refFiles); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("files %v, TF %v", a, b)
	}
	// Signatures: same keys, tensor names, dtypes and shapes.
	if a, b := sortedKeys(mine.SignatureDef), sortedKeys(ref.SignatureDef); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("signatures %v, TF %v", a, b)
	}
	for key, rs := range ref.SignatureDef {
		ms := mine.SignatureDef[key]
		if ms == nil {
			continue
		}
		if !proto.Equal(ms, rs) {
			t.Errorf("signature %s\n tfsave %v\n TF     %v", key, ms, rs)
		}
	}
	// The SaverDef: TF2's traced save and restore calls.
	if !proto.Equal(mine.SaverDef, ref.SaverDef) {
		t.Errorf("SaverDef\n tfsave %v\n TF     %v", mine.SaverDef, ref.SaverDef)
	}
	// The main graph: the same ops in the same order (variable names are
	// the model's own), and the three calls with the same argument types.
	opsOf := func(g *protopb.MetaGraphDef) []string {
		var ops []string
		for _, n := range g.GraphDef.Node {
			ops = append(ops, n.Op)
		}
		return ops
	}
	if a, b := fmt.Sprint(opsOf(mine)), fmt.Sprint(opsOf(ref)); a != b {
		t.Errorf("main graph ops\n tfsave %s\n TF     %s", a, b)
	}
	nodeOf := func(g *protopb.MetaGraphDef, name string) *nodepb.NodeDef {
		for _, n := range g.GraphDef.Node {
			if n.Name == name {
				return n
			}
		}
		return nil
	}
	for _, call := range []string{"StatefulPartitionedCall", "StatefulPartitionedCall_1", "StatefulPartitionedCall_2"} {
		mc, rc := nodeOf(mine, call), nodeOf(ref, call)
		if mc == nil || rc == nil {
			t.Errorf("%s: tfsave %v, TF %v", call, mc != nil, rc != nil)
			continue
		}
		for _, k := range []string{"Tin", "Tout"} {
			if !proto.Equal(mc.Attr[k], rc.Attr[k]) {
				t.Errorf("%s %s: %v, TF %v", call, k, mc.Attr[k], rc.Attr[k])
			}
		}
	}
	// The restore functions restore the same checkpoint keys.
	restoreNames := func(g *protopb.MetaGraphDef) string {
		fn := nodeOf(g, g.SaverDef.RestoreOpName).Attr["f"].GetFunc().GetName()
		for _, f := range g.GraphDef.Library.Function {
			if f.Signature.Name != fn {
				continue
			}
			for _, n := range f.NodeDef {
				if n.Name == "RestoreV2/tensor_names" {
					return fmt.Sprintf("%q", n.Attr["value"].GetTensor().StringVal)
				}
			}
		}
		return "none"
	}
	if a, b := restoreNames(mine), restoreNames(ref); a != b {
		t.Errorf("restore tensor_names %s, TF %s", a, b)
	}
	mc := nodeOf(mine, "StatefulPartitionedCall")
	// The function called from the main graph, and what it calls, are in
	// the library with matching signatures.
	mineFns := map[string]bool{}
	for _, f := range mine.GraphDef.Library.Function {
		mineFns[f.Signature.Name] = true
	}
	if !mineFns[mc.Attr["f"].GetFunc().GetName()] {
		t.Errorf("call target %q not in the library", mc.Attr["f"].GetFunc().GetName())
	}
	// Checkpoint: identical header bytes, same keys, dtypes and shapes.
	_, mh, me := readBundle(t, files[VariablesIndex])
	_, rh, re := readBundle(t, refFiles[VariablesIndex])
	if !bytes.Equal(mh, rh) {
		t.Errorf("bundle header %x, TF %x", mh, rh)
	}
	if len(me) != len(re) {
		t.Fatalf("%d checkpoint entries, TF %d", len(me), len(re))
	}
	for i := range re {
		m, r := me[i], re[i]
		if m.key != r.key || m.entry.Dtype != r.entry.Dtype || !proto.Equal(m.entry.Shape, r.entry.Shape) || m.entry.ShardId != r.entry.ShardId {
			t.Errorf("entry %d: %q %s %v, TF %q %s %v", i, m.key, m.entry.Dtype, m.entry.Shape, r.key, r.entry.Dtype, r.entry.Shape)
		}
		// Same encoding: the same fields in the same order.
		if fieldTags(m.raw) != fieldTags(r.raw) {
			t.Errorf("entry %q encodes fields %s, TF %s", m.key, fieldTags(m.raw), fieldTags(r.raw))
		}
	}
	// The object graph names the variable's checkpoint key in both.
	for name, f := range map[string]map[string][]byte{"tfsave": files, "TF": refFiles} {
		og := objectGraphOf(t, f)
		found := false
		for _, n := range og.Nodes {
			for _, a := range n.Attributes {
				found = found || a.CheckpointKey == "counter/.ATTRIBUTES/VARIABLE_VALUE"
			}
		}
		if !found {
			t.Errorf("%s object graph does not name counter/.ATTRIBUTES/VARIABLE_VALUE", name)
		}
	}
	// Same shape of graph versions.
	if mine.GraphDef.Versions.Producer != ref.GraphDef.Versions.Producer || mine.GraphDef.Versions.MinConsumer != ref.GraphDef.Versions.MinConsumer {
		t.Errorf("versions %v, TF %v", mine.GraphDef.Versions, ref.GraphDef.Versions)
	}
}

// fieldTags lists the protobuf field numbers of a message, in order.
func fieldTags(b []byte) string {
	var tags []string
	for len(b) > 0 {
		key, n := uvarint(b)
		b = b[n:]
		tags = append(tags, fmt.Sprint(key>>3))
		switch key & 7 {
		case 0:
			_, n = uvarint(b)
			b = b[n:]
		case 1:
			b = b[8:]
		case 2:
			l, n := uvarint(b)
			b = b[n+int(l):]
		case 5:
			b = b[4:]
		default:
			return "bad wire type"
		}
	}
	return strings.Join(tags, ",")
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i, c := range b {
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, len(b)
}

func objectGraphOf(t *testing.T, files map[string][]byte) *protopb.TrackableObjectGraph {
	t.Helper()
	_, _, entries := readBundle(t, files[VariablesIndex])
	for _, e := range entries {
		if e.key != ObjectGraphKey {
			continue
		}
		if e.entry.Dtype != typespb.DataType_DT_STRING || len(e.entry.Shape.GetDim()) != 0 {
			t.Fatalf("object graph entry %v", e.entry)
		}
		_, strs := entryCRC(t, e.key, e.entry, files[VariablesData])
		var og protopb.TrackableObjectGraph
		if err := proto.Unmarshal([]byte(strs[0]), &og); err != nil {
			t.Fatal(err)
		}
		return &og
	}
	t.Fatal("no object graph in checkpoint")
	return nil
}

// TestFileLayoutMatchesReferences checks that every model with variables
// has the file set TensorFlow writes (saved_model.pb plus the single-shard
// checkpoint) and the bundle header TensorFlow writes.
func TestFileLayoutMatchesReferences(t *testing.T) {
	dirs := referenceModelDirs(t)
	files, err := PCTRModel(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, mineHeader, _ := readBundle(t, files[VariablesIndex])
	for _, dir := range dirs {
		refFiles := readDirFiles(t, dir)
		var refNames []string
		for p := range refFiles {
			if !strings.HasPrefix(p, "assets/") {
				refNames = append(refNames, p)
			}
		}
		sort.Strings(refNames)
		if a, b := fmt.Sprint(sortedKeys(files)), fmt.Sprint(refNames); a != b {
			t.Errorf("%s: files %s, TF %s", filepath.Base(dir), a, b)
		}
		_, rh, _ := readBundle(t, refFiles[VariablesIndex])
		if !bytes.Equal(mineHeader, rh) {
			t.Errorf("%s: bundle header %x, TF %x", filepath.Base(dir), mineHeader, rh)
		}
	}
}
