package sequence_test

import (
	"context"
	"testing"
	"time"

	"github.com/inferbid/inferbid/sequence"
)

// TestPerClientCap: a client holds at most MaxPerClient sequences; other
// clients and starts naming no client are not held back by it; an end, a
// sweep and a failed start each give the client its slot back.
func TestPerClientCap(t *testing.T) {
	m := sequence.NewManager(sequence.Options{Name: "m/", MaxSequences: 100, MaxPerClient: 3}, newCounter)
	a := sequence.WithClient(context.Background(), "10.0.0.1")
	b := sequence.WithClient(context.Background(), "10.0.0.2")
	var got int
	var ids []uint64
	for range 3 {
		id, err := m.Run(a, 0, sequence.Start, add(1, &got))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_, err := m.Run(a, 0, sequence.Start, add(1, &got))
	wantCode(t, err, sequence.Unavailable, "per-client cap")
	if _, err := m.Run(b, 0, sequence.Start, add(1, &got)); err != nil {
		t.Errorf("another client: %v", err)
	}
	if _, err := m.Run(context.Background(), 0, sequence.Start, add(1, &got)); err != nil {
		t.Errorf("no client: %v", err)
	}
	if n := m.PerClient("10.0.0.1"); n != 3 {
		t.Errorf("PerClient = %d, want 3", n)
	}
	// An end frees a slot of its client (whoever sends the end).
	if _, err := m.Run(b, ids[0], sequence.End, add(1, &got)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(a, 0, sequence.Start, add(1, &got)); err != nil {
		t.Errorf("start after an end: %v", err)
	}
	// A sweep frees them all (none was used since the last sweep, after
	// one more).
	m.Sweep()
	m.Sweep()
	if n := m.PerClient("10.0.0.1"); n != 0 || m.Len() != 0 {
		t.Errorf("after two sweeps: PerClient %d, Len %d; want 0, 0", n, m.Len())
	}
	// A failed start does not count.
	fail := func(any) error { return context.Canceled }
	for range 5 {
		m.Run(a, 0, sequence.Start, fail)
	}
	if n := m.PerClient("10.0.0.1"); n != 0 {
		t.Errorf("after failed starts: PerClient %d, want 0", n)
	}
}

// TestFullPoolReclaimsIdle: with every slot taken, a start removes the
// sequences idle for IdleAfter itself (no sweep ran): a client that filled
// the pool and went quiet cannot hold it until the next sweep. Sequences
// that keep being used are not idle and stay.
func TestFullPoolReclaimsIdle(t *testing.T) {
	m := sequence.NewManager(sequence.Options{Name: "m/", MaxSequences: 4, MaxPerClient: -1, IdleAfter: 2 * time.Second}, newCounter)
	var got int
	var ids []uint64
	for range 4 {
		id, err := m.Run(context.Background(), 0, sequence.Start, add(1, &got))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_, err := m.Run(context.Background(), 0, sequence.Start, add(1, &got))
	wantCode(t, err, sequence.Unavailable, "Max sequence number")
	// ids[0] keeps being used; the others go quiet past IdleAfter.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := m.Run(context.Background(), ids[0], sequence.NoControl, add(1, &got)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := m.Run(context.Background(), 0, sequence.Start, add(1, &got)); err != nil {
		t.Fatalf("start into a pool of idle sequences: %v", err)
	}
	if m.Len() != 2 {
		t.Errorf("Len = %d after the reclaim, want 2 (the busy one and the new one)", m.Len())
	}
	if _, err := m.Run(context.Background(), ids[0], sequence.NoControl, add(1, &got)); err != nil {
		t.Errorf("the busy sequence was reclaimed: %v", err)
	}
	if _, err := m.Run(context.Background(), ids[1], sequence.NoControl, add(1, &got)); err == nil {
		t.Error("an idle sequence survived the reclaim")
	}
}
