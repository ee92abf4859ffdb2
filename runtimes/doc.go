// Package runtimes is the portable layer between the sidecar and the model
// runtimes (TensorFlow, PyTorch, ONNX).
//
// A backend implements the small Backend and BackendModel interfaces and
// registers itself in init() with Register; only cmd/ blank-imports backends.
// Everything that is the same for every backend lives here, once: input
// validation against the model signature (names, dtypes, shapes, element
// counts), error typing and wrapping with the model path, reference counting
// so that Close waits for in-flight calls, and per-model call statistics.
//
// The shape follows gocloud.dev/blob over blob/driver: users hold *Model, and
// backends never see a request that the portable layer could have rejected.
package runtimes
