//go:build !race

package pytorch_test

const raceEnabled = false
