// Package cli is the main every inferbid command shares. A command's body
// is a RunFunc,
//
//	func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
//
// and its main is one line, cli.Main("name", run): Main is the only place a
// command calls os.Exit. The exit code comes from run's error: 0 for nil or
// flag.ErrHelp, 2 for a *UsageError (a bad command line), 1 for anything
// else. Main writes "name: err" to stderr, except for an error run has
// already reported (Reported, ParseFlags).
//
// The flag helpers every command uses: ParseInterleaved accepts flags
// before and after positional arguments; DurationVar/Duration accept a Go
// duration ("5s") or plain milliseconds ("5000"), as do the INFERENCE_*
// environment variables set through them; VersionFlag and Version give
// every binary a --version with the module version and VCS commit; and
// UndocumentedDefaults lets a test check that every flag's help states its
// default.
//
// The package lives in internal/ rather than cmd/internal/ so that the
// generators outside cmd/ (examples/internal/genbucket,
// runtimes/tensorflow/tfsave/cmd/gen-tf-models) can import it too.
package cli
