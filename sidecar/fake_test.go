package sidecar

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/affine"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/tensor"
)

// The in-test affine runtime (package affine): registry and server logic
// is tested with it; the real runtimes are tested through the same server
// in server_onnx_test.go and e2e_test.go.

func affineFiles(spec string) runtimes.Files { return affine.Files(spec) }

func newAffineRuntime() (*runtimes.Runtime, *affine.Backend) {
	return affine.NewRuntime(runtimes.Config{})
}

func newAffineRuntimeWith(cfg runtimes.Config) (*runtimes.Runtime, *affine.Backend) {
	return affine.NewRuntime(cfg)
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func x3(vals ...float32) []tensor.Tensor { return affine.X(vals...) }

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
