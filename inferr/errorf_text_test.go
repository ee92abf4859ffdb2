package inferr

import (
	"errors"
	"io"
	"testing"
)

// Errorf with %w must print the cause once and still unwrap to it.
func TestErrorfWrapsCauseOnce(t *testing.T) {
	err := Errorf(InputParsing, "read %q: %w", "f", io.ErrUnexpectedEOF)
	if got, want := err.Error(), `read "f": unexpected EOF`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || TypeOf(err) != InputParsing {
		t.Errorf("lost the cause or the type: %v %v", errors.Is(err, io.ErrUnexpectedEOF), TypeOf(err))
	}
}
