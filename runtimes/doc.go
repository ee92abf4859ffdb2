// Package runtimes is the portable layer between the sidecar and the model
// runtimes (TensorFlow, PyTorch, ONNX).
//
// A backend implements the small interface of package runtimes/driver
// (Backend, Model) and registers itself in init() with Register; binaries
// (cmd/) and tests blank-import the backends they need, libraries never do.
// Everything that is the same for every backend lives here, once: input
// validation against the model signature (names, dtypes, shapes, element
// counts) and binding inputs in signature order (no copy when the caller
// already sent them in that order; Model.Bind does that alone, without a
// call), error typing and wrapping with the
// model path, a read-write lock so that Close waits for in-flight calls,
// and per-model call statistics.
//
// The shape follows gocloud.dev/blob over blob/driver: users hold *Model, and
// backends never see a request that the portable layer could have rejected.
// Backends return plain errors (wrapping driver.ErrInvalidInput or
// driver.ErrInvalidOutput where that is the fault) and ErrorType, the one
// classifier, gives them one of the six error types.
package runtimes
