//go:build !pytorch || !cgo

package pytorch

import (
	"errors"

	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
)

// ErrNotBuilt is what Open returns in a binary built without the pytorch
// build tag (or without cgo).
var ErrNotBuilt = errors.New(`pytorch: this binary was built without libtorch: rebuild with cgo and "-tags pytorch" (scripts/install-libtorch.sh installs libtorch-dev)`)

func init() {
	runtimes.Register("pytorch", func(driver.Config) (driver.Backend, error) { return nil, ErrNotBuilt })
}
