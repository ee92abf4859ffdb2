package inferr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestTypeNamesRoundTrip(t *testing.T) {
	for typ := Unknown; typ <= GRPC; typ++ {
		if got := ParseType(typ.String()); got != typ {
			t.Errorf("ParseType(%q) = %v, want %v", typ.String(), got, typ)
		}
	}
	if Type(99).String() != "UNKNOWN" || ParseType("nope") != Unknown {
		t.Error("out-of-range types must read as UNKNOWN")
	}
}

func TestWrapKeepsInnermostTypeAndMessage(t *testing.T) {
	base := Errorf(InputParsing, "tensor %q: bad", "x")
	wrapped := Wrap(ModelExecution, fmt.Errorf("entry 0: %w", base), "model \"m/\"")
	if TypeOf(wrapped) != InputParsing {
		t.Fatalf("TypeOf = %v, want INPUT_PARSING (already typed errors keep their type)", TypeOf(wrapped))
	}
	if !strings.Contains(wrapped.Error(), `model "m/"`) || !strings.Contains(wrapped.Error(), `tensor "x": bad`) {
		t.Fatalf("message lost context: %q", wrapped)
	}
	untyped := Wrap(ModelExecution, io.ErrUnexpectedEOF, "load")
	if TypeOf(untyped) != ModelExecution || !errors.Is(untyped, io.ErrUnexpectedEOF) {
		t.Fatalf("Wrap of an untyped error: type %v, is EOF %v", TypeOf(untyped), errors.Is(untyped, io.ErrUnexpectedEOF))
	}
	if Wrap(GRPC, nil, "x") != nil {
		t.Fatal("Wrap(nil) must be nil")
	}
	if TypeOf(context.DeadlineExceeded) != GRPC || TypeOf(io.EOF) != Unknown {
		t.Fatal("untyped errors: deadline is GRPC, others UNKNOWN")
	}
}
