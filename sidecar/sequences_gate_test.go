package sidecar

import (
	"context"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/sidecar/registry"
	"github.com/inferbid/inferbid/tensor"
)

// gateBackend is an in-test stateful runtime whose sequence calls with a
// negative x wait for the test (entered, then release), so that a request
// can be held in flight without timing: the running sum of x per sequence.
type gateBackend struct {
	entered chan struct{}
	release chan struct{}
}

type gateModel struct{ b *gateBackend }

func (b *gateBackend) Load(context.Context, runtimes.Files) (driver.Model, error) {
	return &gateModel{b: b}, nil
}
func (b *gateBackend) Close() error { return nil }

func (m *gateModel) Signature() runtimes.Signature {
	return runtimes.Signature{
		Inputs:  []runtimes.TensorSpec{{Name: "x", DType: tensor.Float, Shape: []int64{1}}},
		Outputs: []runtimes.TensorSpec{{Name: "sum", DType: tensor.Float, Shape: []int64{1}}},
	}
}
func (m *gateModel) Stateful() bool { return true }
func (m *gateModel) Close() error   { return nil }
func (m *gateModel) Predict(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	var st float32
	return m.PredictSequence(ctx, &st, in)
}
func (m *gateModel) NewSequenceState() (any, error) { return new(float32), nil }
func (m *gateModel) PredictSequence(ctx context.Context, st any, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := in[0].Data.([]float32)[0]
	if x < 0 {
		m.b.entered <- struct{}{}
		select {
		case <-m.b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	sum := st.(*float32)
	*sum += x
	return []tensor.Tensor{tensor.New("sum", []int64{1}, []float32{*sum})}, nil
}

// A start with the id of a sequence whose end is still running is
// FAILED_PRECONDITION, and the class reaches the client over the real
// socket; once the end is done the id starts afresh.
func TestStartWhileEndingIsFailedPreconditionOverTheWire(t *testing.T) {
	b := &gateBackend{entered: make(chan struct{}), release: make(chan struct{})}
	rt := runtimes.NewRuntime("gate", runtimes.Config{}, b)
	settings := registry.Settings{StatefulModels: map[string]runtimes.SequenceSettings{"g/": {Stateful: true}}}
	_, c := serveOnSocket(t, ServerOptions{Runtime: rt, Settings: settings, SequenceCleanerInterval: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.RegisterModel(ctx, "g/", runtimes.Files{"m": []byte("x")}, ""); err != nil {
		t.Fatal(err)
	}
	entry := func(x float32, id int64, ctl int32) batch.Entry {
		e := seqEntry(x, id, ctl)
		e.ModelPath = "g/"
		return e
	}
	if r := predictOne(t, c, entry(1, 5, 1)); r.Err != nil {
		t.Fatal(r.Err)
	}
	ended := make(chan batch.Result, 1)
	go func() {
		res, err := c.Predict(ctx, []batch.Entry{entry(-1, 5, 2)})
		if err != nil {
			ended <- batch.Result{Err: err}
			return
		}
		ended <- res[0]
	}()
	select {
	case <-b.entered: // the end request runs and holds sequence 5
	case <-ctx.Done():
		t.Fatal("the end request never reached the model")
	}
	r := predictOne(t, c, entry(1, 5, 1))
	if got, ok := sequence.CodeOf(r.Err); !ok || got != sequence.FailedPrecondition || inferr.TypeOf(r.Err) != inferr.ModelExecution {
		t.Errorf("start while ending: %v (class %v), want MODEL_EXECUTION FAILED_PRECONDITION", r.Err, got)
	}
	close(b.release)
	if r := <-ended; r.Err != nil {
		t.Fatalf("the end request: %v", r.Err)
	}
	if r := predictOne(t, c, entry(2, 5, 1)); r.Err != nil {
		t.Fatalf("start after the end: %v", r.Err)
	}
}

// serveOnSocket serves opts (Runtime set; without a Logger, quietly) on a
// real socket and returns the server and a healthy client; both stop when
// the test ends.
func serveOnSocket(t *testing.T, opts ServerOptions) (*Server, *Client) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLog
	}
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	socket := socketIn(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(socket) }()
	c, err := NewClient(socket, ClientOptions{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		srv.GracefulStop()
		<-served
	})
	return srv, c
}
