package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
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
//     process (both ends' work, and the socket's);
//   - fastlane-consented: the same with a batch.DebugSink in the ctx
//     (is_consented: the sidecar's debug lines and metrics come back).
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
	b.Run("fastlane-consented", func(b *testing.B) {
		lines := 0
		cctx := batch.WithDebugLog(ctx, func(string) { lines++ })
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.Predict(cctx, entries)
			if err != nil || res[0].Err != nil {
				b.Fatal(err, res)
			}
		}
		if lines == 0 {
			b.Fatal("no debug lines")
		}
	})
}

// BenchmarkJSONPredictHeap reports what Server.predict allocates for a
// large JSON batch, per byte of request (alloc-B/req-B), with the
// collector off so that every byte allocated counts as held at the end:
// an upper bound of the handler's peak heap growth. "unregistered" is the
// parse path alone (the entry fails as MODEL_NOT_FOUND); "affine" adds a
// model whose output is as large as its input, rendered at about twice the
// request's size (FLOAT values widened to 17 digits). The transport's share
// is measured on a real process by TestJSONPredictMemory.
//
//	go test -run '^$' -bench JSONPredictHeap -benchtime 1x ./sidecar/
func BenchmarkJSONPredictHeap(b *testing.B) {
	rt, _ := newAffineRuntime()
	srv, err := NewServer(ServerOptions{Runtime: rt, Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	ctx := context.Background()
	if _, err := srv.reg.Register(ctx, "affine/", affineFiles("2 1"), "", nil); err != nil {
		b.Fatal(err)
	}
	sample := []rtmetrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		rtmetrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	for _, size := range []int{10 << 20, 100 << 20} {
		for _, model := range []string{"unregistered/", "affine/"} {
			doc := floatBatchOf(model, size)
			req := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_BatchJson{BatchJson: doc}}
			b.Run(fmt.Sprintf("%dMB/%s", size>>20, strings.TrimSuffix(model, "/")), func(b *testing.B) {
				var perByte float64
				for b.Loop() {
					runtime.GC()
					old := debug.SetGCPercent(-1)
					before := allocated()
					resp, err := srv.predict(ctx, req, false)
					perByte = float64(allocated()-before) / float64(len(doc))
					debug.SetGCPercent(old)
					if err != nil || len(resp.GetOutputJson()) == 0 {
						b.Fatal(err)
					}
				}
				b.ReportMetric(perByte, "alloc-B/req-B")
			})
		}
	}
}

// floatBatchOf is a one-entry JSON batch of about size bytes for path: a
// FLOAT [rows,3] tensor, values as 8-character JSON numbers.
func floatBatchOf(path string, size int) []byte {
	var b bytes.Buffer
	rows := size / 27
	b.Grow(size + 256)
	fmt.Fprintf(&b, `{"request":[{"model_path":%q,"tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[%d,3],"tensor_content":[`, path, rows)
	for i := range rows * 3 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(i%1000)/1000+0.000125, 'f', 6, 64))
	}
	b.WriteString(`]}]}]}`)
	return b.Bytes()
}
