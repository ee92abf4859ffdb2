// Package driver is the small interface a model runtime implements, as
// gocloud.dev/blob/driver is for blob: a Backend loads Models from bytes,
// and a Model describes its Signature and runs Predict.
//
// Backends are written against this package only (plus runtimes.Register to
// make themselves known). Everything that is the same for every backend lives
// once in the portable package runtimes, above this interface: input
// validation against the Signature (names, count, dtype, shape, element caps),
// output validation, the six error types with the model path, statistics,
// and Close waiting for calls in flight. A backend therefore never sees a
// request runtimes could have rejected, and never builds a wire-level error:
// it returns plain errors, wrapping ErrInvalidInput or ErrInvalidOutput when
// the fault is the caller's input or an output it cannot return, and runtimes
// classifies the rest (see runtimes.ErrorType).
//
// Config holds what the runtimes read of the sidecar's runtime config and
// nothing else: how the sidecar serves models (dynamic batching, sequences,
// shared state) is package sidecar/registry's Settings, which no backend
// sees.
package driver
