// Package affine is a tiny real runtime for the sidecar's tests: a model is
// the file "affine" whose first line holds "A B [DELAY [WARMUPS [LOAD]]]"
// (what follows is padding, for large models); it maps FLOAT x [-1,3] to
// y = A*x + B, sleeping DELAY per call and LOAD in its load, and counts its
// live models so that tests can find leaks. The model registry
// (sidecar/registry) and the sidecar's servers are tested with it; the
// real runtimes are tested through the same server in their own tests.
package affine

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

// Backend is the affine runtime's backend, with its counters.
type Backend struct {
	// Live counts the loaded models not closed yet, Loads the loads,
	// Calls the Predict calls and Closed the closed models.
	Live, Loads, Calls, Closed atomic.Int64
}

type model struct {
	b        *Backend
	a, c     float32
	delay    time.Duration
	warmUps  int
	isClosed atomic.Bool
}

func (b *Backend) Load(ctx context.Context, files runtimes.Files) (driver.Model, error) {
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
	m := &model{b: b, a: float32(a), c: float32(c), warmUps: 1}
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
	b.Live.Add(1)
	b.Loads.Add(1)
	return m, nil
}

func (b *Backend) Close() error { return nil }

func (m *model) Signature() runtimes.Signature {
	return runtimes.Signature{
		Inputs:  []runtimes.TensorSpec{{Name: "x", DType: tensor.Float, Shape: []int64{-1, 3}}},
		Outputs: []runtimes.TensorSpec{{Name: "y", DType: tensor.Float, Shape: []int64{-1, 3}}},
	}
}

func (m *model) WarmUpRuns() int { return m.warmUps }

func (m *model) Predict(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	if m.isClosed.Load() {
		panic("Predict on a closed model")
	}
	m.b.Calls.Add(1)
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

func (m *model) Close() error {
	if m.isClosed.Swap(true) {
		panic("model closed twice")
	}
	m.b.Live.Add(-1)
	m.b.Closed.Add(1)
	return nil
}

// Files returns the files of an affine model of the given first line.
func Files(spec string) runtimes.Files { return runtimes.Files{"affine": []byte(spec)} }

// NewRuntime returns a runtime named "affine" over a new Backend, with cfg.
func NewRuntime(cfg runtimes.Config) (*runtimes.Runtime, *Backend) {
	b := &Backend{}
	return runtimes.NewRuntime("affine", cfg, b), b
}

// X returns the input x of an affine model: rows of 3 values.
func X(vals ...float32) []tensor.Tensor {
	return []tensor.Tensor{tensor.New("x", []int64{int64(len(vals) / 3), 3}, vals)}
}
