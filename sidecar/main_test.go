package sidecar_test

import (
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// TestMain removes the binaries the end-to-end tests built.
func TestMain(m *testing.M) { testhelp.Main(m) }

// buildBinary go-builds ./cmd/<name> of this module once per test run.
func buildBinary(t testing.TB, name string, cgo bool) string {
	t.Helper()
	return testhelp.BuildBinary(t, "cmd/"+name, cgo)
}
