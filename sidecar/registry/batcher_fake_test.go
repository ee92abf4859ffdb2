package registry

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

// rowsBackend is a test runtime for the batcher. A model is the file
// "rows" holding its mode; it takes FLOAT x and returns y:
//
//	double    y = 2x+1, per element; x and y are [-1,-1]
//	sum       y [1,cols] holds the column sums: not per row, although the
//	          signature declares y [-1,-1]
//	fixedout  as double, but the signature declares y [1,-1]
//	fixedin   as double, but the signature declares x [2,-1]
//	gate      as double, but each call waits for the backend's gate (or
//	          its context, counting the cancellation)
type rowsBackend struct {
	calls     atomic.Int64
	maxRows   atomic.Int64
	cancelled atomic.Int64
	gate      chan struct{}
	entered   chan context.Context // gate mode: each call's context, as it starts
}

type rowsModel struct {
	b    *rowsBackend
	mode string
}

func newRowsRuntime(cfg runtimes.Config) (*runtimes.Runtime, *rowsBackend) {
	b := &rowsBackend{gate: make(chan struct{}), entered: make(chan context.Context, 64)}
	return runtimes.NewRuntime("rows", cfg, b), b
}

func rowsFiles(mode string) runtimes.Files { return runtimes.Files{"rows": []byte(mode)} }

func (b *rowsBackend) Load(_ context.Context, files runtimes.Files) (driver.Model, error) {
	mode := string(files["rows"])
	switch mode {
	case "double", "sum", "fixedout", "fixedin", "gate":
		return &rowsModel{b: b, mode: mode}, nil
	}
	return nil, fmt.Errorf("rows: unknown mode %q", mode)
}

func (b *rowsBackend) Close() error { return nil }

func (m *rowsModel) Signature() runtimes.Signature {
	in, out := []int64{-1, -1}, []int64{-1, -1}
	switch m.mode {
	case "fixedout":
		out = []int64{1, -1}
	case "fixedin":
		in = []int64{2, -1}
	}
	return runtimes.Signature{
		Inputs:  []runtimes.TensorSpec{{Name: "x", DType: tensor.Float, Shape: in}},
		Outputs: []runtimes.TensorSpec{{Name: "y", DType: tensor.Float, Shape: out}},
	}
}

func (m *rowsModel) Predict(ctx context.Context, in []tensor.Tensor) ([]tensor.Tensor, error) {
	m.b.calls.Add(1)
	rows, cols := in[0].Shape[0], in[0].Shape[1]
	for {
		cur := m.b.maxRows.Load()
		if rows <= cur || m.b.maxRows.CompareAndSwap(cur, rows) {
			break
		}
	}
	x := in[0].Data.([]float32)
	switch m.mode {
	case "gate":
		m.b.entered <- ctx
		select {
		case <-m.b.gate:
		case <-ctx.Done():
			m.b.cancelled.Add(1)
			return nil, ctx.Err()
		}
	case "sum":
		y := make([]float32, cols)
		for i, v := range x {
			y[i%int(cols)] += v
		}
		return []tensor.Tensor{tensor.New("y", []int64{1, cols}, y)}, nil
	}
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = 2*v + 1
	}
	return []tensor.Tensor{tensor.New("y", []int64{rows, cols}, y)}, nil
}

func (m *rowsModel) Close() error { return nil }

// batchingRegistry builds a registry over rt with settings, logging to
// the returned buffer, and closes it when the test ends.
func batchingRegistry(t *testing.T, rt *runtimes.Runtime, settings Settings) (*Registry, *testhelp.SyncBuffer) {
	t.Helper()
	logs := &testhelp.SyncBuffer{}
	r := newTestRegistryWith(t, rt, Options{Settings: settings, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return r, logs
}

// batching returns settings that batch per model path. The settings are
// not range-checked here (the sidecar's ParseRuntimeConfig's job): tests
// use delays far beyond max_delay_us's limit so that only a full batch
// runs, which makes the batch's membership independent of timing.
func batching(models map[string]BatchSettings) Settings {
	return Settings{DynamicBatching: &DynamicBatching{Models: models}}
}

// forever is a max_delay_us no test waits for: such a batch runs when full.
const forever = 600_000_000

func register(t *testing.T, r *Registry, path string, files runtimes.Files) {
	t.Helper()
	if _, err := r.register(context.Background(), path, files, ""); err != nil {
		t.Fatal(err)
	}
}

func batcherOf(t *testing.T, r *Registry, path string) *batcher {
	t.Helper()
	e := r.lookup(path)
	if e == nil || e.batcher == nil {
		t.Fatalf("model %q has no batcher", path)
	}
	return e.batcher
}

// waitPending waits until the open batch of path's batcher holds n calls.
func waitPending(t *testing.T, b *batcher, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.mu.Lock()
		got := 0
		if b.pending != nil {
			got = len(b.pending.calls)
		}
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the open batch holds %d calls, want %d", got, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// rowsInput is x of the given rows and cols, valued from seed.
func rowsInput(seed, rows, cols int) []tensor.Tensor {
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(seed*100+i) / 8
	}
	return []tensor.Tensor{tensor.New("x", []int64{int64(rows), int64(cols)}, x)}
}

// sameBits reports whether a and b are the same tensors: names, shapes and
// every element bit for bit.
func sameBits(a, b []tensor.Tensor) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d outputs, want %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || tensor.FormatShape(a[i].Shape) != tensor.FormatShape(b[i].Shape) || a[i].DType() != b[i].DType() {
			return fmt.Errorf("output %d is %q %s %s, want %q %s %s", i, a[i].Name, a[i].DType(), tensor.FormatShape(a[i].Shape), b[i].Name, b[i].DType(), tensor.FormatShape(b[i].Shape))
		}
		var same bool
		switch x := a[i].Data.(type) {
		case []float32:
			y := b[i].Data.([]float32)
			same = len(x) == len(y)
			for j := 0; same && j < len(x); j++ {
				same = math.Float32bits(x[j]) == math.Float32bits(y[j])
			}
		case []float64:
			y := b[i].Data.([]float64)
			same = len(x) == len(y)
			for j := 0; same && j < len(x); j++ {
				same = math.Float64bits(x[j]) == math.Float64bits(y[j])
			}
		default:
			same = fmt.Sprint(a[i].Data) == fmt.Sprint(b[i].Data)
		}
		if !same {
			return fmt.Errorf("output %d: %v, want %v", i, a[i].Data, b[i].Data)
		}
	}
	return nil
}

// sameAnswer compares a call's answer with the unbatched one: the same
// tensors, or the same error (type and text).
func sameAnswer(out []tensor.Tensor, err error, wantOut []tensor.Tensor, wantErr error) error {
	if err != nil || wantErr != nil {
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() || inferr.TypeOf(err) != inferr.TypeOf(wantErr) {
			return fmt.Errorf("error %v, want %v", err, wantErr)
		}
		return nil
	}
	return sameBits(out, wantOut)
}

func wantLog(t *testing.T, logs *testhelp.SyncBuffer, fragment string, times int) {
	t.Helper()
	if got := strings.Count(logs.String(), fragment); got != times {
		t.Errorf("log has %q %d times, want %d:\n%s", fragment, got, times, logs)
	}
}
