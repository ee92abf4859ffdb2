package tfsave

import (
	"fmt"
	"strings"

	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// controlOpSpecs are TF1 control flow's primitive ops (tf.compat.v1 graphs
// with control_flow_v2 off), as TensorFlow's control_flow_ops.cc declares
// them. A while loop's Merge is added with its Enter twice and given its
// NextIteration afterwards with UpdateInput, as TensorFlow's Python builds
// the back edge.
var controlOpSpecs = []opSpec{
	{name: "Switch", in: "data:T pred:bool", out: "output_false:T output_true:T", attrs: "T:type"},
	{name: "RefSwitch", in: "data:ref(T) pred:bool", out: "output_false:ref(T) output_true:ref(T)", attrs: "T:type", allowsUninit: true},
	{name: "Merge", in: "inputs:N*T", out: "output:T value_index:int32", attrs: "T:type N:int>=1"},
	{name: "RefMerge", in: "inputs:N*ref(T)", out: "output:ref(T) value_index:int32", attrs: "T:type N:int>=1"},
	{name: "Enter", in: "data:T", out: "output:T", attrs: "T:type frame_name:string is_constant:bool=false parallel_iterations:int=10"},
	{name: "RefEnter", in: "data:ref(T)", out: "output:ref(T)", attrs: "T:type frame_name:string is_constant:bool=false parallel_iterations:int=10"},
	{name: "Exit", in: "data:T", out: "output:T", attrs: "T:type"},
	{name: "RefExit", in: "data:ref(T)", out: "output:ref(T)", attrs: "T:type"},
	{name: "NextIteration", in: "data:T", out: "output:T", attrs: "T:type"},
	{name: "RefNextIteration", in: "data:ref(T)", out: "output:ref(T)", attrs: "T:type"},
	{name: "LoopCond", in: "input:bool", out: "output:bool"},
	{name: "ControlTrigger"},
}

func init() { opSpecs = append(opSpecs, controlOpSpecs...) }

// UpdateInput replaces data input i of node with tensor, which must have
// the input's dtype: the back edge of a TF1 while loop (Merge's second
// input becomes the NextIteration added after it), which no node could
// name when the Merge was added.
func (b *Builder) UpdateInput(node string, i int, tensor string) {
	if b.err != nil {
		return
	}
	n, ok := b.byName[node]
	if !ok {
		b.failf("UpdateInput: no node %q", node)
		return
	}
	src, idx, err := splitTensor(tensor)
	if err != nil {
		b.fail(fmt.Errorf("tfsave: UpdateInput %s: %w", node, err))
		return
	}
	k := 0
	for j, in := range n.def.Input {
		if strings.HasPrefix(in, "^") {
			continue
		}
		if k == i {
			var old, got typespb.DataType
			if old, err = b.tensorDType(in); err == nil {
				got, err = b.tensorDType(canonicalInput(src, idx))
			}
			if err != nil {
				b.fail(fmt.Errorf("tfsave: UpdateInput %s: %w", node, err))
				return
			}
			if old != got {
				b.failf("UpdateInput %s input %d: %s is %v, the input %v", node, i, tensor, got, old)
				return
			}
			n.def.Input[j] = canonicalInput(src, idx)
			return
		}
		k++
	}
	b.failf("UpdateInput: node %q has no data input %d", node, i)
}
