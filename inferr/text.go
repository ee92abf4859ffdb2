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
func Clip(s string) string { return clipTo(s, MaxEcho) }

// Quote is strconv.Quote(Clip(s)): the usual way a message names a model
// path or a tensor.
func Quote(s string) string { return strconv.Quote(Clip(s)) }

// Sanitize returns msg as valid UTF-8, cut to at most MaxMessageBytes: what
// every edge that carries an error message out of the process applies
// (gRPC refuses a status message that is not valid UTF-8, and protobuf a
// string field).
func Sanitize(msg string) string { return clipTo(msg, MaxMessageBytes) }

func clipTo(s string, n int) string {
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	cut := len(s) > n
	head := s
	if cut {
		// Cut before sanitising: a 100 MB string is never copied whole.
		head = head[:runeCut(head, n)]
	}
	head = strings.ToValidUTF8(head, "\uFFFD")
	if len(head) > n { // each invalid byte became three
		head, cut = head[:runeCut(head, n)], true
	}
	if !cut {
		return head
	}
	return head + "... (" + strconv.Itoa(len(s)) + " bytes)"
}

// runeCut returns where to cut s to keep at most n bytes without splitting
// a rune (n < len(s)).
func runeCut(s string, n int) int {
	cut := n
	for cut > 0 && n-cut < utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return cut
}
