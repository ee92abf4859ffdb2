package main

import (
	"context"
	"io"

	"github.com/inferbid/inferbid/cmd/internal/sidecarmain"
	"github.com/inferbid/inferbid/internal/cli"
	_ "github.com/inferbid/inferbid/runtimes/tensorflow"
)

func main() { cli.Main("inference-sidecar-tensorflow", run) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return sidecarmain.Run(ctx, "tensorflow", args, stdin, stdout, stderr)
}
