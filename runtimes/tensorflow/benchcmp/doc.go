// Package benchcmp holds no code: its benchmark runs the team's benchmark
// MLP on the pure-Go TensorFlow executor and on ONNX Runtime side by side
// (same architecture and weights), so both are measured under the same
// machine load; BenchmarkDense does the same for one wide Dense layer
// (MatMul 256x256 + bias + Relu, the ONNX model encoded in the test) at
// batch 1 and 1024 with num_intraop_threads 1 and 0, alternating the two
// runtimes' calls and reporting their time ratio (tf/ort). It is a separate package so that the TensorFlow runtime's
// own tests never depend on the ONNX runtime building.
package benchcmp
