// Package testsummary turns the event stream of `go test -json` back into
// what plain `go test` prints (one line per package, the output of failing
// tests, build errors) and adds what plain `go test` does not say: the
// totals over every package (`N passed, N failed, N skipped`, subtests
// included), how many checks were skipped because the reference models are
// not configured (testhelp.ReferenceSkipTag in a skip message), and, while a
// long step is silent, a progress line naming the packages still running.
//
// It is the library of internal/cmd/testsummary, which make test runs around
// its go test commands. Summary is fed decoded lines; the heartbeat is driven
// by the caller with the current time, so that tests drive it without clocks.
package testsummary
