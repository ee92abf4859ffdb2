package main

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/kservepb"
	"github.com/inferbid/inferbid/proto/tfservingpb"
)

var (
	kserveListenRE = regexp.MustCompile(`kserve v2 HTTP API listening.* addr=(\S+)`)
	kserveGRPCRE   = regexp.MustCompile(`kserve v2 gRPC service listening.* addr=(\S+)`)
)

// TestKServeEndToEnd drives the Open Inference Protocol's HTTP API of the
// real binaries (bidding-server, the TensorFlow sidecar, the sample bucket)
// on the main listener and on --kserve_listen, and finds the requests in
// /metrics by protocol.
func TestKServeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	root := testhelp.ModuleRoot(t)
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	s := startBiddingServer(t, server, []string{
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_model_bucket_name", "file://" + filepath.Join(root, "examples/bucket"),
		"--inference_model_config_path", "model_config.json",
		"--kserve_listen", "127.0.0.1:0",
		"--kserve_grpc_listen", "127.0.0.1:0",
	}, nil)
	defer s.stop(t)
	m := kserveListenRE.FindStringSubmatch(s.log())
	if m == nil {
		t.Fatalf("no kserve listener in the log:\n%s", s.log())
	}
	body := `{"id":"e2e","inputs":[{"name":"ad_id","shape":[1,1],"datatype":"INT64","data":[7]},` +
		`{"name":"publisher_id","shape":[1,1],"datatype":"INT64","data":[3]},` +
		`{"name":"dense","shape":[1,6],"datatype":"FP32","data":[[0,0.1,0.2,0.3,0.4,0.5]]}]}`
	for _, base := range []string{s.url, "http://" + m[1]} {
		if code, b := get(t, base+"/v2/health/ready"); code != 200 || b != "" {
			t.Errorf("%s/v2/health/ready: %d %q, want 200 and no body", base, code, b)
		}
		if code, b := get(t, base+"/v2"); code != 200 || !strings.Contains(b, `"name":"inferbid"`) || strings.Contains(b, `"version":"bidding-server`) || !strings.Contains(b, `"extensions":["binary_tensor_data","sequence"]`) {
			t.Errorf("%s/v2: %d %s", base, code, b)
		}
		code, b := get(t, base+"/v2/models/pctr")
		if code != 200 || !strings.Contains(b, `"platform":"tensorflow_savedmodel"`) || !strings.Contains(b, `"versions":["v1","v2"]`) {
			t.Errorf("%s/v2/models/pctr: %d %s", base, code, b)
		}
		code, b = post(t, base+"/v2/models/pctr/infer", body)
		var r struct {
			ModelVersion string `json:"model_version"`
			ID           string `json:"id"`
			Outputs      []struct {
				Name string    `json:"name"`
				Data []float64 `json:"data"`
			} `json:"outputs"`
		}
		if code != 200 || json.Unmarshal([]byte(b), &r) != nil || r.ModelVersion != "v2" || r.ID != "e2e" ||
			len(r.Outputs) != 1 || r.Outputs[0].Name != "pctr" || len(r.Outputs[0].Data) != 1 {
			t.Errorf("%s/v2/models/pctr/infer: %d %s", base, code, b)
		}
		code, b = post(t, base+"/v2/models/nosuch/infer", body)
		if code != 404 || !strings.Contains(b, `"error"`) {
			t.Errorf("%s/v2/models/nosuch/infer: %d %s, want 404 and an error object", base, code, b)
		}
	}

	// The v2 listener serves the v2 API alone.
	if code, _ := get(t, "http://"+m[1]+"/v1/models"); code != 404 {
		t.Errorf("/v1/models on --kserve_listen: %d, want 404", code)
	}

	g := kserveGRPCRE.FindStringSubmatch(s.log())
	if g == nil {
		t.Fatalf("no kserve gRPC listener in the log:\n%s", s.log())
	}
	conn, err := grpc.NewClient(g[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := kservepb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r, err := c.ServerReady(ctx, &kservepb.ServerReadyRequest{}); err != nil || !r.GetReady() {
		t.Errorf("gRPC ServerReady: %v %v", r, err)
	}
	r, err := c.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "pctr", ModelVersion: "v1", Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
		{Name: "ad_id", Datatype: "INT64", Shape: []int64{1, 1}, Contents: &kservepb.InferTensorContents{Int64Contents: []int64{7}}},
		{Name: "publisher_id", Datatype: "INT64", Shape: []int64{1, 1}, Contents: &kservepb.InferTensorContents{Int64Contents: []int64{3}}},
		{Name: "dense", Datatype: "FP32", Shape: []int64{1, 6}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{0, 0.1, 0.2, 0.3, 0.4, 0.5}}},
	}})
	if err != nil || r.GetModelVersion() != "v1" || len(r.GetOutputs()) != 1 || len(r.GetOutputs()[0].GetContents().GetFp32Contents()) != 1 {
		t.Errorf("gRPC ModelInfer pctr v1: %v %v", r, err)
	}

	for name, want := range map[string]float64{
		`inferbid_v2_requests_total{code="200",endpoint="infer",protocol="http"}`:                 2,
		`inferbid_v2_requests_total{code="200",endpoint="infer",protocol="grpc"}`:                 1,
		`inferbid_v2_requests_total{code="404",endpoint="infer",protocol="http"}`:                 2,
		`inferbid_v2_model_requests_total{code="200",model_path="pctr/v2/",protocol="http"}`:      2,
		`inferbid_v2_model_requests_total{code="200",model_path="pctr/v1/",protocol="grpc"}`:      1,
		`inferbid_v2_model_requests_total{code="404",model_path="_unregistered",protocol="http"}`: 2,
	} {
		if v := metricValue(t, s.url, name); v != want {
			t.Errorf("%s: %v, want %v", name, v, want)
		}
	}
}

// TestKServeModelRepositoryEndToEnd: with --kserve_model_repository, the
// model repository extension lists, unloads and loads the bucket's and the
// local models of the real binaries; TF Serving's gRPC Predict answers on
// the KServe gRPC port.
func TestKServeModelRepositoryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	root := testhelp.ModuleRoot(t)
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	s := startBiddingServer(t, server, []string{
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_model_bucket_name", "file://" + filepath.Join(root, "examples/bucket"),
		"--inference_model_config_path", "model_config.json",
		"--inference_model_local_paths", "local/v1/=" + filepath.Join(root, "examples/bucket/pcvr/v1"),
		"--kserve_grpc_listen", "127.0.0.1:0",
		"--kserve_model_repository",
	}, nil)
	defer s.stop(t)
	if code, b := get(t, s.url+"/v2"); code != 200 || !strings.Contains(b, `"extensions":["binary_tensor_data","sequence","model_repository"]`) {
		t.Fatalf("/v2: %d %s", code, b)
	}
	index := func(body string) map[string]string {
		t.Helper()
		code, b := post(t, s.url+"/v2/repository/index", body)
		var models []struct{ Name, Version, State, Reason string }
		if code != 200 || json.Unmarshal([]byte(b), &models) != nil {
			t.Fatalf("index: %d %s", code, b)
		}
		out := map[string]string{}
		for _, m := range models {
			out[m.Name+"/"+m.Version] = m.State + " " + m.Reason
		}
		return out
	}
	want := map[string]string{"pctr/v1": "READY ", "pctr/v2": "READY ", "pcvr/v1": "READY ", "local/v1": "READY "}
	if got := index(""); !maps.Equal(got, want) {
		t.Fatalf("index: %v, want %v", got, want)
	}
	infer := func(model string) int {
		body := `{"inputs":[{"name":"ad_id","shape":[1,1],"datatype":"INT64","data":[7]},{"name":"publisher_id","shape":[1,1],"datatype":"INT64","data":[3]},` +
			`{"name":"dense","shape":[1,6],"datatype":"FP32","data":[0,0.1,0.2,0.3,0.4,0.5]}]}`
		if strings.HasPrefix(model, "pcvr") || strings.HasPrefix(model, "local") {
			code, _ := get(t, s.url+"/v2/models/"+model+"/ready")
			return code
		}
		code, _ := post(t, s.url+"/v2/models/"+model+"/infer", body)
		return code
	}
	for _, name := range []string{"pctr", "local"} {
		if code, b := post(t, s.url+"/v2/repository/models/"+name+"/unload", ""); code != 200 {
			t.Fatalf("unload %s: %d %s", name, code, b)
		}
		if code := infer(name); code != 404 {
			t.Fatalf("%s after unload: %d, want 404", name, code)
		}
	}
	want = map[string]string{"pctr/v1": "UNAVAILABLE unloaded", "pctr/v2": "UNAVAILABLE unloaded", "pcvr/v1": "READY ", "local/v1": "UNAVAILABLE unloaded"}
	if got := index(`{}`); !maps.Equal(got, want) {
		t.Fatalf("index after unload: %v, want %v", got, want)
	}
	if got := index(`{"ready": true}`); !maps.Equal(got, map[string]string{"pcvr/v1": "READY "}) {
		t.Fatalf("ready index: %v", got)
	}
	// A load of another bucket model syncs the watcher: pctr stays out.
	if code, b := post(t, s.url+"/v2/repository/models/pcvr/load", ""); code != 200 {
		t.Fatalf("load pcvr: %d %s", code, b)
	}
	if code := infer("pctr"); code != 404 {
		t.Fatalf("pctr after a sync: %d, want 404 (held)", code)
	}
	for _, name := range []string{"pctr", "local"} {
		if code, b := post(t, s.url+"/v2/repository/models/"+name+"/load", `{"parameters": {}}`); code != 200 {
			t.Fatalf("load %s: %d %s", name, code, b)
		}
		if code := infer(name); code != 200 {
			t.Fatalf("%s after load: %d", name, code)
		}
	}
	for _, c := range []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/v2/repository/models/nosuch/load", "", 404, "not configured"},
		{"/v2/repository/models/nosuch/unload", "", 404, "not configured"},
		{"/v2/repository/models/pctr/load", `{"parameters": {"config": "{}"}}`, 400, "not supported"},
		{"/v2/repository/index", `{"ready": 1}`, 400, "want true or false"},
	} {
		if code, b := post(t, s.url+c.path, c.body); code != c.code || !strings.Contains(b, c.msg) {
			t.Errorf("%s %s: %d %s, want %d and %q", c.path, c.body, code, b, c.code, c.msg)
		}
	}

	// TF Serving's gRPC service shares the KServe gRPC port.
	g := kserveGRPCRE.FindStringSubmatch(s.log())
	if g == nil {
		t.Fatalf("no kserve gRPC listener in the log:\n%s", s.log())
	}
	conn, err := grpc.NewClient(g[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := tfservingpb.NewModelServiceClient(conn).GetModelStatus(ctx, &tfservingpb.GetModelStatusRequest{ModelSpec: &tfservingpb.ModelSpec{Name: "pctr"}})
	if err != nil || len(st.GetModelVersionStatus()) != 2 || st.GetModelVersionStatus()[1].GetState() != tfservingpb.ModelVersionStatus_AVAILABLE {
		t.Fatalf("GetModelStatus pctr: %v %v", st, err)
	}
}
