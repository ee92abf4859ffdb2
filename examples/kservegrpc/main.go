package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferbid/inferbid/internal/cli"
	pb "github.com/inferbid/inferbid/proto/kservepb"
)

func main() { cli.Main("kservegrpc", run) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kservegrpc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8082", "the server's --kserve_grpc_listen address")
	model := fs.String("model", "pctr", "the model name (the newest version is used)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := pb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	ready, err := c.ServerReady(ctx, &pb.ServerReadyRequest{})
	if err != nil {
		return fmt.Errorf("ServerReady: %w", err)
	}
	if !ready.GetReady() {
		return errors.New("the server is not ready")
	}
	md, err := c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: *model})
	if err != nil {
		return fmt.Errorf("ModelMetadata: %w", err)
	}
	fmt.Fprintf(stdout, "model %s versions %v platform %s\n", md.GetName(), md.GetVersions(), md.GetPlatform())
	for _, in := range md.GetInputs() {
		fmt.Fprintf(stdout, "  input  %s %s %v\n", in.GetName(), in.GetDatatype(), in.GetShape())
	}

	// Two rows of the example pCTR model's inputs, as raw little-endian
	// bytes (the fast form; typed contents work too).
	var adIDs, publishers, dense []byte
	for _, v := range []int64{7, 42} {
		adIDs = binary.LittleEndian.AppendUint64(adIDs, uint64(v))
	}
	for _, v := range []int64{3, 3} {
		publishers = binary.LittleEndian.AppendUint64(publishers, uint64(v))
	}
	for _, v := range []float32{0, 0.1, 0.2, 0.3, 0.4, 0.5, 1, 1, 1, 1, 1, 1} {
		dense = binary.LittleEndian.AppendUint32(dense, math.Float32bits(v))
	}
	resp, err := c.ModelInfer(ctx, &pb.ModelInferRequest{
		ModelName: *model,
		Id:        "example-1",
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "ad_id", Datatype: "INT64", Shape: []int64{2, 1}},
			{Name: "publisher_id", Datatype: "INT64", Shape: []int64{2, 1}},
			{Name: "dense", Datatype: "FP32", Shape: []int64{2, 6}},
		},
		RawInputContents: [][]byte{adIDs, publishers, dense},
	})
	if err != nil {
		return fmt.Errorf("ModelInfer: %w", err)
	}
	fmt.Fprintf(stdout, "id %s: model %s version %s\n", resp.GetId(), resp.GetModelName(), resp.GetModelVersion())
	for i, o := range resp.GetOutputs() {
		if o.GetDatatype() != "FP32" || i >= len(resp.GetRawOutputContents()) {
			fmt.Fprintf(stdout, "  output %s %s %v\n", o.GetName(), o.GetDatatype(), o.GetShape())
			continue
		}
		raw := resp.GetRawOutputContents()[i]
		values := make([]float32, len(raw)/4)
		for j := range values {
			values[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		fmt.Fprintf(stdout, "  output %s %s %v %v\n", o.GetName(), o.GetDatatype(), o.GetShape(), values)
	}
	return nil
}
