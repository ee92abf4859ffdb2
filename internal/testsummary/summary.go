package testsummary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// Event is one line of `go test -json` (cmd/test2json's TestEvent, plus the
// build events of go 1.24 and later).
type Event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string // a package's fail: the package whose build failed
}

// Options configure a Summary. The zero value of every field means its
// default.
type Options struct {
	// Out receives what plain go test would print, the progress lines and
	// the totals; nil = io.Discard.
	Out io.Writer
	// Heartbeat is how long the output may stay silent before Heartbeat
	// prints a progress line; 0 = DefaultHeartbeat, negative = never.
	Heartbeat time.Duration
	// ModulePath is trimmed from package names in progress lines.
	ModulePath string
	// MaxTestOutput bounds the output kept per running test (it is printed
	// when the test fails); 0 = DefaultMaxTestOutput. Past it the rest is
	// counted, not kept.
	MaxTestOutput int
}

// DefaultHeartbeat is the longest silence before a progress line.
const DefaultHeartbeat = time.Minute

// DefaultMaxTestOutput bounds the output kept per test: a failing test's
// output is printed in full up to it.
const DefaultMaxTestOutput = 4 << 20

// Totals are the counts over everything a Summary was fed.
type Totals struct {
	Passed, Failed, Skipped int // tests and subtests
	// ReferenceSkipped counts the skipped tests whose output holds
	// testhelp.ReferenceSkipTag: checks that need the reference models.
	ReferenceSkipped int
	// Packages by outcome: tests passed, failed (build failures included),
	// no test files.
	PackagesOK, PackagesFailed, PackagesNoTests int
}

// Summary reads go test -json events and prints the plain go test view of
// them. It is not safe for concurrent use.
type Summary struct {
	opts     Options
	totals   Totals
	packages map[string]*pkgState
	tests    map[testKey]*testState
	last     time.Time // of the last line written (zero: nothing yet)
}

type testKey struct{ pkg, test string }

type pkgState struct {
	started time.Time // zero until its test binary starts
	output  bytes.Buffer
	dropped int
}

type testState struct {
	output  bytes.Buffer
	dropped int
	refSkip bool // its output holds testhelp.ReferenceSkipTag
}

// New returns a Summary writing to opts.Out.
func New(opts Options) *Summary {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.MaxTestOutput <= 0 {
		opts.MaxTestOutput = DefaultMaxTestOutput
	}
	return &Summary{opts: opts, packages: map[string]*pkgState{}, tests: map[testKey]*testState{}}
}

// Line handles one line of the stream: a JSON event, or anything else (go
// itself sometimes writes plain lines), which is printed as it is. now is
// when the line arrived.
func (s *Summary) Line(line []byte, now time.Time) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return
	}
	var e Event
	if trimmed[0] != '{' || json.Unmarshal(trimmed, &e) != nil || e.Action == "" {
		s.write(now, string(trimmed)+"\n")
		return
	}
	if e.Time.IsZero() {
		e.Time = now
	}
	s.Event(e, now)
}

// Event handles one decoded event; now is when it arrived.
func (s *Summary) Event(e Event, now time.Time) {
	switch {
	case e.Action == "build-output":
		s.write(now, e.Output)
	case e.Action == "build-fail":
		// The package's own fail event follows and reports it.
	case e.Test == "":
		s.packageEvent(e, now)
	default:
		s.testEvent(e, now)
	}
}

func (s *Summary) pkg(name string) *pkgState {
	p := s.packages[name]
	if p == nil {
		p = &pkgState{}
		s.packages[name] = p
	}
	return p
}

func (s *Summary) packageEvent(e Event, now time.Time) {
	p := s.pkg(e.Package)
	switch e.Action {
	case "start":
		p.started = e.Time
	case "output":
		// Kept until the package ends: plain go test shows a package's
		// output only when it fails, and its ok or ? line.
		if p.output.Len()+len(e.Output) <= s.opts.MaxTestOutput {
			p.output.WriteString(e.Output)
		} else {
			p.dropped += len(e.Output)
		}
	case "pass", "skip":
		s.finishPackage(e, p, now, false)
	case "fail":
		s.finishPackage(e, p, now, true)
	}
}

func (s *Summary) finishPackage(e Event, p *pkgState, now time.Time, failed bool) {
	delete(s.packages, e.Package)
	switch {
	case failed:
		s.totals.PackagesFailed++
		// Tests that never ended were running when the test binary died
		// (a panic, a timeout): their output says why.
		for _, k := range s.testsOf(e.Package) {
			t := s.tests[k]
			delete(s.tests, k)
			s.write(now, framelessOutput(&t.output, t.dropped))
		}
		s.write(now, framelessOutput(&p.output, p.dropped))
		if p.output.Len() == 0 {
			s.write(now, fmt.Sprintf("FAIL\t%s\n", e.Package))
		}
	case e.Action == "skip":
		s.totals.PackagesNoTests++
		s.write(now, summaryLines(p.output.String()))
	default:
		s.totals.PackagesOK++
		s.write(now, summaryLines(p.output.String()))
	}
}

// testsOf lists the tests of pkg still open, in name order (a parent
// before its subtests).
func (s *Summary) testsOf(pkg string) []testKey {
	var keys []testKey
	for k := range s.tests {
		if k.pkg == pkg {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].test < keys[j].test })
	return keys
}

func (s *Summary) testEvent(e Event, now time.Time) {
	k := testKey{e.Package, e.Test}
	t := s.tests[k]
	if t == nil {
		t = &testState{}
		s.tests[k] = t
	}
	switch e.Action {
	case "output":
		if strings.Contains(e.Output, testhelp.ReferenceSkipTag) {
			t.refSkip = true
		}
		if t.output.Len()+len(e.Output) <= s.opts.MaxTestOutput {
			t.output.WriteString(e.Output)
		} else {
			t.dropped += len(e.Output)
		}
	case "pass":
		s.totals.Passed++
		delete(s.tests, k)
	case "skip":
		s.totals.Skipped++
		if t.refSkip {
			s.totals.ReferenceSkipped++
		}
		delete(s.tests, k)
	case "fail":
		s.totals.Failed++
		delete(s.tests, k)
		s.write(now, framelessOutput(&t.output, t.dropped))
	}
}

// framelessOutput is a test's output without the === RUN/PAUSE/CONT/NAME
// lines that -json (which implies -v) adds, as plain go test prints it.
func framelessOutput(out *bytes.Buffer, dropped int) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		if strings.HasPrefix(line, "=== ") || line == "" {
			continue
		}
		b.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "    [testsummary: %d more bytes of output not shown]\n", dropped)
	}
	return b.String()
}

// summaryLines keeps the lines plain go test prints for a package that
// passed or has no tests: "ok  \tpkg\t1.2s" and "?   \tpkg\t[no test files]".
func summaryLines(out string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "?   \t") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func (s *Summary) write(now time.Time, text string) {
	if text == "" {
		return
	}
	io.WriteString(s.opts.Out, text)
	s.last = now
}

// Started tells the Summary when a command started: the silence that
// Heartbeat measures counts from then.
func (s *Summary) Started(now time.Time) {
	if s.last.IsZero() || now.After(s.last) {
		s.last = now
	}
}

// Heartbeat prints a progress line when nothing was written for
// Options.Heartbeat: the packages whose tests are running and for how long,
// or that test binaries are being built when none is running.
func (s *Summary) Heartbeat(now time.Time, elapsed time.Duration) {
	if s.opts.Heartbeat < 0 || s.last.IsZero() || now.Sub(s.last) < s.opts.Heartbeat {
		return
	}
	done := s.totals.PackagesOK + s.totals.PackagesFailed + s.totals.PackagesNoTests
	type running struct {
		name string
		for_ time.Duration
	}
	var rs []running
	for name, p := range s.packages {
		if !p.started.IsZero() {
			rs = append(rs, running{strings.TrimPrefix(strings.TrimPrefix(name, s.opts.ModulePath), "/"), now.Sub(p.started)})
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		return rs[i].for_ > rs[j].for_ || rs[i].for_ == rs[j].for_ && rs[i].name < rs[j].name
	})
	var b strings.Builder
	fmt.Fprintf(&b, "    ... %s so far, %d packages done; ", Round(elapsed), done)
	if len(rs) == 0 {
		b.WriteString("building test binaries")
	} else {
		b.WriteString("running: ")
		for i, r := range rs {
			if i > 0 {
				b.WriteString(", ")
			}
			if name := r.name; name == "" {
				b.WriteString(".")
			} else {
				b.WriteString(name)
			}
			fmt.Fprintf(&b, " (%s)", Round(r.for_))
		}
	}
	b.WriteString("\n")
	s.write(now, b.String())
}

// Totals returns the counts so far.
func (s *Summary) Totals() Totals { return s.totals }

// Finish prints what the stream left open (packages whose tests never
// ended, when go test itself was stopped), then the loud reference-models
// line when checks were skipped for that reason, then the totals line,
// which is the last line of make test.
func (s *Summary) Finish(now time.Time, elapsed time.Duration) {
	var open []string
	for name := range s.packages {
		open = append(open, name)
	}
	sort.Strings(open)
	for _, name := range open {
		p := s.packages[name]
		for _, k := range s.testsOf(name) {
			s.write(now, framelessOutput(&s.tests[k].output, s.tests[k].dropped))
			delete(s.tests, k)
		}
		s.write(now, framelessOutput(&p.output, p.dropped))
		s.write(now, fmt.Sprintf("INCOMPLETE\t%s (the stream ended before the package did)\n", name))
		s.totals.PackagesFailed++
		delete(s.packages, name)
	}
	if line := ReferenceLine(s.totals); line != "" {
		s.write(now, line+"\n")
	}
	s.write(now, TotalsLine(s.totals, elapsed)+"\n")
}

// ReferenceLine is the loud line about checks skipped for want of the
// reference models; "" when none was.
func ReferenceLine(t Totals) string {
	if t.ReferenceSkipped == 0 {
		return ""
	}
	checks := "checks"
	if t.ReferenceSkipped == 1 {
		checks = "check"
	}
	return fmt.Sprintf("!!! %d %s against real TensorFlow/PyTorch reference models SKIPPED: %s is not set (see README.md, \"Development\"; CI sets it, with %s=1)",
		t.ReferenceSkipped, checks, testhelp.EnvReferenceModels, testhelp.EnvRequireReference)
}

// TotalsLine is the last line: tests and packages by outcome, and the time.
func TotalsLine(t Totals, elapsed time.Duration) string {
	verdict := "PASS"
	if t.Failed > 0 || t.PackagesFailed > 0 {
		verdict = "FAIL"
	}
	return fmt.Sprintf("==> %s: %d passed, %d failed, %d skipped (tests and subtests) in %d packages (%d ok, %d failed, %d without tests), %s",
		verdict, t.Passed, t.Failed, t.Skipped,
		t.PackagesOK+t.PackagesFailed+t.PackagesNoTests, t.PackagesOK, t.PackagesFailed, t.PackagesNoTests,
		Round(elapsed))
}

// Round rounds d for humans: tenths of a second under a minute, whole
// seconds above.
func Round(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
