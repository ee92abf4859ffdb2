package inferr

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxEcho is how many bytes of a request's own content (a model path, a
// tensor name, a value) an error message repeats: a 100 MB model_path must
// not come back whole in every answer and log line.
const MaxEcho = 256

// MaxMessageBytes bounds a whole error message where it leaves the process
// (a gRPC status, an error frame, an Error in a result). It is a backstop:
// the places that echo input clip it to MaxEcho first.
const MaxMessageBytes = 16 << 10

// Clip returns s as valid UTF-8 (invalid bytes become U+FFFD), cut on a rune
// boundary to at most MaxEcho bytes, followed by "... (N bytes)" giving the
// original length when it was cut. Use it for request content inside error
// messages.
func Clip(s string) string { return ClipN(s, MaxEcho) }

// ClipN is Clip with a limit of n bytes instead of MaxEcho (n < 0 counts
// as 0), for a string or a byte slice: the one way this module cuts text
// it repeats (request content in errors, a peer's bytes in a log line, a
// child's log tail). It reads at most n+1 bytes of s, so a 100 MB input is
// never copied or scanned whole; the result is valid UTF-8 of at most n
// bytes plus the suffix.
func ClipN[T ~string | ~[]byte](s T, n int) string {
	n = max(n, 0)
	// One byte past the limit tells whether the cut splits a rune.
	return clipHead(string(s[:min(len(s), n+1)]), len(s), n)
}

// Quote is strconv.Quote(Clip(s)): the usual way a message names a model
// path or a tensor.
func Quote(s string) string { return strconv.Quote(Clip(s)) }

// Sanitize returns msg as valid UTF-8, cut to at most MaxMessageBytes: what
// every edge that carries an error message out of the process applies
// (gRPC refuses a status message that is not valid UTF-8, and protobuf a
// string field).
func Sanitize(msg string) string { return ClipN(msg, MaxMessageBytes) }

// clipHead clips head, the first bytes (at most n+1) of a text total bytes
// long, to n bytes.
func clipHead(head string, total, n int) string {
	if total <= n && utf8.ValidString(head) {
		return head
	}
	cut := total > n
	if cut {
		head = head[:runeCut(head, n)]
	}
	head = strings.ToValidUTF8(head, "\uFFFD")
	if len(head) > n { // each invalid byte became three
		head, cut = head[:runeCut(head, n)], true
	}
	if !cut {
		return head
	}
	return head + "... (" + strconv.Itoa(total) + " bytes)"
}

// runeCut returns where to cut s to keep at most n bytes without splitting
// a valid rune (n < len(s)): before the rune that covers byte n, if one
// starts within the UTFMax-1 bytes before it (or is cut short by the end of
// s, which may be a head), else at n (stray bytes there are invalid anyway,
// and ToValidUTF8 replaces them).
func runeCut(s string, n int) int {
	for p := n; p >= 0 && n-p < utf8.UTFMax; p-- {
		if !utf8.RuneStart(s[p]) {
			continue
		}
		if !utf8.FullRuneInString(s[p:]) {
			return p
		}
		if _, size := utf8.DecodeRuneInString(s[p:]); size > 1 && p+size > n {
			return p
		}
		return n
	}
	return n
}
