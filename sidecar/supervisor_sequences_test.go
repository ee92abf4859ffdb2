package sidecar_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// A model registered with its own sequence settings (a model_metadata
// entry's) keeps them across a sidecar restart: the replay carries them.
// The runtime config lists no stateful model, so without them the running
// sum would refuse the sequence inputs.
func TestSupervisorReplaysSequenceSettings(t *testing.T) {
	bin := buildBinary(t, "inference-sidecar-tensorflow", false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath: bin,
		SocketPath: filepath.Join(testhelp.ShortDir(t), "sup.sock"),
		MinBackoff: 50 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(tLogWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	files, err := tfsave.RunningSumModel(tfsave.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := uint32(1)
	if err := sup.RegisterModelWithSequences(ctx, "sum/", files, "", &runtimes.SequenceSettings{Stateful: true, MaxSequenceNumber: &one}); err != nil {
		t.Fatal(err)
	}
	c := sup.Client()
	start := func(id int64) (batch.Result, error) {
		res, err := c.Predict(ctx, []batch.Entry{{ModelPath: "sum/", Tensors: []tensor.Tensor{
			tensor.New("x", []int64{1}, []float32{1}),
			tensor.New(sidecar.SequenceIDName, []int64{1}, []int64{id}),
			tensor.New(sidecar.SequenceControlName, []int64{1}, []int32{1})}}})
		if err != nil {
			return batch.Result{}, err
		}
		return res[0], nil
	}
	if r, err := start(3); err != nil || r.Err != nil {
		t.Fatalf("start 3 before the kill: %v %v", err, r.Err)
	}
	if err := syscall.Kill(sup.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Sequence 3 died with the sidecar, so 4 starts within the limit of 1
	// once the model is back (the old sidecar, holding 3, would refuse it;
	// a model replayed without its settings would refuse the sequence
	// inputs).
	for {
		r, err := start(4)
		if err == nil && r.Err == nil {
			break
		}
		if err == nil {
			err = r.Err
		}
		if inferr.TypeOf(err) != inferr.GRPC && inferr.TypeOf(err) != inferr.ModelNotFound {
			t.Fatalf("start 4 after the kill: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("the sidecar never came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // a poll while the supervisor restarts the child
	}
	r, err := start(5)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := sequence.CodeOf(r.Err); !ok || c != sequence.Unavailable {
		t.Fatalf("start 5 after the replay: %v, want UNAVAILABLE (the replayed limit of 1)", r.Err)
	}
}
