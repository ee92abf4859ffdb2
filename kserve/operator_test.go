package kserve_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/inferbid/inferbid/kserve"
	pb "github.com/inferbid/inferbid/proto/kservepb"
)

// TestLoadErrors: a model the config lists whose load failed answers model
// metadata, ready and infer with its load error (503; ready 400), on HTTP
// and gRPC, rather than "not known"; another unknown name stays a 404.
func TestLoadErrors(t *testing.T) {
	srv := kserve.New(kserve.Options{LoadErrors: func() map[string]string {
		return map[string]string{"bad/v3/": `checksum mismatch: config lists 00.., the bucket content is 79..`}
	}})
	srv.SetBackend(tfSidecar(t))
	url := serveHTTP(t, srv)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v2/models/bad", 503},
		{"GET", "/v2/models/bad/versions/v3", 503},
		{"GET", "/v2/models/bad/ready", 400},
		{"POST", "/v2/models/bad/infer", 503},
	} {
		body := ""
		if c.method == "POST" {
			body = `{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]}`
		}
		code, out := call(t, c.method, url+c.path, body)
		if code != c.want || !strings.Contains(string(out), "failed to load") || !strings.Contains(string(out), "checksum mismatch") {
			t.Errorf("%s %s: %d %s, want %d with the load error", c.method, c.path, code, out, c.want)
		}
	}
	if code, out := call(t, "GET", url+"/v2/models/other", ""); code != 404 || !strings.Contains(string(out), "not known") {
		t.Errorf("GET /v2/models/other: %d %s, want 404 not known", code, out)
	}
	if code, out := call(t, "GET", url+"/v2/models/bad/versions/v4", ""); code != 404 {
		t.Errorf("GET /v2/models/bad/versions/v4 (neither serving nor failed): %d %s, want 404", code, out)
	}
	client := serveGRPC(t, srv)
	_, err := client.ModelReady(context.Background(), &pb.ModelReadyRequest{Name: "bad"})
	wantCode(t, "gRPC ModelReady of a failed model", err, codes.Unavailable, "checksum mismatch")
	_, err = client.ModelMetadata(context.Background(), &pb.ModelMetadataRequest{Name: "bad"})
	wantCode(t, "gRPC ModelMetadata of a failed model", err, codes.Unavailable, "checksum mismatch")
}

// TestGRPCHealthService: grpc.health.v1.Health answers SERVING exactly
// when the server is ready (for "" and the inference service), asked anew
// each time; an unknown service is NOT_FOUND.
func TestGRPCHealthService(t *testing.T) {
	ready := errors.New("no configured model serves")
	srv := kserve.New(kserve.Options{Ready: func(context.Context) error { return ready }})
	srv.SetBackend(tfSidecar(t))
	_ = serveGRPC(t, srv)
	addr := lastGRPCAddr
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h := healthpb.NewHealthClient(conn)
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("Check(%q): %v", svc, err)
		}
		return resp.GetStatus()
	}
	for _, svc := range []string{"", "inference.GRPCInferenceService"} {
		if st := check(svc); st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("Check(%q) while not ready: %s", svc, st)
		}
	}
	ready = nil
	for _, svc := range []string{"", "inference.GRPCInferenceService"} {
		if st := check(svc); st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) once ready: %s", svc, st)
		}
	}
	_, err = h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "nope"})
	wantCode(t, "Check of an unknown service", err, codes.NotFound, "nope")
}

// TestErrorsNameSignatureKeys: the v2 API's input errors name a
// TensorFlow tensor by its signature key, as the model's metadata shows it
// ("dense"), with the graph name in parentheses; a misspelt name gets a
// suggestion.
func TestErrorsNameSignatureKeys(t *testing.T) {
	url, _ := newTFServer(t, kserve.Options{})
	const adID = `{"name":"ad_id","shape":[1,1],"datatype":"INT64","data":[1]}`
	const pub = `{"name":"publisher_id","shape":[1,1],"datatype":"INT64","data":[3]}`
	for _, c := range []struct{ body, want string }{
		{`{"inputs":[` + adID + `,` + pub + `]}`, `missing input tensor \"dense\" (serving_default_dense:0)`},
		{`{"inputs":[{"name":"adid","shape":[1,1],"datatype":"INT64","data":[1]},` + pub + `]}`, `unknown input tensor \"adid\"`},
		{`{"inputs":[{"name":"adid","shape":[1,1],"datatype":"INT64","data":[1]},` + pub + `]}`, `did you mean \"ad_id\" (serving_default_ad_id:0)?`},
		{`{"inputs":[` + adID + `,` + pub + `,{"name":"dense","shape":[1,5],"datatype":"FP32","data":[1,2,3,4,5]}]}`, `input tensor \"dense\" (serving_default_dense:0): tensor_shape [1,5]`},
	} {
		code, out := call(t, "POST", url+"/v2/models/pctr/versions/v1/infer", c.body)
		if code != 400 || !strings.Contains(string(out), c.want) {
			t.Errorf("infer %s: %d %s, want 400 containing %s", c.body, code, out, c.want)
		}
	}
}

// TestTFServingNumericVersionAndObservation: TF Serving's numeric version
// (/versions/1) reaches model path pctr/v1/, and the prediction is
// observed with its model path and a duration (for per-model metrics).
func TestTFServingNumericVersionAndObservation(t *testing.T) {
	var mu sync.Mutex
	var obs []kserve.Observation
	srv := kserve.New(kserve.Options{Observe: func(o kserve.Observation) {
		mu.Lock()
		obs = append(obs, o)
		mu.Unlock()
	}})
	srv.SetBackend(tfSidecar(t))
	mux := http.NewServeMux()
	mux.Handle("POST /v1/models/", srv.TFServingPredictHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	const body = `{"inputs":{"ad_id":[[1]],"publisher_id":[[3]],"dense":[[0.1,0.2,0.3,0.4,0.5,0.6]]}}`
	for _, c := range []struct {
		path, wantPath string
		code           int
	}{
		{"/v1/models/pctr/versions/1:predict", "pctr/v1/", 200},
		{"/v1/models/pctr/versions/v2:predict", "pctr/v2/", 200},
		{"/v1/models/pctr/versions/7:predict", "", 404},
	} {
		code, out := call(t, "POST", hs.URL+c.path, body)
		if code != c.code {
			t.Errorf("POST %s: %d %s, want %d", c.path, code, out, c.code)
			continue
		}
		mu.Lock()
		o := obs[len(obs)-1]
		mu.Unlock()
		if o.Endpoint != "tfserving_predict" || o.ModelPath != c.wantPath || o.Status != c.code || (code == 200 && o.Duration <= 0) {
			t.Errorf("POST %s observed %+v, want model path %q, status %d and a duration", c.path, o, c.wantPath, c.code)
		}
	}
}
