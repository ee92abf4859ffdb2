package tfsave

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	functionpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	graphpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opdefpb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	variablepb "github.com/wamuir/graft/tensorflow/core/framework/variable_go_proto"
	versionspb "github.com/wamuir/graft/tensorflow/core/framework/versions_go_proto"
	protopb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// File names of a SavedModel directory.
const (
	SavedModelFile   = "saved_model.pb"
	VariablesIndex   = "variables/variables.index"
	VariablesData    = "variables/variables.data-00000-of-00001"
	ObjectGraphKey   = "_CHECKPOINTABLE_OBJECT_GRAPH"
	SaverFilename    = "save/Const:0"
	SaverRestoreOp   = "save/restore_all"
	SaverSaveTensor  = "save/Identity:0"
	ServeTag         = "serve"
	InitOpSignature  = "__saved_model_init_op"
	graphProducer    = 1482 // the GraphDef version of TensorFlow 2.13, whose layout this mirrors
	graphMinConsumer = 12
)

// Files writes the SavedModel: "saved_model.pb" and, when the graph has
// variables (or Options.FunctionCall is set: TF2 always checkpoints its
// object graph), "variables/variables.index" and
// "variables/variables.data-00000-of-00001". A graph-mode saver (as TF1's
// tf.compat.v1.train.Saver(sharded=True) builds it) restores the variables,
// or TF2's traced restore function with Options.TracedSaver. After Files
// the builder is frozen; later calls return the same files.
func (b *Builder) Files() (map[string][]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.files != nil {
		return copyFiles(b.files), nil
	}
	files, err := b.write()
	if err != nil {
		b.fail(err)
		return nil, err
	}
	b.files = files
	return copyFiles(files), nil
}

func copyFiles(f map[string][]byte) map[string][]byte {
	c := make(map[string][]byte, len(f))
	for k, v := range f {
		c[k] = append([]byte(nil), v...)
	}
	return c
}

func (b *Builder) write() (map[string][]byte, error) {
	var saver *protopb.SaverDef
	if b.opts.TracedSaver && (!b.opts.FunctionCall || b.opts.Variables != ResourceVariables) {
		return nil, fmt.Errorf("tfsave: TracedSaver needs FunctionCall and resource variables")
	}
	if len(b.vars) > 0 && !b.opts.FunctionCall {
		inits := make([]string, len(b.vars))
		for i, v := range b.vars {
			inits[i] = "^" + v.initializer
		}
		b.OpNamed(b.UniqueName("init"), "NoOp", inits, nil)
	}
	if len(b.vars) > 0 && !b.opts.TracedSaver {
		saver = b.addSaver()
	}
	if b.err != nil {
		return nil, b.err
	}
	graph := &graphpb.GraphDef{Versions: &versionspb.VersionDef{Producer: graphProducer, MinConsumer: graphMinConsumer}}
	sigs := make(map[string]*protopb.SignatureDef, len(b.sigs))
	removed := map[string]bool{}
	if b.opts.FunctionCall {
		graph.Library = &functionpb.FunctionDefLibrary{}
		for _, key := range sortedKeys(b.sigs) {
			if err := b.addFunctionCall(b.sigs[key], graph.Library, removed); err != nil {
				return nil, err
			}
		}
		// TF2 exports keep no initializers in the main graph.
		for _, v := range b.vars {
			removed[v.initializer] = true
			for _, in := range b.byName[v.initializer].def.Input {
				if src := nodeName(in); strings.HasSuffix(src, "/initial_value") {
					removed[src] = true
				}
			}
		}
		// TF2 exports name their (here empty) initialization in a
		// signature whose output is a bare NoOp node name.
		initOp := b.OpNamed(b.UniqueName("NoOp"), "NoOp", nil, nil)
		sigs[InitOpSignature] = &protopb.SignatureDef{Outputs: map[string]*protopb.TensorInfo{
			InitOpSignature: {Encoding: &protopb.TensorInfo_Name{Name: initOp}, TensorShape: shapeProto(nil)},
		}}
		if b.opts.TracedSaver {
			var err error
			if saver, err = b.addTracedSaver(graph.Library); err != nil {
				return nil, err
			}
		}
		if b.err != nil {
			return nil, b.err
		}
		b.keepReferenced(removed)
	}
	for _, n := range b.nodes {
		if !removed[n.def.Name] {
			graph.Node = append(graph.Node, n.def)
		}
	}
	for key, s := range b.sigs {
		sd, err := b.signatureDef(s)
		if err != nil {
			return nil, err
		}
		sigs[key] = sd
	}
	meta := &protopb.MetaGraphDef{
		MetaInfoDef: &protopb.MetaGraphDef_MetaInfoDef{
			StrippedOpList:       strippedOps(graph),
			Tags:                 []string{ServeTag},
			TensorflowVersion:    "2.13.1",
			TensorflowGitVersion: "inferbid-tfsave",
		},
		GraphDef:      graph,
		SaverDef:      saver,
		SignatureDef:  sigs,
		CollectionDef: b.collections(),
	}
	sm := &protopb.SavedModel{SavedModelSchemaVersion: 1, MetaGraphs: []*protopb.MetaGraphDef{meta}}
	pb, err := proto.MarshalOptions{Deterministic: true}.Marshal(sm)
	if err != nil {
		return nil, fmt.Errorf("tfsave: marshal saved_model.pb: %w", err)
	}
	files := map[string][]byte{SavedModelFile: pb}
	if len(b.vars) == 0 && !b.opts.FunctionCall {
		// TF1's SavedModelBuilder writes no checkpoint when there is
		// nothing to save.
		return files, nil
	}
	// Saved in key order, as TF1's Saver does.
	tensors := make([]BundleTensor, 0, len(b.vars)+1)
	for _, v := range b.vars {
		tensors = append(tensors, BundleTensor{Key: v.key, Tensor: v.value})
	}
	sort.Slice(tensors, func(i, j int) bool { return tensors[i].Key < tensors[j].Key })
	if b.opts.FunctionCall {
		og, err := proto.MarshalOptions{Deterministic: true}.Marshal(b.objectGraph())
		if err != nil {
			return nil, fmt.Errorf("tfsave: marshal object graph: %w", err)
		}
		tensors = append(tensors, BundleTensor{Key: ObjectGraphKey, Strings: []string{string(og)}})
	}
	// TF1-style models get the index TF 1.x wrote (snappy where it pays).
	index, data, err := WriteBundle(tensors, BundleOptions{Snappy: b.opts.Variables == RefVariables})
	if err != nil {
		return nil, err
	}
	files[VariablesIndex] = index
	files[VariablesData] = data
	return files, nil
}

// addSaver adds the save and restore subgraphs of a sharded V2 Saver, named
// as TensorFlow names them, and returns the SaverDef.
func (b *Builder) addSaver() *protopb.SaverDef {
	vars := append([]*variable(nil), b.vars...)
	sort.Slice(vars, func(i, j int) bool { return vars[i].key < vars[j].key })
	names := make([]string, len(vars))
	slices := make([]string, len(vars))
	for i, v := range vars {
		names[i] = v.key
	}
	shape := []int64{int64(len(vars))}
	str := func(name string, shape []int64, vals ...string) string {
		return b.OpNamed(name, "Const", nil, map[string]any{"dtype": typespb.DataType_DT_STRING, "value": stringTensorProto(shape, vals...)})
	}
	scalarString := map[string]any{"dtype": typespb.DataType_DT_STRING, "shape": Shape{}}
	in := str("save/filename/input", nil, "model")
	fn := b.OpNamed("save/filename", "PlaceholderWithDefault", []string{in}, scalarString)
	prefix := b.OpNamed("save/Const", "PlaceholderWithDefault", []string{fn}, scalarString)

	// Save: write a temporary shard, then merge it into the prefix.
	part := str("save/StringJoin/inputs_1", nil, "_temp_"+tempSuffix(names)+"/part")
	join := b.OpNamed("save/StringJoin", "StringJoin", []string{prefix, part}, nil)
	numShards := ConstOf[int32](b, "save/num_shards", []int64{}, 1)
	shard := ConstOf[int32](b, "save/ShardedFilename/shard", []int64{}, 0)
	sharded := b.OpNamed("save/ShardedFilename", "ShardedFilename", []string{join, shard, numShards}, nil)
	saveIn := []string{sharded, str("save/SaveV2/tensor_names", shape, names...), str("save/SaveV2/shape_and_slices", shape, slices...)}
	for _, v := range vars {
		if b.opts.Variables == RefVariables {
			saveIn = append(saveIn, v.Handle)
		} else {
			saveIn = append(saveIn, v.Value)
		}
	}
	save := b.OpNamed("save/SaveV2", "SaveV2", saveIn, nil)
	ctl := b.OpNamed("save/control_dependency", "Identity", []string{sharded, "^" + save}, nil)
	pack := b.OpNamed("save/MergeV2Checkpoints/checkpoint_prefixes", "Pack", []string{sharded, "^" + nodeName(ctl)}, nil)
	merge := b.OpNamed("save/MergeV2Checkpoints", "MergeV2Checkpoints", []string{pack, prefix}, nil)
	b.OpNamed("save/Identity", "Identity", []string{prefix, "^" + merge, "^" + nodeName(ctl)}, nil)

	// Restore: one RestoreV2, one assignment per variable.
	restore := nodeName(b.OpNamed("save/RestoreV2", "RestoreV2", []string{prefix,
		str("save/RestoreV2/tensor_names", shape, names...), str("save/RestoreV2/shape_and_slices", shape, slices...)},
		map[string]any{"dtypes": varTypes(vars)}))
	assigns := make([]string, len(vars))
	for i, v := range vars {
		restored := Output(restore, i)
		if b.opts.Variables == RefVariables {
			assigns[i] = "^" + nodeName(b.OpNamed(b.UniqueName("save/Assign"), "Assign", []string{v.Handle, restored}, nil))
		} else {
			id := b.OpNamed(b.UniqueName("save/Identity"), "Identity", []string{restored}, nil)
			assigns[i] = "^" + b.OpNamed(b.UniqueName("save/AssignVariableOp"), "AssignVariableOp", []string{v.Handle, id}, nil)
		}
	}
	shardOp := b.OpNamed("save/restore_shard", "NoOp", assigns, nil)
	b.OpNamed("save/restore_all", "NoOp", []string{"^" + shardOp}, nil)
	for _, n := range b.nodes {
		if strings.HasPrefix(n.def.Name, "save/") {
			n.outer = true
		}
	}
	return &protopb.SaverDef{
		FilenameTensorName:        SaverFilename,
		SaveTensorName:            SaverSaveTensor,
		RestoreOpName:             SaverRestoreOp,
		MaxToKeep:                 5,
		Sharded:                   true,
		KeepCheckpointEveryNHours: 10000,
		Version:                   protopb.SaverDef_V2,
	}
}

// tempSuffix stands in for the random UUID TensorFlow puts in temporary
// shard names, derived from the variable names so files are reproducible.
func tempSuffix(names []string) string {
	var h uint64 = 14695981039346656037
	for _, n := range names {
		for i := 0; i < len(n); i++ {
			h = (h ^ uint64(n[i])) * 1099511628211
		}
		h = (h ^ 0xff) * 1099511628211
	}
	return fmt.Sprintf("%016x%016x", h, h*0x9e3779b97f4a7c15)
}

func varTypes(vars []*variable) []typespb.DataType {
	ts := make([]typespb.DataType, len(vars))
	for i, v := range vars {
		ts[i], _ = DataType(v.DType)
	}
	return ts
}

// collections writes TF1's variable collections (VariableDef protos).
func (b *Builder) collections() map[string]*protopb.CollectionDef {
	if len(b.vars) == 0 || b.opts.FunctionCall {
		return nil
	}
	var list [][]byte
	for _, v := range b.vars {
		vd := &variablepb.VariableDef{
			VariableName:    v.Handle,
			InitializerName: v.initializer,
			SnapshotName:    v.Value,
			IsResource:      b.opts.Variables == ResourceVariables,
			Trainable:       true,
		}
		if b.opts.Variables == RefVariables {
			vd.InitialValueName = v.Name + "/initial_value:0"
		} else {
			vd.InitialValueName = v.Name + "/Initializer/initial_value:0"
		}
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(vd)
		if err != nil {
			continue
		}
		list = append(list, raw)
	}
	bl := func() *protopb.CollectionDef {
		return &protopb.CollectionDef{Kind: &protopb.CollectionDef_BytesList_{BytesList: &protopb.CollectionDef_BytesList{Value: list}}}
	}
	return map[string]*protopb.CollectionDef{"variables": bl(), "trainable_variables": bl()}
}

func (b *Builder) signatureDef(s *signature) (*protopb.SignatureDef, error) {
	//lint:ignore SA1019 method_name is part of the SavedModel format the writer reproduces (TF1 servers and the reference's models set it)
	sd := &protopb.SignatureDef{MethodName: s.method, Inputs: map[string]*protopb.TensorInfo{}, Outputs: map[string]*protopb.TensorInfo{}}
	for _, m := range []struct {
		src map[string]string
		dst map[string]*protopb.TensorInfo
	}{{s.inputs, sd.Inputs}, {s.outputs, sd.Outputs}} {
		for k, t := range m.src {
			dt, err := b.tensorDType(t)
			if err != nil {
				return nil, fmt.Errorf("tfsave: signature %q key %q: %w", s.key, k, err)
			}
			m.dst[k] = &protopb.TensorInfo{
				Encoding:    &protopb.TensorInfo_Name{Name: t},
				Dtype:       baseType(dt),
				TensorShape: shapeProto(b.tensorShape(t)),
			}
		}
	}
	return sd, nil
}

// strippedOps is the OpList of the ops the graph and its functions use,
// sorted by name as TensorFlow writes it.
func strippedOps(g *graphpb.GraphDef) *opdefpb.OpList {
	used := map[string]bool{}
	for _, n := range g.Node {
		used[n.Op] = true
	}
	for _, f := range g.GetLibrary().GetFunction() {
		for _, n := range f.NodeDef {
			used[n.Op] = true
		}
	}
	list := &opdefpb.OpList{}
	for _, name := range sortedKeys(used) {
		if d, err := lookupOpDef(name); err == nil {
			list.Op = append(list.Op, d)
		}
	}
	return list
}

// keepReferenced puts back into the main graph any removed node that a
// remaining node still refers to.
func (b *Builder) keepReferenced(removed map[string]bool) {
	for changed := true; changed; {
		changed = false
		for _, n := range b.nodes {
			if removed[n.def.Name] {
				continue
			}
			for _, in := range n.def.Input {
				src := nodeName(strings.TrimPrefix(in, "^"))
				if removed[src] {
					delete(removed, src)
					changed = true
				}
			}
		}
	}
}

// addFunctionCall moves the computation of a signature's outputs into
// library functions as TF2 exports do: __inference_signature_wrapper_N
// calls __inference__wrapped_model_N, whose body is the computation. The
// main graph keeps the placeholders and variables and gets one
// (Stateful)PartitionedCall whose outputs, ordered by signature key, become
// the signature's outputs.
func (b *Builder) addFunctionCall(s *signature, lib *functionpb.FunctionDefLibrary, removed map[string]bool) error {
	outKeys := sortedKeys(s.outputs)
	if len(outKeys) == 0 {
		return nil
	}
	// Collect the body: every node the outputs need, stopping at outer nodes
	// (captured as arguments); variable reads are cloned into the body.
	inBody := map[string]bool{}
	captured := map[string]bool{} // tensor names "node:i"
	var visit func(name string) error
	visit = func(name string) error {
		if inBody[name] {
			return nil
		}
		n, ok := b.byName[name]
		if !ok {
			return fmt.Errorf("tfsave: signature %q: no node %q", s.key, name)
		}
		inBody[name] = true
		for _, in := range n.def.Input {
			if c, ok := strings.CutPrefix(in, "^"); ok {
				if src := b.byName[c]; src != nil && !src.outer {
					if err := visit(c); err != nil {
						return err
					}
				}
				continue
			}
			src, idx, _ := splitTensor(in)
			sn := b.byName[src]
			if sn.outer && !sn.varRead {
				captured[Output(src, idx)] = true
				continue
			}
			if err := visit(src); err != nil {
				return err
			}
		}
		return nil
	}
	// Signature inputs are arguments even when unused, as in TF2 exports.
	for _, t := range s.inputs {
		if sn := b.byName[nodeName(t)]; sn.outer && !sn.varRead {
			captured[t] = true
		}
	}
	for _, k := range outKeys {
		t := s.outputs[k]
		src, idx, _ := splitTensor(t)
		if sn := b.byName[src]; sn.outer && !sn.varRead {
			// An output that is itself a placeholder or variable passes
			// through an Identity in the body.
			captured[Output(src, idx)] = true
			continue
		}
		if err := visit(src); err != nil {
			return err
		}
	}
	// Arguments: signature inputs in key order, then other captures in
	// graph order.
	var args []string
	seen := map[string]bool{}
	for _, k := range sortedKeys(s.inputs) {
		if t := s.inputs[k]; captured[t] && !seen[t] {
			args, seen[t] = append(args, t), true
		}
	}
	for _, n := range b.nodes {
		for i := 0; i < len(n.shapes); i++ {
			if t := Output(n.def.Name, i); captured[t] && !seen[t] {
				args, seen[t] = append(args, t), true
			}
		}
	}
	argName := map[string]string{}
	usedArg := map[string]bool{}
	var inArgs []*opdefpb.OpDef_ArgDef
	var tin []typespb.DataType
	stateful := false
	for _, t := range args {
		name := sanitizeArg(nodeName(t))
		if usedArg[name] {
			name = sanitizeArg(t)
		}
		for i := 1; usedArg[name]; i++ {
			name = sanitizeArg(nodeName(t)) + "_" + strconv.Itoa(i)
		}
		usedArg[name] = true
		argName[t] = name
		dt, err := b.tensorDType(t)
		if err != nil {
			return err
		}
		dt = baseType(dt)
		if dt == typespb.DataType_DT_RESOURCE {
			stateful = true
		}
		inArgs = append(inArgs, &opdefpb.OpDef_ArgDef{Name: name, Type: dt})
		tin = append(tin, dt)
	}
	// Body nodes in graph order (inputs always precede their consumers).
	rewrite := func(in string) (string, error) {
		if c, ok := strings.CutPrefix(in, "^"); ok {
			if inBody[c] {
				return in, nil
			}
			return "", nil // control edges to outer nodes are dropped
		}
		src, idx, _ := splitTensor(in)
		if a, ok := argName[Output(src, idx)]; ok && !inBody[src] {
			return a, nil
		}
		arg, k, err := outputArg(b.byName[src], idx)
		if err != nil {
			return "", err
		}
		return src + ":" + arg + ":" + strconv.Itoa(k), nil
	}
	bodyNames := map[string]bool{}
	var body []*nodepb.NodeDef
	for _, n := range b.nodes {
		if !inBody[n.def.Name] {
			continue
		}
		c := proto.Clone(n.def).(*nodepb.NodeDef)
		c.Input = nil
		for _, in := range n.def.Input {
			r, err := rewrite(in)
			if err != nil {
				return fmt.Errorf("tfsave: signature %q: %w", s.key, err)
			}
			if r != "" {
				c.Input = append(c.Input, r)
			}
		}
		if n.opDef.IsStateful {
			stateful = true
		}
		body = append(body, c)
		bodyNames[c.Name] = true
		if !n.outer {
			removed[n.def.Name] = true
		}
	}
	unique := func(base string) string {
		name := base
		for i := 1; bodyNames[name]; i++ {
			name = base + "_" + strconv.Itoa(i)
		}
		bodyNames[name] = true
		return name
	}
	var outArgs []*opdefpb.OpDef_ArgDef
	var tout []typespb.DataType
	ret := map[string]string{}
	for i, k := range outKeys {
		t := s.outputs[k]
		dt, err := b.tensorDType(t)
		if err != nil {
			return err
		}
		dt = baseType(dt)
		retName := "identity"
		if i > 0 {
			retName += "_" + strconv.Itoa(i)
		}
		src, err := rewrite(canonicalInput(splitTensorMust(t)))
		if err != nil {
			return err
		}
		idName := unique("Identity")
		body = append(body, &nodepb.NodeDef{Name: idName, Op: "Identity", Input: []string{src}, Attr: map[string]*attrpb.AttrValue{"T": typeAttr(dt)}})
		ret[retName] = idName + ":output:0"
		outArgs = append(outArgs, &opdefpb.OpDef_ArgDef{Name: retName, Type: dt})
		tout = append(tout, dt)
	}
	callOp := "PartitionedCall"
	if stateful {
		callOp = "StatefulPartitionedCall"
	}
	fnID := len(lib.Function)/2 + 1
	inner := &functionpb.FunctionDef{
		Signature: &opdefpb.OpDef{Name: "__inference__wrapped_model_" + strconv.Itoa(fnID), InputArg: inArgs, OutputArg: outArgs, IsStateful: stateful},
		NodeDef:   body,
		Ret:       ret,
	}
	// The wrapper: one call to the inner function, then an Identity per
	// output, as TF2's signature wrappers look.
	wrapper := &functionpb.FunctionDef{
		Signature: &opdefpb.OpDef{Name: "__inference_signature_wrapper_" + strconv.Itoa(fnID), InputArg: inArgs, OutputArg: outArgs, IsStateful: stateful},
		Ret:       map[string]string{},
	}
	callIn := make([]string, len(inArgs))
	for i, a := range inArgs {
		callIn[i] = a.Name
	}
	wrapper.NodeDef = append(wrapper.NodeDef, callNode(callOp, callOp, callIn, tin, tout, inner.Signature.Name))
	for i, a := range outArgs {
		id := "Identity"
		if i > 0 {
			id += "_" + strconv.Itoa(i)
		}
		wrapper.NodeDef = append(wrapper.NodeDef, &nodepb.NodeDef{Name: id, Op: "Identity", Input: []string{callOp + ":output:" + strconv.Itoa(i)}, Attr: map[string]*attrpb.AttrValue{"T": typeAttr(a.Type)}})
		wrapper.Ret[a.Name] = id + ":output:0"
	}
	lib.Function = append(lib.Function, inner, wrapper)

	// The main graph's call node.
	mainIn := make([]string, len(args))
	for i, t := range args {
		mainIn[i] = canonicalInput(splitTensorMust(t))
	}
	callName := b.UniqueName(callOp)
	od, err := lookupOpDef(callOp)
	if err != nil {
		return err
	}
	call := &node{def: callNode(callName, callOp, mainIn, tin, tout, wrapper.Signature.Name), opDef: od, outer: true}
	call.shapes = make([][]int64, len(outKeys))
	for i, k := range outKeys {
		call.shapes[i] = b.tensorShape(s.outputs[k])
		s.outputs[k] = Output(callName, i)
	}
	b.nodes = append(b.nodes, call)
	b.byName[callName] = call
	return nil
}

func splitTensorMust(t string) (string, int) {
	n, i, _ := splitTensor(t)
	return n, i
}

func typeAttr(t typespb.DataType) *attrpb.AttrValue {
	return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: t}}
}

func callNode(name, op string, inputs []string, tin, tout []typespb.DataType, fn string) *nodepb.NodeDef {
	list := func(ts []typespb.DataType) *attrpb.AttrValue {
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{Type: append([]typespb.DataType{}, ts...)}}}
	}
	str := func(s string) *attrpb.AttrValue { return &attrpb.AttrValue{Value: &attrpb.AttrValue_S{S: []byte(s)}} }
	return &nodepb.NodeDef{Name: name, Op: op, Input: inputs, Attr: map[string]*attrpb.AttrValue{
		"Tin": list(tin), "Tout": list(tout),
		"f":      {Value: &attrpb.AttrValue_Func{Func: &attrpb.NameAttrList{Name: fn}}},
		"config": str(""), "config_proto": str(""), "executor_type": str(""),
	}}
}

// sanitizeArg makes a function argument name from a node name as TensorFlow
// does: lower case, anything but letters, digits and "_" becomes "_".
func sanitizeArg(s string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(s) {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	out := sb.String()
	if out == "" || (out[0] >= '0' && out[0] <= '9') {
		out = "arg_" + out
	}
	return out
}

// objectGraph is the TrackableObjectGraph TF2 stores under
// _CHECKPOINTABLE_OBJECT_GRAPH: the root, one object per path component of
// each variable name, and the VARIABLE_VALUE attribute of each variable.
func (b *Builder) objectGraph() *protopb.TrackableObjectGraph {
	g := &protopb.TrackableObjectGraph{Nodes: []*protopb.TrackableObjectGraph_TrackableObject{{}}}
	children := []map[string]int32{{}}
	for _, v := range b.vars {
		cur := int32(0)
		for _, part := range strings.Split(v.Name, "/") {
			id, ok := children[cur][part]
			if !ok {
				id = int32(len(g.Nodes))
				g.Nodes = append(g.Nodes, &protopb.TrackableObjectGraph_TrackableObject{})
				children = append(children, map[string]int32{})
				children[cur][part] = id
				g.Nodes[cur].Children = append(g.Nodes[cur].Children, &protopb.TrackableObjectGraph_TrackableObject_ObjectReference{NodeId: id, LocalName: part})
			}
			cur = id
		}
		g.Nodes[cur].Attributes = append(g.Nodes[cur].Attributes, &protopb.TrackableObjectGraph_TrackableObject_SerializedTensor{
			Name: "VARIABLE_VALUE", FullName: v.Name, CheckpointKey: v.key,
		})
	}
	return g
}
