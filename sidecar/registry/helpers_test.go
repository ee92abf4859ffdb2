package registry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/affine"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTestRegistryWith builds a registry over rt with opts (a quiet logger
// unless opts has one) and closes it when the test ends.
func newTestRegistryWith(t testing.TB, rt *runtimes.Runtime, opts Options) *Registry {
	t.Helper()
	opts.Runtime = rt
	if opts.Logger == nil {
		opts.Logger = quietLog
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// Shorthands of the tests: a registration without sequence settings of
// its own, a call that arrives now.

func (r *Registry) register(ctx context.Context, path string, files runtimes.Files, warmUpJSON string) (Result, error) {
	return r.Register(ctx, path, files, warmUpJSON, nil)
}

func (r *Registry) predict(ctx context.Context, path string, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	return r.Predict(ctx, path, inputs, time.Time{})
}

func newAffineRuntime() (*runtimes.Runtime, *affine.Backend) {
	return affine.NewRuntime(runtimes.Config{})
}

func affineFiles(spec string) runtimes.Files { return affine.Files(spec) }

func x3(vals ...float32) []tensor.Tensor { return affine.X(vals...) }

func warmUpJSON(path, name string) string {
	return fmt.Sprintf(`{"request":[{"model_path":%q,"tensors":[{"tensor_name":%q,"data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":["1","2","3"]}]}]}`, path, name)
}

// errType asserts err's type and that its text names every fragment.
func errType(t *testing.T, what string, err error, want inferr.Type, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, want)
		return
	}
	if got := inferr.TypeOf(err); got != want {
		t.Errorf("%s: type %s (%v), want %s", what, got, err, want)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: %q does not mention %q", what, err, f)
		}
	}
}
