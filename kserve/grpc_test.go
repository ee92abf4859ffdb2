package kserve_test

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/inferbid/inferbid/kserve"
	pb "github.com/inferbid/inferbid/proto/kservepb"
)

// lastGRPCAddr is the address serveGRPC served on last (tests are not
// parallel), for clients of the other services on that server.
var lastGRPCAddr string

// serveGRPC serves srv's gRPC service on a real TCP listener and returns a
// client generated from the protocol's proto.
func serveGRPC(t *testing.T, srv *kserve.Server) pb.GRPCInferenceServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := srv.NewGRPCServer()
	lastGRPCAddr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ln) }()
	t.Cleanup(func() {
		gs.GracefulStop()
		if err := <-served; err != nil {
			t.Errorf("gRPC Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewGRPCInferenceServiceClient(conn)
}

// wantCode checks a gRPC error's code and that its message holds parts.
func wantCode(t *testing.T, what string, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if err == nil || st.Code() != code {
		t.Errorf("%s: error %v, want code %s", what, err, code)
		return
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("%s: message %q does not mention %q", what, st.Message(), p)
		}
	}
}

func rawFloat32(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func fromRawFloat32(b []byte) []float64 {
	out := make([]float64, len(b)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

func widen32(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// runGRPCConformance checks every RPC of inference.GRPCInferenceService
// against a server whose sidecar holds the affine models.
func runGRPCConformance(t *testing.T, srv *kserve.Server, fx affineFixture) {
	c := serveGRPC(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	if r, err := c.ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil || !r.GetLive() {
		t.Errorf("ServerLive: %v %v", r, err)
	}
	if r, err := c.ServerReady(ctx, &pb.ServerReadyRequest{}); err != nil || !r.GetReady() {
		t.Errorf("ServerReady: %v %v", r, err)
	}
	for _, v := range []string{"", "v9", "v10"} {
		if r, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "affine", Version: v}); err != nil || !r.GetReady() {
			t.Errorf("ModelReady affine %q: %v %v", v, r, err)
		}
	}
	_, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "affine", Version: "v1"})
	wantCode(t, "ModelReady of a missing version", err, codes.NotFound, "v1")
	_, err = c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "nosuch"})
	wantCode(t, "ModelReady of an unknown model", err, codes.NotFound, "nosuch")

	if r, err := c.ServerMetadata(ctx, &pb.ServerMetadataRequest{}); err != nil || r.GetName() != "inferbid" || r.GetVersion() == "" {
		t.Errorf("ServerMetadata: %v %v", r, err)
	}
	md, err := c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "affine"})
	if err != nil {
		t.Fatalf("ModelMetadata: %v", err)
	}
	if md.GetName() != "affine" || !slices.Equal(md.GetVersions(), []string{"v9", "v10"}) || md.GetPlatform() != fx.Platform || len(md.GetInputs()) != 1 || (len(md.GetOutputs()) == 0 && !fx.Positional) {
		t.Fatalf("ModelMetadata: %v", md)
	}
	if in := md.GetInputs()[0]; !fx.Positional && (in.GetName() != "x" || in.GetDatatype() != "FP32" || !slices.Equal(in.GetShape(), []int64{-1, 3})) {
		t.Errorf("ModelMetadata input %v, want x FP32 [-1,3]", in)
	}
	_, err = c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "affine", Version: "v2"})
	wantCode(t, "ModelMetadata of a missing version", err, codes.NotFound, "v2")

	x := []float32{0.5, -1, 2, 3, 4.25, -6}
	input := func(dt string, contents *pb.InferTensorContents) *pb.ModelInferRequest_InferInputTensor {
		return &pb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: dt, Shape: []int64{2, 3}, Contents: contents,
			Parameters: map[string]*pb.InferParameter{"p": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}}}}
	}
	for _, v := range []string{"", "v9", "v10"} {
		served := v
		if served == "" {
			served = "v10"
		}
		want := affineWant(served, widen32(x))
		// The output's name: the metadata's, or the answer's when the
		// runtime describes no outputs.
		outName := ""
		if len(md.GetOutputs()) > 0 {
			outName = md.GetOutputs()[0].GetName()
		} else if r, err := c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "affine", ModelVersion: v,
			Inputs: []*pb.ModelInferRequest_InferInputTensor{input("FP32", &pb.InferTensorContents{Fp32Contents: x})}}); err == nil && len(r.GetOutputs()) == 1 {
			outName = r.GetOutputs()[0].GetName()
		}
		// Typed contents, with parameters and the output asked by name.
		r, err := c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "affine", ModelVersion: v, Id: "g-" + v,
			Parameters: map[string]*pb.InferParameter{"q": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 3}}},
			Inputs:     []*pb.ModelInferRequest_InferInputTensor{input("FP32", &pb.InferTensorContents{Fp32Contents: x})},
			Outputs:    []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: outName}}})
		if err != nil {
			t.Errorf("ModelInfer %q: %v", v, err)
			continue
		}
		if r.GetModelName() != "affine" || r.GetModelVersion() != served || r.GetId() != "g-"+v || len(r.GetOutputs()) != 1 || len(r.GetRawOutputContents()) != 0 {
			t.Errorf("ModelInfer %q: %v", v, r)
			continue
		}
		o := r.GetOutputs()[0]
		if o.GetName() != outName || o.GetDatatype() != "FP32" || !slices.Equal(o.GetShape(), []int64{2, 3}) || !close32(widen32(o.GetContents().GetFp32Contents()), want) {
			t.Errorf("ModelInfer %q: output %v, want FP32 [2,3] %v", v, o, want)
		}
		// Raw contents in, raw contents out.
		r, err = c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "affine", ModelVersion: v,
			Inputs:           []*pb.ModelInferRequest_InferInputTensor{input("FP32", nil)},
			RawInputContents: [][]byte{rawFloat32(x)}})
		if err != nil {
			t.Errorf("ModelInfer raw %q: %v", v, err)
			continue
		}
		if len(r.GetRawOutputContents()) != 1 || r.GetOutputs()[0].GetContents() != nil || !close32(fromRawFloat32(r.GetRawOutputContents()[0]), want) {
			t.Errorf("ModelInfer raw %q: %v, want raw_output_contents %v", v, r, want)
		}
	}

	infer := func(req *pb.ModelInferRequest) error {
		if req.ModelName == "" {
			req.ModelName = "affine"
		}
		_, err := c.ModelInfer(ctx, req)
		return err
	}
	in := func(ts ...*pb.ModelInferRequest_InferInputTensor) []*pb.ModelInferRequest_InferInputTensor { return ts }
	wantCode(t, "unknown model", infer(&pb.ModelInferRequest{ModelName: "nosuch", Inputs: in(input("FP32", &pb.InferTensorContents{Fp32Contents: x}))}), codes.NotFound, "nosuch")
	wantCode(t, "no inputs", infer(&pb.ModelInferRequest{}), codes.InvalidArgument, "no inputs")
	// Datatypes the model cannot take (for PyTorch, whose models declare
	// no dtypes, ones libtorch cannot take at all).
	if fx.Positional {
		wantCode(t, "UINT32", infer(&pb.ModelInferRequest{Inputs: in(input("UINT32", &pb.InferTensorContents{UintContents: make([]uint32, 6)}))}), codes.InvalidArgument, `"x"`, "UINT32")
		wantCode(t, "UINT64 raw", infer(&pb.ModelInferRequest{Inputs: in(input("UINT64", nil)), RawInputContents: [][]byte{make([]byte, 48)}}), codes.InvalidArgument, `"x"`, "UINT64")
	} else {
		wantCode(t, "BOOL", infer(&pb.ModelInferRequest{Inputs: in(input("BOOL", &pb.InferTensorContents{BoolContents: make([]bool, 6)}))}), codes.InvalidArgument, `"x"`, "BOOL")
		wantCode(t, "FP16 raw", infer(&pb.ModelInferRequest{Inputs: in(input("FP16", nil)), RawInputContents: [][]byte{make([]byte, 12)}}), codes.InvalidArgument, `"x"`, "FP16")
	}
	wantCode(t, "short contents", infer(&pb.ModelInferRequest{Inputs: in(input("FP32", &pb.InferTensorContents{Fp32Contents: x[:5]}))}), codes.InvalidArgument, `"x"`, "5 values")
	wantCode(t, "wrong contents field", infer(&pb.ModelInferRequest{Inputs: in(input("FP32", &pb.InferTensorContents{Fp64Contents: make([]float64, 6)}))}), codes.InvalidArgument, `"x"`, "fp32_contents")
	wantCode(t, "short raw", infer(&pb.ModelInferRequest{Inputs: in(input("FP32", nil)), RawInputContents: [][]byte{make([]byte, 23)}}), codes.InvalidArgument, `"x"`, "23 bytes")
	wantCode(t, "raw and contents", infer(&pb.ModelInferRequest{Inputs: in(input("FP32", &pb.InferTensorContents{Fp32Contents: x})), RawInputContents: [][]byte{rawFloat32(x)}}), codes.InvalidArgument, `"x"`, "raw_input_contents")
	wantCode(t, "raw count", infer(&pb.ModelInferRequest{Inputs: in(input("FP32", nil)), RawInputContents: [][]byte{rawFloat32(x), rawFloat32(x)}}), codes.InvalidArgument, "2 buffers")
	wantCode(t, "zero dimension", infer(&pb.ModelInferRequest{Inputs: in(&pb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: "FP32", Shape: []int64{0, 3}})}), codes.InvalidArgument, `"x"`)
	wantCode(t, "unknown output", infer(&pb.ModelInferRequest{Inputs: in(input("FP32", &pb.InferTensorContents{Fp32Contents: x})),
		Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "nosuch"}}}), codes.InvalidArgument, "nosuch")
	if !fx.Positional {
		wantCode(t, "FP64 for an FP32 input", infer(&pb.ModelInferRequest{Inputs: in(input("FP64", &pb.InferTensorContents{Fp64Contents: make([]float64, 6)}))}), codes.InvalidArgument, "x", "affine/v10/")
	}
	if fx.AllDTypes != nil {
		checkAllDTypesGRPC(t, c, fx)
	}
}

// checkAllDTypesGRPC sends every datatype the sidecar carries through the
// identity model, typed and raw, and wants each value back exactly.
func checkAllDTypesGRPC(t *testing.T, c pb.GRPCInferenceServiceClient, fx affineFixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	contents := map[string]*pb.InferTensorContents{
		"FP64":  {Fp64Contents: []float64{1e-300, -2.5, math.Pi, 1e300}},
		"FP32":  {Fp32Contents: []float32{1.5, -2.25, math.MaxFloat32, 1e-7}},
		"INT8":  {IntContents: []int32{-128, 127, 0, -1}},
		"INT16": {IntContents: []int32{-32768, 32767, 1, 2}},
		"INT32": {IntContents: []int32{math.MinInt32, math.MaxInt32, 3, 4}},
		"INT64": {Int64Contents: []int64{math.MinInt64, math.MaxInt64, 1<<53 + 1, 5}},
	}
	req := &pb.ModelInferRequest{ModelName: "alldtypes"}
	for _, d := range allDTypesData {
		req.Inputs = append(req.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: fx.InName(d.dtype), Datatype: d.datatype, Shape: []int64{2, 2}, Contents: contents[d.datatype]})
	}
	r, err := c.ModelInfer(ctx, req)
	if err != nil {
		t.Fatalf("alldtypes ModelInfer: %v", err)
	}
	if len(r.GetOutputs()) != len(allDTypesData) {
		t.Fatalf("alldtypes: %d outputs, want %d", len(r.GetOutputs()), len(allDTypesData))
	}
	for i, d := range allDTypesData {
		o := r.GetOutputs()[i]
		if fx.OutName != nil {
			j := slices.IndexFunc(r.GetOutputs(), func(o *pb.ModelInferResponse_InferOutputTensor) bool { return o.GetName() == fx.OutName(d.dtype) })
			if j < 0 {
				t.Errorf("alldtypes: no output %q", fx.OutName(d.dtype))
				continue
			}
			o = r.GetOutputs()[j]
		}
		want := contents[d.datatype]
		got := o.GetContents()
		same := slices.Equal(got.GetFp64Contents(), want.GetFp64Contents()) && slices.Equal(got.GetFp32Contents(), want.GetFp32Contents()) &&
			slices.Equal(got.GetIntContents(), want.GetIntContents()) && slices.Equal(got.GetInt64Contents(), want.GetInt64Contents())
		if o.GetDatatype() != d.datatype || !slices.Equal(o.GetShape(), []int64{2, 2}) || !same {
			t.Errorf("alldtypes %s: output %v, want %v", d.datatype, o, want)
		}
	}

	// The same values raw: the identity gives back the same bytes.
	raw := &pb.ModelInferRequest{ModelName: "alldtypes"}
	for _, d := range allDTypesData {
		raw.Inputs = append(raw.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: fx.InName(d.dtype), Datatype: d.datatype, Shape: []int64{2, 2}})
		raw.RawInputContents = append(raw.RawInputContents, rawOf(contents[d.datatype], d.datatype))
	}
	r, err = c.ModelInfer(ctx, raw)
	if err != nil {
		t.Fatalf("alldtypes raw ModelInfer: %v", err)
	}
	if len(r.GetRawOutputContents()) != len(r.GetOutputs()) {
		t.Fatalf("alldtypes raw: %d raw_output_contents for %d outputs", len(r.GetRawOutputContents()), len(r.GetOutputs()))
	}
	for i, o := range r.GetOutputs() {
		want := rawOf(contents[o.GetDatatype()], o.GetDatatype())
		if fx.OutName == nil {
			want = raw.RawInputContents[i]
		}
		if string(r.GetRawOutputContents()[i]) != string(want) {
			t.Errorf("alldtypes raw output %s (%s): % x, want % x", o.GetName(), o.GetDatatype(), r.GetRawOutputContents()[i], want)
		}
	}
}

// rawOf is typed contents as the protocol's raw little-endian bytes.
func rawOf(c *pb.InferTensorContents, datatype string) []byte {
	var b []byte
	for _, v := range c.GetFp64Contents() {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	for _, v := range c.GetFp32Contents() {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	for _, v := range c.GetInt64Contents() {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	for _, v := range c.GetIntContents() {
		switch datatype {
		case "INT8":
			b = append(b, byte(v))
		case "INT16":
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		default:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	}
	return b
}

// Without a sidecar the server is live and not ready, and models are not
// found; a message over MaxRequestBytes is refused by gRPC itself.
func TestGRPCNotReadyAndMessageLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c := serveGRPC(t, kserve.New(kserve.Options{MaxRequestBytes: 1024}))
	if r, err := c.ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil || !r.GetLive() {
		t.Errorf("ServerLive without a sidecar: %v %v", r, err)
	}
	if r, err := c.ServerReady(ctx, &pb.ServerReadyRequest{}); err != nil || r.GetReady() {
		t.Errorf("ServerReady without a sidecar: %v %v, want false", r, err)
	}
	_, err := c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "pctr"})
	wantCode(t, "ModelMetadata without a sidecar", err, codes.NotFound, "not available")
	_, err = c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "pctr", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{512}}},
		RawInputContents: [][]byte{make([]byte, 2048)}})
	wantCode(t, "a message over the limit", err, codes.ResourceExhausted)
}
