package jsbridge

import (
	"context"
	"log/slog"
	"strings"

	"github.com/dop251/goja"
)

// installConsole defines console.log/info/debug/warn/error, writing to the
// server log. Messages are truncated so a script cannot flood the log with
// one call.
func installConsole(rt *goja.Runtime, strfy goja.Callable, logger *slog.Logger) error {
	console := rt.NewObject()
	level := func(l slog.Level) func(goja.FunctionCall) goja.Value {
		return func(call goja.FunctionCall) goja.Value {
			if !logger.Enabled(context.Background(), l) {
				return goja.Undefined()
			}
			logger.Log(context.Background(), l, formatConsole(strfy, call.Arguments), "source", "console")
			return goja.Undefined()
		}
	}
	for name, l := range map[string]slog.Level{
		"log": slog.LevelInfo, "info": slog.LevelInfo, "debug": slog.LevelDebug,
		"warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		if err := console.Set(name, level(l)); err != nil {
			return err
		}
	}
	return rt.Set("console", console)
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
