//go:build race

package tensorflow

// raceEnabled: under the race detector sync.Pool drops items at random, so
// the tests that count a call's allocations skip.
const raceEnabled = true
