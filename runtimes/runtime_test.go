package runtimes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// echoBackend is a minimal backend for testing the portable layer only: it
// returns its inputs. Real runtimes are tested by runtimes/conformance.
type echoBackend struct{ sig Signature }

func (b echoBackend) Load(_ context.Context, files Files) (driver.Model, error) {
	if _, ok := files["bad"]; ok {
		return nil, errors.New("cannot parse model")
	}
	return &echoModel{sig: b.sig}, nil
}
func (echoBackend) Close() error { return nil }

type echoModel struct {
	sig     Signature
	block   chan struct{} // when set, Predict waits on it
	closed  atomic.Bool
	running atomic.Int32
}

func (m *echoModel) Signature() Signature { return m.sig }
func (m *echoModel) Predict(_ context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	m.running.Add(1)
	defer m.running.Add(-1)
	if m.closed.Load() {
		return nil, errors.New("predict on a closed backend model")
	}
	if m.block != nil {
		<-m.block
	}
	if len(in) > 0 {
		if err, ok := backendErrors[in[0].Name]; ok {
			return nil, err
		}
	}
	var out []tensor.Tensor
	for _, t := range in {
		if t.Data != nil { // absent optional inputs are not echoed
			out = append(out, t)
		}
	}
	return out, nil
}
func (m *echoModel) Close() error {
	if m.running.Load() != 0 {
		return errors.New("closed while running")
	}
	m.closed.Store(true)
	return nil
}

var sigXY = Signature{Inputs: []TensorSpec{
	{Name: "serving_default_x:0", Aliases: []string{"x"}, DType: tensor.Float, Shape: []int64{-1, 2}},
	{Name: "serving_default_y:0", Aliases: []string{"y"}, DType: tensor.Int64, Shape: []int64{-1}, Optional: true},
}}

func loadEcho(t *testing.T, sig Signature) *Model {
	t.Helper()
	rt := NewRuntime("echo", Config{MaxTensorElements: 1000}, echoBackend{sig: sig})
	m, err := rt.Load(context.Background(), "m/", Files{"f": []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPredictBindsByNameOrAliasInSignatureOrder(t *testing.T) {
	m := loadEcho(t, sigXY)
	y := tensor.New("serving_default_y:0", []int64{2}, []int64{7, 8})
	x := tensor.New("x", []int64{1, 2}, []float32{1, 2})
	out, err := m.Predict(context.Background(), []tensor.Tensor{y, x})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Name != "x" || out[1].Name != "serving_default_y:0" {
		t.Fatalf("inputs not reordered to the signature: %+v", out)
	}
	out, err = m.Predict(context.Background(), []tensor.Tensor{x})
	if err != nil || len(out) != 1 {
		t.Fatalf("optional input left out: %v, %+v", err, out)
	}
}

// TestPredictInSignatureOrderCopiesNoInputs checks the usual request (every
// input once, in signature order) costs one allocation fewer than the same
// inputs out of order, which need a reordered copy.
func TestPredictInSignatureOrderCopiesNoInputs(t *testing.T) {
	m := loadEcho(t, sigXY)
	x := tensor.New("x", []int64{1, 2}, []float32{1, 2})
	y := tensor.New("y", []int64{1}, []int64{7})
	allocs := func(in []tensor.Tensor) float64 {
		return testing.AllocsPerRun(100, func() {
			if _, err := m.Predict(context.Background(), in); err != nil {
				t.Fatal(err)
			}
		})
	}
	inOrder, reordered := allocs([]tensor.Tensor{x, y}), allocs([]tensor.Tensor{y, x})
	if inOrder != reordered-1 {
		t.Fatalf("Predict allocates %v times for inputs in signature order, %v out of order; want one fewer", inOrder, reordered)
	}
}

func TestPredictRejectsBadInputsAsInputParsing(t *testing.T) {
	m := loadEcho(t, sigXY)
	x := tensor.New("x", []int64{1, 2}, []float32{1, 2})
	for name, c := range map[string]struct {
		in   []tensor.Tensor
		want string
	}{
		"unknown name":   {[]tensor.Tensor{x, tensor.New("z", []int64{1}, []int64{1})}, `unknown input tensor "z" (model inputs: "x" (serving_default_x:0), "y" (serving_default_y:0))`},
		"near name":      {[]tensor.Tensor{x, tensor.New("Y_", []int64{1}, []int64{1})}, `did you mean "y" (serving_default_y:0)?`},
		"graph name":     {[]tensor.Tensor{tensor.New("serving_default_x:0", []int64{1, 3}, []float32{1, 2, 3})}, `input tensor "x" (serving_default_x:0): tensor_shape [1,3]`},
		"twice":          {[]tensor.Tensor{x, x}, "given twice"},
		"missing":        {[]tensor.Tensor{tensor.New("y", []int64{1}, []int64{1})}, `missing input tensor "x" (serving_default_x:0)`},
		"dtype":          {[]tensor.Tensor{tensor.New("x", []int64{1, 2}, []float64{1, 2})}, "data_type DOUBLE, model expects FLOAT"},
		"rank":           {[]tensor.Tensor{tensor.New("x", []int64{2}, []float32{1, 2})}, "tensor_shape [2], model expects [-1,2]"},
		"dim":            {[]tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})}, "model expects [-1,2]"},
		"count mismatch": {[]tensor.Tensor{tensor.New("x", []int64{2, 2}, []float32{1, 2})}, "needs 4 values, tensor_content has 2"},
		"too many":       {[]tensor.Tensor{tensor.New("x", []int64{1000, 2}, make([]float32, 2000))}, "more than 1000 elements"},
		"no data":        {[]tensor.Tensor{{Name: "x", Shape: []int64{1}}}, "no data of a supported type"},
		// Every input in signature order (Model.bind's no-copy path).
		"dtype in order": {[]tensor.Tensor{x, tensor.New("y", []int64{1}, []int32{1})}, `input tensor "y" (serving_default_y:0): data_type INT32, model expects INT64`},
		"rank in order":  {[]tensor.Tensor{x, tensor.New("y", []int64{1, 1}, []int64{1})}, "tensor_shape [1,1], model expects [-1]"},
	} {
		_, err := m.Predict(context.Background(), c.in)
		if inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `model "m/"`) {
			t.Errorf("%s: got %v %q, want INPUT_PARSING containing %q and the model path", name, inferr.TypeOf(err), err, c.want)
		}
	}
}

// Bind checks and orders inputs exactly as Predict does, without a call.
func TestBindChecksLikePredictWithoutRunning(t *testing.T) {
	m := loadEcho(t, sigXY)
	x := tensor.New("x", []int64{1, 2}, []float32{1, 2})
	y := tensor.New("y", []int64{1}, []int64{7})
	got, err := m.Bind([]tensor.Tensor{y, x})
	if err != nil || len(got) != 2 || got[0].Name != "x" || got[1].Name != "y" {
		t.Fatalf("Bind(y, x) = %+v, %v; want x, y", got, err)
	}
	if got, err := m.Bind([]tensor.Tensor{x}); err != nil || len(got) != 2 || got[1].Data != nil {
		t.Fatalf("Bind(x) = %+v, %v; want x and an absent optional y", got, err)
	}
	bad := []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})}
	_, bindErr := m.Bind(bad)
	_, predictErr := m.Predict(context.Background(), bad)
	if inferr.TypeOf(bindErr) != inferr.InputParsing || bindErr == nil || predictErr == nil || bindErr.Error() != predictErr.Error() {
		t.Fatalf("Bind error %v, Predict error %v; want the same INPUT_PARSING error", bindErr, predictErr)
	}
	if st := m.Stats(); st.Calls != 1 {
		t.Fatalf("Bind ran the model: %+v", st)
	}
	m.Close()
	if _, err := m.Bind([]tensor.Tensor{x}); err != nil {
		t.Fatalf("Bind on a closed model: %v", err)
	}
}

type statefulEcho struct{ echoModel }

func (*statefulEcho) Stateful() bool { return true }

type statefulBackend struct{}

func (statefulBackend) Load(context.Context, Files) (driver.Model, error) {
	return &statefulEcho{}, nil
}
func (statefulBackend) Close() error { return nil }

func TestStatefulComesFromTheBackend(t *testing.T) {
	if loadEcho(t, sigXY).Stateful() {
		t.Error("a model without driver.StatefulModel reports stateful")
	}
	m, err := NewRuntime("s", Config{}, statefulBackend{}).Load(context.Background(), "s/", Files{"f": nil})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Stateful() {
		t.Error("a model whose backend says stateful reports not stateful")
	}
}

func TestBackendErrorsAreTyped(t *testing.T) {
	m := loadEcho(t, Signature{Positional: true})
	_, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("fail", nil, []int32{1})})
	if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), "kernel exploded") {
		t.Fatalf("got %v %q", inferr.TypeOf(err), err)
	}
	rt := NewRuntime("echo", Config{}, echoBackend{})
	if _, err := rt.Load(context.Background(), "bad/", Files{"bad": nil}); inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), `"bad/"`) {
		t.Fatalf("load error: %v %q", inferr.TypeOf(err), err)
	}
	if _, err := rt.Load(context.Background(), "empty/", nil); inferr.TypeOf(err) != inferr.ModelExecution {
		t.Fatalf("empty files: %v", err)
	}
	if st := m.Stats(); st.Calls != 1 || st.Failures != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// backendErrors are what echoModel returns for an input of that name.
var backendErrors = map[string]error{
	"fail":      errors.New("kernel exploded"),
	"badinput":  fmt.Errorf("%w: rows disagree between inputs", driver.ErrInvalidInput),
	"badoutput": fmt.Errorf("%w: output is a map", driver.ErrInvalidOutput),
	"deadline":  fmt.Errorf("run stopped: %w", context.DeadlineExceeded),
	"canceled":  fmt.Errorf("run stopped: %w", context.Canceled),
}

// TestErrorTypeClassifiesBackendErrors: the one classifier gives each kind
// of backend error its type, and the error names the model path and keeps
// the backend's words and the sentinel.
func TestErrorTypeClassifiesBackendErrors(t *testing.T) {
	m := loadEcho(t, Signature{Positional: true})
	for name, want := range map[string]inferr.Type{
		"fail":      inferr.ModelExecution,
		"badinput":  inferr.InputParsing,
		"badoutput": inferr.OutputParsing,
		"deadline":  inferr.GRPC,
		"canceled":  inferr.GRPC,
	} {
		_, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New(name, nil, []int32{1})})
		if got := inferr.TypeOf(err); got != want {
			t.Errorf("%s: type %s, want %s (%v)", name, got, want, err)
		}
		if !errors.Is(err, backendErrors[name]) || !strings.Contains(err.Error(), `"m/"`) {
			t.Errorf("%s: %q lost the backend error or the model path", name, err)
		}
	}
}

func TestCloseWaitsForCallsInFlight(t *testing.T) {
	m := loadEcho(t, Signature{Positional: true})
	backend := m.backend.(*echoModel)
	backend.block = make(chan struct{})
	in := []tensor.Tensor{tensor.New("a", []int64{1}, []float64{1})}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := m.Predict(context.Background(), in)
			errs <- err
		})
	}
	for backend.running.Load() != 8 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error)
	go func() { closed <- m.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while calls were in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(backend.block)
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("call in flight failed: %v", err)
		}
	}
	_, err := m.Predict(context.Background(), in)
	if !errors.Is(err, ErrClosed) || inferr.TypeOf(err) != inferr.ModelNotFound {
		t.Fatalf("after Close: %v", err)
	}
	if m.Close() != nil {
		t.Fatal("second Close must be a no-op")
	}
}

func TestOpenChecksRegistryAndModuleName(t *testing.T) {
	Register("echo-test", func(Config) (driver.Backend, error) { return echoBackend{}, nil })
	if _, err := Open("nope", Config{}); err == nil || !strings.Contains(err.Error(), "echo-test") {
		t.Fatalf("unknown runtime error should list the registered ones: %v", err)
	}
	if _, err := Open("echo-test", Config{ModuleName: "pytorch"}); err == nil {
		t.Fatal("a config for another module must be refused")
	}
	rt, err := Open("echo-test", Config{})
	if err != nil || rt.Name() != "echo-test" {
		t.Fatal(err)
	}
}

// A positional model may be given its required inputs only: they fill the
// required positions in order, and the optional ones are absent (a PyTorch
// sequence's state).
func TestPositionalOptionalInputsMayBeLeftOut(t *testing.T) {
	m := loadEcho(t, Signature{Positional: true, Inputs: []TensorSpec{{Name: "x"}, {Name: "h_in", Optional: true}, {Name: "y", DType: tensor.Int64}}})
	a := tensor.New("a", []int64{1}, []float32{1})
	b := tensor.New("b", []int64{1}, []int64{2})
	got, err := m.Bind([]tensor.Tensor{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Name != "a" || got[1].Name != "h_in" || got[1].Data != nil || got[2].Name != "b" {
		t.Fatalf("bound %+v, want a, absent h_in, b", got)
	}
	if got, err := m.Bind([]tensor.Tensor{a, a, b}); err != nil || len(got) != 3 || got[1].Data == nil {
		t.Fatalf("all three given: %+v %v", got, err)
	}
	if _, err := m.Bind([]tensor.Tensor{b, a}); err == nil || !strings.Contains(err.Error(), `"y"`) {
		t.Fatalf("a wrong dtype at a required position: %v, want an error naming y", err)
	}
	if _, err := m.Bind([]tensor.Tensor{a}); err == nil || !strings.Contains(err.Error(), "takes 3 input tensors, got 1") {
		t.Fatalf("one input: %v", err)
	}
}

// A backend that cannot serve external variables (ONNX, PyTorch) is never
// asked to: the load is refused, naming the path and the runtime.
func TestExternalVariablesRefusedByOtherRuntimes(t *testing.T) {
	rt := NewRuntime("onnx", Config{}, echoBackend{})
	ctx := WithLoadOptions(context.Background(), LoadOptions{Checksum: "c", ExternalVariables: map[string]string{"emb": "redis-cluster://127.0.0.1:1"}})
	for _, load := range []func() (*Model, error){
		func() (*Model, error) { return rt.Load(ctx, "m/", Files{"f": nil}) },
		func() (*Model, error) { return rt.LoadDisk(ctx, "m/", DiskFiles{"f": "/nonexistent"}) },
	} {
		_, err := load()
		if err == nil || !strings.Contains(err.Error(), "external_variables") || !strings.Contains(err.Error(), "onnx") || !strings.Contains(err.Error(), "m/") {
			t.Errorf("load: %v, want a refusal naming external_variables, the runtime and the path", err)
		}
	}
	// Without the options the same backend loads.
	if m, err := rt.Load(context.Background(), "m/", Files{"f": nil}); err != nil {
		t.Fatal(err)
	} else {
		m.Close()
	}
}
