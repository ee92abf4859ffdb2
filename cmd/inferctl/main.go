package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/sidecar"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage:
  inferctl --socket PATH register --model-path P [--warmup FILE] LOCAL_FILE_OR_DIR
  inferctl --socket PATH predict [FILE]
  inferctl --socket PATH models
  inferctl --socket PATH delete --model-path P
  inferctl checksum LOCAL_FILE_OR_DIR
global flags:
`

// maxPredictInput bounds the batch JSON read from a file or stdin.
const maxPredictInput = 512 << 20

// usageError marks command-line mistakes (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	global := flag.NewFlagSet("inferctl", flag.ContinueOnError)
	global.SetOutput(stderr)
	socket := global.String("socket", os.Getenv("INFERENCE_SIDECAR_SOCKET"), "the sidecar's Unix socket")
	timeout := global.Duration("timeout", 5*time.Minute, "deadline of the whole command")
	global.Usage = func() {
		fmt.Fprint(stderr, usage)
		global.PrintDefaults()
	}
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if global.NArg() == 0 {
		global.Usage()
		return 2
	}
	cmd, rest := global.Arg(0), global.Args()[1:]
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var err error
	switch cmd {
	case "checksum":
		err = checksum(rest, stdout, stderr)
	case "register", "predict", "models", "delete":
		if *socket == "" {
			err = usagef("%s needs --socket PATH", cmd)
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
		case "models":
			err = models(ctx, c, rest, stdout)
		case "delete":
			err = deleteModel(ctx, c, rest, stderr)
		}
	default:
		err = usagef("unknown command %q", cmd)
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "inferctl: %v\n", err)
		fmt.Fprint(stderr, usage)
		return 2
	case errors.Is(err, errFlagParse):
		return 2
	default:
		fmt.Fprintf(stderr, "inferctl %s: %s: %v\n", cmd, inferr.TypeOf(err), err)
		return 1
	}
}

var errFlagParse = errors.New("bad flags")

func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errFlagParse
	}
	return nil
}

func checksum(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("checksum", flag.ContinueOnError)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("checksum takes one LOCAL_FILE_OR_DIR")
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
		return usagef("register needs --model-path P")
	}
	if fs.NArg() != 1 {
		return usagef("register takes one LOCAL_FILE_OR_DIR (after the flags)")
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
		return usagef("predict takes at most one FILE")
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

func models(ctx context.Context, c *sidecar.Client, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usagef("models takes no arguments, got %s", strings.Join(args, " "))
	}
	paths, err := c.ModelPaths(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(paths)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return nil
}

func deleteModel(ctx context.Context, c *sidecar.Client, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	modelPath := fs.String("model-path", "", "the model path to delete (required)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("delete needs --model-path P")
	}
	if fs.NArg() > 0 {
		return usagef("delete takes no arguments besides --model-path")
	}
	return c.DeleteModel(ctx, *modelPath)
}
