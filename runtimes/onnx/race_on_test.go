//go:build race

package onnx

// raceEnabled: the race detector multiplies a process's resident memory,
// so the tests that measure it skip.
const raceEnabled = true
