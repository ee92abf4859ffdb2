package inferr

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	for _, c := range []struct {
		name, in string
		want     string
	}{
		{"short", "pctr/v1/", "pctr/v1/"},
		{"invalid short", "a\xffb", "a\uFFFDb"},
		{"long, cut on a rune", long, strings.Repeat("é", 128) + "... (400 bytes)"},
		{"long invalid", strings.Repeat("\xff", 1000), "\uFFFD... (1000 bytes)"},
	} {
		got := Clip(c.in)
		if got != c.want {
			t.Errorf("%s: Clip = %q, want %q", c.name, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: Clip result is not valid UTF-8: %q", c.name, got)
		}
	}
	huge := strings.Repeat("p", 100<<20)
	if got := Quote(huge); len(got) > MaxEcho+40 || !strings.HasSuffix(got, `... (104857600 bytes)"`) {
		t.Errorf("Quote of 100 MB: %d bytes, ending %q", len(got), got[max(0, len(got)-40):])
	}
	if got := Sanitize(huge); len(got) > MaxMessageBytes+40 {
		t.Errorf("Sanitize of 100 MB gave %d bytes", len(got))
	}
}
