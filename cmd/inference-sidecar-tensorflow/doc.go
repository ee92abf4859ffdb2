// Command inference-sidecar-tensorflow serves TensorFlow SavedModels (pure
// Go, no libtensorflow; builds with CGO_ENABLED=0) over a Unix socket:
//
//	inference-sidecar-tensorflow --socket PATH [--runtime_config JSON]
//
// It is sidecarmain.Run with the tensorflow runtime (flags, environment and
// exit codes are documented there).
package main
