package kserve_test

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	pb "github.com/inferbid/inferbid/proto/kservepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/registry"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// statefulModelDir holds the committed stateful model: tfsave's running sum
// (input x FLOAT [1], output sum FLOAT [1], the sum starting at 0).
const statefulModelDir = "testdata/stateful/sum/1"

var updateStateful = flag.Bool("update-stateful", false, "rewrite "+statefulModelDir+" from tfsave.RunningSumModel")

// The committed model is what tfsave builds today (go test ./kserve
// -run TestStatefulModelIsUpToDate -update-stateful rewrites it).
func TestStatefulModelIsUpToDate(t *testing.T) {
	want, err := tfsave.RunningSumModel(tfsave.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if *updateStateful {
		os.RemoveAll(statefulModelDir)
		for name, b := range want {
			p := filepath.Join(statefulModelDir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := modelfiles.ReadLocal(statefulModelDir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("committed files %v, tfsave builds %v (rerun with -update-stateful)", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, b := range want {
		if string(got[name]) != string(b) {
			t.Errorf("%s differs from what tfsave builds (rerun with -update-stateful)", name)
		}
	}
}

// statefulServer serves the committed running-sum model as model "sum"
// version "1" (model path sum/1/), stateful with at most maxSeq sequences,
// over a real sidecar socket, behind the v2 API and TF Serving's predict.
func statefulServer(t *testing.T, maxSeq uint32) (*kserve.Server, string) {
	return serveBackend(t, statefulClient(t, maxSeq))
}

// statefulClient is the client of a real sidecar serving the committed
// running-sum model at sum/1/.
func statefulClient(t *testing.T, maxSeq uint32) *sidecar.Client {
	t.Helper()
	settings := registry.Settings{StatefulModels: map[string]runtimes.SequenceSettings{"sum/1/": {Stateful: true, MaxSequenceNumber: &maxSeq}}}
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Settings: settings, Logger: slog.New(slog.DiscardHandler), SequenceCleanerInterval: -1}, sidecar.ClientOptions{})
	files, err := modelfiles.ReadLocal(statefulModelDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := client.RegisterModel(ctx, "sum/1/", files, ""); err != nil {
		t.Fatal(err)
	}
	return client
}

// serveBackend serves b behind the v2 API and TF Serving's predict.
func serveBackend(t *testing.T, b kserve.Backend) (*kserve.Server, string) {
	t.Helper()
	srv := kserve.New(kserve.Options{Limits: batch.Limits{}})
	srv.SetBackend(b)
	mux := http.NewServeMux()
	mux.Handle("/v2/", srv.Handler())
	mux.Handle("POST /v1/models/", srv.TFServingPredictHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

type tfsOutputs struct {
	Outputs struct {
		Sum        []float64 `json:"sum"`
		SequenceID []uint64  `json:"sequence_id"`
	} `json:"outputs"`
}

func tfsPredict(t *testing.T, url, body string) (int, tfsOutputs, []byte) {
	t.Helper()
	code, b := call(t, http.MethodPost, url+"/v1/models/sum:predict", body)
	var out tfsOutputs
	if code == http.StatusOK {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
	}
	return code, out, b
}

// The seed's REST example: start with an id of the client's choice, a
// request in the middle, the end; a start without an id gets one from the
// server; with two sequences interleaved.
func TestTFServingPredictSequenceFlow(t *testing.T) {
	_, url := statefulServer(t, 10)
	steps := []struct {
		body    string
		wantSum float64
		wantID  uint64 // 0: any non-zero id
	}{
		{`{"signature_name": "serving_default", "inputs": {"x": [1.5], "sequence_control_input": [1], "sequence_id": [10]}}`, 1.5, 10},
		{`{"inputs": {"x": [100], "sequence_control_input": [1], "sequence_id": [11]}}`, 100, 11},
		{`{"signature_name": "serving_default", "inputs": {"x": [2], "sequence_id": [10]}}`, 3.5, 10},
		{`{"inputs": {"x": [200], "sequence_id": [11], "sequence_control_input": [0]}}`, 300, 11},
		{`{"signature_name": "serving_default", "inputs": {"x": [3], "sequence_control_input": [2], "sequence_id": [10]}}`, 6.5, 10},
		{`{"inputs": {"x": [7], "sequence_control_input": [1]}}`, 7, 0},
	}
	for i, s := range steps {
		code, out, b := tfsPredict(t, url, s.body)
		if code != http.StatusOK {
			t.Fatalf("step %d: status %d: %s", i, code, b)
		}
		if len(out.Outputs.Sum) != 1 || out.Outputs.Sum[0] != s.wantSum || len(out.Outputs.SequenceID) != 1 || out.Outputs.SequenceID[0] == 0 || (s.wantID != 0 && out.Outputs.SequenceID[0] != s.wantID) {
			t.Fatalf("step %d: %s, want sum [%v] and sequence_id [%d]", i, b, s.wantSum, s.wantID)
		}
	}
	// The row form carries the sequence inputs as any other input.
	code, b := call(t, http.MethodPost, url+"/v1/models/sum:predict", `{"instances": [{"x": 4, "sequence_id": 20, "sequence_control_input": 1}]}`)
	if code != http.StatusOK || string(b) != `{"predictions":[{"sum":4,"sequence_id":20}]}`+"\n" {
		t.Fatalf("row-form start: %d %s", code, b)
	}
	code, b = call(t, http.MethodPost, url+"/v1/models/sum:predict", `{"instances": [{"sequence_id": 20, "x": 1, "sequence_control_input": 2}]}`)
	if code != http.StatusOK || string(b) != `{"predictions":[{"sum":5,"sequence_id":20}]}`+"\n" {
		t.Fatalf("row-form end: %d %s", code, b)
	}
	// 10 ended: its id may start again, from the checkpoint.
	code, out, b := tfsPredict(t, url, `{"inputs": {"x": [1], "sequence_control_input": [1], "sequence_id": [10]}}`)
	if code != http.StatusOK || out.Outputs.Sum[0] != 1 {
		t.Fatalf("restart of 10: %d %s", code, b)
	}
}

// Every sequence error through TF Serving's predict, with the seed's HTTP
// status and message.
func TestTFServingPredictSequenceErrors(t *testing.T) {
	_, url := statefulServer(t, 2)
	if code, _, b := tfsPredict(t, url, `{"inputs": {"x": [1], "sequence_control_input": [1], "sequence_id": [5]}}`); code != http.StatusOK {
		t.Fatalf("start: %d %s", code, b)
	}
	for _, c := range []struct {
		what, body string
		code       int
		msg        string
	}{
		{"id in use", `{"inputs": {"x": [1], "sequence_control_input": [1], "sequence_id": [5]}}`, 409, "Sequence with a provided ID already exists."},
		{"unknown id", `{"inputs": {"x": [1], "sequence_id": [6]}}`, 404, "Sequence with a provided ID does not exist."},
		{"no id", `{"inputs": {"x": [1]}}`, 400, "Sequence ID has not been provided in request inputs."},
		{"id 0 at the end", `{"inputs": {"x": [1], "sequence_id": [0], "sequence_control_input": [2]}}`, 400, "Sequence ID has not been provided in request inputs."},
		{"bad control", `{"inputs": {"x": [1], "sequence_id": [5], "sequence_control_input": [3]}}`, 400, "Unexpected value of sequence control input."},
		{"unknown input", `{"inputs": {"y": [1], "sequence_id": [5]}}`, 400, `input "y" is not an input of the model`},
		{"instances without an id", `{"instances": [{"x": 1}]}`, 400, "Sequence ID has not been provided in request inputs."},
		{"unknown model", `{"inputs": {"x": [1]}}`, 404, ""},
	} {
		u := url
		if c.what == "unknown model" {
			code, b := call(t, http.MethodPost, u+"/v1/models/nope:predict", c.body)
			wantError(t, c.what, code, b, c.code)
			continue
		}
		code, _, b := tfsPredict(t, u, c.body)
		wantError(t, c.what, code, b, c.code, c.msg)
	}
	if code, _, b := tfsPredict(t, url, `{"inputs": {"x": [1], "sequence_control_input": [1]}}`); code != http.StatusOK {
		t.Fatalf("second start: %d %s", code, b)
	}
	code, _, b := tfsPredict(t, url, `{"inputs": {"x": [1], "sequence_control_input": [1]}}`)
	wantError(t, "limit reached", code, b, 503, "Max sequence number has been reached. Could not create a new sequence.")
}

// The v2 API takes the sequence fields as inputs (answered as an output)
// or as request parameters (answered as a parameter).
func TestV2InferSequences(t *testing.T) {
	_, url := statefulServer(t, 10)
	infer := url + "/v2/models/sum/versions/1/infer"
	code, b := call(t, http.MethodPost, infer, `{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]},
		{"name": "sequence_id", "shape": [1], "datatype": "INT64", "data": [42]},
		{"name": "sequence_control_input", "shape": [1], "datatype": "INT32", "data": [1]}]}`)
	if code != http.StatusOK {
		t.Fatalf("start as inputs: %d %s", code, b)
	}
	var resp struct {
		Parameters map[string]uint64 `json:"parameters"`
		Outputs    []struct {
			Name     string    `json:"name"`
			Datatype string    `json:"datatype"`
			Data     []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	outs := map[string]float64{}
	for _, o := range resp.Outputs {
		outs[o.Name] = o.Data[0]
	}
	if outs["sum"] != 1 || outs["sequence_id"] != 42 || resp.Parameters != nil {
		t.Fatalf("start as inputs: %s", b)
	}
	code, b = call(t, http.MethodPost, infer, `{"parameters": {"sequence_id": 42}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [2]}]}`)
	resp.Outputs, resp.Parameters = nil, nil
	if err := json.Unmarshal(b, &resp); code != http.StatusOK || err != nil || resp.Parameters["sequence_id"] != 42 || len(resp.Outputs) != 1 || resp.Outputs[0].Data[0] != 3 {
		t.Fatalf("middle as parameters: %d %s", code, b)
	}
	code, b = call(t, http.MethodPost, infer, `{"parameters": {"sequence_control_input": 1}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [5]}]}`)
	resp.Outputs, resp.Parameters = nil, nil
	if err := json.Unmarshal(b, &resp); code != http.StatusOK || err != nil || resp.Parameters["sequence_id"] == 0 || resp.Outputs[0].Data[0] != 5 {
		t.Fatalf("start without id as parameters: %d %s", code, b)
	}
	// The assigned id (random, not a count) continues the sequence.
	assigned := resp.Parameters["sequence_id"]
	if assigned > sequence.MaxAssignedID {
		t.Fatalf("assigned id %d is above MaxAssignedID", assigned)
	}
	code, b = call(t, http.MethodPost, infer, `{"parameters": {"sequence_id": `+strconv.FormatUint(assigned, 10)+`, "sequence_control_input": 2}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [6]}]}`)
	resp.Outputs, resp.Parameters = nil, nil
	if err := json.Unmarshal(b, &resp); code != http.StatusOK || err != nil || resp.Parameters["sequence_id"] != assigned || resp.Outputs[0].Data[0] != 11 {
		t.Fatalf("end of the assigned id %d: %d %s", assigned, code, b)
	}
	for _, c := range []struct {
		what, body string
		code       int
		msg        string
	}{
		{"id in use", `{"parameters": {"sequence_id": 42, "sequence_control_input": 1}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]}`, 409, "already exists"},
		{"unknown id", `{"parameters": {"sequence_id": 43}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]}`, 404, "does not exist"},
		{"no id", `{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]}`, 400, "Sequence ID has not been provided"},
		{"bad control", `{"parameters": {"sequence_id": 42, "sequence_control_input": 7}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]}`, 400, "Unexpected value of sequence control input"},
		{"negative id", `{"parameters": {"sequence_id": -1}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]}`, 400, "non-negative integer"},
		{"both ways", `{"parameters": {"sequence_id": 42}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}, {"name": "sequence_id", "shape": [1], "datatype": "INT64", "data": [42]}]}`, 400, "both as an input and as a parameter"},
	} {
		code, b := call(t, http.MethodPost, infer, c.body)
		wantError(t, c.what, code, b, c.code, c.msg)
	}
	code, b = call(t, http.MethodPost, infer, `{"parameters": {"sequence_id": 42, "sequence_control_input": 2}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [4]}]}`)
	resp.Outputs, resp.Parameters = nil, nil
	if err := json.Unmarshal(b, &resp); code != http.StatusOK || err != nil || resp.Outputs[0].Data[0] != 7 {
		t.Fatalf("end as parameters: %d %s", code, b)
	}
}

// Over gRPC the sequence fields are int64_param parameters (answered as a
// parameter) and sequence errors carry their gRPC codes.
func TestGRPCInferSequences(t *testing.T) {
	srv, _ := statefulServer(t, 1)
	c := serveGRPC(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req := func(x float32, params map[string]int64) *pb.ModelInferRequest {
		r := &pb.ModelInferRequest{ModelName: "sum", Inputs: []*pb.ModelInferRequest_InferInputTensor{{
			Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{x}}}}}
		if len(params) > 0 {
			r.Parameters = map[string]*pb.InferParameter{}
			for k, v := range params {
				r.Parameters[k] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: v}}
			}
		}
		return r
	}
	resp, err := c.ModelInfer(ctx, req(2, map[string]int64{"sequence_control_input": 1, "sequence_id": 3}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetParameters()["sequence_id"].GetInt64Param() != 3 || len(resp.GetOutputs()) != 1 || resp.GetOutputs()[0].GetContents().GetFp32Contents()[0] != 2 {
		t.Fatalf("start: %v", resp)
	}
	_, err = c.ModelInfer(ctx, req(1, map[string]int64{"sequence_control_input": 1, "sequence_id": 3}))
	wantCode(t, "id in use", err, codes.AlreadyExists, "already exists")
	_, err = c.ModelInfer(ctx, req(1, map[string]int64{"sequence_control_input": 1}))
	wantCode(t, "limit", err, codes.Unavailable, "Max sequence number has been reached")
	_, err = c.ModelInfer(ctx, req(1, map[string]int64{"sequence_id": 4}))
	wantCode(t, "unknown id", err, codes.NotFound, "does not exist")
	_, err = c.ModelInfer(ctx, req(1, nil))
	wantCode(t, "no id", err, codes.InvalidArgument, "Sequence ID has not been provided")
	_, err = c.ModelInfer(ctx, req(1, map[string]int64{"sequence_id": -3}))
	wantCode(t, "negative id", err, codes.InvalidArgument, "non-negative")
	resp, err = c.ModelInfer(ctx, req(5, map[string]int64{"sequence_control_input": 2, "sequence_id": 3}))
	if err != nil || resp.GetOutputs()[0].GetContents().GetFp32Contents()[0] != 7 {
		t.Fatalf("end: %v %v", resp, err)
	}
}

// classBackend is the real sidecar serving sum/1/ for names and
// signatures, whose Predict answers an entry with x = c a sequence error of
// class c whose text names no class: the edges must take the class from
// the error (as the sidecar's client gives it), never from the message. It
// reaches the class no single real request can produce on demand
// (FAILED_PRECONDITION needs an end in flight; the sidecar's tests hold one).
type classBackend struct{ *sidecar.Client }

func (b classBackend) Predict(ctx context.Context, entries []batch.Entry) ([]batch.Result, error) {
	res := make([]batch.Result, len(entries))
	for i, e := range entries {
		x, _ := tensor.Data[float32](e.Tensors[0])
		c := sequence.Code(x[0])
		res[i] = batch.Result{ModelPath: e.ModelPath, Err: inferr.Wrap(inferr.ModelExecution, &sequence.Error{Code: c, Msg: "model \"sum/1/\": sequence_id 5: class only in the error"}, "")}
	}
	return res, nil
}

// Every class reaches the v2 REST and gRPC APIs and TF Serving's predict
// with its HTTP status and gRPC code.
func TestSequenceClassesReachEveryEdge(t *testing.T) {
	srv, url := serveBackend(t, classBackend{statefulClient(t, 10)})
	g := serveGRPC(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for c := sequence.InvalidArgument; c <= sequence.FailedPrecondition; c++ {
		x := strconv.Itoa(int(c))
		code, b := call(t, http.MethodPost, url+"/v2/models/sum/versions/1/infer", `{"parameters": {"sequence_id": 5}, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [`+x+`]}]}`)
		wantError(t, "v2 REST "+c.String(), code, b, c.HTTPStatus(), "class only in the error")
		code, _, b = tfsPredict(t, url, `{"inputs": {"x": [`+x+`], "sequence_id": [5]}}`)
		wantError(t, "TF Serving "+c.String(), code, b, c.HTTPStatus(), "class only in the error")
		_, err := g.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "sum", Inputs: []*pb.ModelInferRequest_InferInputTensor{{
			Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{float32(c)}}}}})
		wantCode(t, "gRPC "+c.String(), err, c.GRPCCode(), "class only in the error")
	}
}

// The seed's sequence_id is a uint64: the v2 API takes it as a UINT64
// input, a JSON parameter or a gRPC uint64_param, and TF Serving's predict
// as a number, above 2^63-1 too, and answers it in the same form.
func TestUint64SequenceIDs(t *testing.T) {
	srv, url := statefulServer(t, 10)
	infer := url + "/v2/models/sum/versions/1/infer"
	const maxID = "18446744073709551615"
	x := func(v int) string {
		return `{"name": "x", "shape": [1], "datatype": "FP32", "data": [` + strconv.Itoa(v) + `]}`
	}
	// As inputs: the answer's sequence_id output is UINT64.
	code, b := call(t, http.MethodPost, infer, `{"inputs": [`+x(1)+`, {"name": "sequence_id", "shape": [1], "datatype": "UINT64", "data": [`+maxID+`]},
		{"name": "sequence_control_input", "shape": [1], "datatype": "UINT32", "data": [1]}]}`)
	if code != http.StatusOK || !strings.Contains(string(b), `{"name":"sequence_id","shape":[1],"datatype":"UINT64","data":[`+maxID+`]}`) {
		t.Fatalf("start as UINT64 input: %d %s", code, b)
	}
	// As a JSON parameter: exact above 2^53 and 2^63.
	code, b = call(t, http.MethodPost, infer, `{"parameters": {"sequence_id": `+maxID+`}, "inputs": [`+x(2)+`]}`)
	if code != http.StatusOK || !strings.Contains(string(b), `"parameters":{"sequence_id":`+maxID+`}`) || !strings.Contains(string(b), `"data":[3]`) {
		t.Fatalf("middle as parameter: %d %s", code, b)
	}
	// TF Serving's predict.
	code, out, b := tfsPredict(t, url, `{"inputs": {"x": [4], "sequence_id": [`+maxID+`]}}`)
	if code != http.StatusOK || !strings.Contains(string(b), `"sequence_id":[`+maxID+`]`) || out.Outputs.Sum[0] != 7 {
		t.Fatalf("TF Serving middle: %d %s", code, b)
	}
	// gRPC: uint64_param in, uint64_param out; int64_param stays int64_param.
	g := serveGRPC(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req := func(v float32, id *pb.InferParameter) *pb.ModelInferRequest {
		return &pb.ModelInferRequest{ModelName: "sum", Parameters: map[string]*pb.InferParameter{"sequence_id": id}, Inputs: []*pb.ModelInferRequest_InferInputTensor{{
			Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{v}}}}}
	}
	resp, err := g.ModelInfer(ctx, req(8, &pb.InferParameter{ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: math.MaxUint64}}))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := resp.GetParameters()["sequence_id"].GetParameterChoice().(*pb.InferParameter_Uint64Param); !ok || p.Uint64Param != math.MaxUint64 || resp.GetOutputs()[0].GetContents().GetFp32Contents()[0] != 15 {
		t.Fatalf("gRPC uint64_param: %v", resp)
	}
	start := &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 1}}
	r := req(1, &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 9}})
	r.Parameters["sequence_control_input"] = start
	if resp, err = g.ModelInfer(ctx, r); err != nil {
		t.Fatal(err)
	}
	if p, ok := resp.GetParameters()["sequence_id"].GetParameterChoice().(*pb.InferParameter_Int64Param); !ok || p.Int64Param != 9 {
		t.Fatalf("gRPC int64_param: %v", resp)
	}
	// A string id is Triton's: "9" names another sequence than 9.
	_, err = g.ModelInfer(ctx, req(1, &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: "9"}}))
	wantCode(t, "string id", err, codes.NotFound, "does not exist")
	_, err = g.ModelInfer(ctx, req(1, &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}}))
	wantCode(t, "bool id", err, codes.InvalidArgument, "uint64_param")
}

// Triton's sequence parameters: sequence_id as a number or a string,
// sequence_start and sequence_end as booleans, over v2 HTTP; the answer
// gives the id back in the form it came in.
func TestV2InferTritonSequences(t *testing.T) {
	_, url := statefulServer(t, 10)
	infer := url + "/v2/models/sum/infer"
	x := func(v float64) string {
		return `"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [` + strconv.FormatFloat(v, 'g', -1, 64) + `]}]`
	}
	type answer struct {
		Parameters map[string]any `json:"parameters"`
		Outputs    []struct {
			Data []float64 `json:"data"`
		} `json:"outputs"`
	}
	run := func(params string, v float64) (answer, int, []byte) {
		t.Helper()
		code, b := call(t, http.MethodPost, infer, `{"parameters": {`+params+`}, `+x(v)+`}`)
		var a answer
		if code == http.StatusOK {
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
		}
		return a, code, b
	}
	steps := []struct {
		params string
		x, sum float64
		id     any
	}{
		{`"sequence_id": "user-a", "sequence_start": true`, 1, 1, "user-a"},
		{`"sequence_id": 77, "sequence_start": true, "sequence_end": false`, 10, 10, float64(77)},
		{`"sequence_id": "user-a"`, 2, 3, "user-a"},
		{`"sequence_id": "user-a", "sequence_start": false, "sequence_end": false`, 4, 7, "user-a"},
		{`"sequence_id": 77`, 5, 15, float64(77)},
		{`"sequence_id": "user-a", "sequence_end": true`, 1, 8, "user-a"},
		{`"sequence_id": 77, "sequence_end": true`, 1, 16, float64(77)},
		// Ended: "user-a" starts again from the checkpoint.
		{`"sequence_id": "user-a", "sequence_start": true`, 2, 2, "user-a"},
	}
	for i, s := range steps {
		a, code, b := run(s.params, s.x)
		if code != http.StatusOK || len(a.Outputs) != 1 || a.Outputs[0].Data[0] != s.sum || a.Parameters["sequence_id"] != s.id {
			t.Fatalf("step %d (%s): %d %s, want sum %v and sequence_id %v", i, s.params, code, b, s.sum, s.id)
		}
	}
	for _, c := range []struct {
		what, params string
		code         int
		msg          string
	}{
		{"string id in use", `"sequence_id": "user-a", "sequence_start": true`, 409, "already exists"},
		{"ended string id", `"sequence_id": "user-b"`, 404, "does not exist"},
		{"start and end at once", `"sequence_id": "user-c", "sequence_start": true, "sequence_end": true`, 400, "sequence of one request is not supported"},
		{"both vocabularies", `"sequence_id": 5, "sequence_start": true, "sequence_control_input": 1`, 400, "not both"},
		{"start not a boolean", `"sequence_id": 5, "sequence_start": 1`, 400, `"sequence_start" is 1, want true or false`},
		{"empty string id", `"sequence_id": "", "sequence_start": true`, 400, "empty string"},
		{"id of another type", `"sequence_id": 1.5`, 400, "a non-negative integer or a string"},
	} {
		_, code, b := run(c.params, 1)
		wantError(t, c.what, code, b, c.code, c.msg)
	}
}

// Triton's sequence parameters over gRPC: string_param and uint64_param
// ids, bool_param flags.
func TestGRPCInferTritonSequences(t *testing.T) {
	srv, _ := statefulServer(t, 10)
	c := serveGRPC(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req := func(x float32, params map[string]*pb.InferParameter) *pb.ModelInferRequest {
		return &pb.ModelInferRequest{ModelName: "sum", Parameters: params, Inputs: []*pb.ModelInferRequest_InferInputTensor{{
			Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{x}}}}}
	}
	str := func(s string) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: s}}
	}
	flag := func(b bool) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: b}}
	}
	u64 := func(n uint64) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: n}}
	}
	steps := []struct {
		params map[string]*pb.InferParameter
		x, sum float32
	}{
		{map[string]*pb.InferParameter{"sequence_id": str("s1"), "sequence_start": flag(true)}, 3, 3},
		{map[string]*pb.InferParameter{"sequence_id": u64(math.MaxUint64), "sequence_start": flag(true)}, 1, 1},
		{map[string]*pb.InferParameter{"sequence_id": str("s1")}, 4, 7},
		{map[string]*pb.InferParameter{"sequence_id": u64(math.MaxUint64), "sequence_end": flag(true)}, 1, 2},
		{map[string]*pb.InferParameter{"sequence_id": str("s1"), "sequence_end": flag(true)}, 1, 8},
	}
	for i, s := range steps {
		resp, err := c.ModelInfer(ctx, req(s.x, s.params))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := resp.GetOutputs()[0].GetContents().GetFp32Contents()[0]; got != s.sum {
			t.Fatalf("step %d: sum %v, want %v", i, got, s.sum)
		}
		want, got := s.params["sequence_id"], resp.GetParameters()["sequence_id"]
		if want.GetStringParam() != got.GetStringParam() || want.GetUint64Param() != got.GetUint64Param() {
			t.Fatalf("step %d: sequence_id %v, want %v", i, got, want)
		}
	}
	_, err := c.ModelInfer(ctx, req(1, map[string]*pb.InferParameter{"sequence_id": str("s1")}))
	wantCode(t, "ended", err, codes.NotFound, "does not exist")
	_, err = c.ModelInfer(ctx, req(1, map[string]*pb.InferParameter{"sequence_id": str("s2"), "sequence_start": str("true")}))
	wantCode(t, "flag as a string", err, codes.InvalidArgument, `"sequence_start" must be a bool_param`)
	_, err = c.ModelInfer(ctx, req(1, map[string]*pb.InferParameter{"sequence_id": flag(true)}))
	wantCode(t, "id as a bool", err, codes.InvalidArgument, "string_param")
}
