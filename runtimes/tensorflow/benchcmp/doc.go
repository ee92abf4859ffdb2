// Package benchcmp holds no code: its benchmark runs the team's benchmark
// MLP on the pure-Go TensorFlow executor and on ONNX Runtime side by side
// (same architecture and weights), so both are measured under the same
// machine load. It is a separate package so that the TensorFlow runtime's
// own tests never depend on the ONNX runtime building.
package benchcmp
