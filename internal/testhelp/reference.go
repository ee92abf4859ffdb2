package testhelp

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvReferenceModels names the variable that points tests at the reference
// models: SavedModels and TorchScript files exported by real TensorFlow and
// PyTorch, with known answers. The directory holds bidding-auction-servers/
// and tensorflow-serving/ (see docs/architecture.md, "Testing"). The models
// are test data that lives outside the repository; nothing copies them in.
const EnvReferenceModels = "INFERBID_REFERENCE_MODELS"

// ReferenceModels returns the reference models directory named by
// INFERBID_REFERENCE_MODELS. When the variable is unset the test is skipped
// with a message naming it; when it is set but does not name a readable
// directory the test fails: a CI that sets the variable wrongly must not
// pass by skipping. A relative value is taken from the module root.
func ReferenceModels(tb testing.TB) string {
	tb.Helper()
	dir, ok := LookupReferenceModels(tb)
	if !ok {
		tb.Skipf("reference models not configured: set %s to the reference models directory to run this test", EnvReferenceModels)
	}
	return dir
}

// LookupReferenceModels is ReferenceModels for tests and benchmarks that
// also run without the models (they use them when they are there): ok is
// false when the variable is unset, and nothing is skipped. A variable that
// is set but does not name a readable directory still fails the test.
func LookupReferenceModels(tb testing.TB) (dir string, ok bool) {
	tb.Helper()
	dir = os.Getenv(EnvReferenceModels)
	if dir == "" {
		return "", false
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(ModuleRoot(tb), dir)
	}
	st, err := os.Stat(dir)
	if err != nil {
		tb.Fatalf("%s=%q: %v", EnvReferenceModels, os.Getenv(EnvReferenceModels), err)
		return "", false
	}
	if !st.IsDir() {
		tb.Fatalf("%s=%q is not a directory", EnvReferenceModels, os.Getenv(EnvReferenceModels))
		return "", false
	}
	if _, err := os.ReadDir(dir); err != nil {
		tb.Fatalf("%s=%q is not readable: %v", EnvReferenceModels, os.Getenv(EnvReferenceModels), err)
		return "", false
	}
	return dir, true
}
