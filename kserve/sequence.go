package kserve

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/kservepb"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// SequenceParams are the sequence fields of a stateful model's request given
// as request parameters (OpenVINO Model Server takes them as inputs, which
// work too: they pass through as any input does).
type SequenceParams struct {
	ID      *uint64 // sequence_id; 0 means absent
	Control *uint32 // sequence_control_input: 0 none, 1 start, 2 end
	// IDUnsigned: the gRPC request gave sequence_id as uint64_param, so the
	// answer does too.
	IDUnsigned bool
}

func (p SequenceParams) given() bool { return p.ID != nil || p.Control != nil }

// sequenceParamJSON reads a sequence parameter of an HTTP request: an
// integer in range (the JSON text itself, so a large id is exact).
func sequenceParamJSON(p *SequenceParams, key string, v gjson.Result) error {
	if key != sidecar.SequenceIDName && key != sidecar.SequenceControlName {
		return nil
	}
	n, err := strconv.ParseUint(v.Raw, 10, 64)
	if v.Type != gjson.Number || err != nil {
		return fmt.Errorf("parameters: %q is %s, want a non-negative integer", key, inferr.ClipN(v.Raw, 32))
	}
	return setSequenceParam(p, key, n)
}

// sequenceParamsGRPC reads the sequence parameters of a gRPC request:
// int64_param or uint64_param (the seed's type, for ids above 2^63-1); the
// answer gives sequence_id back in the same form.
func sequenceParamsGRPC(params map[string]*kservepb.InferParameter) (SequenceParams, error) {
	var p SequenceParams
	for _, key := range []string{sidecar.SequenceIDName, sidecar.SequenceControlName} {
		v, ok := params[key]
		if !ok {
			continue
		}
		var n uint64
		switch c := v.GetParameterChoice().(type) {
		case *kservepb.InferParameter_Int64Param:
			if c.Int64Param < 0 {
				return p, fmt.Errorf("parameters: %q is %d, want a non-negative int64_param or a uint64_param", key, c.Int64Param)
			}
			n = uint64(c.Int64Param)
		case *kservepb.InferParameter_Uint64Param:
			n = c.Uint64Param
			if key == sidecar.SequenceIDName {
				p.IDUnsigned = true
			}
		default:
			return p, fmt.Errorf("parameters: %q must be a non-negative int64_param or a uint64_param", key)
		}
		if err := setSequenceParam(&p, key, n); err != nil {
			return p, err
		}
	}
	return p, nil
}

func setSequenceParam(p *SequenceParams, key string, n uint64) error {
	if key == sidecar.SequenceIDName {
		p.ID = &n
		return nil
	}
	if n > math.MaxUint32 {
		return fmt.Errorf("parameters: %q is %d, want 0 (none), 1 (start) or 2 (end): %s", key, n, sequence.MsgBadControlValue)
	}
	c := uint32(n)
	p.Control = &c
	return nil
}

// withSequenceInputs appends the sequence parameters to the inputs as the
// inputs the sidecar takes, in the seed's types (UINT64 [1] and UINT32
// [1]); giving a field both ways is an error.
func withSequenceInputs(inputs []tensor.Tensor, p SequenceParams) ([]tensor.Tensor, error) {
	if !p.given() {
		return inputs, nil
	}
	for _, in := range inputs {
		if in.Name == sidecar.SequenceIDName || in.Name == sidecar.SequenceControlName {
			return nil, errorf(http.StatusBadRequest, "%s is given both as an input and as a parameter", in.Name)
		}
	}
	out := slices.Clip(inputs)
	if p.ID != nil {
		out = append(out, tensor.New(sidecar.SequenceIDName, []int64{1}, []uint64{*p.ID}))
	}
	if p.Control != nil {
		out = append(out, tensor.New(sidecar.SequenceControlName, []int64{1}, []uint32{*p.Control}))
	}
	return out, nil
}

// takeSequenceID removes the sequence_id output and returns its value, for
// a request that gave the sequence fields as parameters: the answer carries
// it as a parameter too.
func takeSequenceID(outs []tensor.Tensor) ([]tensor.Tensor, *uint64) {
	i := slices.IndexFunc(outs, func(t tensor.Tensor) bool { return t.Name == sidecar.SequenceIDName })
	if i < 0 {
		return outs, nil
	}
	var id uint64
	switch d := outs[i].Data.(type) {
	case []uint64: // the form the parameters were sent in
		if len(d) != 1 {
			return outs, nil
		}
		id = d[0]
	case []int64: // an assigned id, when the request gave none
		if len(d) != 1 || d[0] < 0 {
			return outs, nil
		}
		id = uint64(d[0])
	default:
		return outs, nil
	}
	return slices.Delete(outs, i, i+1), &id
}

// sequenceStatus is the HTTP status of a sequence error from the sidecar
// (its class travels in the sidecar's protocol as sequence_class).
func sequenceStatus(err error) (int, bool) {
	c, ok := sequence.CodeOf(err)
	if !ok {
		return 0, false
	}
	return c.HTTPStatus(), true
}
