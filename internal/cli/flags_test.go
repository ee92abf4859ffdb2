package cli

import (
	"bytes"
	"flag"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"5s", 5 * time.Second},
		{"1m30s", 90 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"50µs", 50 * time.Microsecond},
		{"-1ns", -1},
		{"5000", 5 * time.Second},
		{"0", 0},
		{"-1", -time.Millisecond},
		{" 60000 ", time.Minute},
	} {
		got, err := ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "soon", "5 s", "1.5", "9223372036854775807", "5x"} {
		got, err := ParseDuration(in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		} else if in != "" && !strings.Contains(err.Error(), strings.TrimSpace(in)) {
			t.Errorf("ParseDuration(%q): %v, want the value in the error", in, err)
		}
	}
}

func TestDurationFlag(t *testing.T) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	d := Duration(fs, "period", time.Minute, "poll period")
	if *d != time.Minute {
		t.Fatalf("default %v", *d)
	}
	fs.PrintDefaults()
	if !strings.Contains(out.String(), "-period duration\n    \tpoll period (a Go duration like 5s, or milliseconds) (default 1m0s)") {
		t.Errorf("help does not state the default: %q", out.String())
	}
	for in, want := range map[string]time.Duration{"5s": 5 * time.Second, "1500": 1500 * time.Millisecond} {
		if err := fs.Set("period", in); err != nil || *d != want {
			t.Errorf("--period %s: %v, %v; want %v", in, *d, err, want)
		}
	}
	out.Reset()
	if err := ParseFlags(fs, []string{"--period", "soon"}); ExitCode(err) != 2 || !strings.Contains(out.String(), `"soon" is neither a duration`) {
		t.Errorf("--period soon: %v, flag output %q", err, out.String())
	}
}

func TestParseInterleaved(t *testing.T) {
	for _, c := range []struct {
		args       []string
		positional []string
		path       string
		n          int
	}{
		{[]string{"DIR", "--model-path", "m/"}, []string{"DIR"}, "m/", 0},
		{[]string{"--model-path", "m/", "DIR"}, []string{"DIR"}, "m/", 0},
		{[]string{"a", "-n", "2", "b", "--model-path=x/", "c"}, []string{"a", "b", "c"}, "x/", 2},
		{[]string{"a", "--", "-n", "3"}, []string{"a", "-n", "3"}, "", 0},
		{[]string{"-", "-n", "1"}, []string{"-"}, "", 1},
		{nil, nil, "", 0},
	} {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		path := fs.String("model-path", "", "")
		n := fs.Int("n", 0, "")
		pos, err := ParseInterleaved(fs, c.args)
		if err != nil || !slices.Equal(pos, c.positional) || *path != c.path || *n != c.n {
			t.Errorf("ParseInterleaved(%q) = %q, %v; model-path %q, n %d; want %q, %q, %d", c.args, pos, err, *path, *n, c.positional, c.path, c.n)
		}
	}
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := ParseInterleaved(fs, []string{"a", "-bogus"}); ExitCode(err) != 2 || !IsReported(err) {
		t.Errorf("a bad flag after a positional: %v", err)
	}
}

func TestUndocumentedDefaults(t *testing.T) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.String("socket", "", "the socket")
	fs.String("config", "", "the config; empty = none")
	fs.Int("workers", 0, "workers; 0 = the default (GOMAXPROCS)")
	fs.Int("retries", 3, "retries")
	fs.Bool("verbose", false, "say more")
	Duration(fs, "wait", 0, "how long to wait")
	if got := UndocumentedDefaults(fs); !slices.Equal(got, []string{"socket", "wait"}) {
		t.Errorf("UndocumentedDefaults = %q, want [socket wait]", got)
	}
}

func TestFormatVersion(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "prog unknown version (no build information in the binary)"},
		{"checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "31c241b", "vcs.time", "2026-11-25T08:00:00Z", "vcs.modified", "false")},
			true, "prog devel (commit 31c241b, 2026-11-25T08:00:00Z) go1.26.8"},
		{"modified checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "31c241b", "vcs.modified", "true")},
			true, "prog devel (commit 31c241b, modified) go1.26.8"},
		{"go install m@v", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			true, "prog v1.2.3 (commit unknown: built without VCS information) go1.26.8"},
		{"empty", &debug.BuildInfo{}, true, "prog devel (commit unknown: built without VCS information)"},
	} {
		if got := formatVersion("prog", c.bi, c.ok); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if v := Version("prog"); !strings.HasPrefix(v, "prog ") {
		t.Errorf("Version = %q", v)
	}

	// A commit set at link time stands in for VCS information go did not
	// stamp, and never overrides what it did.
	defer func(c string) { Commit = c }(Commit)
	Commit = "abc123-modified"
	noVCS := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	if got, want := formatVersion("prog", noVCS, true), "prog devel (commit abc123-modified) go1.26.8"; got != want {
		t.Errorf("with Commit set: %q, want %q", got, want)
	}
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings("vcs.revision", "31c241b")}
	if got, want := formatVersion("prog", stamped, true), "prog devel (commit 31c241b)"; got != want {
		t.Errorf("stamped and Commit set: %q, want %q", got, want)
	}
}
