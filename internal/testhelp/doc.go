// Package testhelp holds the test plumbing several packages need, written
// once: finding the module root and files under it (fixtures that live in
// another package's testdata), building the module's binaries once per test
// process, Unix socket paths short enough for sun_path, and the
// skip-or-fail rule for native libraries (INFERBID_REQUIRE_NATIVE=1, set by
// make test, turns a missing library into a failure), and the reference
// models directory (INFERBID_REFERENCE_MODELS: unset skips with a message
// that starts with ReferenceSkipTag, which make test counts and reports;
// INFERBID_REQUIRE_REFERENCE=1, set by CI, turns that skip into a failure;
// set but wrong fails).
//
// It imports nothing of the module, so any package's tests, and the
// runtimes/conformance suite, can use it.
package testhelp
