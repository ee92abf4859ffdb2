package testhelp

import (
	"strings"
	"testing"

	"github.com/inferbid/inferbid/inferr"
)

// ErrType asserts that err is of type want and that its text names every
// fragment (a model path, a field), reporting what under t.
func ErrType(t testing.TB, what string, err error, want inferr.Type, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, want)
		return
	}
	if got := inferr.TypeOf(err); got != want {
		t.Errorf("%s: type %s (%v), want %s", what, got, err, want)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: %q does not mention %q", what, err, f)
		}
	}
}
