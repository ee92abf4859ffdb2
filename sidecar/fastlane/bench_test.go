package fastlane

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

// BenchmarkRoundTrip: a one-row request answered by a handler that does no
// work, client and server in this process over a real Unix socket, with
// and without a ctx deadline, beside a raw echo of 96 bytes between two
// goroutines in this process. The cross-process numbers are
// sidecar.BenchmarkTransports; this one is steadier, for profiling.
func BenchmarkRoundTrip(b *testing.B) {
	dir := testhelp.ShortDir(b)
	resp := &inferencepb.PredictResponse{Output: &inferencepb.PredictResponse_Result{Result: &inferencepb.BatchResult{
		Responses: []*inferencepb.ModelResponse{{ModelPath: "mlp/", Tensors: []*inferencepb.Tensor{{Name: "y", DataType: inferencepb.DataType_FLOAT, Shape: []int64{1, 1}, FloatData: []float32{0.5}}}}}}}}
	srv, _ := NewServer(ServerOptions{Handler: func(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
		return resp, nil
	}})
	lis, err := net.Listen("unix", filepath.Join(dir, "fl.sock"))
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	c := NewClient(filepath.Join(dir, "fl.sock"), ClientOptions{})
	defer c.Close()
	req := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{Requests: []*inferencepb.ModelRequest{
		{ModelPath: "mlp/", Tensors: []*inferencepb.Tensor{{Name: "x", DataType: inferencepb.DataType_FLOAT, Shape: []int64{1, 8}, FloatData: make([]float32, 8)}}}}}}}
	ctx := context.Background()
	b.Run("fastlane", func(b *testing.B) {
		benchlat.Loop(b, func() error { _, err := c.Predict(ctx, req); return err })
	})
	b.Run("fastlane-deadline", func(b *testing.B) {
		benchlat.Loop(b, func() error {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := c.Predict(ctx, req)
			return err
		})
	})
	elis, err := net.Listen("unix", filepath.Join(dir, "echo.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer elis.Close()
	go func() {
		for {
			nc, err := elis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				buf := make([]byte, 4096)
				for {
					n, err := nc.Read(buf)
					if err != nil {
						return
					}
					nc.Write(buf[:n])
				}
			}()
		}
	}()
	b.Run("echo", func(b *testing.B) {
		nc, err := net.Dial("unix", filepath.Join(dir, "echo.sock"))
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		msg, got := make([]byte, 96), make([]byte, 96)
		benchlat.Loop(b, func() error {
			nc.Write(msg)
			_, err := io.ReadFull(nc, got)
			return err
		})
	})
}
