//go:build pytorch && cgo

package kserve_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/kserve"
	pb "github.com/inferbid/inferbid/proto/kservepb"
	"github.com/inferbid/inferbid/runtimes"
	_ "github.com/inferbid/inferbid/runtimes/pytorch"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
)

// Both surfaces against libtorch (go test -tags pytorch, as make test's
// PyTorch run does). TorchScript is positional: names are ignored and the
// signature has no dtypes, so the name and dtype checks are left out.
func TestConformancePyTorch(t *testing.T) {
	rt, err := runtimes.Open("pytorch", runtimes.Config{NumIntraopThreads: 1, NumInteropThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Logger: slog.New(slog.DiscardHandler)}, sidecar.ClientOptions{})
	read := func(name string) runtimes.Files {
		return runtimes.Files{name: testhelp.ReadFile(t, "runtimes/pytorch/testdata/"+name)}
	}
	runConformance(t, client, affineFixture{Platform: kserve.PlatformPyTorch, Positional: true,
		V1: read("affine_v1.pt"), V2: read("affine_v2.pt"),
		AllDTypes: read("alldtypes.pt"),
		InName:    func(d string) string { return d },
	})
}

// TestV2DTypesPyTorch: BOOL, UINT8 and FP16 go through libtorch's identity
// model (six positional inputs) exactly over HTTP and gRPC raw; UINT16 and
// BYTES, which libtorch does not take, are a 400 naming the input.
func TestV2DTypesPyTorch(t *testing.T) {
	rt, err := runtimes.Open("pytorch", runtimes.Config{NumIntraopThreads: 1, NumInteropThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	client := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt, Logger: slog.New(slog.DiscardHandler)}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := client.RegisterModel(ctx, "identity/", runtimes.Files{"alldtypes.pt": testhelp.ReadFile(t, "runtimes/pytorch/testdata/alldtypes.pt")}, ""); err != nil {
		t.Fatal(err)
	}
	srv := kserve.New(kserve.Options{})
	srv.SetBackend(client)
	values := []v2Value{v2Values[0], v2Values[1], v2Values[5], v2Values[0], v2Values[1], v2Values[5]} // BOOL, UINT8, FP16 twice

	url := serveHTTP(t, srv)
	var inputs []string
	for i, v := range values {
		inputs = append(inputs, fmt.Sprintf(`{"name":"in%d","shape":[2,2],"datatype":%q,"data":%s}`, i, v.datatype, v.jsonIn))
	}
	code, body := call(t, "POST", url+"/v2/models/identity/infer", `{"inputs":[`+strings.Join(inputs, ",")+`]}`)
	if code != 200 {
		t.Fatalf("HTTP infer: %d %s", code, body)
	}
	for i, v := range values {
		want := fmt.Sprintf(`"datatype":%q,"data":%s}`, v.datatype, v.jsonOut)
		if !strings.Contains(string(body), fmt.Sprintf(`{"name":"%d","shape":[2,2],`, i)+want) {
			t.Errorf("HTTP output %d: %s does not hold %s", i, body, want)
		}
	}
	bad := strings.Replace(`{"inputs":[`+strings.Join(inputs, ",")+`]}`, `"datatype":"UINT8","data":[[0,1],[254,255]]`, `"datatype":"UINT16","data":[[0,1],[254,255]]`, 1)
	code, body = call(t, "POST", url+"/v2/models/identity/infer", bad)
	wantError(t, "UINT16 input", code, body, 400, `"in1"`, "UINT16")

	c := serveGRPC(t, srv)
	raw := &pb.ModelInferRequest{ModelName: "identity"}
	for i, v := range values {
		raw.Inputs = append(raw.Inputs, &pb.ModelInferRequest_InferInputTensor{Name: fmt.Sprintf("in%d", i), Datatype: v.datatype, Shape: []int64{2, 2}})
		raw.RawInputContents = append(raw.RawInputContents, v.raw)
	}
	r, err := c.ModelInfer(ctx, raw)
	if err != nil {
		t.Fatalf("raw ModelInfer: %v", err)
	}
	for i, v := range values {
		if i >= len(r.GetOutputs()) || r.GetOutputs()[i].GetDatatype() != v.datatype || string(r.GetRawOutputContents()[i]) != string(v.raw) {
			t.Errorf("raw output %d: %v, want %s % x", i, r.GetOutputs(), v.datatype, v.raw)
		}
	}
	raw.Inputs[1].Datatype, raw.RawInputContents[1] = "BYTES", rawBytes([]byte("a"), nil, nil, nil)
	_, err = c.ModelInfer(ctx, raw)
	wantCode(t, "BYTES input", err, codes.InvalidArgument, `"in1"`, "BYTES")
}
