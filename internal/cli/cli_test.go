package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runMain runs mainExit with run and returns the exit code and stderr.
func runMain(t *testing.T, run RunFunc, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	code := -1
	mainExit("prog", run, args, strings.NewReader(""), io.Discard, &stderr, func(c int) {
		if code != -1 {
			t.Fatalf("exit called twice (%d, then %d)", code, c)
		}
		code = c
	})
	if code == -1 {
		t.Fatal("exit not called")
	}
	return code, stderr.String()
}

func returning(err error) RunFunc {
	return func(context.Context, []string, io.Reader, io.Writer, io.Writer) error { return err }
}

func TestMainExitCodes(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name     string
		err      error
		code     int
		stderr   string
		usageErr bool
	}{
		{"nil", nil, 0, "", false},
		{"help", flag.ErrHelp, 0, "", false},
		{"wrapped help", fmt.Errorf("sub: %w", flag.ErrHelp), 0, "", false},
		{"failure", boom, 1, "prog: boom\n", false},
		{"usage", Usagef("unknown command %q", "x"), 2, "prog: unknown command \"x\"\n", true},
		{"usage struct", &UsageError{Err: boom}, 2, "prog: boom\n", true},
		{"wrapped usage", fmt.Errorf("--flag: %w", Usagef("bad")), 2, "prog: --flag: bad\n", true},
		{"reported failure", Reported(boom), 1, "", false},
		{"reported usage", Reported(Usagef("bad")), 2, "", true},
		{"wrapped reported", fmt.Errorf("x: %w", Reported(boom)), 1, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stderr := runMain(t, returning(c.err))
			if code != c.code || stderr != c.stderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr, c.code, c.stderr)
			}
			if got := ExitCode(c.err); got != c.code {
				t.Errorf("ExitCode = %d, want %d", got, c.code)
			}
			var ue *UsageError
			if errors.As(c.err, &ue) != c.usageErr {
				t.Errorf("errors.As(*UsageError) = %v, want %v", !c.usageErr, c.usageErr)
			}
		})
	}
}

func TestUsageErrorUnwraps(t *testing.T) {
	boom := errors.New("boom")
	err := Usagef("reading %s: %w", "f", boom)
	if !errors.Is(err, boom) || err.Error() != "reading f: boom" {
		t.Errorf("Usagef: %v (is boom: %v)", err, errors.Is(err, boom))
	}
	if !errors.Is(Reported(err), boom) || Reported(err).Error() != err.Error() {
		t.Errorf("Reported changes the error: %v", Reported(err))
	}
	if Reported(nil) != nil || IsReported(nil) || IsReported(err) || !IsReported(Reported(err)) {
		t.Error("Reported/IsReported on nil or unreported errors")
	}
}

func TestMainPassesArgsAndStreams(t *testing.T) {
	var gotArgs []string
	var stdout bytes.Buffer
	mainExit("prog", func(ctx context.Context, args []string, stdin io.Reader, out, stderr io.Writer) error {
		gotArgs = args
		b, _ := io.ReadAll(stdin)
		fmt.Fprintf(out, "%s", b)
		return ctx.Err()
	}, []string{"a", "b"}, strings.NewReader("in"), &stdout, io.Discard, func(c int) {
		if c != 0 {
			t.Errorf("exit %d", c)
		}
	})
	if strings.Join(gotArgs, " ") != "a b" || stdout.String() != "in" {
		t.Errorf("args %q, stdout %q", gotArgs, stdout.String())
	}
}

// TestMainSignalCancelsContext: SIGTERM and SIGINT cancel run's context
// instead of killing the process.
func TestMainSignalCancelsContext(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		code, stderr := runMain(t, func(ctx context.Context, _ []string, _ io.Reader, _, _ io.Writer) error {
			// The signal is caught from here on: Main made the context first.
			if err := syscall.Kill(os.Getpid(), sig); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Second):
				return errors.New("context not canceled by " + sig.String())
			}
		})
		if code != 0 || stderr != "" {
			t.Errorf("%v: exit %d, stderr %q", sig, code, stderr)
		}
	}
}

func TestParseFlags(t *testing.T) {
	newFS := func(out io.Writer) (*flag.FlagSet, *int) {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.SetOutput(out)
		return fs, fs.Int("n", 0, "a number")
	}
	var out bytes.Buffer
	fs, n := newFS(&out)
	if err := ParseFlags(fs, []string{"-n", "3", "rest"}); err != nil || *n != 3 || fs.Arg(0) != "rest" {
		t.Errorf("ParseFlags: %v, n=%d, args %q", err, *n, fs.Args())
	}
	fs, _ = newFS(&out)
	if err := ParseFlags(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) || ExitCode(err) != 0 {
		t.Errorf("-h: %v", err)
	}
	out.Reset()
	fs, _ = newFS(&out)
	err := ParseFlags(fs, []string{"-bogus"})
	if ExitCode(err) != 2 || !IsReported(err) || !strings.Contains(out.String(), "-bogus") {
		t.Errorf("-bogus: %v (exit %d, reported %v), flag output %q", err, ExitCode(err), IsReported(err), out.String())
	}
	// Main prints nothing more: the flag package said it.
	if code, stderr := runMain(t, returning(err)); code != 2 || stderr != "" {
		t.Errorf("Main after a bad flag: exit %d, stderr %q", code, stderr)
	}
}
