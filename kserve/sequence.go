package kserve

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"

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
		return fmt.Errorf("parameters: %q is %s, want a non-negative integer", key, clipRaw(v.Raw))
	}
	return setSequenceParam(p, key, n)
}

// sequenceParamsGRPC reads the sequence parameters of a gRPC request
// (int64_param).
func sequenceParamsGRPC(params map[string]*kservepb.InferParameter) (SequenceParams, error) {
	var p SequenceParams
	for _, key := range []string{sidecar.SequenceIDName, sidecar.SequenceControlName} {
		v, ok := params[key]
		if !ok {
			continue
		}
		c, ok := v.GetParameterChoice().(*kservepb.InferParameter_Int64Param)
		if !ok || c.Int64Param < 0 {
			return p, fmt.Errorf("parameters: %q must be a non-negative int64_param", key)
		}
		if err := setSequenceParam(&p, key, uint64(c.Int64Param)); err != nil {
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

func clipRaw(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// withSequenceInputs appends the sequence parameters to the inputs as the
// inputs the sidecar takes (INT64 [1] and INT32 [1]); giving a field both
// ways is an error.
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
		if *p.ID > math.MaxInt64 {
			return nil, errorf(http.StatusBadRequest, "parameters: %q is %d, above the largest id this server carries (2^63-1)", sidecar.SequenceIDName, *p.ID)
		}
		out = append(out, tensor.New(sidecar.SequenceIDName, []int64{1}, []int64{int64(*p.ID)}))
	}
	if p.Control != nil {
		out = append(out, tensor.New(sidecar.SequenceControlName, []int64{1}, []int32{int32(*p.Control)}))
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
	d, ok := outs[i].Data.([]int64)
	if !ok || len(d) != 1 {
		return outs, nil
	}
	id := uint64(d[0])
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
