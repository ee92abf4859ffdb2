package sidecar

import (
	"io"
	"log/slog"

	"github.com/inferbid/inferbid/internal/affine"
	"github.com/inferbid/inferbid/internal/testhelp"
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
var errType = testhelp.ErrType
