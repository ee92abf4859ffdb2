package inferr

import (
	"runtime"
	"strconv"
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

func TestClipN(t *testing.T) {
	for _, c := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"fits", "abc", 3, "abc"},
		{"cut", "abcd", 3, "abc... (4 bytes)"},
		{"zero", "abc", 0, "... (3 bytes)"},
		{"negative", "abc", -5, "... (3 bytes)"},
		{"empty", "", 10, ""},
		// "é" is 2 bytes, "€" 3, "😀" 4: a cut inside one drops it whole.
		{"inside é", "aé", 2, "a... (3 bytes)"},
		{"inside €", "a€b", 3, "a... (5 bytes)"},
		{"inside 😀", "ab😀", 5, "ab... (6 bytes)"},
		{"after 😀", "😀😀", 4, "😀... (8 bytes)"},
		// An invalid byte becomes U+FFFD (3 bytes), which may itself need a cut.
		{"invalid fits", "a\xff", 4, "a\uFFFD"},
		{"invalid grows past n", "ab\xff", 3, "ab... (3 bytes)"},
		{"stray continuations", "a\x80\x80\x80\x80\x80b", 4, "a\uFFFD... (7 bytes)"},
	} {
		for _, got := range []string{ClipN(c.in, c.n), ClipN([]byte(c.in), c.n)} {
			if got != c.want {
				t.Errorf("%s: ClipN(%q, %d) = %q, want %q", c.name, c.in, c.n, got, c.want)
			}
		}
	}
}

// TestClipNReadsOnlyTheHead clips a 100 MB byte slice: only the head is
// copied, so the allocation stays far below the input's size.
func TestClipNReadsOnlyTheHead(t *testing.T) {
	huge := make([]byte, 100<<20)
	for i := range huge {
		huge[i] = 0xff // invalid throughout: a whole-input ToValidUTF8 would copy 300 MB
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := ClipN(huge, 40)
	runtime.ReadMemStats(&after)
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
		t.Errorf("ClipN of 100 MB allocated %d bytes", allocated)
	}
	if want := "\uFFFD... (104857600 bytes)"; got != want {
		t.Errorf("ClipN = %q, want %q", got, want)
	}
}

// FuzzClipN checks, for any input and limit, that ClipN returns valid
// UTF-8 of at most n bytes plus the suffix, that the suffix is there
// exactly when the input was longer than n or grew past n, that an input
// that fits and is valid comes back unchanged, and that the kept text is a
// prefix of the sanitized input.
func FuzzClipN(f *testing.F) {
	f.Add("pctr/v1/", 4)
	f.Add("a\xffb", 2)
	f.Add(strings.Repeat("é", 30), 7)
	f.Add("😀😀", 5)
	f.Add("\x80\x80\x80\x80\x80", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % 300
		got := ClipN(s, n)
		if !utf8.ValidString(got) {
			t.Fatalf("ClipN(%q, %d) = %q: not valid UTF-8", s, n, got)
		}
		suffix := "... (" + strconv.Itoa(len(s)) + " bytes)"
		head, cut := strings.CutSuffix(got, suffix)
		if len(head) > max(n, 0) {
			t.Fatalf("ClipN(%q, %d) keeps %d bytes", s, n, len(head))
		}
		if len(s) > max(n, 0) && !cut {
			t.Fatalf("ClipN(%q, %d) = %q: cut without saying so", s, n, got)
		}
		if len(s) <= max(n, 0) && utf8.ValidString(s) && got != s {
			t.Fatalf("ClipN(%q, %d) = %q: changed a text that fits", s, n, got)
		}
		if clean := strings.ToValidUTF8(s, "\uFFFD"); !strings.HasPrefix(clean, head) {
			// A cut may split a run of invalid bytes that ToValidUTF8
			// merges into one U+FFFD; the head is then a prefix of the
			// sanitized head of s.
			if !strings.HasPrefix(strings.ToValidUTF8(s[:min(len(s), max(n, 0))], "\uFFFD"), head) {
				t.Fatalf("ClipN(%q, %d) = %q: not a prefix of the input", s, n, got)
			}
		}
		if got2 := ClipN([]byte(s), n); got2 != got {
			t.Fatalf("ClipN of bytes %q != of string %q", got2, got)
		}
	})
}
