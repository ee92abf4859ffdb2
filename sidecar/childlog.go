package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/inferbid/inferbid/inferr"
)

// LogFormatEnv is the environment variable through which the supervisor
// asks the sidecar for JSON log lines ("json"), which lineLogger forwards
// as structured records; the sidecar's --log_format defaults to it.
const LogFormatEnv = "INFERENCE_SIDECAR_LOG_FORMAT"

// lineLogger forwards what a child writes to the supervisor's logger, one
// record per line, and keeps the last lines for start-up errors.
//
// A line that is a slog JSON record (an object with a string "msg") is
// forwarded as that record: its level, message and attributes (groups
// too), its time as the record's time (no second timestamp), plus
// source=sidecar and pid. Any other line is forwarded as plain text: the
// line is the message, at WARN on stderr (a panic, a native library's
// complaint, a usage error) and INFO on stdout, with source, pid and
// stream.
type lineLogger struct {
	log    *slog.Logger
	stream string
	mu     sync.Mutex
	pid    int // the child's, set under mu before any line is handled
	buf    []byte
	tail   []string // the last tailLines lines, structured ones rendered as text
	// lastErr is the last ERROR record's message and err attribute: the
	// cause a start-up error names first.
	lastErr string
}

// A start-up error carries at most the last tailLines lines, tailBytes
// bytes, of the child's stderr.
const (
	tailLines = 20
	tailBytes = 4 << 10
)

// tailNote is "; the sidecar's error: ...; stderr: ..." with the last
// ERROR record and the last lines written (flushed once the child has
// exited), or "" when there are none.
func (l *lineLogger) tailNote() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tail) == 0 {
		return ""
	}
	t := strings.Join(l.tail, "\n")
	if len(t) > tailBytes {
		t = "..." + t[len(t)-tailBytes:]
	}
	note := ""
	if l.lastErr != "" {
		note = "; the sidecar's error: " + inferr.ClipN(l.lastErr, tailBytes)
	}
	return note + "; " + l.stream + ":\n" + strings.ToValidUTF8(t, "\uFFFD")
}

const maxLogLine = 64 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLogLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLogger) emit(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	// The child's own attributes come after source and pid.
	r, attrs, ok := parseJSONRecord(line)
	if !ok {
		level := slog.LevelInfo
		if l.stream == "stderr" {
			level = slog.LevelWarn
		}
		r = slog.NewRecord(time.Now(), level, strings.ToValidUTF8(string(line), "\uFFFD"), 0)
		attrs = []slog.Attr{slog.String("stream", l.stream)}
	}
	l.remember(line, r, attrs, ok)
	r.AddAttrs(slog.String("source", "sidecar"), slog.Int("pid", l.pid))
	r.AddAttrs(attrs...)
	ctx := context.Background()
	if h := l.log.Handler(); h.Enabled(ctx, r.Level) {
		_ = h.Handle(ctx, r)
	}
}

// remember keeps line in the tail (a structured one as "LEVEL msg k=v",
// without its time), and an ERROR record's cause.
func (l *lineLogger) remember(line []byte, r slog.Record, attrs []slog.Attr, structured bool) {
	text := string(line[max(0, len(line)-tailBytes):])
	if structured {
		var b bytes.Buffer
		h := slog.NewTextHandler(&b, &slog.HandlerOptions{
			Level: slog.LevelDebug,
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if len(groups) == 0 && a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		})
		rr := r.Clone()
		rr.AddAttrs(attrs...)
		_ = h.Handle(context.Background(), rr)
		text = strings.TrimSuffix(b.String(), "\n")
		text = inferr.ClipN(text, tailBytes)
		if r.Level >= slog.LevelError {
			l.lastErr = r.Message
			for _, a := range attrs {
				if a.Key == "err" || a.Key == "error" {
					l.lastErr += ": " + a.Value.String()
				}
			}
		}
	}
	if len(l.tail) == tailLines {
		l.tail = slices.Delete(l.tail, 0, 1)
	}
	l.tail = append(l.tail, text)
}

// maxGroupDepth bounds how deep nested objects become slog groups; deeper
// ones are kept as their JSON text.
const maxGroupDepth = 8

// parseJSONRecord reads line as a slog JSON record: an object with a
// string "msg". It returns the record (time, level and message; the time
// is now when the line has none) and its other attributes in order.
func parseJSONRecord(line []byte) (slog.Record, []slog.Attr, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || !json.Valid(line) {
		return slog.Record{}, nil, false
	}
	fields, ok := objectAttrs(line, 0)
	if !ok {
		return slog.Record{}, nil, false
	}
	var msg string
	haveMsg := false
	when := time.Time{}
	level := slog.LevelInfo
	attrs := fields[:0:0]
	for _, a := range fields {
		switch {
		case a.Key == slog.MessageKey && a.Value.Kind() == slog.KindString && !haveMsg:
			msg, haveMsg = a.Value.String(), true
		case a.Key == slog.TimeKey && a.Value.Kind() == slog.KindString && when.IsZero():
			t, err := time.Parse(time.RFC3339Nano, a.Value.String())
			if err != nil {
				attrs = append(attrs, a)
				continue
			}
			when = t
		case a.Key == slog.LevelKey && a.Value.Kind() == slog.KindString:
			if err := level.UnmarshalText([]byte(a.Value.String())); err != nil {
				attrs = append(attrs, a)
			}
		default:
			attrs = append(attrs, a)
		}
	}
	if !haveMsg {
		return slog.Record{}, nil, false
	}
	if when.IsZero() {
		when = time.Now()
	}
	return slog.NewRecord(when, level, msg, 0), attrs, true
}

// objectAttrs turns a valid JSON object into attributes, in order: nested
// objects become groups (to maxGroupDepth), arrays keep their decoded
// value, numbers are int64 when whole and in range, else float64.
func objectAttrs(obj []byte, depth int) ([]slog.Attr, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var attrs []slog.Attr
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, ok := tok.(string)
		if !ok {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		v, ok := jsonValue(raw, depth)
		if !ok {
			return nil, false
		}
		attrs = append(attrs, slog.Attr{Key: key, Value: v})
	}
	return attrs, true
}

func jsonValue(raw json.RawMessage, depth int) (slog.Value, bool) {
	switch raw[0] {
	case '{':
		if depth >= maxGroupDepth {
			return slog.StringValue(string(raw)), true
		}
		attrs, ok := objectAttrs(raw, depth+1)
		return slog.GroupValue(attrs...), ok
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return slog.StringValue(s), err == nil
	case 't', 'f':
		return slog.BoolValue(raw[0] == 't'), true
	case 'n':
		return slog.AnyValue(nil), true
	case '[':
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v []any
		err := dec.Decode(&v)
		return slog.AnyValue(v), err == nil
	default:
		n := json.Number(raw)
		if i, err := n.Int64(); err == nil {
			return slog.Int64Value(i), true
		}
		f, err := n.Float64()
		return slog.Float64Value(f), err == nil
	}
}
