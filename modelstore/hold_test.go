package modelstore

import (
	"slices"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
)

// Hold deletes a served model at once, despite its grace period, and keeps
// it out of later polls; Release lets the next poll load it again.
func TestHoldAndRelease(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	a := e.putModel("models/a/", runtimes.Files{"model.pt": randomBytes(t, 100)})
	b := e.putModel("models/b/", runtimes.Files{"model.pt": randomBytes(t, 100)})
	e.putConfig(cfgEntry{path: "models/a/", checksum: a, graceMs: 3600_000}, cfgEntry{path: "models/b/", checksum: b})
	e.mustSync()
	e.expectCalls("register models/a/", "register models/b/")
	if err := e.w.Hold(e.ctx, "models/a/"); err != nil {
		t.Fatal(err)
	}
	e.expectCalls("delete models/a/")
	if !e.w.Held("models/a/") || e.reg.servingChecksum("models/a/") != "" {
		t.Fatal("models/a/ is not held, or still serves")
	}
	e.mustSync()
	e.expectCalls() // held: not loaded again
	if got := e.w.Listed(); !slices.Equal(got, []string{"models/a/", "models/b/"}) {
		t.Fatalf("Listed = %v: a held model is still listed", got)
	}
	// Holding a path nobody serves deletes nothing.
	if err := e.w.Hold(e.ctx, "models/c/"); err != nil {
		t.Fatal(err)
	}
	e.expectCalls()
	e.w.Release("models/a/")
	e.mustSync()
	e.expectCalls("register models/a/")
	if e.w.Held("models/a/") || e.reg.servingChecksum("models/a/") != a {
		t.Fatal("models/a/ did not load again after Release")
	}
}
