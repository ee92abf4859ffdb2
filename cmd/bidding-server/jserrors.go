package main

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/inferbid/inferbid/jsbridge"
)

// stackFrame is one line of goja's stack in a ScriptError's message:
// "\tat generateBid (bid.js:3:10(3))" or "\tat bid.js:3:10(3)": the script
// name, the line and the column (the parenthesised program counter after
// them is dropped).
var stackFrame = regexp.MustCompile(`^\s*at (?:[^\s()]+ \()?([^()\s]+):(\d+):(\d+)(?:\(\d+\))?\)?\s*$`)

// errorClass is the leading "ReferenceError" of "ReferenceError: x is not
// defined".
var errorClass = regexp.MustCompile(`^([A-Za-z_$][A-Za-z0-9_$]*Error):`)

// scriptPosition is where a script error was thrown, as "bid.js:3:10"
// (script, line, column), from the first stack frame of its message; "" when
// the message has none.
func scriptPosition(msg string) string {
	_, stack, _ := strings.Cut(msg, "\n")
	for line := range strings.SplitSeq(stack, "\n") {
		if m := stackFrame.FindStringSubmatch(line); m != nil {
			return m[1] + ":" + m[2] + ":" + m[3]
		}
	}
	return ""
}

// scriptErrorClass is the error's class (TypeError, a script's own
// FooError), or "thrown value" for anything else a script throws: never
// the message, which may hold the request's data.
func scriptErrorClass(msg string) string {
	if m := errorClass.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	if strings.HasPrefix(msg, "Uncaught (in promise)") {
		return "rejected promise"
	}
	return "thrown value"
}

// scriptErrorLog logs script errors at WARN without the request's data: the
// error class, the module version and the position; the same (class,
// version, position) at most once per scriptErrorLogPeriod, with how many
// were not logged since.
type scriptErrorLog struct {
	mu   sync.Mutex
	seen map[string]*seenScriptError
}

type seenScriptError struct {
	at         time.Time
	suppressed int
}

const (
	scriptErrorLogPeriod = time.Minute
	// scriptErrorLogKeys bounds the remembered errors; past it the map is
	// cleared (a flood of distinct positions logs at most this many a
	// period).
	scriptErrorLogKeys = 1024
)

// logScriptError logs err when it is a script error (others are the
// server's and logged where they happen).
func (s *server) logScriptError(version string, err error) {
	var se *jsbridge.ScriptError
	if !errors.As(err, &se) || s.logger == nil {
		return
	}
	class, pos := scriptErrorClass(se.Message), scriptPosition(se.Message)
	key := class + "\x00" + version + "\x00" + pos
	l := &s.scriptErrors
	now := time.Now()
	l.mu.Lock()
	if l.seen == nil || len(l.seen) >= scriptErrorLogKeys {
		l.seen = map[string]*seenScriptError{}
	}
	e := l.seen[key]
	if e != nil && now.Sub(e.at) < scriptErrorLogPeriod {
		e.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := 0
	if e != nil {
		suppressed = e.suppressed
	}
	l.seen[key] = &seenScriptError{at: now}
	l.mu.Unlock()
	if pos == "" {
		pos = "unknown"
	}
	s.logger.Warn("generateBid threw (the message is in the bid's error, not logged: it may hold the request's data)",
		"function", se.Func, "error_class", class, "module_version", version, "position", pos,
		"same_error_not_logged_in_last_minute", suppressed)
}
