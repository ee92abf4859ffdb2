package sidecar

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/tensor"
)

// TestClientFallback: a client with a Fallback (a JS worker's) hands it the
// requests the sidecar could not be reached for and those whose answer
// names a model the sidecar lacks, and only those; the host's side,
// PredictProto, answers them as Predict would.
func TestClientFallback(t *testing.T) {
	clients, _ := consentServer(t)
	host := clients[TransportFastLane]
	var called, sent atomic.Int32 // calls, and entries they carried
	fallback := func(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
		called.Add(1)
		sent.Add(int32(len(req.GetBatch().GetRequests())))
		return host.PredictProto(ctx, req)
	}
	newClient := func(socket string) *Client {
		c, err := NewClient(socket, ClientOptions{Logger: quietLog, Fallback: fallback})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x := tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})
	served := []batch.Entry{{ModelPath: "affine/", Tensors: []tensor.Tensor{x}}}
	missing := []batch.Entry{{ModelPath: "missing/", Tensors: []tensor.Tensor{x}}}

	worker := newClient(host.SocketPath())
	if res, err := worker.Predict(ctx, served); err != nil || res[0].Err != nil {
		t.Fatalf("served model: %v %+v", err, res)
	}
	if n := called.Load(); n != 0 {
		t.Fatalf("a request the sidecar answered went to the fallback (%d calls)", n)
	}
	res, err := worker.Predict(ctx, missing)
	if err != nil || inferr.TypeOf(res[0].Err) != inferr.ModelNotFound {
		t.Fatalf("missing model: %v %+v, want MODEL_NOT_FOUND", err, res)
	}
	if n := called.Load(); n != 1 {
		t.Fatalf("a MODEL_NOT_FOUND answer went to the fallback %d times, want 1", n)
	}

	// A batch with a served and a missing model: only the missing entry is
	// retried (the served one ran: a sequence step must not run twice),
	// and the answers keep their places.
	res, err = worker.Predict(ctx, append(append([]batch.Entry{}, served...), missing...))
	if err != nil || res[0].Err != nil || len(res[0].Tensors) == 0 || inferr.TypeOf(res[1].Err) != inferr.ModelNotFound {
		t.Fatalf("mixed batch: %v %+v", err, res)
	}
	if n, e := called.Load(), sent.Load(); n != 2 || e != 2 {
		t.Fatalf("after the mixed batch the fallback had %d calls carrying %d entries, want 2 and 2 (the missing entry alone)", n, e)
	}

	// Nothing listens here: the fast lane's dial is refused (not sent).
	unreachable := newClient(socketIn(t))
	res, err = unreachable.Predict(ctx, served)
	if err != nil || res[0].Err != nil || len(res[0].Tensors) == 0 {
		t.Fatalf("unreachable sidecar: %v %+v, want the fallback's answer", err, res)
	}
	if n := called.Load(); n != 3 {
		t.Fatalf("a request never sent went to the fallback %d times in all, want 3", n)
	}
}
