package sidecar

import (
	"context"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/affine"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

// socketIn returns a socket path in a fresh private directory (short
// enough for sun_path).
func socketIn(t *testing.T) string { return testhelp.SocketPath(t, "s.sock") }

type testServer struct {
	srv     *Server
	socket  string
	client  *Client
	backend *affine.Backend
	served  chan error
}

// startServer serves the affine runtime, whose element cap is
// opts.Limits.MaxElements, as cmd/ sets both from the runtime config.
func startServer(t *testing.T, opts ServerOptions) *testServer {
	t.Helper()
	rt, b := newAffineRuntimeWith(runtimes.Config{MaxTensorElements: opts.Limits.MaxElements})
	opts.Runtime = rt
	opts.Logger = quietLog
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: srv, socket: socketIn(t), backend: b, served: make(chan error, 1)}
	go func() { ts.served <- srv.Serve(ts.socket) }()
	c, err := NewClient(ts.socket, ClientOptions{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ts.client = c
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.GracefulStop()
		if err := <-ts.served; err != nil {
			t.Errorf("Serve returned %v after GracefulStop", err)
		}
		if n := b.Live.Load(); n != 0 {
			t.Errorf("%d models open after the server stopped", n)
		}
	})
	return ts
}

func TestServeSocketSetup(t *testing.T) {
	base := t.TempDir()
	if len(base) > 80 {
		t.Skip("temp dir too long for a nested socket path")
	}
	socket := filepath.Join(base, "new", "dir", "s.sock")
	rt, _ := newAffineRuntime()
	srv, _ := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(socket) }()
	c, _ := NewClient(socket, ClientOptions{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Dir(socket))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	fi, err = os.Lstat(socket)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode %v, %v; want a 0600 socket", fi.Mode(), err)
	}
	// A second server on a live socket refuses and leaves it alone.
	srv2, _ := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	err = srv2.Serve(socket)
	if err == nil || !strings.Contains(err.Error(), "live server") {
		t.Errorf("second Serve on a live socket = %v, want a refusal", err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Errorf("the first server stopped answering: %v", err)
	}
	srv.GracefulStop()
	if err := <-served; err != nil {
		t.Errorf("Serve after GracefulStop = %v", err)
	}
}

func TestServeStaleSocketAndBadPaths(t *testing.T) {
	dir := filepath.Dir(socketIn(t))
	stale := filepath.Join(dir, "stale.sock")
	// A socket file nobody listens on: bind, then close without unlinking.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(stale); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	lis, err := Listen(stale)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	lis.Close()

	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, []byte("keep me"), 0o600)
	if _, err := Listen(regular); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "keep me" {
		t.Errorf("Listen touched a regular file")
	}
	long := "/tmp/" + strings.Repeat("x", 120) + ".sock"
	if _, err := Listen(long); err == nil || !strings.Contains(err.Error(), "107") {
		t.Errorf("Listen on a %d-byte path = %v, want the length error", len(long), err)
	}
	if _, err := Listen(""); err == nil {
		t.Error("Listen on an empty path succeeded")
	}
}

func registerAffine(t *testing.T, c *Client, path, spec string) {
	t.Helper()
	if err := c.RegisterModel(context.Background(), path, affineFiles(spec), ""); err != nil {
		t.Fatalf("register %s: %v", path, err)
	}
}

func TestPredictJSONPath(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	registerAffine(t, ts.client, "a/", "2 1")
	registerAffine(t, ts.client, "b/", "3 0")
	ctx := context.Background()
	req := `{"request":[
	 {"model_path":"a/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":["1","2",3]}]},
	 {"model_path":"missing/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":[1,2,3]}]},
	 {"model_path":"b/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":[1,2]}]},
	 {"model_path":"b/","tensors":[{"tensor_name":"x","data_type":"DOUBLE","tensor_shape":[1,3],"tensor_content":[1,2,3]}]},
	 {"model_path":"b/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[2,3],"tensor_content":[1,2,3,4,5,6]}]}]}`
	out, err := ts.client.PredictJSON(ctx, []byte(req))
	if err != nil {
		t.Fatal(err)
	}
	res, err := batch.ParseResponse(out)
	if err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	if len(res) != 5 {
		t.Fatalf("%d results for 5 entries: %s", len(res), out)
	}
	wantFloats(t, res[0], []float64{3, 5, 7})
	errType(t, "unknown model", res[1].Err, inferr.ModelNotFound, "missing/")
	errType(t, "short content", res[2].Err, inferr.InputParsing)
	errType(t, "wrong dtype", res[3].Err, inferr.InputParsing, "DOUBLE")
	wantFloats(t, res[4], []float64{3, 6, 9, 12, 15, 18})
	if res[1].ModelPath != "missing/" || res[4].ModelPath != "b/" {
		t.Errorf("model paths not kept: %q %q", res[1].ModelPath, res[4].ModelPath)
	}

	out, err = ts.client.PredictJSON(ctx, []byte(`{"request": not json`))
	if err != nil {
		t.Fatal(err)
	}
	// ParseResponse gives a whole-batch error response back as its error.
	_, err = batch.ParseResponse(out)
	errType(t, "not JSON", err, inferr.InputParsing, "not valid JSON")
	if strings.Contains(string(out), "model_path") {
		t.Errorf("a whole-batch error names a model: %s", out)
	}
}

func wantFloats(t *testing.T, r batch.Result, want []float64) {
	t.Helper()
	if r.Err != nil {
		t.Errorf("model %q: %v", r.ModelPath, r.Err)
		return
	}
	if len(r.Tensors) != 1 {
		t.Errorf("model %q: %d outputs", r.ModelPath, len(r.Tensors))
		return
	}
	var got []float64
	switch d := r.Tensors[0].Data.(type) {
	case []float64:
		got = d
	case []float32:
		for _, v := range d {
			got = append(got, float64(v))
		}
	}
	if len(got) != len(want) {
		t.Errorf("model %q: %v, want %v", r.ModelPath, got, want)
		return
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-6 {
			t.Errorf("model %q: %v, want %v", r.ModelPath, got, want)
			return
		}
	}
}

func TestPredictTypedPath(t *testing.T) {
	ts := startServer(t, ServerOptions{Limits: batch.Limits{MaxEntries: 8, MaxElements: 30}})
	registerAffine(t, ts.client, "a/", "2 1")
	ctx := context.Background()
	preErr := inferr.Errorf(inferr.InputParsing, "parsed badly on the host")
	entries := []batch.Entry{
		{ModelPath: "a/", Tensors: x3(1, 2, 3, 4, 5, 6)},
		{ModelPath: "a/", Err: preErr},
		{ModelPath: "gone/", Tensors: x3(1, 2, 3)},
		{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 3}, []int8{1, 2, 3})}},
		{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{11, 3}, make([]float32, 33))}},
		{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{2, 3}, []float32{1, 2, 3})}},
	}
	res, err := ts.client.Predict(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(entries) {
		t.Fatalf("%d results for %d entries", len(res), len(entries))
	}
	if d, ok := res[0].Tensors[0].Data.([]float32); !ok || len(d) != 6 || d[5] != 13 || res[0].Tensors[0].Shape[0] != 2 {
		t.Errorf("typed result %+v, want FLOAT [2,3] ending in 13", res[0].Tensors)
	}
	if res[1].Err != preErr {
		t.Errorf("a host-side entry error was not kept: %v", res[1].Err)
	}
	errType(t, "unknown model", res[2].Err, inferr.ModelNotFound, "gone/")
	errType(t, "INT8 into FLOAT", res[3].Err, inferr.InputParsing, "INT8")
	errType(t, "over the element limit", res[4].Err, inferr.InputParsing, "30")
	errType(t, "content shorter than shape", res[5].Err, inferr.InputParsing, "6")

	many := make([]batch.Entry, 9)
	for i := range many {
		many[i] = batch.Entry{ModelPath: "a/", Tensors: x3(1, 2, 3)}
	}
	_, err = ts.client.Predict(ctx, many)
	errType(t, "too many entries", err, inferr.InputParsing, "9", "8")

	// Raw proto: a value out of INT8 range and a missing dtype are the
	// entry's INPUT_PARSING errors.
	raw := inferencepb.NewInferenceServiceClient(ts.client.conn)
	resp, err := raw.Predict(ctx, &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{Requests: []*inferencepb.ModelRequest{
		{ModelPath: "a/", Tensors: []*inferencepb.Tensor{{Name: "x", DataType: inferencepb.DataType_INT8, Shape: []int64{1}, IntData: []int32{300}}}},
		{ModelPath: "a/", Tensors: []*inferencepb.Tensor{{Name: "x", Shape: []int64{1}, FloatData: []float32{1}}}},
		{ModelPath: "", Tensors: nil},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	rs := resp.GetResult().GetResponses()
	if len(rs) != 3 {
		t.Fatalf("%d responses for 3", len(rs))
	}
	errType(t, "INT8 out of range", errorFromProto(rs[0].GetError()), inferr.InputParsing, "300")
	errType(t, "no dtype", errorFromProto(rs[1].GetError()), inferr.InputParsing, "data_type")
	errType(t, "no model path", errorFromProto(rs[2].GetError()), inferr.InputParsing, "model_path")
	_, err = raw.Predict(ctx, &inferencepb.PredictRequest{})
	errType(t, "empty request", fromStatus(err), inferr.InputParsing)
}

func TestPredictMetricsAndConsentedDebugLogs(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	registerAffine(t, ts.client, "a/", "2 1")
	raw := inferencepb.NewInferenceServiceClient(ts.client.conn)
	req := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_BatchJson{BatchJson: []byte(
		`{"request":[{"model_path":"a/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":[1,2,3]}]},{"model_path":"zz/","tensors":[]}]}`)}}
	resp, err := raw.Predict(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.GetMetrics()["inference_duration_ms"]; !ok {
		t.Errorf("metrics %v lack inference_duration_ms", resp.GetMetrics())
	}
	if len(resp.GetDebugLogs()) != 0 {
		t.Errorf("debug logs for a request without consent: %q", resp.GetDebugLogs())
	}
	req.IsConsented = true
	resp, err = raw.Predict(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	logs := strings.Join(resp.GetDebugLogs(), "\n")
	if !strings.Contains(logs, `"a/"`) || !strings.Contains(logs, `"zz/"`) {
		t.Errorf("consented debug logs %q do not cover both entries", logs)
	}
}

// streamRaw sends msgs on a raw registration stream and returns the typed error.
func streamRaw(t *testing.T, ts *testServer, msgs ...*inferencepb.RegisterModelChunk) error {
	t.Helper()
	raw := inferencepb.NewInferenceServiceClient(ts.client.conn)
	st, err := raw.RegisterModelStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := st.Send(m); err != nil {
			break // the server ended the stream; CloseAndRecv has its status
		}
	}
	_, err = st.CloseAndRecv()
	return fromStatus(err)
}

func header(path string, files ...*inferencepb.FileHeader) *inferencepb.RegisterModelChunk {
	return &inferencepb.RegisterModelChunk{Part: &inferencepb.RegisterModelChunk_Header{Header: &inferencepb.RegisterModelHeader{ModelPath: path, Files: files}}}
}

func withExt(c *inferencepb.RegisterModelChunk, ext map[string]string) *inferencepb.RegisterModelChunk {
	c.GetHeader().ExternalVariables = ext
	return c
}

func data(s string) *inferencepb.RegisterModelChunk {
	return &inferencepb.RegisterModelChunk{Part: &inferencepb.RegisterModelChunk_Data{Data: []byte(s)}}
}

func file(path string, size int64) *inferencepb.FileHeader {
	return &inferencepb.FileHeader{Path: path, Size: size}
}

func TestRegisterStreamCorrupt(t *testing.T) {
	received := t.TempDir()
	ts := startServer(t, ServerOptions{MaxModelBytes: 1000, TempDir: received})
	cases := []struct {
		name      string
		msgs      []*inferencepb.RegisterModelChunk
		fragments []string
	}{
		{"data before header", []*inferencepb.RegisterModelChunk{data("2 1")}, []string{"header"}},
		{"empty stream", nil, []string{"header"}},
		{"no model path", []*inferencepb.RegisterModelChunk{header("", file("affine", 3)), data("2 1")}, []string{"model_path"}},
		{"no files", []*inferencepb.RegisterModelChunk{header("m/")}, []string{"no files"}},
		{"declared over the cap", []*inferencepb.RegisterModelChunk{header("m/", file("affine", 1<<62)), data("2 1")}, []string{"1000"}},
		{"sum over the cap", []*inferencepb.RegisterModelChunk{header("m/", file("affine", 600), file("b", 600))}, []string{"1000", `"b"`}},
		{"negative size", []*inferencepb.RegisterModelChunk{header("m/", file("affine", -1))}, []string{"-1"}},
		{"bad file path", []*inferencepb.RegisterModelChunk{header("m/", file("../affine", 3)), data("2 1")}, []string{"../affine"}},
		{"declared twice", []*inferencepb.RegisterModelChunk{header("m/", file("affine", 3), file("affine", 3))}, []string{"twice"}},
		{"overrun", []*inferencepb.RegisterModelChunk{header("m/", file("affine", 3)), data("2 1 0s")}, []string{"overruns", `"affine"`}},
		{"short file", []*inferencepb.RegisterModelChunk{header("m/", file("affine", 5)), data("2 1")}, []string{"short", "3 of", "5"}},
		{"extra data", []*inferencepb.RegisterModelChunk{header("m/", file("affine", 3)), data("2 1"), data("x")}, []string{"after the last"}},
		{"second header", []*inferencepb.RegisterModelChunk{header("m/", file("affine", 3)), header("m/", file("affine", 3))}, []string{"second header"}},
		// Refused from the header, before the (missing) files.
		{"bad external variable", []*inferencepb.RegisterModelChunk{withExt(header("m/", file("affine", 3)), map[string]string{"v": "http://x"})}, []string{"external_variables", `"v"`}},
	}
	for _, c := range cases {
		errType(t, c.name, streamRaw(t, ts, c.msgs...), inferr.InputParsing, c.fragments...)
	}
	if n := ts.backend.Loads.Load(); n != 0 {
		t.Errorf("corrupt streams loaded %d models", n)
	}
	// Files split across chunks, with an empty file, arrive whole.
	err := streamRaw(t, ts, header("m/", file("affine", 7), file("empty", 0), file("z", 2)), data("2 "), data("1 1ms"), data("ab"))
	if err != nil {
		t.Fatalf("a valid chunked stream failed: %v", err)
	}
	out, err := ts.client.Predict(context.Background(), []batch.Entry{{ModelPath: "m/", Tensors: x3(1, 1, 1)}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("%v %v", err, out)
	}
	// The client side refuses an oversized model with the server's error.
	err = ts.client.RegisterModel(context.Background(), "big/", runtimes.Files{"affine": make([]byte, 1001)}, "")
	errType(t, "oversized model", err, inferr.InputParsing, "1001")
	// A registration that fails to load leaves no files either.
	err = ts.client.RegisterModel(context.Background(), "junk/", runtimes.Files{"affine": []byte("junk")}, "")
	errType(t, "junk model", err, inferr.ModelExecution)
	// Every stream was received into TempDir, and nothing stays there.
	if left, err := os.ReadDir(received); err != nil || len(left) != 0 {
		t.Errorf("streamed registrations left %v in TempDir (%v)", left, err)
	}
	// Streams are received into TempDir: without it, they fail naming it.
	missing := filepath.Join(received, "missing")
	ts2 := startServer(t, ServerOptions{TempDir: missing})
	err = ts2.client.RegisterModel(context.Background(), "m/", runtimes.Files{"affine": []byte("2 1")}, "")
	errType(t, "missing TempDir", err, inferr.GRPC, missing)
}

func TestRegisterUnaryAndDelete(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	raw := inferencepb.NewInferenceServiceClient(ts.client.conn)
	ctx := context.Background()
	resp, err := raw.RegisterModel(ctx, &inferencepb.RegisterModelRequest{ModelPath: "u/", Files: []*inferencepb.ModelFile{{Path: "affine", Content: []byte("2 1")}}})
	if err != nil || resp.GetReplaced() {
		t.Fatalf("unary register = %v, %v", resp, err)
	}
	resp, err = raw.RegisterModel(ctx, &inferencepb.RegisterModelRequest{ModelPath: "u/", Files: []*inferencepb.ModelFile{{Path: "affine", Content: []byte("3 1")}}})
	if err != nil || !resp.GetReplaced() {
		t.Fatalf("unary re-register = %v, %v; want replaced", resp, err)
	}
	_, err = raw.RegisterModel(ctx, &inferencepb.RegisterModelRequest{ModelPath: "u/", Files: []*inferencepb.ModelFile{{Path: "affine"}, {Path: "affine"}}})
	errType(t, "duplicate file", fromStatus(err), inferr.InputParsing, "twice")
	paths, err := ts.client.ModelPaths(ctx)
	if err != nil || len(paths) != 1 || paths[0] != "u/" {
		t.Errorf("ModelPaths = %q, %v", paths, err)
	}
	if err := ts.client.DeleteModel(ctx, "u/"); err != nil {
		t.Fatal(err)
	}
	errType(t, "delete twice", ts.client.DeleteModel(ctx, "u/"), inferr.ModelNotFound, "u/")
	errType(t, "delete empty", ts.client.DeleteModel(ctx, ""), inferr.InputParsing)
	paths, err = ts.client.ModelPaths(ctx)
	if err != nil || paths == nil || len(paths) != 0 {
		t.Errorf("ModelPaths after delete = %#v, %v; want []", paths, err)
	}
}

// A sidecar that goes away: calls in flight and later calls get GRPC errors.
func TestDeadSidecarGivesGRPCErrors(t *testing.T) {
	rt, _ := newAffineRuntime()
	srv, _ := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	socket := socketIn(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(socket) }()
	c, _ := NewClient(socket, ClientOptions{})
	defer c.Close()
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	registerAffine(t, c, "slow/", "2 1 3s")
	inflight := make(chan error, 1)
	go func() {
		_, err := c.Predict(ctx, []batch.Entry{{ModelPath: "slow/", Tensors: x3(1, 2, 3)}})
		inflight <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the call reach the model
	srv.Stop()
	<-served
	errType(t, "call in flight when the sidecar died", <-inflight, inferr.GRPC)
	_, err := c.PredictJSON(ctx, []byte(`{"request":[]}`))
	errType(t, "PredictJSON to a dead sidecar", err, inferr.GRPC)
	_, err = c.Predict(ctx, []batch.Entry{{ModelPath: "slow/", Tensors: x3(1, 2, 3)}})
	errType(t, "Predict to a dead sidecar", err, inferr.GRPC)
	errType(t, "RegisterModel to a dead sidecar", c.RegisterModel(ctx, "m/", affineFiles("1 1"), ""), inferr.GRPC)
	_, err = c.ModelPaths(ctx)
	errType(t, "ModelPaths to a dead sidecar", err, inferr.GRPC)
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	errType(t, "WaitHealthy on a dead sidecar", c.WaitHealthy(short), inferr.GRPC)
}

func TestHealthServing(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	conn, err := grpc.NewClient("unix://"+ts.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, svc := range []string{"", inferencepb.InferenceService_ServiceDesc.ServiceName} {
		resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q = %v, %v; want SERVING", svc, resp.GetStatus(), err)
		}
	}
}

func TestParseRuntimeConfig(t *testing.T) {
	cfg, err := ParseRuntimeConfig(`{"num_interop_threads":2,"num_intraop_threads":1,"module_name":"onnx","cpuset":[0,1]}`)
	if err != nil || cfg.NumInteropThreads != 2 || cfg.NumIntraopThreads != 1 || cfg.ModuleName != "onnx" || len(cfg.Cpuset) != 2 {
		t.Errorf("ParseRuntimeConfig = %+v, %v", cfg, err)
	}
	if cfg, err := ParseRuntimeConfig("  "); err != nil || cfg.ModuleName != "" {
		t.Errorf("blank config = %+v, %v", cfg, err)
	}
	for in, frag := range map[string]string{
		`{"num_threads":1}`:             "num_threads",
		`{"num_interop_threads":"2"}`:   "num_interop_threads",
		`{"num_intraop_threads":-1}`:    "num_intraop_threads",
		`{"cpuset":[-3]}`:               "cpuset",
		`{} {}`:                         "trailing",
		`[1]`:                           "",
		`null`:                          "null",
		`{"module_name":"onnx"`:         "",
		`{"model_reset_probability":2}`: "model_reset_probability",
	} {
		_, err := ParseRuntimeConfig(in)
		if err == nil || inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), frag) {
			t.Errorf("ParseRuntimeConfig(%s) = %v, want INPUT_PARSING naming %q", in, err, frag)
		}
	}
}

func TestEnumsMatch(t *testing.T) {
	for _, d := range tensor.AllDTypes {
		if dtypeToProto(d).String() != d.String() {
			t.Errorf("dtype %s maps to proto %s", d, dtypeToProto(d))
		}
	}
	for ty := inferr.Unknown; ty <= inferr.GRPC; ty++ {
		if inferencepb.ErrorType(ty).String() != ty.String() {
			t.Errorf("error type %s maps to proto %s", ty, inferencepb.ErrorType(ty))
		}
	}
	if errors.Is(nil, context.Canceled) {
		t.Fatal("unreachable")
	}
}

// Socket paths with characters a URL would misread still work.
func TestOddSocketPath(t *testing.T) {
	dir := filepath.Join(filepath.Dir(socketIn(t)), "a%20b?c#d")
	socket := filepath.Join(dir, "s.sock")
	rt, _ := newAffineRuntime()
	srv, _ := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(socket) }()
	defer func() { srv.GracefulStop(); <-served }()
	c, err := NewClient(socket, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("socket %q: %v", socket, err)
	}
}

// TestFastLaneMetricsOnlyWhenConsented: the fast lane's handler fills
// Metrics for consented requests only; gRPC always does.
func TestFastLaneMetricsOnlyWhenConsented(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	registerAffine(t, ts.client, "a/", "2 1")
	entries := []batch.Entry{{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})}}}
	pb, _ := entriesToProto(entries)
	req := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: pb}}
	resp, err := ts.client.fast.Predict(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetMetrics()) != 0 {
		t.Errorf("fast lane, not consented: metrics %v, want none", resp.GetMetrics())
	}
	req.IsConsented = true
	resp, err = ts.client.fast.Predict(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.GetMetrics()["inference_duration_ms"]; !ok || len(resp.GetDebugLogs()) == 0 {
		t.Errorf("fast lane, consented: metrics %v, debug logs %q", resp.GetMetrics(), resp.GetDebugLogs())
	}
}

// TestServerElementCapIsTheRuntimes: with no batch limit given, the server's
// element cap (JSON parsing) is the runtime's, so both transports and both
// input forms stop at the same count.
func TestServerElementCapIsTheRuntimes(t *testing.T) {
	rt, _ := newAffineRuntimeWith(runtimes.Config{MaxTensorElements: 30})
	srv, err := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if got := srv.opts.Limits.MaxElements; got != 30 {
		t.Fatalf("server element cap %d, want the runtime's 30", got)
	}
	entries, err := batch.Parse([]byte(`{"request":[{"model_path":"a/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[11,3],"tensor_content":[`+strings.Repeat("1,", 32)+`1]}]}]}`), srv.opts.Limits)
	if err != nil || len(entries) != 1 || inferr.TypeOf(entries[0].Err) != inferr.InputParsing || !strings.Contains(entries[0].Err.Error(), "30") {
		t.Fatalf("33 elements under the server's limits: %v, %+v", err, entries)
	}
}
