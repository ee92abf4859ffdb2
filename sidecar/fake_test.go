package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// affineBackend is a tiny in-test runtime: a model is the file "affine"
// whose first line holds "A B [DELAY [WARMUPS [LOAD]]]" (what follows is
// padding, for large models); it maps FLOAT x [-1,3] to y = A*x + B,
// sleeping DELAY per call and LOAD in its load. It counts live models so tests can find leaks.
// Registry and server logic is tested with it; the real runtimes are
// tested through the same server in server_onnx_test.go and e2e_test.go.
type affineBackend struct {
	live   atomic.Int64
	loads  atomic.Int64
	calls  atomic.Int64
	closed atomic.Int64
}

type affineModel struct {
	b        *affineBackend
	a, c     float32
	delay    time.Duration
	warmUps  int
	isClosed atomic.Bool
}

func (b *affineBackend) Load(ctx context.Context, files runtimes.Files) (driver.Model, error) {
	src, ok := files["affine"]
	if !ok {
		return nil, fmt.Errorf("no file named affine")
	}
	line, _, _ := bytes.Cut(src, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 2 {
		return nil, fmt.Errorf("affine: want \"A B\", got %q", line)
	}
	a, err1 := strconv.ParseFloat(f[0], 32)
	c, err2 := strconv.ParseFloat(f[1], 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("affine: bad coefficients %q", line)
	}
	m := &affineModel{b: b, a: float32(a), c: float32(c), warmUps: 1}
	if len(f) > 2 {
		d, err := time.ParseDuration(f[2])
		if err != nil {
			return nil, err
		}
		m.delay = d
	}
	if len(f) > 3 {
		m.warmUps, _ = strconv.Atoi(f[3])
	}
	if len(f) > 4 {
		d, err := time.ParseDuration(f[4])
		if err != nil {
			return nil, err
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b.live.Add(1)
	b.loads.Add(1)
	return m, nil
}

func (b *affineBackend) Close() error { return nil }

func (m *affineModel) Signature() runtimes.Signature {
	return runtimes.Signature{
		Inputs:  []runtimes.TensorSpec{{Name: "x", DType: tensor.Float, Shape: []int64{-1, 3}}},
		Outputs: []runtimes.TensorSpec{{Name: "y", DType: tensor.Float, Shape: []int64{-1, 3}}},
	}
}

func (m *affineModel) WarmUpRuns() int { return m.warmUps }

func (m *affineModel) Predict(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if m.isClosed.Load() {
		panic("Predict on a closed model")
	}
	m.b.calls.Add(1)
	if m.delay > 0 {
		time.Sleep(m.delay)
	}
	x := in[0].Data.([]float32)
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = m.a*v + m.c
	}
	return []tensor.Tensor{tensor.New("y", in[0].Shape, y)}, nil
}

func (m *affineModel) Close() error {
	if m.isClosed.Swap(true) {
		panic("model closed twice")
	}
	m.b.live.Add(-1)
	m.b.closed.Add(1)
	return nil
}

func affineFiles(spec string) runtimes.Files { return runtimes.Files{"affine": []byte(spec)} }

func newAffineRuntime() (*runtimes.Runtime, *affineBackend) {
	return newAffineRuntimeWith(runtimes.Config{})
}

func newAffineRuntimeWith(cfg runtimes.Config) (*runtimes.Runtime, *affineBackend) {
	b := &affineBackend{}
	return runtimes.NewRuntime("affine", cfg, b), b
}
