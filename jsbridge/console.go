package jsbridge

import (
	"context"
	"log/slog"
	"strings"

	"github.com/dop251/goja"
)

// installConsole defines console.log/info/debug/warn/error, writing to the
// server log. Messages are truncated so a script cannot flood the log with
// one call. The methods are made on first use: a runtime serves one call,
// and most calls never log.
func installConsole(rt *goja.Runtime, strfy goja.Callable, logger *slog.Logger) error {
	return rt.Set("console", rt.NewDynamicObject(&consoleObject{rt: rt, strfy: strfy, logger: logger}))
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
	rt     *goja.Runtime
	strfy  goja.Callable
	logger *slog.Logger
	props  map[string]goja.Value // made, set, or deleted (nil)
	keys   []string              // properties the script added, in order
}

func (c *consoleObject) method(level slog.Level) goja.Value {
	return c.rt.ToValue(func(call goja.FunctionCall) goja.Value {
		if c.logger.Enabled(context.Background(), level) {
			c.logger.Log(context.Background(), level, formatConsole(c.strfy, call.Arguments), "source", "console")
		}
		return goja.Undefined()
	})
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
	if len(s) > defaultMaxLogBytes {
		s = s[:defaultMaxLogBytes] + "…(truncated)"
	}
	return s
}

func consoleString(strfy goja.Callable, v goja.Value) string {
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
