package tfsave

import (
	"fmt"
	"sort"
	"strconv"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	functionpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opdefpb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	protopb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// funcNode makes a function-body node: attrs converted, defaults filled.
func funcNode(name, op string, inputs []string, attrs map[string]any) (*nodepb.NodeDef, error) {
	od, err := lookupOpDef(op)
	if err != nil {
		return nil, err
	}
	def := &nodepb.NodeDef{Name: name, Op: op, Input: inputs, Attr: map[string]*attrpb.AttrValue{}}
	for k, v := range attrs {
		av, err := attrValue(v)
		if err != nil {
			return nil, fmt.Errorf("tfsave: function node %q attr %q: %w", name, k, err)
		}
		def.Attr[k] = av
	}
	if err := completeAttrs(def, od); err != nil {
		return nil, fmt.Errorf("tfsave: function node %q (%s): %w", name, op, err)
	}
	return def, nil
}

// addTracedSaver adds TF2's save and restore functions and the main-graph
// nodes that call them: "saver_filename" (a string Placeholder), a Const
// with the serialized object graph, then the save call and the restore
// call, in that order, as tf.saved_model.save lays them out.
func (b *Builder) addTracedSaver(lib *functionpb.FunctionDefLibrary) (*protopb.SaverDef, error) {
	vars := append([]*variable(nil), b.vars...)
	sort.Slice(vars, func(i, j int) bool { return vars[i].key < vars[j].key })
	og, err := proto.MarshalOptions{Deterministic: true}.Marshal(b.objectGraph())
	if err != nil {
		return nil, fmt.Errorf("tfsave: marshal object graph: %w", err)
	}
	names := make([]string, 0, len(vars)+1)
	dtypes := make([]typespb.DataType, 0, len(vars)+1)
	for _, v := range vars {
		dt, _ := DataType(v.DType)
		names, dtypes = append(names, v.key), append(dtypes, dt)
	}
	names, dtypes = append(names, ObjectGraphKey), append(dtypes, typespb.DataType_DT_STRING)
	slices := make([]string, len(names))
	strConst := func(name string, vals []string) (*nodepb.NodeDef, error) {
		return funcNode(name, "Const", nil, map[string]any{"dtype": typespb.DataType_DT_STRING, "value": stringTensorProto([]int64{int64(len(vals))}, vals...)})
	}
	stringArg := func(name string) *opdefpb.OpDef_ArgDef {
		return &opdefpb.OpDef_ArgDef{Name: name, Type: typespb.DataType_DT_STRING}
	}
	resourceArgs := make([]*opdefpb.OpDef_ArgDef, len(vars))
	for i, v := range vars {
		resourceArgs[i] = &opdefpb.OpDef_ArgDef{Name: sanitizeArg(v.Name), Type: typespb.DataType_DT_RESOURCE}
		for k := 0; k < i; k++ {
			if resourceArgs[k].Name == resourceArgs[i].Name {
				resourceArgs[i].Name += "_" + strconv.Itoa(i)
			}
		}
	}
	fnID := strconv.Itoa(len(lib.Function) + 1)
	var nodes []*nodepb.NodeDef
	add := func(n *nodepb.NodeDef, err error) error {
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
		return nil
	}

	// __inference__traced_save_N(file_prefix, variables..., savev2_const):
	// SaveV2 of every variable's value and the object graph.
	saveIn := []string{"file_prefix", "SaveV2/tensor_names:output:0", "SaveV2/shape_and_slices:output:0"}
	if err := add(strConst("SaveV2/tensor_names", names)); err != nil {
		return nil, err
	}
	if err := add(strConst("SaveV2/shape_and_slices", slices)); err != nil {
		return nil, err
	}
	for i, v := range vars {
		read := "Read_" + strconv.Itoa(i) + "/ReadVariableOp"
		if i == 0 {
			read = "Read/ReadVariableOp"
		}
		if err := add(funcNode(read, "ReadVariableOp", []string{resourceArgs[i].Name}, map[string]any{"dtype": v.DType})); err != nil {
			return nil, err
		}
		saveIn = append(saveIn, read+":value:0")
	}
	saveIn = append(saveIn, "savev2_const")
	if err := add(funcNode("SaveV2", "SaveV2", saveIn, map[string]any{"dtypes": dtypes})); err != nil {
		return nil, err
	}
	if err := add(funcNode("Identity", "Identity", []string{"file_prefix", "^SaveV2"}, map[string]any{"T": typespb.DataType_DT_STRING})); err != nil {
		return nil, err
	}
	saveFn := &functionpb.FunctionDef{
		Signature: &opdefpb.OpDef{
			Name:          "__inference__traced_save_" + fnID,
			InputArg:      append(append([]*opdefpb.OpDef_ArgDef{stringArg("file_prefix")}, resourceArgs...), stringArg("savev2_const")),
			OutputArg:     []*opdefpb.OpDef_ArgDef{stringArg("identity")},
			ControlOutput: []string{"SaveV2"},
			IsStateful:    true,
		},
		NodeDef:    nodes,
		Ret:        map[string]string{"identity": "Identity:output:0"},
		ControlRet: map[string]string{"SaveV2": "SaveV2"},
	}

	// __inference__traced_restore_N(file_prefix, variables...): RestoreV2,
	// then an Identity and an AssignVariableOp per variable.
	nodes = nil
	if err := add(strConst("RestoreV2/tensor_names", names)); err != nil {
		return nil, err
	}
	if err := add(strConst("RestoreV2/shape_and_slices", slices)); err != nil {
		return nil, err
	}
	if err := add(funcNode("RestoreV2", "RestoreV2", []string{"file_prefix", "RestoreV2/tensor_names:output:0", "RestoreV2/shape_and_slices:output:0"}, map[string]any{"dtypes": dtypes})); err != nil {
		return nil, err
	}
	var assigns []string
	controlRet := map[string]string{}
	for i, v := range vars {
		suffix := ""
		if i > 0 {
			suffix = "_" + strconv.Itoa(i)
		}
		id, assign := "Identity"+suffix, "AssignVariableOp"+suffix
		if err := add(funcNode(id, "Identity", []string{"RestoreV2:tensors:" + strconv.Itoa(i)}, map[string]any{"T": v.DType})); err != nil {
			return nil, err
		}
		if err := add(funcNode(assign, "AssignVariableOp", []string{resourceArgs[i].Name, id + ":output:0"}, map[string]any{"dtype": v.DType})); err != nil {
			return nil, err
		}
		assigns = append(assigns, "^"+assign)
		controlRet[assign] = assign
	}
	if err := add(funcNode("NoOp", "NoOp", assigns, nil)); err != nil {
		return nil, err
	}
	final := "Identity_" + strconv.Itoa(len(vars))
	if len(vars) == 0 {
		final = "Identity"
	}
	if err := add(funcNode(final, "Identity", []string{"file_prefix", "^NoOp"}, map[string]any{"T": typespb.DataType_DT_STRING})); err != nil {
		return nil, err
	}
	restoreFn := &functionpb.FunctionDef{
		Signature: &opdefpb.OpDef{
			Name:          "__inference__traced_restore_" + fnID,
			InputArg:      append([]*opdefpb.OpDef_ArgDef{stringArg("file_prefix")}, resourceArgs...),
			OutputArg:     []*opdefpb.OpDef_ArgDef{stringArg("identity")},
			ControlOutput: sortedKeys(controlRet),
			IsStateful:    true,
		},
		NodeDef:    nodes,
		Ret:        map[string]string{"identity": final + ":output:0"},
		ControlRet: controlRet,
	}
	lib.Function = append(lib.Function, saveFn, restoreFn)

	// Main graph: the object graph Const, saver_filename and the two calls.
	ogConst := b.OpNamed(b.UniqueName("Const"), "Const", nil, map[string]any{"dtype": typespb.DataType_DT_STRING, "value": stringTensorProto(nil, string(og))})
	filename := b.OpNamed("saver_filename", "Placeholder", nil, map[string]any{"dtype": typespb.DataType_DT_STRING, "shape": Shape{}})
	if b.err != nil {
		return nil, b.err
	}
	b.markOuter(nodeName(ogConst), "saver_filename")
	handles := make([]string, len(vars))
	resTypes := make([]typespb.DataType, len(vars))
	for i, v := range vars {
		handles[i] = nodeName(v.Handle)
		resTypes[i] = typespb.DataType_DT_RESOURCE
	}
	str := []typespb.DataType{typespb.DataType_DT_STRING}
	saveCall := b.addCallNode(append(append([]string{nodeName(filename)}, handles...), nodeName(ogConst)),
		append(append(str, resTypes...), typespb.DataType_DT_STRING), str, saveFn.Signature.Name)
	restoreCall := b.addCallNode(append([]string{nodeName(filename)}, handles...), append(str, resTypes...), str, restoreFn.Signature.Name)
	if b.err != nil {
		return nil, b.err
	}
	return &protopb.SaverDef{
		FilenameTensorName: filename,
		SaveTensorName:     saveCall + ":0",
		RestoreOpName:      restoreCall,
		Version:            protopb.SaverDef_V2,
	}, nil
}

// addCallNode adds a StatefulPartitionedCall to the main graph.
func (b *Builder) addCallNode(inputs []string, tin, tout []typespb.DataType, fn string) string {
	od, err := lookupOpDef("StatefulPartitionedCall")
	if err != nil {
		b.fail(err)
		return ""
	}
	name := b.UniqueName("StatefulPartitionedCall")
	n := &node{def: callNode(name, "StatefulPartitionedCall", inputs, tin, tout, fn), opDef: od, outer: true, shapes: make([][]int64, len(tout))}
	for i := range n.shapes {
		n.shapes[i] = []int64{}
	}
	b.nodes = append(b.nodes, n)
	b.byName[name] = n
	return name
}
