package sidecar

import (
	"log/slog"
	"strings"
	"testing"
)

func TestParseJSONRecord(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 20) + `1` + strings.Repeat(`}`, 20)
	for _, c := range []struct {
		line   string
		ok     bool
		level  slog.Level
		msg    string
		attrs  string // attrs as slog prints them
		hasNow bool   // no time in the line: the record's time is now
	}{
		{`{"time":"2026-01-02T03:04:05Z","level":"INFO","msg":"hi","k":"v"}`, true, slog.LevelInfo, "hi", "[k=v]", false},
		{`{"msg":"no level","n":-3,"f":1e3,"big":18446744073709551616}`, true, slog.LevelInfo, "no level", "[n=-3 f=1000 big=1.8446744073709552e+19]", true},
		{`{"level":"WARN+2","msg":"custom level"}`, true, slog.LevelWarn + 2, "custom level", "[]", true},
		{`{"level":"LOUD","msg":"bad level"}`, true, slog.LevelInfo, "bad level", "[level=LOUD]", true},
		{`{"time":"yesterday","msg":"bad time"}`, true, slog.LevelInfo, "bad time", "[time=yesterday]", true},
		{`  {"msg":"g","g":{"h":{"i":null}},"arr":[1,"x",{"y":true}]}  `, true, slog.LevelInfo, "g", "[g=[h=[i=<nil>]] arr=[1 x map[y:true]]]", true},
		{`{"msg":"deep","d":` + deep + `}`, true, slog.LevelInfo, "deep", "", true},
		{`{"msg":"dup","msg":"second"}`, true, slog.LevelInfo, "dup", "[msg=second]", true},
		{`{"level":"INFO","message":"not slog"}`, false, 0, "", "", false},
		{`{"msg":42}`, false, 0, "", "", false},
		{`{"msg":"cut`, false, 0, "", "", false},
		{`["msg","array"]`, false, 0, "", "", false},
		{`time=2026-01-02T03:04:05Z level=INFO msg=logfmt`, false, 0, "", "", false},
		{`"just a string"`, false, 0, "", "", false},
	} {
		r, attrs, ok := parseJSONRecord([]byte(c.line))
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v", c.line, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		got := slogAttrs(attrs)
		if r.Level != c.level || r.Message != c.msg || (c.attrs != "" && got != c.attrs) || r.Time.IsZero() {
			t.Errorf("%s: level %v, msg %q, attrs %s, time %v; want %v, %q, %s", c.line, r.Level, r.Message, got, r.Time, c.level, c.msg, c.attrs)
		}
		if c.msg == "deep" && !strings.Contains(got, `{"a":1}`) {
			t.Errorf("a group deeper than %d levels is not kept as JSON text: %s", maxGroupDepth, got)
		}
	}
}

func slogAttrs(attrs []slog.Attr) string {
	parts := make([]string, len(attrs))
	for i, a := range attrs {
		parts[i] = a.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}
