package batch_test

import (
	"context"
	"testing"

	"github.com/inferbid/inferbid/batch"
)

type ctxKey struct{}

func TestDebugLogFrom(t *testing.T) {
	bg := context.Background()
	if batch.DebugLogFrom(bg) != nil {
		t.Fatal("a plain ctx carries a sink")
	}
	var got []string
	ctx := batch.WithDebugLog(bg, func(l string) { got = append(got, l) })
	// Found through the values a caller wraps around it.
	inner, cancel := context.WithCancel(context.WithValue(ctx, ctxKey{}, 1))
	defer cancel()
	sink := batch.DebugLogFrom(inner)
	if sink == nil {
		t.Fatal("no sink in a consented ctx")
	}
	sink("a")
	sink("b")
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("the sink got %q", got)
	}
	if batch.DebugLogFrom(batch.WithDebugLog(inner, nil)) != nil {
		t.Fatal("a nil sink did not withdraw consent")
	}
}

// Inference calls look the sink up on every call: without one, that must
// cost no allocation (the fast lane's hot path).
func TestDebugLogFromAllocatesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, 1))
	defer cancel()
	if n := testing.AllocsPerRun(100, func() {
		if batch.DebugLogFrom(ctx) != nil {
			t.Fatal("sink")
		}
	}); n != 0 {
		t.Fatalf("DebugLogFrom allocates %v times", n)
	}
}
