package tensorflow

import (
	"errors"
	"strings"
	"testing"

	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// TestMissingOpsReport loads a model whose serving subgraph uses two ops
// without a kernel (one of them twice, one feeding another node, each on a
// different output) and checks that the load error lists both, sorted,
// with their nodes, in the main graph and inside a function alike.
func TestMissingOpsReport(t *testing.T) {
	for _, opts := range []tfsave.Options{{}, {FunctionCall: true}} {
		b := tfsave.NewBuilderWith(opts)
		x := b.Placeholder("x", tensor.Float, []int64{-1, 2})
		// Built from supported ops, renamed below to ops no runtime has.
		a1 := b.OpNamed("zeta1", "Tanh", []string{x}, nil)
		a2 := b.OpNamed("zeta2", "Tanh", []string{x}, nil)
		c := b.OpNamed("alpha", "Sigmoid", []string{x}, nil)
		b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{
			"a": b.OpNamed("after", "Relu", []string{a1}, nil),
			"b": b.OpNamed("sum", "AddV2", []string{a2, b.OpNamed("fine", "Neg", []string{x}, nil)}, nil),
			"c": c,
		})
		files, err := b.Files()
		if err != nil {
			t.Fatal(err)
		}
		files = editGraph(t, files, func(mg *cpb.MetaGraphDef) {
			rename := map[string]string{"Tanh": "ZetaOp", "Sigmoid": "AlphaOp"}
			nodes := mg.GraphDef.Node
			for _, fn := range mg.GraphDef.GetLibrary().GetFunction() {
				nodes = append(nodes, fn.NodeDef...)
			}
			for _, nd := range nodes {
				if r, ok := rename[nd.Op]; ok {
					nd.Op = r
				}
			}
		})
		err = loadErr(t, files)
		if !errors.Is(err, ErrUnsupportedOp) {
			t.Fatalf("function=%v: error %v, want ErrUnsupportedOp", opts.FunctionCall, err)
		}
		msg := err.Error()
		want := []string{"needs 2 ops", "AlphaOp (1 node: ", "alpha)", "ZetaOp (2 nodes: ", "zeta1", "zeta2"}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("function=%v: error %q does not contain %q", opts.FunctionCall, msg, w)
			}
		}
		if i, j := strings.Index(msg, "AlphaOp"), strings.Index(msg, "ZetaOp"); i < 0 || j < i {
			t.Errorf("function=%v: ops not sorted in %q", opts.FunctionCall, msg)
		}
		for _, bad := range []string{"after", "sum", "Relu"} {
			if strings.Contains(msg, bad) {
				t.Errorf("function=%v: error %q names %q, which has a kernel", opts.FunctionCall, msg, bad)
			}
		}
	}
}

// TestMissingOpsNoBlowUp checks that compiling past a missing op does not
// revisit the graph above it once per path: a ladder of 200 nodes, each
// reading the previous one twice, over a missing op.
func TestMissingOpsNoBlowUp(t *testing.T) {
	b := tfsave.NewBuilder()
	x := b.Placeholder("x", tensor.Float, []int64{-1, 2})
	y := b.OpNamed("missing", "Tanh", []string{x}, nil)
	for range 200 {
		y = b.Op("AddV2", []string{y, y}, nil)
	}
	b.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	files = editGraph(t, files, func(mg *cpb.MetaGraphDef) {
		for _, nd := range mg.GraphDef.Node {
			if nd.Op == "Tanh" {
				nd.Op = "ZetaOp"
			}
		}
	})
	if err := loadErr(t, files); !strings.Contains(err.Error(), "ZetaOp (1 node: missing)") {
		t.Errorf("error %v, want it to name ZetaOp at node missing", err)
	}
}
