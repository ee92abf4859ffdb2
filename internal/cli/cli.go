package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// RunFunc is a command's body: args without the program name, the standard
// streams, and a context that ends on SIGTERM or SIGINT.
type RunFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// UsageError is a bad command line: Main exits 2 for it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a *UsageError with the formatted message (%w wraps).
func Usagef(format string, a ...any) error {
	return &UsageError{Err: fmt.Errorf(format, a...)}
}

// reported is an error its command has already written to stderr.
type reported struct{ err error }

func (r reported) Error() string { return r.err.Error() }
func (r reported) Unwrap() error { return r.err }

// Reported marks err as already written to stderr (by the flag package, or
// by the command in a format of its own): Main exits with err's code and
// prints nothing. Reported(nil) is nil.
func Reported(err error) error {
	if err == nil {
		return nil
	}
	return reported{err}
}

// IsReported says whether err, or an error it wraps, was marked Reported.
func IsReported(err error) bool {
	var r reported
	return errors.As(err, &r)
}

// ParseFlags parses args with fs, which must be flag.ContinueOnError. The
// flag package reports a bad flag itself (the message and fs.Usage on fs's
// output), so ParseFlags returns nil, flag.ErrHelp, or that error as a
// reported *UsageError.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return Reported(&UsageError{Err: err})
}

// ExitCode is the exit code for run's error: 0 for nil and flag.ErrHelp,
// 2 for a *UsageError, 1 otherwise.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

// Main runs run with os.Args[1:] and the process's standard streams, under
// a context canceled by SIGTERM or SIGINT (which no longer kill the process
// until run returns), writes "name: err" to stderr unless err is nil,
// flag.ErrHelp or Reported, and exits with ExitCode(err). Call it only from
// a func main.
func Main(name string, run RunFunc) {
	mainExit(name, run, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Exit)
}

// mainExit is Main with its arguments, streams and exit injected.
func mainExit(name string, run RunFunc, args []string, stdin io.Reader, stdout, stderr io.Writer, exit func(int)) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, args, stdin, stdout, stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) && !IsReported(err) {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	exit(ExitCode(err))
}
