package kserve_test

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	dtpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/inferbid/inferbid/kserve"
	pb "github.com/inferbid/inferbid/proto/kservepb"
	tfs "github.com/inferbid/inferbid/proto/tfservingpb"
)

// tfServingGRPC serves srv's gRPC server on a real TCP listener and
// returns a connection: TF Serving's services and KServe's share it.
func tfServingGRPC(t *testing.T, srv *kserve.Server) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := srv.NewGRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func shapeOf(dims ...int64) *shpb.TensorShapeProto {
	s := &shpb.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &shpb.TensorShapeProto_Dim{Size: d})
	}
	return s
}

func floatTensor(shape []int64, v ...float32) *tpb.TensorProto {
	return &tpb.TensorProto{Dtype: dtpb.DataType_DT_FLOAT, TensorShape: shapeOf(shape...), FloatVal: v}
}

// TF Serving's gRPC Predict answers what its REST predict answers, over the
// official service names, on the KServe gRPC port.
func TestTFServingGRPCPredict(t *testing.T) {
	srv, _, url := tfServingServer(t)
	conn := tfServingGRPC(t, srv)
	pred := tfs.NewPredictionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	// KServe's service answers on the same connection.
	if live, err := pb.NewGRPCInferenceServiceClient(conn).ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil || !live.GetLive() {
		t.Fatalf("KServe ServerLive beside TF Serving: %v %v", live, err)
	}

	resp, err := pred.Predict(ctx, &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine", SignatureName: "serving_default"},
		Inputs: map[string]*tpb.TensorProto{"x": floatTensor([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}})
	if err != nil {
		t.Fatal(err)
	}
	y := resp.GetOutputs()["y"]
	code, b := call(t, http.MethodPost, url+"/v1/models/affine:predict", `{"inputs": {"x": [[1, 2, 3], [4, 5, 6]]}}`)
	var rest struct{ Outputs [][]float64 }
	decodeJSON(t, b, &rest)
	if code != http.StatusOK || y.GetDtype() != dtpb.DataType_DT_FLOAT || len(y.GetTensorShape().GetDim()) != 2 || y.GetTensorShape().GetDim()[0].GetSize() != 2 {
		t.Fatalf("Predict: %v (REST: %d %s)", resp, code, b)
	}
	var fromREST []float32
	for _, row := range rest.Outputs {
		for _, v := range row {
			fromREST = append(fromREST, float32(v))
		}
	}
	if !reflect.DeepEqual(y.GetFloatVal(), fromREST) || !reflect.DeepEqual(fromREST, []float32{3, 5, 7, 9, 11, 13}) {
		t.Fatalf("Predict: %v, REST %v, want 2x+1", y.GetFloatVal(), fromREST)
	}
	if resp.GetModelSpec().GetName() != "affine" || resp.GetModelSpec().GetVersion().GetValue() != 1 || resp.GetModelSpec().GetSignatureName() != "serving_default" {
		t.Errorf("model_spec %v", resp.GetModelSpec())
	}

	// tensor_content (little-endian), and a single float_val repeated over
	// the shape (TensorFlow's rule), give the same answers.
	raw := make([]byte, 0, 24)
	for _, v := range []float32{1, 2, 3, 4, 5, 6} {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	resp, err = pred.Predict(ctx, &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"},
		Inputs: map[string]*tpb.TensorProto{"x": {Dtype: dtpb.DataType_DT_FLOAT, TensorShape: shapeOf(2, 3), TensorContent: raw}}})
	if err != nil || !reflect.DeepEqual(resp.GetOutputs()["y"].GetFloatVal(), fromREST) {
		t.Fatalf("tensor_content: %v %v", resp, err)
	}
	resp, err = pred.Predict(ctx, &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"},
		Inputs: map[string]*tpb.TensorProto{"x": floatTensor([]int64{1, 3}, 2)}})
	if err != nil || !reflect.DeepEqual(resp.GetOutputs()["y"].GetFloatVal(), []float32{5, 5, 5}) {
		t.Fatalf("one float_val over [1,3]: %v %v", resp, err)
	}

	// A numbered version of a "vN" path, and output_filter.
	in := map[string]*tpb.TensorProto{
		"ad_id":        {Dtype: dtpb.DataType_DT_INT64, TensorShape: shapeOf(1, 1), Int64Val: []int64{1}},
		"publisher_id": {Dtype: dtpb.DataType_DT_INT64, TensorShape: shapeOf(1, 1), Int64Val: []int64{3}},
		"dense":        floatTensor([]int64{1, 6}, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
	}
	resp, err = pred.Predict(ctx, &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "pctr", VersionChoice: &tfs.ModelSpec_Version{Version: wrapperspb.Int64(1)}}, Inputs: in})
	if err != nil || len(resp.GetOutputs()) == 0 || resp.GetModelSpec().GetVersion().GetValue() != 1 {
		t.Fatalf("pctr version 1: %v %v", resp, err)
	}
	code, b = call(t, http.MethodPost, url+"/v1/models/pctr/versions/v1:predict", `{"inputs": {"ad_id": [[1]], "publisher_id": [[3]], "dense": [[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]]}}`)
	var pctr struct{ Outputs [][]float64 }
	decodeJSON(t, b, &pctr)
	for _, o := range resp.GetOutputs() {
		if code != http.StatusOK || len(o.GetFloatVal()) != 1 || o.GetFloatVal()[0] != float32(pctr.Outputs[0][0]) {
			t.Fatalf("pctr version 1: %v, REST %d %s", resp, code, b)
		}
	}
	for name := range resp.GetOutputs() {
		got, err := pred.Predict(ctx, &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "pctr"}, Inputs: in, OutputFilter: []string{name}})
		if err != nil || len(got.GetOutputs()) != 1 || got.GetOutputs()[name] == nil {
			t.Fatalf("output_filter %q: %v %v", name, got, err)
		}
	}

	for _, c := range []struct {
		what string
		req  *tfs.PredictRequest
		code codes.Code
		msg  string
	}{
		{"unknown model", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "nope"}, Inputs: in}, codes.NotFound, `"nope"`},
		{"unknown version", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "pctr", VersionChoice: &tfs.ModelSpec_Version{Version: wrapperspb.Int64(9)}}, Inputs: in}, codes.NotFound, "no version 9 (versions: v1, v2)"},
		{"version label", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "pctr", VersionChoice: &tfs.ModelSpec_VersionLabel{VersionLabel: "stable"}}, Inputs: in}, codes.InvalidArgument, "version_label"},
		{"other signature", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "pctr", SignatureName: "train"}, Inputs: in}, codes.InvalidArgument, "signature_name"},
		{"no inputs", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"}}, codes.InvalidArgument, "no inputs"},
		{"too many values", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"}, Inputs: map[string]*tpb.TensorProto{"x": floatTensor([]int64{1, 3}, 1, 2, 3, 4)}}, codes.InvalidArgument, "float_val holds 4 values"},
		{"short tensor_content", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"}, Inputs: map[string]*tpb.TensorProto{"x": {Dtype: dtpb.DataType_DT_FLOAT, TensorShape: shapeOf(1, 3), TensorContent: raw[:8]}}}, codes.InvalidArgument, "tensor_content holds 8 bytes"},
		{"complex dtype", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"}, Inputs: map[string]*tpb.TensorProto{"x": {Dtype: dtpb.DataType_DT_COMPLEX64, TensorShape: shapeOf(1)}}}, codes.InvalidArgument, "DT_COMPLEX64 is not supported"},
		{"int8 out of range", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"}, Inputs: map[string]*tpb.TensorProto{"x": {Dtype: dtpb.DataType_DT_INT8, TensorShape: shapeOf(1), IntVal: []int32{300}}}}, codes.InvalidArgument, "out of range for DT_INT8"},
		{"unknown output", &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"}, Inputs: map[string]*tpb.TensorProto{"x": floatTensor([]int64{1, 3}, 1, 2, 3)}, OutputFilter: []string{"z"}}, codes.InvalidArgument, `"z"`},
	} {
		_, err := pred.Predict(ctx, c.req)
		wantCode(t, c.what, err, c.code, c.msg)
	}
	for name, call := range map[string]func() error{
		"Classify":       func() error { _, err := pred.Classify(ctx, &tfs.ClassificationRequest{}); return err },
		"Regress":        func() error { _, err := pred.Regress(ctx, &tfs.RegressionRequest{}); return err },
		"MultiInference": func() error { _, err := pred.MultiInference(ctx, &tfs.MultiInferenceRequest{}); return err },
		"HandleReloadConfigRequest": func() error {
			_, err := tfs.NewModelServiceClient(conn).HandleReloadConfigRequest(ctx, &tfs.ReloadConfigRequest{})
			return err
		},
	} {
		wantCode(t, name, call(), codes.Unimplemented, name+" is not supported")
	}
}

func TestTFServingGRPCMetadataAndStatus(t *testing.T) {
	srv, _, _ := tfServingServer(t)
	conn := tfServingGRPC(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	pred := tfs.NewPredictionServiceClient(conn)
	md, err := pred.GetModelMetadata(ctx, &tfs.GetModelMetadataRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"}, MetadataField: []string{"signature_def"}})
	if err != nil {
		t.Fatal(err)
	}
	var sdm tfs.SignatureDefMap
	if err := md.GetMetadata()["signature_def"].UnmarshalTo(&sdm); err != nil {
		t.Fatal(err)
	}
	sd := sdm.GetSignatureDef()["serving_default"]
	x, y := sd.GetInputs()["x"], sd.GetOutputs()["y"]
	if sd.GetMethodName() != "tensorflow/serving/predict" || x.GetDtype() != dtpb.DataType_DT_FLOAT || y.GetDtype() != dtpb.DataType_DT_FLOAT ||
		len(x.GetTensorShape().GetDim()) != 2 || x.GetTensorShape().GetDim()[0].GetSize() != -1 || x.GetTensorShape().GetDim()[1].GetSize() != 3 || x.GetName() == "" {
		t.Fatalf("signature_def: %v", sd)
	}
	_, err = pred.GetModelMetadata(ctx, &tfs.GetModelMetadataRequest{ModelSpec: &tfs.ModelSpec{Name: "affine"}, MetadataField: []string{"graph"}})
	wantCode(t, "other field", err, codes.InvalidArgument, `"graph" is not supported`)

	ms := tfs.NewModelServiceClient(conn)
	st, err := ms.GetModelStatus(ctx, &tfs.GetModelStatusRequest{ModelSpec: &tfs.ModelSpec{Name: "pctr"}})
	if err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for _, v := range st.GetModelVersionStatus() {
		if v.GetState() != tfs.ModelVersionStatus_AVAILABLE || v.GetStatus().GetErrorMessage() != "" {
			t.Errorf("status %v", v)
		}
		versions = append(versions, v.GetVersion())
	}
	if !reflect.DeepEqual(versions, []int64{1, 2}) {
		t.Fatalf("versions %v, want [1 2]", versions)
	}
	st, err = ms.GetModelStatus(ctx, &tfs.GetModelStatusRequest{ModelSpec: &tfs.ModelSpec{Name: "pctr", VersionChoice: &tfs.ModelSpec_Version{Version: wrapperspb.Int64(2)}}})
	if err != nil || len(st.GetModelVersionStatus()) != 1 || st.GetModelVersionStatus()[0].GetVersion() != 2 {
		t.Fatalf("version 2: %v %v", st, err)
	}
	_, err = ms.GetModelStatus(ctx, &tfs.GetModelStatusRequest{ModelSpec: &tfs.ModelSpec{Name: "nope"}})
	wantCode(t, "unknown model", err, codes.NotFound, `"nope"`)
}

// OpenVINO Model Server's gRPC example for stateful models: the sequence
// fields are inputs (sequence_id DT_UINT64, sequence_control_input
// DT_UINT32), answered as an output, by the same rules as REST.
func TestTFServingGRPCSequences(t *testing.T) {
	srv, _ := statefulServer(t, 10)
	pred := tfs.NewPredictionServiceClient(tfServingGRPC(t, srv))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req := func(x float32, id uint64, ctl uint32) *tfs.PredictRequest {
		in := map[string]*tpb.TensorProto{"x": floatTensor([]int64{1}, x)}
		if id != 0 {
			in["sequence_id"] = &tpb.TensorProto{Dtype: dtpb.DataType_DT_UINT64, TensorShape: shapeOf(1), Uint64Val: []uint64{id}}
		}
		in["sequence_control_input"] = &tpb.TensorProto{Dtype: dtpb.DataType_DT_UINT32, TensorShape: shapeOf(1), Uint32Val: []uint32{ctl}}
		return &tfs.PredictRequest{ModelSpec: &tfs.ModelSpec{Name: "sum"}, Inputs: in}
	}
	for i, s := range []struct {
		x       float32
		id      uint64
		ctl     uint32
		sum     float32
		wantErr codes.Code
	}{
		{1.5, 10, 1, 1.5, codes.OK},
		{2, 10, 0, 3.5, codes.OK},
		{1, 10, 1, 0, codes.AlreadyExists},
		{1, 11, 0, 0, codes.NotFound},
		{3, 10, 2, 6.5, codes.OK},
		{1, 10, 0, 0, codes.NotFound},
	} {
		resp, err := pred.Predict(ctx, req(s.x, s.id, s.ctl))
		if s.wantErr != codes.OK {
			wantCode(t, "step", err, s.wantErr)
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		sum, id := resp.GetOutputs()["sum"].GetFloatVal(), resp.GetOutputs()["sequence_id"]
		if len(sum) != 1 || sum[0] != s.sum || len(id.GetUint64Val()) != 1 || id.GetUint64Val()[0] != s.id {
			t.Fatalf("step %d: %v, want sum %v and a sequence_id", i, resp, s.sum)
		}
	}
}

// TestTFServingUnsupportedObservedAsREST: a refused Classify, Regress or
// MultiInference over gRPC is observed as REST's :classify and :regress are
// (tfserving_predict, 501), so the metrics count both protocols alike.
func TestTFServingUnsupportedObservedAsREST(t *testing.T) {
	var mu sync.Mutex
	var obs []kserve.Observation
	srv := kserve.New(kserve.Options{Observe: func(o kserve.Observation) {
		mu.Lock()
		obs = append(obs, o)
		mu.Unlock()
	}})
	conn := tfServingGRPC(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	pred := tfs.NewPredictionServiceClient(conn)
	for name, call := range map[string]func() error{
		"Classify":       func() error { _, err := pred.Classify(ctx, &tfs.ClassificationRequest{}); return err },
		"Regress":        func() error { _, err := pred.Regress(ctx, &tfs.RegressionRequest{}); return err },
		"MultiInference": func() error { _, err := pred.MultiInference(ctx, &tfs.MultiInferenceRequest{}); return err },
	} {
		wantCode(t, name, call(), codes.Unimplemented, name+" is not supported")
		mu.Lock()
		n := len(obs)
		var o kserve.Observation
		if n > 0 {
			o = obs[n-1]
		}
		obs = nil
		mu.Unlock()
		if n != 1 || o.Protocol != "grpc" || o.Endpoint != "tfserving_predict" || o.Status != http.StatusNotImplemented {
			t.Errorf("%s: %d observations, last %+v; want one: grpc tfserving_predict 501", name, n, o)
		}
	}
}
