package sidecar

import (
	"context"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/tensor"
)

// BenchmarkPredictPath measures the CPU and allocations of a one-entry
// typed Predict with the in-test affine model (which does almost nothing),
// so that what remains is the sidecar's own path:
//
//   - server: Server.predict as the fast lane calls it (no socket);
//   - fastlane: Client.Predict over the fast lane to a server in this
//     process (both ends' work, and the socket's).
//
// Allocations are robust to a noisy machine; compare allocs/op and the
// CPU profile rather than ns/op.
func BenchmarkPredictPath(b *testing.B) {
	rt, _ := newAffineRuntime()
	srv, err := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	socket := testhelp.SocketPath(b, "s.sock")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(socket) }()
	defer func() { srv.GracefulStop(); <-served }()
	c, err := NewClient(socket, ClientOptions{Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		b.Fatal(err)
	}
	if err := c.RegisterModel(ctx, "a/", affineFiles("2 1"), ""); err != nil {
		b.Fatal(err)
	}
	entries := []batch.Entry{{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})}}}
	pb, _ := entriesToProto(entries)
	req := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: pb}}

	b.Run("server", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := srv.fastPredict(ctx, req)
			if err != nil || resp.GetResult().GetResponses()[0].GetError() != nil {
				b.Fatal(err, resp)
			}
		}
	})
	b.Run("fastlane", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.Predict(ctx, entries)
			if err != nil || res[0].Err != nil {
				b.Fatal(err, res)
			}
		}
	})
}
