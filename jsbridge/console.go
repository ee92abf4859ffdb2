package jsbridge

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/inferr"
)

// ConsoleSink receives one console line of a call: level is slog's level
// for the method (log/info: Info, debug: Debug, warn: Warn, error: Error),
// line is the formatted, size-bounded message.
//
// It is called on the goroutine running the script, one line at a time per
// call, and never after the call returned to its caller (an abandoned
// runtime's later lines are dropped). It must not block, and must be safe
// for concurrent use when calls running at once share it.
type ConsoleSink func(level slog.Level, line string)

type consoleKey struct{}

// WithConsole returns ctx carrying sink: console output of calls made with
// that ctx (CallJSON, CallJSONGroup, Do) goes to sink. Without a sink it
// goes nowhere, unless Options.LogConsole.
func WithConsole(ctx context.Context, sink ConsoleSink) context.Context {
	return context.WithValue(ctx, consoleKey{}, sink)
}

// callConsole is one call's sink. The caller closes it once it has the
// call's result, so that a runtime still running afterwards (abandoned)
// writes nothing more to the caller's sink.
type callConsole struct {
	mu     sync.Mutex
	sink   ConsoleSink
	closed bool
}

// newCallConsole is the console of a call made with ctx; nil when ctx
// carries no sink.
func newCallConsole(ctx context.Context) *callConsole {
	if sink, _ := ctx.Value(consoleKey{}).(ConsoleSink); sink != nil {
		return &callConsole{sink: sink}
	}
	return nil
}

func (c *callConsole) write(level slog.Level, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.sink(level, line)
	}
}

// close stops the writes, waiting for one under way.
func (c *callConsole) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// installConsole defines console.log/info/debug/warn/error. A line goes to
// the running call's sink (WithConsole); without one, to logger when it is
// not nil (Options.LogConsole), else nowhere: console output is one user's
// data and does not belong in the operator's log. Messages are truncated so
// a script cannot flood a sink or the log with one call. The methods are
// made on first use: a runtime serves one call, and most calls never log.
func installConsole(v *vm, logger *slog.Logger) error {
	return v.rt.Set("console", v.rt.NewDynamicObject(&consoleObject{v: v, logger: logger}))
}

// consoleMethods are console's methods, in the order Object.keys lists them.
var consoleMethods = []struct {
	name  string
	level slog.Level
}{
	{"log", slog.LevelInfo}, {"info", slog.LevelInfo}, {"debug", slog.LevelDebug},
	{"warn", slog.LevelWarn}, {"error", slog.LevelError},
}

// consoleObject is the console object's properties (goja.DynamicObject):
// the methods, made when first read, and whatever the script sets.
type consoleObject struct {
	v      *vm
	logger *slog.Logger          // nil: lines of calls without a sink are dropped
	props  map[string]goja.Value // made, set, or deleted (nil)
	keys   []string              // properties the script added, in order
}

func (c *consoleObject) method(level slog.Level) goja.Value {
	return c.v.rt.ToValue(func(call goja.FunctionCall) goja.Value {
		c.write(level, call.Arguments)
		return goja.Undefined()
	})
}

// write sends one line where the running call's console goes. The line is
// formatted first, outside the sink's lock: formatting may run JS (toJSON),
// which may log in turn.
func (c *consoleObject) write(level slog.Level, args []goja.Value) {
	if out := c.v.console; out != nil {
		out.write(level, formatConsole(c.v.strfy, args))
		return
	}
	if c.logger != nil && c.logger.Enabled(context.Background(), level) {
		c.logger.Log(context.Background(), level, formatConsole(c.v.strfy, args), "source", "console")
	}
}

func (c *consoleObject) Get(key string) goja.Value {
	if v, ok := c.props[key]; ok {
		return v
	}
	for _, m := range consoleMethods {
		if m.name == key {
			v := c.method(m.level)
			c.Set(key, v)
			return v
		}
	}
	return nil
}

func (c *consoleObject) Set(key string, val goja.Value) bool {
	if c.props == nil {
		c.props = map[string]goja.Value{}
	}
	if _, known := c.props[key]; !known && !isConsoleMethod(key) {
		c.keys = append(c.keys, key)
	}
	c.props[key] = val
	return true
}

func (c *consoleObject) Has(key string) bool {
	if v, ok := c.props[key]; ok {
		return v != nil
	}
	return isConsoleMethod(key)
}

func (c *consoleObject) Delete(key string) bool {
	if c.Has(key) {
		c.Set(key, nil)
	}
	return true
}

func (c *consoleObject) Keys() []string {
	var keys []string
	for _, m := range consoleMethods {
		if c.Has(m.name) {
			keys = append(keys, m.name)
		}
	}
	for _, k := range c.keys {
		if c.Has(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func isConsoleMethod(key string) bool {
	for _, m := range consoleMethods {
		if m.name == key {
			return true
		}
	}
	return false
}

// formatConsole joins arguments as console.log does: strings as they are,
// objects as JSON when they have a JSON form.
func formatConsole(strfy goja.Callable, args []goja.Value) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if b.Len() > defaultMaxLogBytes {
			break
		}
		b.WriteString(consoleString(strfy, a))
	}
	s := b.String()
	return inferr.ClipN(s, defaultMaxLogBytes)
}

func consoleString(strfy goja.Callable, v goja.Value) string {
	if v == nil {
		// A built-in calling console.log with a missing value (Array.from
		// on an array-like) passes Go's nil.
		return "undefined"
	}
	obj, isObj := v.(*goja.Object)
	if !isObj {
		return v.String()
	}
	if _, isFunc := goja.AssertFunction(obj); isFunc {
		return "[function]"
	}
	// JSON.stringify can throw (cycles, BigInt): fall back to String().
	res, err := strfy(goja.Undefined(), v)
	if err != nil || goja.IsUndefined(res) {
		return "[object]"
	}
	return res.String()
}
