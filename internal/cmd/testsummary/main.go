// Command testsummary runs go test -json commands one after the other and
// prints what plain go test would (a line per package, the output of
// failing tests, build errors), a progress line whenever a minute passes in
// silence, and at the end the loud line about checks skipped for want of
// the reference models and the totals over every command:
//
//	testsummary [-heartbeat 1m] -- go test -json ./... [-- go test -json -tags pytorch ./runtimes/pytorch/...]
//
// Each command's standard output must be go test -json's event stream; its
// standard error passes through. Every command runs, even after one fails;
// the exit status is the first non-zero one of the commands (1 when a
// command could not start), so that make test fails when go test does.
// make test runs it (see the Makefile); internal/testsummary does the work.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/inferbid/inferbid/internal/testsummary"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// maxLine bounds one line of a command's output; the rest of a longer line
// is dropped (go test -json splits test output into bounded events, so
// only a misbehaving command writes such lines).
const maxLine = 16 << 20

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testsummary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	heartbeat := fs.Duration("heartbeat", testsummary.DefaultHeartbeat, "print a progress line after this long without output (negative: never)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: testsummary [-heartbeat 1m] -- COMMAND [ARGS...] [-- COMMAND [ARGS...]]...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	commands := splitCommands(fs.Args())
	if len(commands) == 0 {
		fmt.Fprintln(stderr, "testsummary: no command to run")
		fs.Usage()
		return 2
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)

	sum := testsummary.New(testsummary.Options{Out: stdout, Heartbeat: *heartbeat, ModulePath: modulePath()})
	start := time.Now()
	status := 0
	for _, argv := range commands {
		fmt.Fprintf(stdout, "==> %s\n", strings.Join(argv, " "))
		code, stopped := runOne(argv, sum, start, signals, stderr)
		if status == 0 {
			status = code
		}
		if stopped {
			break
		}
	}
	sum.Finish(time.Now(), time.Since(start))
	if t := sum.Totals(); status == 0 && (t.Failed > 0 || t.PackagesFailed > 0) {
		status = 1
	}
	return status
}

// splitCommands splits args at each "--" into commands; empty ones are
// dropped.
func splitCommands(args []string) [][]string {
	var out [][]string
	var cur []string
	for _, a := range args {
		if a == "--" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, a)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// runOne runs one command, feeding its standard output to sum, and returns
// its exit status and whether a signal stopped the run.
func runOne(argv []string, sum *testsummary.Summary, start time.Time, signals <-chan os.Signal, stderr io.Writer) (code int, stopped bool) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	cmd.Stdin = os.Stdin
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testsummary: %s: %v\n", argv[0], err)
		return 1, false
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testsummary: %s: %v\n", argv[0], err)
		return 1, false
	}
	sum.Started(time.Now())

	lines := make(chan []byte)
	go readLines(out, lines)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case line, ok := <-lines:
			if !ok {
				done = true
				break
			}
			sum.Line(line, time.Now())
		case <-tick.C:
			sum.Heartbeat(time.Now(), time.Since(start))
		case sig := <-signals:
			// A terminal's ^C reached the command too; a SIGTERM sent to
			// this process alone is passed on. Then the stream ends.
			stopped = true
			cmd.Process.Signal(sig)
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stopped
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode(), stopped
	default:
		fmt.Fprintf(stderr, "testsummary: %s: %v\n", argv[0], err)
		return 1, stopped
	}
}

// readLines sends each line of r (without its newline) and closes lines at
// the end of r. A line longer than maxLine is cut there.
func readLines(r io.Reader, lines chan<- []byte) {
	defer close(lines)
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) <= maxLine {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			lines <- line
			line = nil
		}
		if err != nil {
			return
		}
	}
}

// modulePath is the module path of the go.mod in the working directory,
// trimmed from package names in progress lines; "" when there is none.
func modulePath() string {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
