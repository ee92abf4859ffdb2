package tensorflow

import (
	"fmt"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"

	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// The TF1 control-flow models of tf1control_test.go (frozen: they hold no
// variables) run here and on tfjs-converter's graph executor, which
// implements Switch, Merge, Enter, Exit, NextIteration and LoopCond with
// TensorFlow's dead-tensor and frame semantics.

// checkTF1Oracle runs files' serving signature on each feed (by signature
// key) here and on tfjs and compares the outputs keys names (every output
// when keys is nil).
func checkTF1Oracle(t *testing.T, files driver.Files, keys []string, feeds ...map[string]tensor.Tensor) {
	t.Helper()
	sm := &cpb.SavedModel{}
	if err := proto.Unmarshal(files["saved_model.pb"], sm); err != nil {
		t.Fatal(err)
	}
	sig := sm.MetaGraphs[0].SignatureDef[tfsave.ServingSignature]
	if keys == nil {
		for k := range sig.Outputs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
	}
	var names []string
	for _, k := range keys {
		names = append(names, sig.Outputs[k].GetName())
	}
	m := loadFiles(t, files, driver.Config{})
	for i, feed := range feeds {
		var ins []tensor.Tensor
		jsFeed := map[string]tensor.Tensor{}
		for k, v := range feed {
			ins = append(ins, named(k, v))
			jsFeed[sig.Inputs[k].GetName()] = v
		}
		got, err := predictNamed(t, m, ins...)
		if err != nil {
			t.Fatalf("feed %d: this runtime: %v", i, err)
		}
		want := tfjsGraph(t, files, jsFeed, names)
		for j, k := range keys {
			compareOracle(t, fmt.Sprintf("feed %d %s", i, k), got[k], want[j], 0, 0)
		}
	}
}

func TestOracleTF1ControlFlow(t *testing.T) {
	n := func(v int32) map[string]tensor.Tensor { return map[string]tensor.Tensor{"n": scalarI32(v)} }
	t.Run("cond", func(t *testing.T) {
		var feeds []map[string]tensor.Tensor
		for _, flag := range []int32{1, 0, 7, -2} {
			feeds = append(feeds, map[string]tensor.Tensor{"x": f32([]int64{1, 1}, 1.5), "flag": scalarI32(flag)})
		}
		feeds = append(feeds, map[string]tensor.Tensor{"x": f32([]int64{2, 1}, 1.5, -4), "flag": scalarI32(0)})
		// tfjs's Merge has no value_index output: "which" keeps its
		// hand-derived check (TestTF1Cond).
		checkTF1Oracle(t, tf1CondModel(t, false), []string{"y"}, feeds...)
	})
	t.Run("while counting", func(t *testing.T) {
		checkTF1Oracle(t, countingLoop(t), nil, n(5), n(0), n(-3), n(10))
	})
	t.Run("while batch", func(t *testing.T) {
		feed := func(rows, cols int64, d float32, v ...float32) map[string]tensor.Tensor {
			return map[string]tensor.Tensor{"x": f32([]int64{rows, cols}, v...), "decay": scalarF32(d)}
		}
		checkTF1Oracle(t, tf1WhileBatchModel(t), nil,
			feed(1, 4, 0.5, 1.5, -2, 0.25, 3),
			feed(2, 4, 1, 1.5, -2, 0.25, 3, 0.1, 0.2, 0.3, 0.4),
			feed(3, 3, 0.9, 0.7, 0.3, 0.9, 1e8, 1, -1e8, -3, 4, 5),
			feed(1, 1, 0.5, 4))
	})
	t.Run("nested", func(t *testing.T) {
		checkTF1Oracle(t, nestedLoopModel(t), nil, n(5), n(1), n(0), n(8))
	})
	t.Run("cond in while", func(t *testing.T) {
		checkTF1Oracle(t, condInWhileModel(t), nil, n(6), n(2), n(0))
	})
	t.Run("while in cond", func(t *testing.T) {
		checkTF1Oracle(t, whileInCondModel(t), nil, n(5), n(-4), n(4), n(0))
	})
}
