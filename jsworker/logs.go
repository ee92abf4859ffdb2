package jsworker

import (
	"context"
	"log/slog"
	"sync"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/jsbridge"
)

// CollectLogs returns ctx carrying the sinks of a consented request: its
// JS console lines (jsbridge.WithConsole) and the sidecar's debug lines for
// its inference calls (batch.WithDebugLog), and a function that returns
// them in the order they came. Both the workers and the in-process pool
// (--js_in_process) collect through it, so debug_info reads the same.
func CollectLogs(ctx context.Context) (context.Context, func() []LogLine) {
	var mu sync.Mutex
	var lines []LogLine
	add := func(l LogLine) {
		mu.Lock()
		lines = append(lines, l)
		mu.Unlock()
	}
	ctx = jsbridge.WithConsole(ctx, func(level slog.Level, text string) {
		add(LogLine{Source: "console", Level: consoleLevel(level), Text: text})
	})
	ctx = batch.WithDebugLog(ctx, func(text string) {
		add(LogLine{Source: "inference", Level: "debug", Text: text})
	})
	return ctx, func() []LogLine {
		mu.Lock()
		defer mu.Unlock()
		return lines
	}
}

// consoleLevel names a console line's level as debug_info shows it.
func consoleLevel(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}
