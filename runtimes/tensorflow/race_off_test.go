//go:build !race

package tensorflow

const raceEnabled = false
