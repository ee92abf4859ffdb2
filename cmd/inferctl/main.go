package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/sidecar"
)

func main() { cli.Main("inferctl", run) }

const usage = `usage:
  inferctl --socket PATH register --model-path P [--warmup FILE] LOCAL_FILE_OR_DIR
  inferctl --socket PATH predict [FILE]
  inferctl [--socket PATH] models [--server URL] [--json] [MODEL_PATH]
  inferctl --socket PATH delete --model-path P
  inferctl checksum LOCAL_FILE_OR_DIR
global flags:
`

// maxPredictInput bounds the batch JSON read from a file or stdin.
const maxPredictInput = 512 << 20

// run reports its errors itself, in inferctl's formats: a usage error is
// followed by the usage text, a failure names the command and the error's
// type. It returns them cli.Reported, for cli.Main's exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	global := flag.NewFlagSet("inferctl", flag.ContinueOnError)
	global.SetOutput(stderr)
	socket := global.String("socket", os.Getenv("INFERENCE_SIDECAR_SOCKET"), "the sidecar's Unix socket")
	timeout := global.Duration("timeout", 5*time.Minute, "deadline of the whole command")
	global.Usage = func() {
		fmt.Fprint(stderr, usage)
		global.PrintDefaults()
	}
	if err := cli.ParseFlags(global, args); err != nil {
		return err
	}
	if global.NArg() == 0 {
		global.Usage()
		return cli.Reported(cli.Usagef("no command"))
	}
	cmd, rest := global.Arg(0), global.Args()[1:]
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	var err error
	switch cmd {
	case "checksum":
		err = checksum(rest, stdout, stderr)
	case "models":
		err = modelsCmd(ctx, *socket, rest, stdout, stderr)
	case "register", "predict", "delete":
		if *socket == "" {
			err = cli.Usagef("%s needs --socket PATH", cmd)
			break
		}
		var c *sidecar.Client
		c, err = sidecar.NewClient(*socket, sidecar.ClientOptions{})
		if err != nil {
			break
		}
		defer c.Close()
		switch cmd {
		case "register":
			err = register(ctx, c, rest, stdout, stderr)
		case "predict":
			err = predict(ctx, c, rest, stdin, stdout, stderr)
		case "delete":
			err = deleteModel(ctx, c, rest, stderr)
		}
	default:
		err = cli.Usagef("unknown command %q", cmd)
	}
	var ue *cli.UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), cli.IsReported(err):
		return err
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "inferctl: %v\n", err)
		fmt.Fprint(stderr, usage)
	default:
		fmt.Fprintf(stderr, "inferctl %s: %s: %v\n", cmd, inferr.TypeOf(err), err)
	}
	return cli.Reported(err)
}

// parseFlags parses a subcommand's flags; the flag package reports bad ones.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	return cli.ParseFlags(fs, args)
}

func checksum(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("checksum", flag.ContinueOnError)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("checksum takes one LOCAL_FILE_OR_DIR")
	}
	sum, err := modelfiles.ChecksumPath(fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, sum)
	return nil
}

func register(ctx context.Context, c *sidecar.Client, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("register", flag.ContinueOnError)
	modelPath := fs.String("model-path", "", "the path to register the model under (required)")
	warmup := fs.String("warmup", "", "a file with the warm-up batch JSON")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *modelPath == "" {
		return cli.Usagef("register needs --model-path P")
	}
	if fs.NArg() != 1 {
		return cli.Usagef("register takes one LOCAL_FILE_OR_DIR (after the flags)")
	}
	var warmUpJSON string
	if *warmup != "" {
		b, err := os.ReadFile(*warmup)
		if err != nil {
			return fmt.Errorf("--warmup: %w", err)
		}
		warmUpJSON = string(b)
	}
	files, err := modelfiles.ReadLocal(fs.Arg(0))
	if err != nil {
		return err
	}
	if err := c.RegisterModel(ctx, *modelPath, files, warmUpJSON); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "registered %s (%d files, %d bytes)\n", *modelPath, len(files), files.Size())
	return nil
}

func predict(ctx context.Context, c *sidecar.Client, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("predict", flag.ContinueOnError)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return cli.Usagef("predict takes at most one FILE")
	}
	in := stdin
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(io.LimitReader(in, maxPredictInput+1))
	if err != nil {
		return fmt.Errorf("read batch: %w", err)
	}
	if len(data) > maxPredictInput {
		return inferr.Errorf(inferr.InputParsing, "batch JSON is larger than %d bytes", maxPredictInput)
	}
	out, err := c.PredictJSON(ctx, data)
	if err != nil {
		// Print what runInference would return, then fail.
		fmt.Fprintf(stdout, "%s\n", batch.AppendBatchError(nil, err))
		return err
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return nil
}

func deleteModel(ctx context.Context, c *sidecar.Client, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	modelPath := fs.String("model-path", "", "the model path to delete (required)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *modelPath == "" {
		return cli.Usagef("delete needs --model-path P")
	}
	if fs.NArg() > 0 {
		return cli.Usagef("delete takes no arguments besides --model-path")
	}
	return c.DeleteModel(ctx, *modelPath)
}
