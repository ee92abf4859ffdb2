//go:build !pytorch || !cgo

package pytorch_test

import (
	"errors"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/pytorch"
)

// Without the tag the package registers "pytorch" as a backend that says
// how to get the real one.
func TestBuiltWithoutTag(t *testing.T) {
	_, err := runtimes.Open("pytorch", driver.Config{})
	if !errors.Is(err, pytorch.ErrNotBuilt) {
		t.Fatalf("Open: %v, want ErrNotBuilt", err)
	}
}
