package sidecar

import (
	"path/filepath"

	"github.com/inferbid/inferbid/runtimes"
)

// NewAffineRuntime is the in-test affine runtime (fake_test.go), for the
// external tests' child sidecar.
func NewAffineRuntime() *runtimes.Runtime {
	rt, _ := newAffineRuntime()
	return rt
}

// MakePrivateDir makes a supervisor's private directory in parent, owned
// by this process (for the stale-directory test's subprocess).
var MakePrivateDir = makePrivateDir

// SidecarTempDir is the $TMPDIR the supervisor gives its sidecar.
func (s *Supervisor) SidecarTempDir() string { return filepath.Join(s.tmpDir, "sidecar-tmp") }
