package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/sidecar"
)

func main() { cli.Main("inferctl", run) }

// globals are the flags every command accepts, before or after its name.
type globals struct {
	socket  string
	timeout time.Duration
	version bool
}

func newGlobals() *globals {
	return &globals{socket: os.Getenv("INFERENCE_SIDECAR_SOCKET"), timeout: 5 * time.Minute}
}

// define adds the global flags to fs, with their current values as
// defaults (so that a command's flag set keeps what came before its name).
func (g *globals) define(fs *flag.FlagSet) {
	fs.StringVar(&g.socket, "socket", g.socket, "the sidecar's Unix socket (default $INFERENCE_SIDECAR_SOCKET)")
	cli.DurationVar(fs, &g.timeout, "timeout", g.timeout, "deadline of the whole command")
	fs.BoolVar(&g.version, "version", g.version, "print the version (module version and VCS commit) and exit")
}

// stdio is a command's standard streams.
type stdio struct {
	in          io.Reader
	out, errOut io.Writer
}

// command is one inferctl subcommand. setup defines its own flags on fs
// and returns its body, which runs once the command line is parsed with
// the positional arguments; c is nil unless the command needs the socket.
type command struct {
	name     string
	synopsis string // after "inferctl [global flags] "
	socket   bool   // talks to the sidecar: needs --socket
	// socketOptional: c is a client when --socket is given, else nil.
	socketOptional bool
	setup          func(fs *flag.FlagSet) func(ctx context.Context, c *sidecar.Client, args []string, s stdio) error
}

// commands are inferctl's subcommands, in usage order.
var commands = []command{
	{name: "register", synopsis: "register --model-path P [--warmup FILE] LOCAL_FILE_OR_DIR", socket: true, setup: registerCmd},
	{name: "predict", synopsis: "predict [--server URL] [--allow-entry-errors] [FILE]", socketOptional: true, setup: predictCmd},
	{name: "models", synopsis: "models [--server URL] [--json] [MODEL_PATH]", socketOptional: true, setup: modelsCmd},
	{name: "delete", synopsis: "delete --model-path P", socket: true, setup: deleteCmd},
	{name: "checksum", synopsis: "checksum LOCAL_FILE_OR_DIR", setup: checksumCmd},
	{name: "variables", synopsis: "variables [--json] SAVED_MODEL_DIR", setup: variablesCmd},
	{name: "export-variables", synopsis: "export-variables --variable NAME --store URL --model-path P [--restart] SAVED_MODEL_DIR", setup: exportCmd},
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  inferctl [--socket PATH] %s\n", c.synopsis)
	}
	b.WriteString("  inferctl --version\n")
	b.WriteString("Flags may come before or after the command and its arguments.\nglobal flags:\n")
	return b.String()
}

// printUsage writes usage() and the global flags with their defaults.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usage())
	fs := flag.NewFlagSet("inferctl", flag.ContinueOnError)
	fs.SetOutput(w)
	newGlobals().define(fs)
	fs.PrintDefaults()
}

// maxPredictInput bounds the batch JSON read from a file or stdin.
const maxPredictInput = 512 << 20

// run reports its errors itself, in inferctl's formats: a usage error is
// followed by the usage text, a failure names the command and the error's
// type. It returns them cli.Reported, for cli.Main's exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	g := newGlobals()
	global := flag.NewFlagSet("inferctl", flag.ContinueOnError)
	global.SetOutput(stderr)
	g.define(global)
	global.Usage = func() { printUsage(stderr) }
	// The global flags stop at the command's name; the command's own flag
	// set takes them again, anywhere after it.
	if err := cli.ParseFlags(global, args); err != nil {
		return err
	}
	if g.version {
		cli.PrintVersion(stdout, "inferctl")
		return nil
	}
	if global.NArg() == 0 {
		global.Usage()
		return cli.Reported(cli.Usagef("no command"))
	}
	name, rest := global.Arg(0), global.Args()[1:]
	err := runCommand(ctx, g, name, rest, stdio{stdin, stdout, stderr})
	var ue *cli.UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), cli.IsReported(err):
		return err
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "inferctl: %v\n", err)
		printUsage(stderr)
	default:
		fmt.Fprintf(stderr, "inferctl %s: %s: %v\n", name, inferr.TypeOf(err), err)
	}
	return cli.Reported(err)
}

func runCommand(ctx context.Context, g *globals, name string, args []string, s stdio) error {
	cmd, ok := lookup(name)
	if !ok {
		return cli.Usagef("unknown command %q", name)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(s.errOut)
	body := cmd.setup(fs)
	g.define(fs)
	fs.Usage = func() {
		fmt.Fprintf(s.errOut, "usage: inferctl %s\nFlags may come before or after the arguments.\nflags:\n", cmd.synopsis)
		fs.PrintDefaults()
	}
	positional, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if g.version {
		cli.PrintVersion(s.out, "inferctl")
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	var c *sidecar.Client
	if cmd.socket && g.socket == "" {
		return cli.Usagef("%s needs --socket PATH", name)
	}
	if (cmd.socket || cmd.socketOptional) && g.socket != "" {
		if c, err = sidecar.NewClient(g.socket, sidecar.ClientOptions{}); err != nil {
			return err
		}
		defer c.Close()
	}
	return body(ctx, c, positional, s)
}

// localModelError types a failure to read the model at path on this
// machine: MODEL_NOT_FOUND when nothing is there, INPUT_PARSING otherwise.
func localModelError(path string, err error) error {
	if errors.Is(err, iofs.ErrNotExist) {
		return inferr.Errorf(inferr.ModelNotFound, "no model file or directory at %s: %w", path, iofs.ErrNotExist)
	}
	return inferr.Errorf(inferr.InputParsing, "model %s: %w", path, err)
}

// readJSONFile reads a local JSON input (what names it, e.g. "--warmup
// FILE") of at most limit bytes, from in when path is "" or "-": every
// failure, a missing file included, is INPUT_PARSING naming it.
func readJSONFile(what, path string, in io.Reader, limit int64) ([]byte, error) {
	if path != "" && path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, inferr.Errorf(inferr.InputParsing, "%s: %w", what, err)
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(io.LimitReader(in, limit+1))
	if err != nil {
		return nil, inferr.Errorf(inferr.InputParsing, "%s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return nil, inferr.Errorf(inferr.InputParsing, "%s is larger than %d bytes", what, limit)
	}
	if !json.Valid(data) {
		// Decode only to say where it goes wrong.
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, inferr.Errorf(inferr.InputParsing, "%s is not valid JSON: %w", what, err)
	}
	return data, nil
}

func checksumCmd(*flag.FlagSet) func(context.Context, *sidecar.Client, []string, stdio) error {
	return func(_ context.Context, _ *sidecar.Client, args []string, s stdio) error {
		if len(args) != 1 {
			return cli.Usagef("checksum takes one LOCAL_FILE_OR_DIR")
		}
		sum, err := modelfiles.ChecksumPath(args[0])
		if err != nil {
			return localModelError(args[0], err)
		}
		fmt.Fprintln(s.out, sum)
		return nil
	}
}

func registerCmd(fs *flag.FlagSet) func(context.Context, *sidecar.Client, []string, stdio) error {
	modelPath := fs.String("model-path", "", "the path to register the model under (required; no default)")
	warmup := fs.String("warmup", "", "a file with the warm-up batch JSON (default none)")
	return func(ctx context.Context, c *sidecar.Client, args []string, s stdio) error {
		if *modelPath == "" {
			return cli.Usagef("register needs --model-path P")
		}
		if len(args) != 1 {
			return cli.Usagef("register takes one LOCAL_FILE_OR_DIR")
		}
		var warmUpJSON string
		if *warmup != "" {
			b, err := readJSONFile("--warmup "+*warmup, *warmup, nil, maxPredictInput)
			if err != nil {
				return err
			}
			warmUpJSON = string(b)
		}
		files, err := modelfiles.ReadLocal(args[0])
		if err != nil {
			return localModelError(args[0], err)
		}
		if err := c.RegisterModel(ctx, *modelPath, files, warmUpJSON); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "registered %s (%d files, %d bytes)\n", *modelPath, len(files), files.Size())
		return nil
	}
}

func predictCmd(fs *flag.FlagSet) func(context.Context, *sidecar.Client, []string, stdio) error {
	allowEntryErrors := fs.Bool("allow-entry-errors", false, "exit 0 even when entries of the batch failed (their errors are in the output)")
	server := fs.String("server", "", "a running bidding-server's base URL (e.g. http://127.0.0.1:8080): run the batch through its POST /v1/predict, as its modules' runInference does, instead of a sidecar (default: the sidecar at --socket)")
	return func(ctx context.Context, c *sidecar.Client, args []string, s stdio) error {
		if len(args) > 1 {
			return cli.Usagef("predict takes at most one FILE")
		}
		if *server == "" && c == nil {
			return cli.Usagef("predict needs --socket PATH (a sidecar) or --server URL (a bidding-server)")
		}
		what, path := "the batch on stdin", ""
		if len(args) == 1 && args[0] != "-" {
			what, path = "batch file "+args[0], args[0]
		}
		data, err := readJSONFile(what, path, s.in, maxPredictInput)
		if err == nil {
			var out []byte
			if *server != "" {
				out, err = serverPredict(ctx, *server, data)
			} else {
				out, err = c.PredictJSON(ctx, data)
			}
			if err == nil {
				fmt.Fprintf(s.out, "%s\n", out)
				if *allowEntryErrors {
					return nil
				}
				return entryFailures(out)
			}
		}
		// Print what runInference would return, then fail.
		fmt.Fprintf(s.out, "%s\n", batch.AppendBatchError(nil, err))
		return err
	}
}

// entryFailures is nil when no entry of the response JSON out has an
// error, else an error counting them, typed as the first one and carrying
// its description.
func entryFailures(out []byte) error {
	var failed, total int
	var first error
	gjson.GetBytes(out, "response").ForEach(func(_, entry gjson.Result) bool {
		total++
		e := entry.Get("error")
		if !e.Exists() {
			return true
		}
		failed++
		if first == nil {
			where := fmt.Sprintf("entry %d", total-1)
			if mp := entry.Get("model_path"); mp.Exists() {
				where += fmt.Sprintf(" (%s)", mp.String())
			}
			first = inferr.Errorf(inferr.ParseType(e.Get("error_type").String()), "%s: %s", where, e.Get("description").String())
		}
		return true
	})
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d entries failed (--allow-entry-errors to exit 0); the first, %w", failed, total, first)
}

func deleteCmd(fs *flag.FlagSet) func(context.Context, *sidecar.Client, []string, stdio) error {
	modelPath := fs.String("model-path", "", "the model path to delete (required; no default)")
	return func(ctx context.Context, c *sidecar.Client, args []string, s stdio) error {
		if *modelPath == "" {
			return cli.Usagef("delete needs --model-path P")
		}
		if len(args) > 0 {
			return cli.Usagef("delete takes no arguments besides --model-path")
		}
		return c.DeleteModel(ctx, *modelPath)
	}
}
