package sequence

import (
	"context"
	"testing"
)

// A draw that gives 0 or an id in use is drawn again; the bits above
// MaxAssignedID are dropped.
func TestAssignIDDrawsAgain(t *testing.T) {
	m := NewManager(Options{Name: "m/"}, func() (any, error) { return new(int), nil })
	draws := []uint64{
		0,             // "no id"
		1 << 53,       // 0 once masked
		5,             // taken by a client below
		1<<63 | 5,     // 5 once masked: still taken
		1<<60 | 1<<40, // 2^40
	}
	m.random = func() uint64 {
		if len(draws) == 0 {
			t.Fatal("drew more often than needed")
		}
		d := draws[0]
		draws = draws[1:]
		return d
	}
	noop := func(any) error { return nil }
	if _, err := m.Run(context.Background(), 5, Start, noop); err != nil {
		t.Fatal(err)
	}
	id, err := m.Run(context.Background(), 0, Start, noop)
	if err != nil || id != 1<<40 || len(draws) != 0 {
		t.Fatalf("assigned %d (err %v, %d draws left), want 2^40 after four rejected draws", id, err, len(draws))
	}
}
