package kserve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	dtpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	errpb "github.com/wamuir/graft/tensorflow/tsl/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/proto/tfservingpb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// registerTFServing adds TF Serving's gRPC services, under their official
// names (tensorflow.serving.PredictionService and ModelService), to gs.
func (s *Server) registerTFServing(gs *grpc.Server) {
	tfservingpb.RegisterPredictionServiceServer(gs, &tfPredictionService{s: s})
	tfservingpb.RegisterModelServiceServer(gs, &tfModelService{s: s})
}

// Endpoints of TF Serving's gRPC surface, for Observe.
const (
	epTFPredict     = "tfserving_predict"
	epTFMetadata    = "tfserving_model_metadata"
	epTFModelStatus = "tfserving_model_status"
)

// predictMethod is the method_name of a predict SignatureDef.
const predictMethod = "tensorflow/serving/predict"

type tfPredictionService struct {
	tfservingpb.UnimplementedPredictionServiceServer
	s *Server
}

type tfModelService struct {
	tfservingpb.UnimplementedModelServiceServer
	s *Server
}

func (s *Server) observeGRPC(ep string, start time.Time, modelPath string, err error) {
	if s.opts.Observe != nil {
		s.opts.Observe(Observation{Protocol: "grpc", Endpoint: ep, Status: httpStatusOf(err), ModelPath: modelPath, Duration: time.Since(start)})
	}
}

// unsupported answers a tf.Example method Unimplemented and observes it as
// the REST edge observes :classify and :regress (tfserving_predict, 501),
// so both protocols count a refused call the same way.
func (p *tfPredictionService) unsupported(method string) error {
	start := time.Now()
	err := status.Errorf(codes.Unimplemented, "%s is not supported: inferbid serves Predict and GetModelMetadata (Classify, Regress and MultiInference take tf.Example protos, which no inferbid runtime reads)", method)
	p.s.observeGRPC(epTFPredict, start, "", err)
	return err
}

func (p *tfPredictionService) Classify(context.Context, *tfservingpb.ClassificationRequest) (*tfservingpb.ClassificationResponse, error) {
	return nil, p.unsupported("Classify")
}

func (p *tfPredictionService) Regress(context.Context, *tfservingpb.RegressionRequest) (*tfservingpb.RegressionResponse, error) {
	return nil, p.unsupported("Regress")
}

func (p *tfPredictionService) MultiInference(context.Context, *tfservingpb.MultiInferenceRequest) (*tfservingpb.MultiInferenceResponse, error) {
	return nil, p.unsupported("MultiInference")
}

func (m *tfModelService) HandleReloadConfigRequest(context.Context, *tfservingpb.ReloadConfigRequest) (*tfservingpb.ReloadConfigResponse, error) {
	return nil, status.Error(codes.Unimplemented, "HandleReloadConfigRequest is not supported: inferbid's models come from the model bucket's config (or the v2 model repository extension, when enabled)")
}

// versionOf maps a ModelSpec to the protocol's version string: "" for the
// newest, else the version of the name whose number is the requested one
// ("3" or "v3" for 3). version_label has no meaning here.
func (s *Server) versionOf(ctx context.Context, spec *tfservingpb.ModelSpec) (string, error) {
	if spec.GetName() == "" {
		return "", errorf(http.StatusBadRequest, "model_spec has no name")
	}
	if spec.GetVersionLabel() != "" {
		return "", errorf(http.StatusBadRequest, "model_spec: version_label %q is not supported (inferbid has no version labels): give version", spec.GetVersionLabel())
	}
	sig := spec.GetSignatureName()
	if sig != "" && sig != servingDefault {
		return "", errorf(http.StatusBadRequest, "model_spec: signature_name is %q, want %q", sig, servingDefault)
	}
	v := spec.GetVersion()
	if v == nil {
		return "", nil
	}
	return s.tfServingVersion(ctx, spec.GetName(), v.GetValue())
}

// tfServingVersion maps TF Serving's numeric version n (REST /versions/3,
// gRPC model_spec.version 3) to the name's version: the one spelled "3"
// when there is one, else the first whose number is 3 ("v3": model paths
// name versions pctr/v1/ or pctr/1/). REST and gRPC share it.
func (s *Server) tfServingVersion(ctx context.Context, name string, n int64) (string, error) {
	r, err := s.Resolve(ctx, name, "")
	if err != nil {
		return "", err
	}
	if v, ok := tfVersionOf(r.Versions, n); ok {
		return v, nil
	}
	return "", errorf(http.StatusNotFound, "model %q has no version %d (versions: %s)", name, n, strings.Join(r.Versions, ", "))
}

// tfVersionOf is the version among versions whose number is n: the one
// spelled as n in decimal first, else the first of another spelling.
func tfVersionOf(versions []string, n int64) (string, bool) {
	exact := strconv.FormatInt(n, 10)
	if slices.Contains(versions, exact) {
		return exact, true
	}
	for _, have := range versions {
		if m, ok := tfVersionNumber(have); ok && m == n {
			return have, true
		}
	}
	return "", false
}

const servingDefault = "serving_default"

// tfVersionNumber is the number of a version string ("3" or "v3").
func tfVersionNumber(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(v, "v"), 10, 64)
	return n, err == nil
}

// answerSpec is the model_spec of an answer: the name, the version served
// (when it is a number) and the signature.
func answerSpec(name, version string) *tfservingpb.ModelSpec {
	spec := &tfservingpb.ModelSpec{Name: name, SignatureName: servingDefault}
	if n, ok := tfVersionNumber(version); ok {
		spec.VersionChoice = &tfservingpb.ModelSpec_Version{Version: wrapperspb.Int64(n)}
	}
	return spec
}

// Predict runs one request as TF Serving's REST predict does: inputs by
// signature key (sequence_id and sequence_control_input among them, for a
// stateful model), every output or those of output_filter, by key.
func (p *tfPredictionService) Predict(ctx context.Context, req *tfservingpb.PredictRequest) (*tfservingpb.PredictResponse, error) {
	start := time.Now()
	resp, modelPath, err := p.predict(ctx, req)
	err = toStatus(err)
	p.s.observeGRPC(epTFPredict, start, modelPath, err)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (p *tfPredictionService) predict(ctx context.Context, req *tfservingpb.PredictRequest) (*tfservingpb.PredictResponse, string, error) {
	s := p.s
	s.wake()
	version, err := s.versionOf(ctx, req.GetModelSpec())
	if err != nil {
		return nil, "", err
	}
	name := req.GetModelSpec().GetName()
	in := req.GetInputs()
	if len(in) == 0 {
		return nil, "", errorf(http.StatusBadRequest, "request has no inputs")
	}
	if len(in) > s.opts.Limits.MaxTensors {
		return nil, "", errorf(http.StatusBadRequest, "request has %d inputs, the limit is %d", len(in), s.opts.Limits.MaxTensors)
	}
	ir := &InferRequest{ModelName: name, ModelVersion: version, Outputs: req.GetOutputFilter()}
	for _, key := range sortedKeys(in) {
		t, err := s.fromTensorProto(key, in[key])
		if err != nil {
			return nil, "", &Error{Status: http.StatusBadRequest, Err: err}
		}
		ir.Inputs = append(ir.Inputs, t)
	}
	resp, err := s.Infer(ctx, ir)
	if err != nil {
		return nil, resp.ModelPath, err
	}
	out := &tfservingpb.PredictResponse{ModelSpec: answerSpec(name, resp.ModelVersion), Outputs: make(map[string]*tpb.TensorProto, len(resp.Outputs))}
	for _, t := range resp.Outputs {
		tp, err := toTensorProto(t)
		if err != nil {
			return nil, resp.ModelPath, errorf(http.StatusInternalServerError, "model %q (model path %q): %v", name, resp.ModelPath, err)
		}
		out.Outputs[t.Name] = tp
	}
	return out, resp.ModelPath, nil
}

// GetModelMetadata answers the signature_def field, the only one TF
// Serving defines: the serving_default SignatureDef, inputs and outputs by
// signature key.
func (p *tfPredictionService) GetModelMetadata(ctx context.Context, req *tfservingpb.GetModelMetadataRequest) (*tfservingpb.GetModelMetadataResponse, error) {
	start := time.Now()
	resp, modelPath, err := p.metadata(ctx, req)
	err = toStatus(err)
	p.s.observeGRPC(epTFMetadata, start, modelPath, err)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (p *tfPredictionService) metadata(ctx context.Context, req *tfservingpb.GetModelMetadataRequest) (*tfservingpb.GetModelMetadataResponse, string, error) {
	fields := req.GetMetadataField()
	if len(fields) == 0 {
		return nil, "", errorf(http.StatusBadRequest, "metadata_field is empty: ask for \"signature_def\"")
	}
	for _, f := range fields {
		if f != "signature_def" {
			return nil, "", errorf(http.StatusBadRequest, "metadata_field %q is not supported: the only field is \"signature_def\"", f)
		}
	}
	version, err := p.s.versionOf(ctx, req.GetModelSpec())
	if err != nil {
		return nil, "", err
	}
	name := req.GetModelSpec().GetName()
	r, info, err := p.s.model(ctx, name, version)
	if err != nil {
		return nil, r.Path, err
	}
	//lint:ignore SA1019 TF Serving's GetModelMetadata answers the signature's method name; its clients may read it
	sd := &cpb.SignatureDef{MethodName: predictMethod, Inputs: tensorInfos(info.Signature.Inputs), Outputs: tensorInfos(info.Signature.Outputs)}
	if info.Signature.Positional {
		sd.Inputs = nil // the model takes its inputs by position: no names to give
	}
	sdm := &tfservingpb.SignatureDefMap{SignatureDef: map[string]*cpb.SignatureDef{servingDefault: sd}}
	a, err := anypb.New(sdm)
	if err != nil {
		return nil, r.Path, err
	}
	return &tfservingpb.GetModelMetadataResponse{ModelSpec: answerSpec(name, r.Version), Metadata: map[string]*anypb.Any{"signature_def": a}}, r.Path, nil
}

// tensorInfos describes tensors by signature key, with the graph tensor
// name, dtype and shape (-1 for a variable dimension, unknown_rank when
// the rank is unknown).
func tensorInfos(specs []runtimes.TensorSpec) map[string]*cpb.TensorInfo {
	out := make(map[string]*cpb.TensorInfo, len(specs))
	for _, sp := range specs {
		key := sp.Name
		if len(sp.Aliases) > 0 {
			key = sp.Aliases[0]
		}
		shape := &shpb.TensorShapeProto{UnknownRank: sp.Shape == nil}
		for _, d := range sp.Shape {
			shape.Dim = append(shape.Dim, &shpb.TensorShapeProto_Dim{Size: d})
		}
		out[key] = &cpb.TensorInfo{Encoding: &cpb.TensorInfo_Name{Name: sp.Name}, Dtype: tfDType(sp.DType), TensorShape: shape}
	}
	return out
}

// GetModelStatus answers the state of every version of the name (or of
// the one asked for): AVAILABLE when it serves, LOADING while the sidecar
// loads it.
func (m *tfModelService) GetModelStatus(ctx context.Context, req *tfservingpb.GetModelStatusRequest) (*tfservingpb.GetModelStatusResponse, error) {
	start := time.Now()
	resp, err := m.status(ctx, req)
	err = toStatus(err)
	m.s.observeGRPC(epTFModelStatus, start, "", err)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (m *tfModelService) status(ctx context.Context, req *tfservingpb.GetModelStatusRequest) (*tfservingpb.GetModelStatusResponse, error) {
	name := req.GetModelSpec().GetName()
	versions := []string{""}
	if req.GetModelSpec().GetVersion() != nil {
		v, err := m.s.versionOf(ctx, req.GetModelSpec())
		if err != nil {
			return nil, err
		}
		versions = []string{v}
	} else {
		if _, err := m.s.versionOf(ctx, req.GetModelSpec()); err != nil {
			return nil, err
		}
		r, err := m.s.Resolve(ctx, name, "")
		if err != nil {
			return nil, err
		}
		if len(r.Versions) > 0 {
			versions = r.Versions
		}
	}
	resp := &tfservingpb.GetModelStatusResponse{}
	for _, v := range versions {
		r, info, err := m.s.model(ctx, name, v)
		if err != nil {
			return nil, err
		}
		st := &tfservingpb.ModelVersionStatus{State: tfservingpb.ModelVersionStatus_AVAILABLE, Status: &tfservingpb.StatusProto{ErrorCode: errpb.Code_OK}}
		if n, ok := tfVersionNumber(r.Version); ok {
			st.Version = n
		}
		if info.State != sidecar.ModelServing {
			st.State = tfservingpb.ModelVersionStatus_LOADING
		}
		resp.ModelVersionStatus = append(resp.ModelVersionStatus, st)
	}
	return resp, nil
}

var tfDTypes = map[tensor.DType]dtpb.DataType{
	tensor.Float: dtpb.DataType_DT_FLOAT, tensor.Double: dtpb.DataType_DT_DOUBLE,
	tensor.Int8: dtpb.DataType_DT_INT8, tensor.Int16: dtpb.DataType_DT_INT16, tensor.Int32: dtpb.DataType_DT_INT32, tensor.Int64: dtpb.DataType_DT_INT64,
	tensor.Uint8: dtpb.DataType_DT_UINT8, tensor.Uint16: dtpb.DataType_DT_UINT16, tensor.Uint32: dtpb.DataType_DT_UINT32, tensor.Uint64: dtpb.DataType_DT_UINT64,
	tensor.Bool: dtpb.DataType_DT_BOOL, tensor.Half: dtpb.DataType_DT_HALF, tensor.Bytes: dtpb.DataType_DT_STRING,
}

func tfDType(d tensor.DType) dtpb.DataType { return tfDTypes[d] } // DT_INVALID for Invalid (any)

func dtypeOfTF(d dtpb.DataType) (tensor.DType, bool) {
	for k, v := range tfDTypes {
		if v == d {
			return k, true
		}
	}
	return tensor.Invalid, false
}

// fromTensorProto reads a TensorProto by TensorFlow's rules: tensor_content
// (little-endian, row-major) when present, else the dtype's typed field,
// where an empty field means zeros and a short one repeats its last value
// (as Tensor::FromProto). The shape is checked against the limits before
// anything is allocated.
func (s *Server) fromTensorProto(name string, tp *tpb.TensorProto) (tensor.Tensor, error) {
	dt, ok := dtypeOfTF(tp.GetDtype())
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("input %q: dtype %s is not supported", name, tp.GetDtype())
	}
	if tp.GetTensorShape().GetUnknownRank() {
		return tensor.Tensor{}, fmt.Errorf("input %q: tensor_shape has unknown_rank set", name)
	}
	shape := make([]int64, len(tp.GetTensorShape().GetDim()))
	for i, d := range tp.GetTensorShape().GetDim() {
		shape[i] = d.GetSize()
	}
	t, err := s.newTensor(name, shape, dt)
	if err != nil {
		return t, err
	}
	n, _ := tensor.NumElements(shape, s.opts.Limits.MaxElements)
	if c := tp.GetTensorContent(); len(c) > 0 {
		if dt == tensor.Bytes {
			return t, fmt.Errorf("input %q: DT_STRING travels in string_val, not tensor_content", name)
		}
		if t.Data, err = decodeRaw(c, dt, n); err != nil {
			return t, fmt.Errorf("input %q (%s, shape %s): tensor_content: %s", name, tp.GetDtype(), tensor.FormatShape(shape), strings.ReplaceAll(err.Error(), "raw_input_contents", "tensor_content"))
		}
		return t, nil
	}
	var field string
	var got int
	switch dt {
	case tensor.Float:
		field, got = "float_val", len(tp.GetFloatVal())
	case tensor.Double:
		field, got = "double_val", len(tp.GetDoubleVal())
	case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Uint8, tensor.Uint16:
		field, got = "int_val", len(tp.GetIntVal())
	case tensor.Int64:
		field, got = "int64_val", len(tp.GetInt64Val())
	case tensor.Uint32:
		field, got = "uint32_val", len(tp.GetUint32Val())
	case tensor.Uint64:
		field, got = "uint64_val", len(tp.GetUint64Val())
	case tensor.Bool:
		field, got = "bool_val", len(tp.GetBoolVal())
	case tensor.Half:
		field, got = "half_val", len(tp.GetHalfVal())
	case tensor.Bytes:
		field, got = "string_val", len(tp.GetStringVal())
	}
	if int64(got) > n {
		return t, fmt.Errorf("input %q: %s holds %d values, the shape %s describes %d", name, field, got, tensor.FormatShape(shape), n)
	}
	if dt == tensor.Bytes {
		if int64(got) != n {
			return t, fmt.Errorf("input %q: string_val holds %d values, the shape %s describes %d", name, got, tensor.FormatShape(shape), n)
		}
		if err := checkBytesTotal(tp.GetStringVal()); err != nil {
			return t, fmt.Errorf("input %q: %w", name, err)
		}
		t.Data = tp.GetStringVal()
		return t, nil
	}
	data := tensor.MakeData(dt, int(n))
	var ferr error
	fill := func(i int, j int) { // data[i] = field[j]
		switch d := data.(type) {
		case []float32:
			d[i] = tp.GetFloatVal()[j]
		case []float64:
			d[i] = tp.GetDoubleVal()[j]
		case []int64:
			d[i] = tp.GetInt64Val()[j]
		case []uint32:
			d[i] = tp.GetUint32Val()[j]
		case []uint64:
			d[i] = tp.GetUint64Val()[j]
		case []bool:
			d[i] = tp.GetBoolVal()[j]
		case []tensor.Float16:
			d[i] = tensor.Float16(uint16(tp.GetHalfVal()[j]))
		case []int32:
			d[i] = tp.GetIntVal()[j]
		case []int16:
			v := tp.GetIntVal()[j]
			if v < math.MinInt16 || v > math.MaxInt16 {
				ferr = fmt.Errorf("input %q: int_val element %d (%d) is out of range for DT_INT16", name, j, v)
			}
			d[i] = int16(v)
		case []int8:
			v := tp.GetIntVal()[j]
			if v < math.MinInt8 || v > math.MaxInt8 {
				ferr = fmt.Errorf("input %q: int_val element %d (%d) is out of range for DT_INT8", name, j, v)
			}
			d[i] = int8(v)
		case []uint16:
			v := tp.GetIntVal()[j]
			if v < 0 || v > math.MaxUint16 {
				ferr = fmt.Errorf("input %q: int_val element %d (%d) is out of range for DT_UINT16", name, j, v)
			}
			d[i] = uint16(v)
		case []uint8:
			v := tp.GetIntVal()[j]
			if v < 0 || v > math.MaxUint8 {
				ferr = fmt.Errorf("input %q: int_val element %d (%d) is out of range for DT_UINT8", name, j, v)
			}
			d[i] = uint8(v)
		}
	}
	if got > 0 {
		for i := range int(n) {
			fill(i, min(i, got-1))
			if ferr != nil {
				return t, ferr
			}
		}
	}
	t.Data = data
	return t, nil
}

// toTensorProto writes an output in the dtype's typed field, as TF
// Serving's answers do.
func toTensorProto(t tensor.Tensor) (*tpb.TensorProto, error) {
	dt, ok := tfDTypes[t.DType()]
	if !ok {
		return nil, fmt.Errorf("output %q holds no data of a known type (%T)", t.Name, t.Data)
	}
	shape := &shpb.TensorShapeProto{}
	for _, d := range t.Shape {
		shape.Dim = append(shape.Dim, &shpb.TensorShapeProto_Dim{Size: d})
	}
	tp := &tpb.TensorProto{Dtype: dt, TensorShape: shape}
	switch v := t.Data.(type) {
	case []float32:
		tp.FloatVal = v
	case []float64:
		tp.DoubleVal = v
	case []int64:
		tp.Int64Val = v
	case []int32:
		tp.IntVal = v
	case []int16:
		tp.IntVal = widen[int16, int32](v)
	case []int8:
		tp.IntVal = widen[int8, int32](v)
	case []uint8:
		tp.IntVal = widenInt32(v)
	case []uint16:
		tp.IntVal = widenInt32(v)
	case []uint32:
		tp.Uint32Val = v
	case []uint64:
		tp.Uint64Val = v
	case []bool:
		tp.BoolVal = v
	case []tensor.Float16:
		tp.HalfVal = make([]int32, len(v))
		for i, h := range v {
			tp.HalfVal[i] = int32(h)
		}
	case [][]byte:
		tp.StringVal = v
	default:
		return nil, errors.New("unknown data")
	}
	return tp, nil
}

func widenInt32[T uint8 | uint16](v []T) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
