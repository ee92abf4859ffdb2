package main

import (
	"context"
	"io"

	"github.com/inferbid/inferbid/cmd/internal/sidecarmain"
	"github.com/inferbid/inferbid/internal/cli"
	_ "github.com/inferbid/inferbid/runtimes/onnx"
)

func main() { cli.Main("inference-sidecar-onnx", run) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return sidecarmain.Run(ctx, "onnx", args, stdin, stdout, stderr)
}
