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
// saver's save path (SaverDef.save_tensor_name), which serving never runs;
// anywhere else they are rejected.
var saverOps = map[string]bool{"SaveV2": true, "MergeV2Checkpoints": true}

// validateGraph rejects graphs (main graph and function library) holding
// ops that write files or summaries: B&A's rule, stricter in that it also
// covers the ops listed above and PrintV2 to a file.
func validateGraph(nodes []*ndpb.NodeDef, lib map[string]*fpb.FunctionDef, saveTensor string) error {
	savePath := saverPath(nodes, lib, saveTensor)
	check := func(where string, nd *ndpb.NodeDef, onSavePath bool) error {
		op := nd.Op
		switch {
		case deniedOps[op]:
		case saverOps[op] && !onSavePath:
		case op == "PrintV2" && strings.HasPrefix(attrs(nd.Attr).s("output_stream"), "file://"):
		default:
			return nil
		}
		return &OpError{Op: op, Node: where, Err: fmt.Errorf("%w: the graph writes files or summaries, which inference models may not do", ErrForbiddenOp)}
	}
	for _, nd := range nodes {
		if err := check(nd.Name, nd, savePath.nodes[nd.Name]); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(lib))
	for n := range lib {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, nd := range lib[name].NodeDef {
			if err := check(name+"/"+nd.Name, nd, savePath.funcs[name]); err != nil {
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

// saverPath finds the main-graph nodes the save tensor depends on and the
// functions they call, minus functions that other main-graph nodes call
// too (so a function shared with serving gets no exemption).
func saverPath(nodes []*ndpb.NodeDef, lib map[string]*fpb.FunctionDef, saveTensor string) reach {
	r := reach{nodes: map[string]bool{}, funcs: map[string]bool{}}
	if saveTensor == "" {
		return r
	}
	byName := make(map[string]*ndpb.NodeDef, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	start, _, _ := splitTensorName(saveTensor)
	stack := []string{start}
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
		for _, in := range nd.Input {
			n, _, _ := splitTensorName(strings.TrimPrefix(in, "^"))
			stack = append(stack, n)
		}
	}
	saveFuncs := map[string]bool{}
	otherFuncs := map[string]bool{}
	for _, nd := range nodes {
		dst := otherFuncs
		if r.nodes[nd.Name] {
			dst = saveFuncs
		}
		calledFuncs(nd, lib, dst)
	}
	for f := range saveFuncs {
		if !otherFuncs[f] {
			r.funcs[f] = true
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
