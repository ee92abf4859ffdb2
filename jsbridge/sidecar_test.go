package jsbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
)

// The tests run the real sidecar server (sidecar.NewServer) over a real Unix
// socket, in-process or as a child process (this test binary re-executed
// with sidecarEnv set, started by the real sidecar.Supervisor). Its runtime
// is "gotest": a small pure-Go backend whose model files are one line of
// text naming what the model does:
//
//	affine A C   y = A*x + C, FLOAT input "x" of any shape
//	mlp          the team's benchmark MLP (input "x" FLOAT [-1,8], output [-1,1])
//	sleep MS     y = x after MS milliseconds (or until the call is cancelled)
//	nan          y = NaN (OUTPUT_PARSING when rendered)
//	fail         the runtime fails (MODEL_EXECUTION)
//	unknown      the runtime fails with an UNKNOWN-typed error
const sidecarEnv = "JSBRIDGE_TEST_SIDECAR"

func TestMain(m *testing.M) {
	if os.Getenv(sidecarEnv) == "1" {
		os.Exit(sidecartest.ServeChild(os.Args[1:], testRuntime()))
	}
	os.Exit(m.Run())
}

// runtimeEnv selects the child sidecar's runtime: "tensorflow" for the
// benchmarks (the real pure-Go TensorFlow runtime), else gotest.
const runtimeEnv = "JSBRIDGE_TEST_RUNTIME"

func testRuntime() *runtimes.Runtime {
	if os.Getenv(runtimeEnv) == tensorflow.Name {
		rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
		if err != nil {
			panic(err)
		}
		return rt
	}
	return runtimes.NewRuntime("gotest", runtimes.Config{}, goBackend{})
}

type goBackend struct{}

func (goBackend) Close() error { return nil }

func (goBackend) Load(_ context.Context, files runtimes.Files) (driver.Model, error) {
	b, ok := files["model.txt"]
	if !ok {
		return nil, errors.New("no model.txt")
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil, errors.New("empty model.txt")
	}
	m := &goModel{kind: f[0]}
	arg := func(i int) float64 {
		if i < len(f) {
			v, _ := strconv.ParseFloat(f[i], 64)
			return v
		}
		return 0
	}
	switch m.kind {
	case "affine":
		m.a, m.c = float32(arg(1)), float32(arg(2))
	case "sleep":
		m.sleep = time.Duration(arg(1)) * time.Millisecond
	case "mlp", "nan", "fail", "unknown":
	default:
		return nil, fmt.Errorf("unknown model kind %q", m.kind)
	}
	return m, nil
}

type goModel struct {
	kind  string
	a, c  float32
	sleep time.Duration
}

func (m *goModel) Signature() runtimes.Signature {
	in := runtimes.TensorSpec{Name: "x", DType: tensor.Float}
	if m.kind == "mlp" {
		in.Shape = []int64{-1, 8}
	}
	return runtimes.Signature{
		Inputs:  []runtimes.TensorSpec{in},
		Outputs: []runtimes.TensorSpec{{Name: "y", DType: tensor.Float}},
	}
}

func (m *goModel) Close() error { return nil }

func (m *goModel) Predict(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, _ := tensor.Data[float32](in[0])
	y := make([]float32, len(x))
	shape := in[0].Shape
	switch m.kind {
	case "affine":
		for i, v := range x {
			y[i] = m.a*v + m.c
		}
	case "sleep":
		select {
		case <-time.After(m.sleep):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		copy(y, x)
	case "nan":
		for i := range y {
			y[i] = float32(math.NaN())
		}
	case "fail":
		return nil, errors.New("the test model always fails")
	case "unknown":
		return nil, inferr.Errorf(inferr.Unknown, "the test model fails in an unclassified way")
	case "mlp":
		y, shape = mlp(x), []int64{shape[0], 1}
	}
	return []tensor.Tensor{tensor.New("y", shape, y)}, nil
}

// mlp is the benchmark MLP of the team contract, accumulated in float32 in
// index order.
func mlp(x []float32) []float32 {
	rows := len(x) / 8
	y := make([]float32, rows)
	for r := range rows {
		var h [16]float32
		for j := range 16 {
			acc := float32(0)
			for i := range 8 {
				acc += x[r*8+i] * float32(0.5*math.Sin(float64(i*16+j)))
			}
			acc += float32(0.1 * math.Cos(float64(j)))
			h[j] = max(acc, 0)
		}
		acc := float32(0)
		for j := range 16 {
			acc += h[j] * float32(0.5*math.Sin(float64(100+j)))
		}
		acc += 0.05
		y[r] = float32(1 / (1 + math.Exp(-float64(acc))))
	}
	return y
}

// startInProcessSidecar serves the gotest runtime on a socket in this
// process and returns a client for it.
func startInProcessSidecar(t testing.TB) *sidecar.Client {
	t.Helper()
	return sidecartest.Serve(t, sidecar.ServerOptions{Runtime: testRuntime(), Logger: quietLogger()}, sidecar.ClientOptions{Logger: quietLogger()})
}

// startChildSidecar runs this test binary as the sidecar under the real
// supervisor.
func startChildSidecar(t testing.TB) *sidecar.Supervisor {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	os.Setenv(sidecarEnv, "1") // inherited by the child only; TestMain already ran
	t.Cleanup(func() { os.Unsetenv(sidecarEnv) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath: exe,
		SocketPath: testhelp.SocketPath(t, "s.sock"),
		MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
		StopGrace:  2 * time.Second,
		Logger:     quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return sup
}

type registrar interface {
	RegisterModel(ctx context.Context, modelPath string, files runtimes.Files, warmUpJSON string) error
}

func register(t testing.TB, r registrar, path, spec string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.RegisterModel(ctx, path, runtimes.Files{"model.txt": []byte(spec)}, ""); err != nil {
		t.Fatalf("register %s: %v", path, err)
	}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError + 1}))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
