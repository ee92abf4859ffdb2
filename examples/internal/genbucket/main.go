package main

import (
	"context"
	"flag"
	"io"

	"github.com/inferbid/inferbid/examples/internal/bucketgen"
	"github.com/inferbid/inferbid/internal/cli"
)

func main() { cli.Main("genbucket", run) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("genbucket", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "examples/bucket", "bucket directory to (re)write")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	return bucketgen.Write(*out)
}
