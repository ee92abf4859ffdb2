package kserve_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	pb "github.com/inferbid/inferbid/proto/kservepb"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// BenchmarkV2Infer is the latency of one request for the example pCTR
// model (pctr/v2/, the demo's) through every way in, serially, against
// one TensorFlow sidecar process over the fast lane: the typed Predict
// alone (the floor), kserve's core (Server.Infer) without a transport,
// runInference from JS (in a fresh runtime per call as deployed, and in
// shared runtimes), POST /v2/models/pctr/infer, and
// ModelInfer over gRPC with typed and with raw contents; and, for
// reference, the HTTP and gRPC transport alone (a liveness check on the
// same client).
func BenchmarkV2Infer(b *testing.B) {
	ctx := context.Background()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	os.Setenv(childSidecarEnv, "1") // for the child only: TestMain already ran
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath: exe,
		SocketPath: testhelp.SocketPath(b, "s.sock"),
		Logger:     slog.New(slog.DiscardHandler),
	})
	os.Unsetenv(childSidecarEnv)
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	files, err := modelfiles.ReadLocal("../examples/bucket/pctr/v2/")
	if err != nil {
		b.Fatal(err)
	}
	if err := sup.RegisterModel(ctx, "pctr/v2/", files, ""); err != nil {
		b.Fatal(err)
	}
	client := sup.Client()

	srv := kserve.New(kserve.Options{})
	srv.SetBackend(client)
	mux := http.NewServeMux()
	mux.Handle("/v2/", srv.Handler())
	hs := httptest.NewServer(mux)
	defer hs.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := srv.NewGRPCServer()
	go gs.Serve(ln)
	defer gs.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	gc := pb.NewGRPCInferenceServiceClient(conn)

	for _, rows := range []int{1, 64} {
		ads, pubs, dense := make([]int64, rows), make([]int64, rows), make([]float32, 6*rows)
		for i := range rows {
			ads[i], pubs[i] = int64(i%100), int64(i%50)
			for j := range 6 {
				dense[6*i+j] = float32(i+j) / 10
			}
		}
		entries := []batch.Entry{{ModelPath: "pctr/v2/", Tensors: []tensor.Tensor{
			tensor.New("ad_id", []int64{int64(rows), 1}, ads),
			tensor.New("publisher_id", []int64{int64(rows), 1}, pubs),
			tensor.New("dense", []int64{int64(rows), 6}, dense),
		}}}
		list := func(v any) string { return strings.Trim(strings.ReplaceAll(fmt.Sprint(v), " ", ","), "[]") }
		baJSON := fmt.Sprintf(`{"request":[{"model_path":"pctr/v2/","tensors":[`+
			`{"tensor_name":"ad_id","data_type":"INT64","tensor_shape":[%d,1],"tensor_content":[%s]},`+
			`{"tensor_name":"publisher_id","data_type":"INT64","tensor_shape":[%d,1],"tensor_content":[%s]},`+
			`{"tensor_name":"dense","data_type":"FLOAT","tensor_shape":[%d,6],"tensor_content":[%s]}]}]}`,
			rows, list(ads), rows, list(pubs), rows, list(dense))
		v2JSON := fmt.Sprintf(`{"inputs":[`+
			`{"name":"ad_id","datatype":"INT64","shape":[%d,1],"data":[%s]},`+
			`{"name":"publisher_id","datatype":"INT64","shape":[%d,1],"data":[%s]},`+
			`{"name":"dense","datatype":"FP32","shape":[%d,6],"data":[%s]}]}`,
			rows, list(ads), rows, list(pubs), rows, list(dense))
		script := fmt.Sprintf(`var req = %q;
function infer() { var out = runInference(req); if (out.indexOf('"error"') >= 0) throw new Error(out); return out.length; }`, baJSON)
		pools := map[bool]*jsbridge.Pool{}
		for _, shared := range []bool{false, true} {
			p, err := jsbridge.New("bench.js", script, jsbridge.Options{Inference: client, Size: runtime.GOMAXPROCS(0), ShareRuntimes: shared, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			pools[shared] = p
		}
		var rawIn [][]byte
		rawIn = append(rawIn, le64(ads), le64(pubs), le32(dense))
		shape := func(cols int) []int64 { return []int64{int64(rows), int64(cols)} }
		typedReq := &pb.ModelInferRequest{ModelName: "pctr", Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "ad_id", Datatype: "INT64", Shape: shape(1), Contents: &pb.InferTensorContents{Int64Contents: ads}},
			{Name: "publisher_id", Datatype: "INT64", Shape: shape(1), Contents: &pb.InferTensorContents{Int64Contents: pubs}},
			{Name: "dense", Datatype: "FP32", Shape: shape(6), Contents: &pb.InferTensorContents{Fp32Contents: dense}},
		}}
		rawReq := &pb.ModelInferRequest{ModelName: "pctr", RawInputContents: rawIn, Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "ad_id", Datatype: "INT64", Shape: shape(1)},
			{Name: "publisher_id", Datatype: "INT64", Shape: shape(1)},
			{Name: "dense", Datatype: "FP32", Shape: shape(6)},
		}}
		httpClient := &http.Client{Timeout: time.Minute}
		paths := []struct {
			name string
			call func() error
		}{
			{"sidecar_predict", func() error {
				res, err := client.Predict(ctx, entries)
				if err == nil {
					err = res[0].Err
				}
				return err
			}},
			// kserve's core without a transport: resolve, Predict, rename.
			{"core_infer", func() error {
				_, err := srv.Infer(ctx, &kserve.InferRequest{ModelName: "pctr", Inputs: entries[0].Tensors})
				return err
			}},
			{"js_runInference_isolated", func() error { _, err := pools[false].CallJSON(ctx, "infer"); return err }},
			{"js_runInference_shared", func() error { _, err := pools[true].CallJSON(ctx, "infer"); return err }},
			{"v2_http", func() error {
				resp, err := httpClient.Post(hs.URL+"/v2/models/pctr/infer", "application/json", strings.NewReader(v2JSON))
				if err != nil {
					return err
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != 200 {
					err = fmt.Errorf("%d %s", resp.StatusCode, body)
				}
				return err
			}},
			// The transport alone, for reference: a health check over the
			// same client and connection.
			{"v2_http_live", func() error {
				resp, err := httpClient.Get(hs.URL + "/v2/health/live")
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return nil
			}},
			{"v2_grpc_live", func() error { _, err := gc.ServerLive(ctx, &pb.ServerLiveRequest{}); return err }},
			{"v2_grpc_typed", func() error { _, err := gc.ModelInfer(ctx, typedReq); return err }},
			{"v2_grpc_raw", func() error { _, err := gc.ModelInfer(ctx, rawReq); return err }},
		}
		for _, p := range paths {
			b.Run(fmt.Sprintf("batch=%d/%s", rows, p.name), func(b *testing.B) { benchlat.Loop(b, p.call) })
		}
	}
}

func le64(v []int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func le32(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}
