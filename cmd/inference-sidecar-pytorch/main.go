//go:build pytorch

// Command inference-sidecar-pytorch serves TorchScript models on libtorch
// over a Unix socket: inference-sidecar-pytorch --socket PATH
// [--runtime_config JSON]. Build it with -tags pytorch (cgo, libtorch-dev).
// It is sidecarmain.Run with the pytorch runtime (flags, environment and
// exit codes are documented there).
package main

import (
	"context"
	"io"

	"github.com/inferbid/inferbid/cmd/internal/sidecarmain"
	"github.com/inferbid/inferbid/internal/cli"
	_ "github.com/inferbid/inferbid/runtimes/pytorch"
)

func main() { cli.Main("inference-sidecar-pytorch", run) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return sidecarmain.Run(ctx, "pytorch", args, stdin, stdout, stderr)
}
