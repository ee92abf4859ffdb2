//go:build !race

package sidecar_test

const raceEnabled = false
