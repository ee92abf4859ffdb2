package inferr

import (
	"context"
	"errors"
	"fmt"
)

// Type is one of the six error types of the batch JSON contract.
// The zero value is Unknown.
type Type int

const (
	Unknown        Type = iota // UNKNOWN: anything not classified below.
	InputParsing               // INPUT_PARSING: bad JSON, missing field, bad dtype/shape/content, unknown input tensor.
	ModelNotFound              // MODEL_NOT_FOUND: no model is registered at the path.
	ModelExecution             // MODEL_EXECUTION: the runtime failed to load or run the model.
	OutputParsing              // OUTPUT_PARSING: an output could not be converted or encoded.
	GRPC                       // GRPC: the sidecar could not be reached or the call failed.
)

var typeNames = [...]string{
	Unknown:        "UNKNOWN",
	InputParsing:   "INPUT_PARSING",
	ModelNotFound:  "MODEL_NOT_FOUND",
	ModelExecution: "MODEL_EXECUTION",
	OutputParsing:  "OUTPUT_PARSING",
	GRPC:           "GRPC",
}

// String returns the JSON name of the type, e.g. "INPUT_PARSING".
func (t Type) String() string {
	if t < 0 || int(t) >= len(typeNames) {
		return "UNKNOWN"
	}
	return typeNames[t]
}

// ParseType maps a JSON name back to its Type; unknown names give Unknown.
func ParseType(s string) Type {
	for i, n := range typeNames {
		if n == s {
			return Type(i)
		}
	}
	return Unknown
}

// Error is an error with an error type. Err is the cause (may be nil when Msg
// says it all).
type Error struct {
	Type Type
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Err == nil:
		return e.Msg
	case e.Msg == "":
		return e.Err.Error()
	default:
		return e.Msg + ": " + e.Err.Error()
	}
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an error of type t. Use %w in format to wrap a cause; the
// outermost type wins in TypeOf.
func Errorf(t Type, format string, args ...any) error {
	// The formatted error already holds the cause's text: keep it as Err
	// (so errors.Is/As reach the cause through it) and leave Msg empty, or
	// Error() would print the cause twice.
	return &Error{Type: t, Err: fmt.Errorf(format, args...)}
}

// Wrap gives err the type t unless it already has one, prefixing msg.
// A nil err stays nil.
func Wrap(t Type, err error, msg string) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		if msg == "" {
			return err
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	return &Error{Type: t, Msg: msg, Err: err}
}

// TypeOf returns the type of the outermost *Error in err's chain. Context
// cancellation and deadlines count as GRPC errors when nothing else typed
// them (they come from the transport edge); anything else untyped is Unknown.
func TypeOf(err error) Type {
	if err == nil {
		return Unknown
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Type
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return GRPC
	}
	return Unknown
}
