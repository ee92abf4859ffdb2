//go:build pytorch && cgo && race

package pytorch_test

// raceEnabled: the race detector multiplies a process's resident memory,
// so the tests that measure it skip.
const raceEnabled = true
