package kserve

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/inferbid/inferbid/proto/kservepb"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// NewGRPCServer returns a gRPC server with the protocol's
// inference.GRPCInferenceService over s, beside it TF Serving's
// tensorflow.serving.PredictionService and ModelService (one listener for
// both protocols), and the standard health service grpc.health.v1.Health
// answering ServerReady; messages are bounded by Options.MaxRequestBytes
// (received) and 4 times that (sent).
func (s *Server) NewGRPCServer() *grpc.Server {
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(int(s.opts.MaxRequestBytes)), grpc.MaxSendMsgSize(4*int(s.opts.MaxRequestBytes)))
	kservepb.RegisterGRPCInferenceServiceServer(gs, &grpcService{s: s})
	s.registerTFServing(gs)
	healthpb.RegisterHealthServer(gs, &healthService{s: s})
	return gs
}

// grpcService is the protocol's gRPC surface: the same core as the HTTP
// one, with errors as gRPC statuses.
type grpcService struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

// statusCodes is the one table between the HTTP statuses the protocol
// gives errors and gRPC codes; anything else is 500 / Internal.
var statusCodes = [...]struct {
	http int
	grpc codes.Code
}{
	{http.StatusBadRequest, codes.InvalidArgument},
	{http.StatusNotFound, codes.NotFound},
	{http.StatusRequestEntityTooLarge, codes.ResourceExhausted},
	{http.StatusServiceUnavailable, codes.Unavailable},
	{http.StatusConflict, codes.AlreadyExists},
	{http.StatusPreconditionFailed, codes.FailedPrecondition},
	{http.StatusNotImplemented, codes.Unimplemented},
}

// grpcCode maps the HTTP status the protocol gives an error to a gRPC code.
func grpcCode(httpStatus int) codes.Code {
	for _, c := range statusCodes {
		if c.http == httpStatus {
			return c.grpc
		}
	}
	return codes.Internal
}

// httpStatusOf is the HTTP equivalent of a gRPC error, for Observe.
func httpStatusOf(err error) int {
	if err == nil {
		return http.StatusOK
	}
	code := status.Code(err)
	for _, c := range statusCodes {
		if c.grpc == code {
			return c.http
		}
	}
	return http.StatusInternalServerError
}

func toStatus(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(grpcCode(StatusOf(err)), err.Error())
}

func (g *grpcService) observe(ep string, start time.Time, modelPath string, err error) {
	if g.s.opts.Observe != nil {
		g.s.opts.Observe(Observation{Protocol: "grpc", Endpoint: ep, Status: httpStatusOf(err), ModelPath: modelPath, Duration: time.Since(start)})
	}
}

func (g *grpcService) ServerLive(ctx context.Context, _ *kservepb.ServerLiveRequest) (*kservepb.ServerLiveResponse, error) {
	defer g.observe(epLive, time.Now(), "", nil)
	return &kservepb.ServerLiveResponse{Live: g.s.Live()}, nil
}

func (g *grpcService) ServerReady(ctx context.Context, _ *kservepb.ServerReadyRequest) (*kservepb.ServerReadyResponse, error) {
	defer g.observe(epReady, time.Now(), "", nil)
	return &kservepb.ServerReadyResponse{Ready: g.s.ServerReady(ctx) == nil}, nil
}

// ModelReady answers false for a model that is loading, Unavailable with
// the load error for one that failed to load, NotFound for one that is not
// known.
func (g *grpcService) ModelReady(ctx context.Context, req *kservepb.ModelReadyRequest) (_ *kservepb.ModelReadyResponse, err error) {
	start := time.Now()
	r, err := g.s.ModelReady(ctx, req.GetName(), req.GetVersion())
	if err != nil && StatusOf(err) == http.StatusBadRequest {
		g.observe(epModelReady, start, r.Path, nil)
		return &kservepb.ModelReadyResponse{Ready: false}, nil
	}
	err = toStatus(err)
	g.observe(epModelReady, start, r.Path, err)
	if err != nil {
		return nil, err
	}
	return &kservepb.ModelReadyResponse{Ready: true}, nil
}

func (g *grpcService) ServerMetadata(ctx context.Context, _ *kservepb.ServerMetadataRequest) (*kservepb.ServerMetadataResponse, error) {
	defer g.observe(epServerMetadata, time.Now(), "", nil)
	md := g.s.Metadata()
	return &kservepb.ServerMetadataResponse{Name: md.Name, Version: md.Version, Extensions: md.Extensions}, nil
}

func (g *grpcService) ModelMetadata(ctx context.Context, req *kservepb.ModelMetadataRequest) (*kservepb.ModelMetadataResponse, error) {
	start := time.Now()
	md, err := g.s.ModelMetadata(ctx, req.GetName(), req.GetVersion())
	err = toStatus(err)
	g.observe(epModelMetadata, start, md.ModelPath, err)
	if err != nil {
		return nil, err
	}
	tm := func(ts []TensorMetadata) []*kservepb.ModelMetadataResponse_TensorMetadata {
		out := make([]*kservepb.ModelMetadataResponse_TensorMetadata, len(ts))
		for i, t := range ts {
			out[i] = &kservepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape}
		}
		return out
	}
	return &kservepb.ModelMetadataResponse{Name: md.Name, Versions: md.Versions, Platform: md.Platform, Inputs: tm(md.Inputs), Outputs: tm(md.Outputs)}, nil
}

func (g *grpcService) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	start := time.Now()
	resp, raw, err := g.infer(ctx, req)
	modelPath := ""
	if resp != nil {
		modelPath = resp.ModelPath
	}
	var out *kservepb.ModelInferResponse
	if err == nil {
		out, err = encodeInferResponse(resp, raw)
	}
	err = toStatus(err)
	g.observe(epInfer, start, modelPath, err)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// infer decodes a request and runs it; raw says whether the inputs came
// as raw_input_contents (the outputs then go back raw).
func (g *grpcService) infer(ctx context.Context, req *kservepb.ModelInferRequest) (*InferResponse, bool, error) {
	g.s.wake()
	inputs := req.GetInputs()
	raw := req.GetRawInputContents()
	if len(inputs) == 0 {
		return nil, false, errorf(http.StatusBadRequest, "request has no inputs")
	}
	if len(inputs) > g.s.opts.Limits.MaxTensors {
		return nil, false, errorf(http.StatusBadRequest, "request has %d inputs, the limit is %d", len(inputs), g.s.opts.Limits.MaxTensors)
	}
	if len(raw) > 0 && len(raw) != len(inputs) {
		return nil, false, errorf(http.StatusBadRequest, "raw_input_contents has %d buffers for %d inputs", len(raw), len(inputs))
	}
	ir := &InferRequest{ID: req.GetId(), ModelName: req.GetModelName(), ModelVersion: req.GetModelVersion(), Inputs: make([]tensor.Tensor, len(inputs))}
	seen := map[string]bool{}
	for i, in := range inputs {
		name := in.GetName()
		if name == "" {
			return nil, false, errorf(http.StatusBadRequest, "inputs[%d] has no name", i)
		}
		if seen[name] {
			return nil, false, errorf(http.StatusBadRequest, "input %q is given twice", name)
		}
		seen[name] = true
		dt, err := ParseDatatype(name, in.GetDatatype())
		if err != nil {
			return nil, false, &Error{Status: http.StatusBadRequest, Err: err}
		}
		t, err := g.s.newTensor(name, in.GetShape(), dt)
		if err != nil {
			return nil, false, &Error{Status: http.StatusBadRequest, Err: err}
		}
		n, _ := tensor.NumElements(t.Shape, g.s.opts.Limits.MaxElements)
		if len(raw) > 0 {
			if in.GetContents() != nil {
				return nil, false, errorf(http.StatusBadRequest, "input %q has contents while the request uses raw_input_contents", name)
			}
			t.Data, err = decodeRaw(raw[i], dt, n)
		} else {
			t.Data, err = decodeContents(in.GetContents(), dt, n)
		}
		if err != nil {
			return nil, false, errorf(http.StatusBadRequest, "input %q (%s, shape %s): %w", name, in.GetDatatype(), tensor.FormatShape(t.Shape), err)
		}
		ir.Inputs[i] = t
	}
	for i, o := range req.GetOutputs() {
		if o.GetName() == "" {
			return nil, false, errorf(http.StatusBadRequest, "outputs[%d] has no name", i)
		}
		ir.Outputs = append(ir.Outputs, o.GetName())
	}
	var err error
	if ir.Sequence, err = sequenceParamsGRPC(req.GetParameters()); err != nil {
		return nil, false, &Error{Status: http.StatusBadRequest, Err: err}
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		ir.Client = remoteHost(p.Addr.String())
	}
	resp, err := g.s.Infer(ctx, ir)
	return resp, len(raw) > 0, err
}

// decodeContents reads the typed contents of dtype d: n values in the field
// the protocol gives the datatype, nothing in the others. FP16 has no
// typed field in the protocol: it travels only in raw_input_contents.
func decodeContents(c *kservepb.InferTensorContents, d tensor.DType, n int64) (any, error) {
	var field string
	var got int
	switch d {
	case tensor.Float:
		field, got = "fp32_contents", len(c.GetFp32Contents())
	case tensor.Double:
		field, got = "fp64_contents", len(c.GetFp64Contents())
	case tensor.Int64:
		field, got = "int64_contents", len(c.GetInt64Contents())
	case tensor.Int8, tensor.Int16, tensor.Int32:
		field, got = "int_contents", len(c.GetIntContents())
	case tensor.Uint8, tensor.Uint16, tensor.Uint32:
		field, got = "uint_contents", len(c.GetUintContents())
	case tensor.Uint64:
		field, got = "uint64_contents", len(c.GetUint64Contents())
	case tensor.Bool:
		field, got = "bool_contents", len(c.GetBoolContents())
	case tensor.Bytes:
		field, got = "bytes_contents", len(c.GetBytesContents())
	default:
		return nil, errors.New("the protocol has no typed contents field for FP16: send it in raw_input_contents")
	}
	total := len(c.GetBoolContents()) + len(c.GetIntContents()) + len(c.GetInt64Contents()) + len(c.GetUintContents()) +
		len(c.GetUint64Contents()) + len(c.GetFp32Contents()) + len(c.GetFp64Contents()) + len(c.GetBytesContents())
	if total != got {
		return nil, fmt.Errorf("contents hold values outside %s, the field of this datatype", field)
	}
	if int64(got) != n {
		return nil, fmt.Errorf("%s holds %d values, the shape describes %d", field, got, n)
	}
	switch d {
	case tensor.Float:
		return c.GetFp32Contents(), nil
	case tensor.Double:
		return c.GetFp64Contents(), nil
	case tensor.Int64:
		return c.GetInt64Contents(), nil
	case tensor.Int32:
		return c.GetIntContents(), nil
	case tensor.Int16:
		return narrow[int16](c.GetIntContents(), "int_contents", math.MinInt16, math.MaxInt16, "INT16")
	case tensor.Int8:
		return narrow[int8](c.GetIntContents(), "int_contents", math.MinInt8, math.MaxInt8, "INT8")
	case tensor.Uint32:
		return c.GetUintContents(), nil
	case tensor.Uint16:
		return narrow[uint16](c.GetUintContents(), "uint_contents", 0, math.MaxUint16, "UINT16")
	case tensor.Uint8:
		return narrow[uint8](c.GetUintContents(), "uint_contents", 0, math.MaxUint8, "UINT8")
	case tensor.Uint64:
		return c.GetUint64Contents(), nil
	case tensor.Bool:
		return c.GetBoolContents(), nil
	case tensor.Bytes:
		b := c.GetBytesContents()
		if err := checkBytesTotal(b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("dtype %s has no contents field", d)
}

// checkBytesTotal bounds a BYTES tensor's content (tensor.DefaultMaxBytes).
func checkBytesTotal(b [][]byte) error {
	total := 0
	for _, e := range b {
		if total += len(e); total > tensor.DefaultMaxBytes {
			return fmt.Errorf("BYTES content is over %d bytes", tensor.DefaultMaxBytes)
		}
	}
	return nil
}

func narrow[T int8 | int16 | uint8 | uint16, W int32 | uint32](v []W, field string, lo, hi W, datatype string) ([]T, error) {
	out := make([]T, len(v))
	for i, x := range v {
		if x < lo || x > hi {
			return nil, fmt.Errorf("%s element %d (%d) is out of range for %s", field, i, x, datatype)
		}
		out[i] = T(x)
	}
	return out, nil
}

// decodeRaw reads a little-endian, row-major buffer of n elements; BYTES
// elements are each a 4-byte little-endian length, then that many bytes.
func decodeRaw(b []byte, d tensor.DType, n int64) (any, error) {
	if d == tensor.Bytes {
		return decodeRawBytes(b, n)
	}
	size := int64(d.Size())
	if int64(len(b)) != n*size {
		return nil, fmt.Errorf("raw_input_contents holds %d bytes, the shape and datatype need %d", len(b), n*size)
	}
	data := tensor.MakeData(d, int(n))
	switch v := data.(type) {
	case []float32:
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []float64:
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case []int8:
		for i := range v {
			v[i] = int8(b[i])
		}
	case []uint8:
		copy(v, b)
	case []bool:
		for i := range v {
			if b[i] > 1 {
				return nil, fmt.Errorf("raw_input_contents byte %d is %d: a BOOL is 0 or 1", i, b[i])
			}
			v[i] = b[i] == 1
		}
	case []int16:
		for i := range v {
			v[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case []uint16:
		for i := range v {
			v[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	case []tensor.Float16:
		for i := range v {
			v[i] = tensor.Float16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case []int32:
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []uint32:
		for i := range v {
			v[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
	case []int64:
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case []uint64:
		for i := range v {
			v[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	default:
		return nil, errors.New("no raw form for this datatype")
	}
	return data, nil
}

// decodeRawBytes reads n length-prefixed elements that must fill b exactly.
// Each needs 4 bytes at least, so the element slice is sized only after
// b proves long enough; the elements alias b (no copy).
func decodeRawBytes(b []byte, n int64) ([][]byte, error) {
	if int64(len(b)) < 4*n {
		return nil, fmt.Errorf("raw_input_contents holds %d bytes, too few for %d BYTES elements (4-byte length each)", len(b), n)
	}
	if len(b)-4*int(n) > tensor.DefaultMaxBytes {
		return nil, fmt.Errorf("BYTES content is over %d bytes", tensor.DefaultMaxBytes)
	}
	out := make([][]byte, n)
	off := 0
	for i := range out {
		if len(b)-off < 4 {
			return nil, fmt.Errorf("raw_input_contents ends inside the length of BYTES element %d", i)
		}
		l := binary.LittleEndian.Uint32(b[off:])
		off += 4
		if uint64(l) > uint64(len(b)-off) {
			return nil, fmt.Errorf("raw_input_contents: BYTES element %d declares %d bytes, %d remain", i, l, len(b)-off)
		}
		out[i] = b[off : off+int(l) : off+int(l)]
		off += int(l)
	}
	if off != len(b) {
		return nil, fmt.Errorf("raw_input_contents holds %d bytes after the %d BYTES elements", len(b)-off, n)
	}
	return out, nil
}

// encodeRaw writes a tensor's elements little-endian (BYTES length-prefixed).
func encodeRaw(t tensor.Tensor) []byte {
	b := make([]byte, 0, t.Len()*t.DType().Size())
	switch v := t.Data.(type) {
	case []float32:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	case []float64:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	case []int8:
		for _, x := range v {
			b = append(b, byte(x))
		}
	case []uint8:
		b = append(b, v...)
	case []bool:
		for _, x := range v {
			if x {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case []int16:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint16(b, uint16(x))
		}
	case []uint16:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint16(b, x)
		}
	case []tensor.Float16:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint16(b, uint16(x))
		}
	case []int32:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
	case []uint32:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
	case []int64:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
	case []uint64:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, x)
		}
	case [][]byte:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
			b = append(b, x...)
		}
	}
	return b
}

// encodeInferResponse builds the answer: outputs in raw_output_contents
// when the request came raw, typed contents otherwise. An FP16 output has
// no typed field, and the protocol forbids mixing the two forms, so an
// answer with one goes back all raw.
func encodeInferResponse(resp *InferResponse, raw bool) (*kservepb.ModelInferResponse, error) {
	out := &kservepb.ModelInferResponse{ModelName: resp.ModelName, ModelVersion: resp.ModelVersion, Id: resp.ID}
	if resp.SequenceID != nil {
		var v kservepb.InferParameter
		if resp.SequenceIDUnsigned || *resp.SequenceID > math.MaxInt64 {
			v.ParameterChoice = &kservepb.InferParameter_Uint64Param{Uint64Param: *resp.SequenceID}
		} else {
			v.ParameterChoice = &kservepb.InferParameter_Int64Param{Int64Param: int64(*resp.SequenceID)}
		}
		out.Parameters = map[string]*kservepb.InferParameter{sidecar.SequenceIDName: &v}
	} else if resp.SequenceIDString != nil {
		out.Parameters = map[string]*kservepb.InferParameter{sidecar.SequenceIDName: {ParameterChoice: &kservepb.InferParameter_StringParam{StringParam: *resp.SequenceIDString}}}
	}
	for _, t := range resp.Outputs {
		if t.DType() == tensor.Half {
			raw = true
		}
	}
	for _, t := range resp.Outputs {
		dt := DatatypeOf(t.DType())
		if dt == "" {
			return nil, errorf(http.StatusInternalServerError, "output %q holds no data of a known type (%T)", t.Name, t.Data)
		}
		o := &kservepb.ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: dt, Shape: t.Shape}
		if raw {
			out.RawOutputContents = append(out.RawOutputContents, encodeRaw(t))
		} else {
			c := &kservepb.InferTensorContents{}
			switch v := t.Data.(type) {
			case []float32:
				c.Fp32Contents = v
			case []float64:
				c.Fp64Contents = v
			case []int64:
				c.Int64Contents = v
			case []int32:
				c.IntContents = v
			case []int16:
				c.IntContents = widen[int16, int32](v)
			case []int8:
				c.IntContents = widen[int8, int32](v)
			case []uint64:
				c.Uint64Contents = v
			case []uint32:
				c.UintContents = v
			case []uint16:
				c.UintContents = widen[uint16, uint32](v)
			case []uint8:
				c.UintContents = widen[uint8, uint32](v)
			case []bool:
				c.BoolContents = v
			case [][]byte:
				c.BytesContents = v
			}
			o.Contents = c
		}
		out.Outputs = append(out.Outputs, o)
	}
	return out, nil
}

func widen[T int8 | int16 | uint8 | uint16, W int32 | uint32](v []T) []W {
	out := make([]W, len(v))
	for i, x := range v {
		out[i] = W(x)
	}
	return out
}
