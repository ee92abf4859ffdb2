package sidecartest

import (
	"context"
	"errors"
	"testing"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

type noBackend struct{}

func (noBackend) Load(context.Context, runtimes.Files) (driver.Model, error) {
	return nil, errors.New("this backend loads nothing")
}
func (noBackend) Close() error { return nil }

// TestServeAnswersOverTheSocket checks the client Serve returns reaches a
// live server: the model list is empty, a prediction for an unknown model
// is that entry's MODEL_NOT_FOUND, and a failing load is a typed error.
func TestServeAnswersOverTheSocket(t *testing.T) {
	rt := runtimes.NewRuntime("none", runtimes.Config{}, noBackend{})
	c := Serve(t, sidecar.ServerOptions{Runtime: rt}, sidecar.ClientOptions{})
	ctx := context.Background()
	paths, err := c.ModelPaths(ctx)
	if err != nil || len(paths) != 0 {
		t.Fatalf("ModelPaths = %v, %v; want none", paths, err)
	}
	res, err := c.Predict(ctx, []batch.Entry{{ModelPath: "nope/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1}, []float32{1})}}})
	if err != nil || len(res) != 1 || inferr.TypeOf(res[0].Err) != inferr.ModelNotFound {
		t.Fatalf("Predict of an unknown model = %+v, %v; want one MODEL_NOT_FOUND entry", res, err)
	}
	if err := c.RegisterModel(ctx, "m/", runtimes.Files{"f": []byte("x")}, ""); inferr.TypeOf(err) != inferr.ModelExecution {
		t.Fatalf("RegisterModel on a backend that loads nothing = %v, want MODEL_EXECUTION", err)
	}
}
