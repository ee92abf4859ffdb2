package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/kservepb"
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
		if code, b := get(t, base+"/v2"); code != 200 || !strings.Contains(b, `"name":"inferbid"`) || strings.Contains(b, `"version":"bidding-server`) || !strings.Contains(b, `"extensions":[]`) {
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
