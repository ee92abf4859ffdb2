package sidecar

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/tensor"
)

// The proto's DataType and ErrorType enums number their values like
// tensor.DType and inferr.Type; the conversions below rely on it and the
// tests check it.

func dtypeToProto(d tensor.DType) inferencepb.DataType { return inferencepb.DataType(d) }

// errorToProto sanitises the description (inferr.Sanitize): protobuf
// refuses to marshal a string field that is not UTF-8, which would fail the
// whole answer instead of one entry.
// A sequence error's class travels in its own field (numbered like
// sequence.Code), so that the edges never read it from the text.
func errorToProto(err error) *inferencepb.Error {
	e := &inferencepb.Error{Type: inferencepb.ErrorType(inferr.TypeOf(err)), Description: inferr.Sanitize(err.Error())}
	if c, ok := sequence.CodeOf(err); ok {
		e.SequenceClass = inferencepb.SequenceErrorClass(c)
	}
	return e
}

// errorFromProto gives a sequence error's class back as a *sequence.Error
// under the type; an unknown class is dropped (the type still holds).
func errorFromProto(e *inferencepb.Error) error {
	t := inferr.Type(e.GetType())
	if t.String() != e.GetType().String() {
		t = inferr.Unknown
	}
	c := sequence.Code(e.GetSequenceClass())
	if c.Valid() {
		return &inferr.Error{Type: t, Err: &sequence.Error{Code: c, Msg: e.GetDescription()}}
	}
	return &inferr.Error{Type: t, Msg: e.GetDescription()}
}

// tensorToProto shares the slices of float32, float64, int32, int64, bool,
// uint32, uint64 and bytes data with the message (no copy); int8 and int16
// are widened to int_data, uint8 and uint16 to uint_data, and FP16 bits are
// packed little-endian into fp16_data.
func tensorToProto(t tensor.Tensor) *inferencepb.Tensor {
	p := &inferencepb.Tensor{Name: t.Name, DataType: dtypeToProto(t.DType()), Shape: t.Shape}
	switch d := t.Data.(type) {
	case []float64:
		p.DoubleData = d
	case []float32:
		p.FloatData = d
	case []int8:
		p.IntData = widen[int8, int32](d)
	case []int16:
		p.IntData = widen[int16, int32](d)
	case []int32:
		p.IntData = d
	case []int64:
		p.Int64Data = d
	case []bool:
		p.BoolData = d
	case []uint8:
		p.UintData = widen[uint8, uint32](d)
	case []uint16:
		p.UintData = widen[uint16, uint32](d)
	case []uint32:
		p.UintData = d
	case []uint64:
		p.Uint64Data = d
	case []tensor.Float16:
		b := make([]byte, 0, 2*len(d))
		for _, v := range d {
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		}
		p.Fp16Data = b
	case [][]byte:
		p.BytesData = d
	}
	return p
}

func widen[T int8 | int16 | uint8 | uint16, W int32 | uint32](d []T) []W {
	out := make([]W, len(d))
	for i, v := range d {
		out[i] = W(v)
	}
	return out
}

func narrow[T int8 | int16 | uint8 | uint16, W int32 | uint32](name string, d []W, lo, hi W) ([]T, error) {
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
// float64, int32, int64, bool, uint32, uint64 and bytes data with the
// message. It only decodes (the dtype, INT8/INT16/UINT8/UINT16 values
// narrowed with a range check, FP16 bits unpacked): whether the
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
	case inferencepb.DataType_BOOL:
		t.Data = nonNil(p.GetBoolData())
	case inferencepb.DataType_UINT8:
		t.Data, err = narrow[uint8](t.Name, p.GetUintData(), 0, math.MaxUint8)
	case inferencepb.DataType_UINT16:
		t.Data, err = narrow[uint16](t.Name, p.GetUintData(), 0, math.MaxUint16)
	case inferencepb.DataType_UINT32:
		t.Data = nonNil(p.GetUintData())
	case inferencepb.DataType_UINT64:
		t.Data = nonNil(p.GetUint64Data())
	case inferencepb.DataType_FP16:
		b := p.GetFp16Data()
		if len(b)%2 != 0 {
			return t, fmt.Errorf("tensor %s: fp16_data has %d bytes, not a whole number of 2-byte values", inferr.Quote(t.Name), len(b))
		}
		h := make([]tensor.Float16, len(b)/2)
		for i := range h {
			h[i] = tensor.Float16(binary.LittleEndian.Uint16(b[2*i:]))
		}
		t.Data = h
	case inferencepb.DataType_BYTES:
		t.Data = nonNil(p.GetBytesData())
	case inferencepb.DataType_INT32:
		t.Data = nonNil(p.GetIntData())
	case inferencepb.DataType_INT64:
		t.Data = nonNil(p.GetInt64Data())
	default:
		return t, fmt.Errorf("tensor %s: data_type %s is not a known data type", inferr.Quote(t.Name), p.GetDataType())
	}
	return t, err
}

// nonNil keeps an empty value list a typed empty slice, so the tensor's
// dtype is known.
func nonNil[T tensor.AnyElement](d []T) []T {
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
