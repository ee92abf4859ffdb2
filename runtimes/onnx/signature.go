package onnx

import (
	"errors"
	"fmt"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// signature maps the declared graph inputs and outputs to the runtime's
// signature. Inputs must be tensors of a dtype tensor.DType carries
// (anything else could never be fed); outputs of other types are kept so that Predict can
// name them in its OUTPUT_PARSING error.
func signature(info *modelInfo) (driver.Signature, error) {
	var sig driver.Signature
	seen := map[string]bool{}
	for _, in := range info.Inputs {
		if in.Name == "" || seen[in.Name] {
			return sig, fmt.Errorf("input names must be unique and not empty (got %q)", in.Name)
		}
		seen[in.Name] = true
		if in.Kind != "tensor" {
			return sig, fmt.Errorf("input %q is a %s; only tensors can be fed", in.Name, in.Kind)
		}
		dt := elemDType(in.Elem)
		if dt == tensor.Invalid {
			return sig, fmt.Errorf("input %q has element type %s; only DOUBLE, FLOAT, FLOAT16, INT8-64, UINT8-64, BOOL and STRING can be fed", in.Name, elemName(in.Elem))
		}
		sig.Inputs = append(sig.Inputs, driver.TensorSpec{Name: in.Name, DType: dt, Shape: in.Shape})
	}
	if len(sig.Inputs) == 0 {
		// onnxruntime_go cannot run a session without inputs, and a model
		// without inputs has nothing to infer from.
		return sig, errors.New("the graph has no inputs (initializers do not count): nothing to feed")
	}
	for _, out := range info.Outputs {
		if out.Name == "" {
			return sig, errors.New("an output has no name")
		}
		sig.Outputs = append(sig.Outputs, driver.TensorSpec{Name: out.Name, DType: elemDType(out.Elem), Shape: out.Shape})
	}
	return sig, nil
}

// maxPreallocElements bounds an output allocated before the run from the
// input shapes (larger ones are left to ONNX Runtime, which knows the truth).
const maxPreallocElements = tensor.DefaultMaxElements

// outputPlan says how to allocate an output before the run: each dimension
// is fixed, or equals an input's dimension of the same dim_param ("batch").
// ONNX Runtime verifies the shape of a preallocated output, so a wrong guess
// is an error, never a wrong answer.
type outputPlan struct {
	ok    bool
	dtype tensor.DType
	dims  []dimSource
}

// dimSource is a fixed size (input < 0) or the size of inputs[input].Shape[axis].
type dimSource struct {
	fixed       int64
	input, axis int
}

// planOutputs makes the output plans of a model; ok reports whether any
// output can be preallocated.
func planOutputs(info *modelInfo, sig driver.Signature) ([]outputPlan, bool) {
	type ref struct{ input, axis int }
	params := map[string]ref{}
	for i, in := range info.Inputs {
		for a, p := range in.DimParams {
			if _, seen := params[p]; p != "" && !seen {
				params[p] = ref{i, a}
			}
		}
	}
	plans := make([]outputPlan, len(info.Outputs))
	anyPlanned := false
	for o, out := range info.Outputs {
		p := outputPlan{dtype: sig.Outputs[o].DType}
		// Only node outputs: ONNX Runtime leaves a preallocated buffer
		// untouched (zeros!) for an output that is a graph input passed
		// straight through (TestPassthroughOutputs).
		// Nor strings: ONNX Runtime owns a string tensor's buffers.
		p.ok = p.dtype != tensor.Invalid && p.dtype != tensor.Bytes && out.Kind == "tensor" && len(out.Shape) > 0 && out.Computed
		for a := 0; p.ok && a < len(out.Shape); a++ {
			switch r, named := params[out.DimParams[a]]; {
			case out.Shape[a] > 0:
				p.dims = append(p.dims, dimSource{fixed: out.Shape[a], input: -1})
			case out.DimParams[a] != "" && named:
				p.dims = append(p.dims, dimSource{input: r.input, axis: r.axis})
			default:
				p.ok = false
			}
		}
		plans[o] = p
		anyPlanned = anyPlanned || p.ok
	}
	return plans, anyPlanned
}

// tensor allocates the planned output for these inputs.
func (p *outputPlan) tensor(name string, inputs []tensor.Tensor) (tensor.Tensor, bool) {
	if !p.ok {
		return tensor.Tensor{}, false
	}
	shape := make([]int64, len(p.dims))
	n := int64(1)
	for a, d := range p.dims {
		size := d.fixed
		if d.input >= 0 {
			in := inputs[d.input].Shape
			if d.axis >= len(in) {
				return tensor.Tensor{}, false
			}
			size = in[d.axis]
		}
		if size < 1 || n > maxPreallocElements/size {
			return tensor.Tensor{}, false
		}
		shape[a] = size
		n *= size
	}
	return tensor.Tensor{Name: name, Shape: shape, Data: tensor.MakeData(p.dtype, int(n))}, true
}
