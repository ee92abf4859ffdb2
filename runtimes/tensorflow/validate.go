package tensorflow

import (
	"fmt"
	"sort"
	"strings"

	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// deniedOps write files or summaries. The first group is B&A's denylist
// (services/inference_sidecar/modules/tensorflow_v2_14_0/validator.cc);
// the second adds ops that also write files which B&A's list misses:
// dataset and debugger writers and the V1 checkpoint writers that no V2
// SavedModel uses.
var deniedOps = map[string]bool{
	// B&A.
	"CloseSummaryWriter":              true,
	"CreateSummaryDbWriter":           true,
	"CreateSummaryFileWriter":         true,
	"FlushSummaryWriter":              true,
	"ImportEvent":                     true,
	"StatsAggregatorSetSummaryWriter": true,
	"SummaryWriter":                   true,
	"WriteAudioSummary":               true,
	"WriteFile":                       true,
	"WriteGraphSummary":               true,
	"WriteHistogramSummary":           true,
	"WriteImageSummary":               true,
	"WriteRawProtoSummary":            true,
	"WriteScalarSummary":              true,
	"WriteSummary":                    true,
	// Added here.
	"Save":                          true,
	"SaveSlices":                    true,
	"DatasetToTFRecord":             true,
	"ExperimentalDatasetToTFRecord": true,
	"SaveDataset":                   true,
	"SaveDatasetV2":                 true,
	"DebugIdentityV2":               true,
	"DebugIdentityV3":               true,
	"DebugNumericSummaryV2":         true,
}

// saverOps write the checkpoint. Every SavedModel holds them on its
// saver's save path (SaverDef.save_tensor_name), which serving never runs:
// like every op, they are judged only where the loader or serving can run
// them.
var saverOps = map[string]bool{"SaveV2": true, "MergeV2Checkpoints": true}

// validateGraph rejects graphs holding, where they can run, ops that write
// files or summaries: B&A's rule, stricter in that it also covers the ops
// listed above and PrintV2 to a file. What can run is what the roots (the
// serving signature's outputs, the restore and init ops) reach: nodes
// unreachable from them, such as a second tf.train.Saver's SaveV2, never
// run and are not judged, as they are not compiled.
func validateGraph(nodes []*ndpb.NodeDef, lib map[string]*fpb.FunctionDef, roots []string) error {
	r := reachable(nodes, lib, roots)
	check := func(where string, nd *ndpb.NodeDef) error {
		op := nd.Op
		switch {
		case deniedOps[op], saverOps[op]:
		case op == "PrintV2" && strings.HasPrefix(attrs(nd.Attr).s("output_stream"), "file://"):
		default:
			return nil
		}
		return &OpError{Op: op, Node: where, Err: fmt.Errorf("%w: the graph writes files or summaries, which inference models may not do", ErrForbiddenOp)}
	}
	for _, nd := range nodes {
		if !r.nodes[nd.Name] {
			continue
		}
		if err := check(nd.Name, nd); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(r.funcs))
	for n := range r.funcs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		// A called function is judged whole: TensorFlow runs its
		// stateful nodes whether or not its outputs need them.
		for _, nd := range lib[name].NodeDef {
			if err := check(name+"/"+nd.Name, nd); err != nil {
				return err
			}
		}
	}
	return nil
}

type reach struct {
	nodes map[string]bool // main-graph nodes
	funcs map[string]bool
}

// reachable finds the main-graph nodes the roots (tensor or node names,
// "^" control prefixes allowed) depend on through data and control inputs,
// and the library functions those nodes call, transitively.
func reachable(nodes []*ndpb.NodeDef, lib map[string]*fpb.FunctionDef, roots []string) reach {
	r := reach{nodes: map[string]bool{}, funcs: map[string]bool{}}
	byName := make(map[string]*ndpb.NodeDef, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var stack []string
	for _, root := range roots {
		n, _, _ := splitTensorName(strings.TrimPrefix(root, "^"))
		stack = append(stack, n)
	}
	for len(stack) > 0 {
		name := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if r.nodes[name] {
			continue
		}
		nd, ok := byName[name]
		if !ok {
			continue
		}
		r.nodes[name] = true
		calledFuncs(nd, lib, r.funcs)
		for _, in := range nd.Input {
			n, _, _ := splitTensorName(strings.TrimPrefix(in, "^"))
			stack = append(stack, n)
		}
	}
	return r
}

// calledFuncs adds the functions nd calls, transitively, to seen.
func calledFuncs(nd *ndpb.NodeDef, lib map[string]*fpb.FunctionDef, seen map[string]bool) {
	var names []string
	if _, ok := lib[nd.Op]; ok {
		names = append(names, nd.Op)
	}
	for _, v := range nd.Attr {
		if f := v.GetFunc(); f != nil {
			names = append(names, f.Name)
		}
		for _, f := range v.GetList().GetFunc() {
			names = append(names, f.Name)
		}
	}
	for _, n := range names {
		fn, ok := lib[n]
		if !ok || seen[n] {
			continue
		}
		seen[n] = true
		for _, inner := range fn.NodeDef {
			calledFuncs(inner, lib, seen)
		}
	}
}
