package sidecar

import (
	"fmt"
	"math"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/tensor"
)

// The proto's DataType and ErrorType enums number their values like
// tensor.DType and inferr.Type; the conversions below rely on it and the
// tests check it.

func dtypeToProto(d tensor.DType) inferencepb.DataType { return inferencepb.DataType(d) }

// errorToProto sanitises the description (inferr.Sanitize): protobuf
// refuses to marshal a string field that is not UTF-8, which would fail the
// whole answer instead of one entry.
func errorToProto(err error) *inferencepb.Error {
	return &inferencepb.Error{Type: inferencepb.ErrorType(inferr.TypeOf(err)), Description: inferr.Sanitize(err.Error())}
}

func errorFromProto(e *inferencepb.Error) error {
	t := inferr.Type(e.GetType())
	if t.String() != e.GetType().String() {
		t = inferr.Unknown
	}
	return &inferr.Error{Type: t, Msg: e.GetDescription()}
}

// tensorToProto shares the slices of float32, float64, int32 and int64
// data with the message (no copy); int8 and int16 are widened to int_data.
func tensorToProto(t tensor.Tensor) *inferencepb.Tensor {
	p := &inferencepb.Tensor{Name: t.Name, DataType: dtypeToProto(t.DType()), Shape: t.Shape}
	switch d := t.Data.(type) {
	case []float64:
		p.DoubleData = d
	case []float32:
		p.FloatData = d
	case []int8:
		p.IntData = widen(d)
	case []int16:
		p.IntData = widen(d)
	case []int32:
		p.IntData = d
	case []int64:
		p.Int64Data = d
	}
	return p
}

func widen[T int8 | int16](d []T) []int32 {
	out := make([]int32, len(d))
	for i, v := range d {
		out[i] = int32(v)
	}
	return out
}

func narrow[T int8 | int16](name string, d []int32, lo, hi int32) ([]T, error) {
	out := make([]T, len(d))
	for i, v := range d {
		if v < lo || v > hi {
			return nil, fmt.Errorf("tensor %s: value %d at index %d is out of range for its data_type", inferr.Quote(name), v, i)
		}
		out[i] = T(v)
	}
	return out, nil
}

// tensorFromProto is the inverse of tensorToProto: it shares float32,
// float64, int32 and int64 data with the message. It only decodes (the
// dtype, and INT8/INT16 values narrowed with a range check): whether the
// element count fits the shape and the caps is checked once, by whoever
// uses the tensor (runtimes.Model for inputs, resultFromProto for outputs).
func tensorFromProto(p *inferencepb.Tensor) (tensor.Tensor, error) {
	t := tensor.Tensor{Name: p.GetName(), Shape: p.GetShape()}
	if t.Shape == nil {
		t.Shape = []int64{}
	}
	var err error
	switch p.GetDataType() {
	case inferencepb.DataType_DOUBLE:
		t.Data = nonNil(p.GetDoubleData())
	case inferencepb.DataType_FLOAT:
		t.Data = nonNil(p.GetFloatData())
	case inferencepb.DataType_INT8:
		t.Data, err = narrow[int8](t.Name, p.GetIntData(), math.MinInt8, math.MaxInt8)
	case inferencepb.DataType_INT16:
		t.Data, err = narrow[int16](t.Name, p.GetIntData(), math.MinInt16, math.MaxInt16)
	case inferencepb.DataType_INT32:
		t.Data = nonNil(p.GetIntData())
	case inferencepb.DataType_INT64:
		t.Data = nonNil(p.GetInt64Data())
	default:
		return t, fmt.Errorf("tensor %s: data_type %s is not one of DOUBLE, FLOAT, INT8, INT16, INT32, INT64", inferr.Quote(t.Name), p.GetDataType())
	}
	return t, err
}

// nonNil keeps an empty value list a typed empty slice, so the tensor's
// dtype is known.
func nonNil[T tensor.Element](d []T) []T {
	if d == nil {
		return []T{}
	}
	return d
}

// entriesToProto builds the typed batch for the runnable entries and
// returns, for each request in it, the index of its entry.
func entriesToProto(entries []batch.Entry) (*inferencepb.Batch, []int) {
	b := &inferencepb.Batch{Requests: make([]*inferencepb.ModelRequest, 0, len(entries))}
	idx := make([]int, 0, len(entries))
	for i, e := range entries {
		if e.Err != nil {
			continue
		}
		req := &inferencepb.ModelRequest{ModelPath: e.ModelPath, Tensors: make([]*inferencepb.Tensor, len(e.Tensors))}
		for j, t := range e.Tensors {
			req.Tensors[j] = tensorToProto(t)
		}
		b.Requests = append(b.Requests, req)
		idx = append(idx, i)
	}
	return b, idx
}

// resultFromProto converts one typed answer back; a malformed output tensor
// becomes the entry's OUTPUT_PARSING error.
func resultFromProto(r *inferencepb.ModelResponse) batch.Result {
	res := batch.Result{ModelPath: r.GetModelPath()}
	if r.GetError() != nil {
		res.Err = errorFromProto(r.GetError())
		return res
	}
	res.Tensors = make([]tensor.Tensor, len(r.GetTensors()))
	for i, p := range r.GetTensors() {
		t, err := tensorFromProto(p)
		if err == nil {
			err = t.Validate(math.MaxInt64)
		}
		if err != nil {
			return batch.Result{ModelPath: res.ModelPath, Err: inferr.Errorf(inferr.OutputParsing, "model %s: output %d: %v", inferr.Quote(res.ModelPath), i, err)}
		}
		res.Tensors[i] = t
	}
	return res
}

// resultToProto converts one entry's outcome to its typed answer.
func resultToProto(r batch.Result) *inferencepb.ModelResponse {
	mr := &inferencepb.ModelResponse{ModelPath: r.ModelPath}
	if r.Err != nil {
		mr.Error = errorToProto(r.Err)
		return mr
	}
	mr.Tensors = make([]*inferencepb.Tensor, len(r.Tensors))
	for i, t := range r.Tensors {
		mr.Tensors[i] = tensorToProto(t)
	}
	return mr
}
