package jsbridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dop251/goja"
)

const consoleScript = `
console.log("top level of the module");
function say(who) {
  console.log("hello", who, {a: 1});
  console.info("info " + who);
  console.debug("debug " + who);
  console.warn("warn " + who);
  console.error("error " + who);
  return true;
}
function long() { console.log(new Array(10000).join("x")); return 1; }
function flood(n) { Array.from({length: n}, console.log); return 1; }
`

// consoleLine is one line a sink received.
type consoleLine struct {
	level slog.Level
	text  string
}

// consoleRecorder is a ConsoleSink that keeps the lines.
type consoleRecorder struct {
	mu    sync.Mutex
	lines []consoleLine
}

func (r *consoleRecorder) sink(level slog.Level, line string) {
	r.mu.Lock()
	r.lines = append(r.lines, consoleLine{level, line})
	r.mu.Unlock()
}

func (r *consoleRecorder) get() []consoleLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]consoleLine(nil), r.lines...)
}

// said is the lines say(who) logs.
func said(who string) []consoleLine {
	return []consoleLine{
		{slog.LevelInfo, "hello " + who + ` {"a":1}`},
		{slog.LevelInfo, "info " + who},
		{slog.LevelDebug, "debug " + who},
		{slog.LevelWarn, "warn " + who},
		{slog.LevelError, "error " + who},
	}
}

// captureLog is a logger that keeps everything, down to Debug.
func captureLog() (*slog.Logger, func() string) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return logger, func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

func newConsolePool(t *testing.T, opts Options) *Pool {
	t.Helper()
	p, err := New("console.js", consoleScript, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// sayAll calls say(who) through CallJSON, a group of two and Do.
func sayAll(t *testing.T, p *Pool, ctx context.Context, who string) {
	t.Helper()
	if _, err := p.CallJSON(ctx, "say", []byte(`"`+who+`"`)); err != nil {
		t.Fatal(err)
	}
	for _, r := range p.CallJSONGroup(ctx, "say", [][][]byte{{[]byte(`"` + who + `-g0"`)}, {[]byte(`"` + who + `-g1"`)}}, GroupOptions{}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	err := p.Do(ctx, "say", func(rt *goja.Runtime, f goja.Callable) error {
		_, err := f(goja.Undefined(), rt.ToValue(who+"-do"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConsoleDroppedByDefault: without a sink and without LogConsole,
// console output goes nowhere: not to the log (at any level), not to
// stdout or stderr.
func TestConsoleDroppedByDefault(t *testing.T) {
	logger, logs := captureLog()
	stdout, stderr := os.Stdout, os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout, os.Stderr = w, w
	func() {
		defer func() { os.Stdout, os.Stderr = stdout, stderr }()
		p := newConsolePool(t, Options{Size: 2, Logger: logger})
		sayAll(t, p, context.Background(), "nobody")
		p.Close()
	}()
	w.Close()
	printed, _ := io.ReadAll(r)
	if len(printed) > 0 {
		t.Errorf("console output printed: %q", printed)
	}
	if l := logs(); strings.Contains(l, "nobody") || strings.Contains(l, "top level") {
		t.Errorf("console output logged:\n%s", l)
	}
}

// TestConsoleSink: a sink in the call's ctx gets the call's lines, in
// order, with their levels, truncated as the log was; the module's top
// level (run when a runtime is built, outside any call) reaches no sink;
// nothing reaches the log.
func TestConsoleSink(t *testing.T) {
	logger, logs := captureLog()
	p := newConsolePool(t, Options{Size: 2, Logger: logger})
	var rec consoleRecorder
	ctx := WithConsole(context.Background(), rec.sink)
	sayAll(t, p, ctx, "w")
	var want []consoleLine
	for _, who := range []string{"w", "w-g0", "w-g1", "w-do"} {
		want = append(want, said(who)...)
	}
	if got := rec.get(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the sink got\n%v\nwant\n%v", got, want)
	}
	if l := logs(); strings.Contains(l, "hello") || strings.Contains(l, "top level") {
		t.Errorf("console output logged with a sink:\n%s", l)
	}

	rec = consoleRecorder{}
	if _, err := p.CallJSON(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	if got := rec.get(); len(got) != 1 || got[0].text != strings.Repeat("x", defaultMaxLogBytes)+"... (9999 bytes)" {
		t.Errorf("a 9999-byte line: %d lines, %q...", len(got), got[0].text[:min(len(got[0].text), 20)])
	}
}

// TestConsoleLogConsole: with LogConsole (unsafe, for development), lines
// of calls without a sink, and of the module's top level, are logged as
// before; a call with a sink still sends its lines to the sink only.
func TestConsoleLogConsole(t *testing.T) {
	logger, logs := captureLog()
	p := newConsolePool(t, Options{Size: 1, Logger: logger, LogConsole: true})
	sayAll(t, p, context.Background(), "logged")
	var rec consoleRecorder
	if _, err := p.CallJSON(WithConsole(context.Background(), rec.sink), "say", []byte(`"sunk"`)); err != nil {
		t.Fatal(err)
	}
	l := logs()
	for _, want := range []string{`msg="top level of the module"`, `level=INFO msg="hello logged {\"a\":1}" script=console.js source=console`, "level=DEBUG msg=\"debug logged-g1\"",
		`level=WARN msg="warn logged-do"`, `level=ERROR msg="error logged"`} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}
	if strings.Contains(l, "sunk") || len(rec.get()) != 5 {
		t.Errorf("a call with a sink: %d lines in the sink; logged:\n%s", len(rec.get()), l)
	}
}

// TestConsoleSinksPerGroup: groups running at once, each with its own
// sink, get their own lines only and all of them, in order, in isolated
// and shared pools alike.
func TestConsoleSinksPerGroup(t *testing.T) {
	for _, shared := range []bool{false, true} {
		p := newConsolePool(t, Options{Size: 3, Logger: quietLogger(), ShareRuntimes: shared})
		const groups, calls = 8, 10
		recs := make([]consoleRecorder, groups)
		var wg sync.WaitGroup
		for g := range groups {
			wg.Go(func() {
				args := make([][][]byte, calls)
				for i := range args {
					args[i] = [][]byte{fmt.Appendf(nil, `"g%d-%d"`, g, i)}
				}
				for i, r := range p.CallJSONGroup(WithConsole(context.Background(), recs[g].sink), "say", args, GroupOptions{}) {
					if r.Err != nil {
						t.Errorf("group %d call %d: %v", g, i, r.Err)
					}
				}
			})
		}
		wg.Wait()
		for g := range recs {
			var want []consoleLine
			for i := range calls {
				want = append(want, said(fmt.Sprintf("g%d-%d", g, i))...)
			}
			if got := recs[g].get(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("shared=%v: group %d's sink got\n%v\nwant\n%v", shared, g, got, want)
			}
		}
	}
}

// TestConsoleAbandonedCallWritesNoMore: a runtime abandoned inside a
// built-in that logs (Array.from calling console.log as its map function
// runs no JS instruction, so the interrupt is not seen) writes nothing to the caller's sink after
// the call returned.
func TestConsoleAbandonedCallWritesNoMore(t *testing.T) {
	p := newConsolePool(t, Options{Size: 1, Logger: quietLogger(), CallTimeout: 100 * time.Millisecond})
	var returned atomic.Bool
	var before, after atomic.Int64
	ctx := WithConsole(context.Background(), func(slog.Level, string) {
		if returned.Load() {
			after.Add(1)
		} else {
			before.Add(1)
		}
	})
	_, err := p.CallJSON(ctx, "flood", []byte("1e6"))
	returned.Store(true)
	if !errors.Is(err, ErrAbandoned) {
		t.Fatalf("flood: %v, want an abandoned runtime", err)
	}
	waitAbandonedDone(t, p)
	if before.Load() == 0 || after.Load() != 0 {
		t.Errorf("the sink got %d lines before the call returned and %d after; want some, then none", before.Load(), after.Load())
	}
}
