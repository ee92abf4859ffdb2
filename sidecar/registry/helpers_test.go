package registry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/affine"
	"github.com/inferbid/inferbid/internal/testhelp"
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
var errType = testhelp.ErrType
