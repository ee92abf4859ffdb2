//go:build pytorch && cgo && !race

package pytorch_test

const raceEnabled = false
