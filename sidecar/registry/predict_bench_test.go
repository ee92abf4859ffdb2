package registry

import (
	"context"
	"testing"
)

// BenchmarkRegistryPredict is the registry's own share of a call: the
// lookup of the entry among 8 published models, the dispatch (no
// sequences, no batcher), the affine model (which does almost nothing) and
// the per-model metrics. Compare allocs/op and, on a quiet machine, ns/op.
func BenchmarkRegistryPredict(b *testing.B) {
	rt, _ := newAffineRuntime()
	r := newTestRegistryWith(b, rt, Options{})
	ctx := context.Background()
	for _, p := range []string{"a/", "b/", "c/", "d/", "e/", "f/", "g/", "h/"} {
		if _, err := r.register(ctx, p, affineFiles("2 1"), ""); err != nil {
			b.Fatal(err)
		}
	}
	in := x3(1, 2, 3)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.predict(ctx, "d/", in); err != nil {
			b.Fatal(err)
		}
	}
}
