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

// EnvRequireReference names the variable that, when "1", turns the skip of
// a check that needs the reference models into a failure: CI sets it, so
// that a CI that lost the models cannot pass by skipping.
const EnvRequireReference = "INFERBID_REQUIRE_REFERENCE"

// ReferenceSkipTag starts the message of every test skipped because
// INFERBID_REFERENCE_MODELS is unset. internal/testsummary counts the
// skipped tests whose output holds it, and make test prints that count in
// one loud line: a skip nobody sees is a check nobody knows is missing.
const ReferenceSkipTag = "reference models not configured"

// ReferenceModels returns the reference models directory named by
// INFERBID_REFERENCE_MODELS. When the variable is unset the test is skipped
// with a message that starts with ReferenceSkipTag and names the variable,
// or fails when INFERBID_REQUIRE_REFERENCE=1; when it is set but does not
// name a readable directory the test fails: a CI that sets the variable
// wrongly must not pass by skipping. A relative value is taken from the
// module root. Every test that needs the reference models goes through it.
func ReferenceModels(tb testing.TB) string {
	tb.Helper()
	dir, ok := LookupReferenceModels(tb)
	if !ok {
		tb.Skipf("%s: this check runs against models exported by real TensorFlow/PyTorch; set %s to their directory to run it (README.md, \"Development\")",
			ReferenceSkipTag, EnvReferenceModels)
	}
	return dir
}

// LookupReferenceModels is ReferenceModels for tests and benchmarks that
// also run without the models (they use them when they are there): ok is
// false when the variable is unset, and nothing is skipped. A variable that
// is set but does not name a readable directory still fails the test, and
// so does an unset one under INFERBID_REQUIRE_REFERENCE=1.
func LookupReferenceModels(tb testing.TB) (dir string, ok bool) {
	tb.Helper()
	dir = os.Getenv(EnvReferenceModels)
	if dir == "" {
		if os.Getenv(EnvRequireReference) == "1" {
			tb.Fatalf("%s=1 and %s is not set: this check needs the reference models exported by real TensorFlow/PyTorch",
				EnvRequireReference, EnvReferenceModels)
		}
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
