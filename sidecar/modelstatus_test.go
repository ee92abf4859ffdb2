package sidecar_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// TestModelStatusShowsServingModelAndSignature registers the example pCTR
// SavedModel in a sidecar served on a real socket and asks GetModels for
// it: serving, its checksum, when it was loaded, and its signature as the
// TensorFlow runtime read it.
func TestModelStatusShowsServingModelAndSignature(t *testing.T) {
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	c := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if got, err := c.Models(ctx, ""); err != nil || len(got) != 0 {
		t.Fatalf("Models of an empty sidecar = %v, %v; want none", got, err)
	}
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := c.RegisterModel(ctx, "pctr/v1/", files, ""); err != nil {
		t.Fatal(err)
	}
	got, err := c.Models(ctx, "")
	if err != nil || len(got) != 1 {
		t.Fatalf("Models = %+v, %v; want pctr/v1/", got, err)
	}
	m := got[0]
	if m.Path != "pctr/v1/" || m.State != sidecar.ModelServing {
		t.Errorf("model %q state %q, want pctr/v1/ serving", m.Path, m.State)
	}
	if m.Runtime != tensorflow.Name {
		t.Errorf("runtime %q, want %q (the runtime's registered name)", m.Runtime, tensorflow.Name)
	}
	if want := modelfiles.Checksum(files); m.Checksum != want {
		t.Errorf("checksum %q, want %q (as inferctl checksum computes it)", m.Checksum, want)
	}
	if m.LoadedAt.Before(before.Add(-time.Second)) || m.LoadedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("loaded_at %v, not during the registration (started %v)", m.LoadedAt, before)
	}
	if m.Files != len(files) || m.Bytes != runtimes.Files(files).Size() {
		t.Errorf("files %d, bytes %d; want %d, %d", m.Files, m.Bytes, len(files), runtimes.Files(files).Size())
	}
	wantIn := map[string]struct {
		alias string
		dtype tensor.DType
		shape []int64
	}{
		"serving_default_ad_id:0":        {"ad_id", tensor.Int64, []int64{-1, 1}},
		"serving_default_publisher_id:0": {"publisher_id", tensor.Int64, []int64{-1, 1}},
		"serving_default_dense:0":        {"dense", tensor.Float, []int64{-1, tfsave.PCTRDense}},
	}
	if len(m.Signature.Inputs) != len(wantIn) {
		t.Fatalf("inputs %+v, want %d", m.Signature.Inputs, len(wantIn))
	}
	for _, in := range m.Signature.Inputs {
		w, ok := wantIn[in.Name]
		if !ok || !slices.Contains(in.Aliases, w.alias) || in.DType != w.dtype || !slices.Equal(in.Shape, w.shape) {
			t.Errorf("input %+v, want %+v", in, w)
		}
	}
	if outs := m.Signature.Outputs; len(outs) != 1 || outs[0].DType != tensor.Float || !slices.Equal(outs[0].Shape, []int64{-1, 1}) {
		t.Errorf("outputs %+v, want one FLOAT [-1,1]", outs)
	}

	// One path; an unknown one is MODEL_NOT_FOUND naming it.
	if one, err := c.Models(ctx, "pctr/v1/"); err != nil || len(one) != 1 || one[0].Checksum != m.Checksum {
		t.Errorf("Models(pctr/v1/) = %+v, %v", one, err)
	}
	if _, err := c.Models(ctx, "nope/"); inferr.TypeOf(err) != inferr.ModelNotFound {
		t.Errorf("Models(nope/) error %v, want MODEL_NOT_FOUND", err)
	}

	// A new version at the path: a new checksum and loaded_at.
	v2, err := tfsave.AffineModel(tfsave.Options{}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterModel(ctx, "pctr/v1/", v2, ""); err != nil {
		t.Fatal(err)
	}
	if one, err := c.Models(ctx, "pctr/v1/"); err != nil || len(one) != 1 || one[0].Checksum != modelfiles.Checksum(v2) || !one[0].LoadedAt.After(m.LoadedAt) {
		t.Errorf("after re-registration: %+v, %v", one, err)
	}
	if err := c.DeleteModel(ctx, "pctr/v1/"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Models(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("Models after delete = %+v, %v; want none", got, err)
	}
}

// heldBackend's Load signals started and waits for release: a registration
// caught while it loads.
type heldBackend struct{ started, release chan struct{} }

func (b *heldBackend) Load(ctx context.Context, files runtimes.Files) (driver.Model, error) {
	close(b.started)
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return heldModel{}, nil
}
func (b *heldBackend) Close() error { return nil }

type heldModel struct{}

func (heldModel) Signature() runtimes.Signature {
	return runtimes.Signature{Positional: true}
}
func (heldModel) Predict(context.Context, []tensor.Tensor) ([]tensor.Tensor, error) { return nil, nil }
func (heldModel) Close() error                                                      { return nil }

// TestModelStatusLoading: a path whose registration is under way is
// loading, then serving.
func TestModelStatusLoading(t *testing.T) {
	b := &heldBackend{started: make(chan struct{}), release: make(chan struct{})}
	rt := runtimes.NewRuntime("held", runtimes.Config{}, b)
	c := sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt}, sidecar.ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	registered := make(chan error, 1)
	go func() { registered <- c.RegisterModel(ctx, "m/", runtimes.Files{"f": []byte("x")}, "") }()
	select {
	case <-b.started:
	case <-ctx.Done():
		t.Fatal("the registration never reached Load")
	}
	got, err := c.Models(ctx, "m/")
	if err != nil || len(got) != 1 || got[0].State != sidecar.ModelLoading || got[0].Runtime != "" || got[0].Checksum != "" || !got[0].LoadedAt.IsZero() {
		t.Errorf("while loading: %+v, %v; want m/ loading, no runtime, checksum nor loaded_at", got, err)
	}
	close(b.release)
	if err := <-registered; err != nil {
		t.Fatal(err)
	}
	got, err = c.Models(ctx, "m/")
	if err != nil || len(got) != 1 || got[0].State != sidecar.ModelServing || !got[0].Signature.Positional {
		t.Errorf("after loading: %+v, %v; want m/ serving, positional", got, err)
	}
}
