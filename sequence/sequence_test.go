package sequence_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/sequence"
)

// counter is a sequence state: a running sum.
type counter struct{ sum int }

func newCounter() (any, error) { return &counter{}, nil }

func add(v int, got *int) func(any) error {
	return func(st any) error {
		c := st.(*counter)
		c.sum += v
		*got = c.sum
		return nil
	}
}

func wantCode(t *testing.T, err error, code sequence.Code, msg string) {
	t.Helper()
	got, ok := sequence.CodeOf(err)
	if !ok || got != code {
		t.Fatalf("error %v: class %v, want %v", err, got, code)
	}
	if !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), `model "m/"`) {
		t.Fatalf("error %q does not name the model and say %q", err, msg)
	}
}

func TestInterleavedSequencesKeepSeparateState(t *testing.T) {
	m := sequence.NewManager(sequence.Options{Name: "m/"}, newCounter)
	ctx := context.Background()
	var got int
	a, err := m.Run(ctx, 0, sequence.Start, add(1, &got))
	if err != nil || a == 0 || got != 1 {
		t.Fatalf("start without id: id %d, sum %d, err %v", a, got, err)
	}
	b, err := m.Run(ctx, 10, sequence.Start, add(100, &got))
	if err != nil || b != 10 || got != 100 {
		t.Fatalf("start with id 10: id %d, sum %d, err %v", b, got, err)
	}
	steps := []struct {
		id   uint64
		ctl  sequence.Control
		v    int
		want int
	}{{a, 0, 2, 3}, {b, 0, 200, 300}, {a, 0, 3, 6}, {b, sequence.End, 300, 600}, {a, sequence.End, 4, 10}}
	for _, s := range steps {
		id, err := m.Run(ctx, s.id, s.ctl, add(s.v, &got))
		if err != nil || id != s.id || got != s.want {
			t.Fatalf("sequence %d +%d: id %d, sum %d, err %v; want sum %d", s.id, s.v, id, got, err, s.want)
		}
	}
	if m.Len() != 0 {
		t.Fatalf("%d sequences left after both ended", m.Len())
	}
	// An ended id starts afresh.
	if _, err := m.Run(ctx, b, sequence.Start, add(5, &got)); err != nil || got != 5 {
		t.Fatalf("restart of %d: sum %d, err %v; want 5 (no state from the ended sequence)", b, got, err)
	}
}

// Assigned ids are unguessable: random over [1, MaxAssignedID], not
// counted (a second caller must not find the first one's id next to its
// own), and each survives a JavaScript number (a float64) exactly.
func TestAssignedIDsAreRandom(t *testing.T) {
	const n = 2000
	m := sequence.NewManager(sequence.Options{Name: "m/", MaxSequences: n + 1}, newCounter)
	var got int
	// A client takes 2; it stays its own.
	if _, err := m.Run(context.Background(), 2, sequence.Start, add(0, &got)); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{2: true}
	high, near := 0, 0
	var prev uint64
	for range n {
		id, err := m.Run(context.Background(), 0, sequence.Start, add(0, &got))
		if err != nil {
			t.Fatal(err)
		}
		if id == 0 || id > sequence.MaxAssignedID || seen[id] {
			t.Fatalf("assigned id %d is 0, above MaxAssignedID or in use", id)
		}
		if uint64(float64(id)) != id {
			t.Fatalf("assigned id %d does not survive a float64", id)
		}
		seen[id] = true
		if id > sequence.MaxAssignedID/2 {
			high++
		}
		if id-prev < 1<<20 || prev-id < 1<<20 {
			near++
		}
		prev = id
	}
	// Half of uniform draws lie in the upper half (2000 draws: 1000 ± 22
	// for one standard deviation; the bounds are 9 of them); two draws
	// within 2^20 of each other happen once in 2^32.
	if high < 800 || high > 1200 || near > 1 {
		t.Fatalf("of %d assigned ids, %d in the upper half and %d within 2^20 of the one before: not uniform", n, high, near)
	}
	// A client may still choose an id the server assigned once it is free.
	if _, err := m.Run(context.Background(), prev, sequence.End, add(0, &got)); err != nil {
		t.Fatal(err)
	}
	if id, err := m.Run(context.Background(), prev, sequence.Start, add(0, &got)); err != nil || id != prev {
		t.Fatalf("start with the freed id %d: id %d, err %v", prev, id, err)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	var got int
	m := sequence.NewManager(sequence.Options{Name: "m/", MaxSequences: 2}, newCounter)
	if _, err := m.Run(ctx, 7, sequence.Start, add(1, &got)); err != nil {
		t.Fatal(err)
	}
	_, err := m.Run(ctx, 7, sequence.Start, add(1, &got))
	wantCode(t, err, sequence.AlreadyExists, sequence.MsgAlreadyExists)
	_, err = m.Run(ctx, 8, sequence.NoControl, add(1, &got))
	wantCode(t, err, sequence.NotFound, sequence.MsgNotFound)
	_, err = m.Run(ctx, 8, sequence.End, add(1, &got))
	wantCode(t, err, sequence.NotFound, sequence.MsgNotFound)
	_, err = m.Run(ctx, 0, sequence.NoControl, add(1, &got))
	wantCode(t, err, sequence.InvalidArgument, sequence.MsgNoID)
	_, err = m.Run(ctx, 0, sequence.End, add(1, &got))
	wantCode(t, err, sequence.InvalidArgument, sequence.MsgNoID)
	_, err = m.Run(ctx, 7, 3, add(1, &got))
	wantCode(t, err, sequence.InvalidArgument, sequence.MsgBadControlValue)
	if _, err := m.Run(ctx, 0, sequence.Start, add(1, &got)); err != nil {
		t.Fatal(err)
	}
	_, err = m.Run(ctx, 0, sequence.Start, add(1, &got))
	wantCode(t, err, sequence.Unavailable, sequence.MsgLimit)
	_, err = m.Run(ctx, 9, sequence.Start, add(1, &got))
	wantCode(t, err, sequence.Unavailable, sequence.MsgLimit)
	// Ending one frees a place.
	if _, err := m.Run(ctx, 7, sequence.End, add(1, &got)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(ctx, 9, sequence.Start, add(1, &got)); err != nil {
		t.Fatalf("start after an end freed a place: %v", err)
	}
	for code, want := range map[sequence.Code]int{sequence.InvalidArgument: 400, sequence.NotFound: 404, sequence.AlreadyExists: 409, sequence.Unavailable: 503, sequence.FailedPrecondition: 412} {
		if code.HTTPStatus() != want {
			t.Errorf("%v: HTTP %d, want %d", code, code.HTTPStatus(), want)
		}
	}
}

// A start with the id of a sequence whose end request is still running is
// FAILED_PRECONDITION.
func TestStartWhileEnding(t *testing.T) {
	ctx := context.Background()
	m := sequence.NewManager(sequence.Options{Name: "m/"}, newCounter)
	var got int
	if _, err := m.Run(ctx, 5, sequence.Start, add(1, &got)); err != nil {
		t.Fatal(err)
	}
	inEnd, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := m.Run(ctx, 5, sequence.End, func(any) error {
			close(inEnd)
			<-release
			return nil
		})
		done <- err
	}()
	<-inEnd
	_, err := m.Run(ctx, 5, sequence.Start, add(1, &got))
	wantCode(t, err, sequence.FailedPrecondition, "set for termination")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := m.Run(ctx, 5, sequence.Start, add(1, &got)); err != nil {
		t.Fatalf("start after the end finished: %v", err)
	}
}

// A failed start leaves no sequence behind.
func TestFailedStartDropsSequence(t *testing.T) {
	m := sequence.NewManager(sequence.Options{Name: "m/"}, newCounter)
	boom := errors.New("boom")
	if _, err := m.Run(context.Background(), 3, sequence.Start, func(any) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if m.Len() != 0 {
		t.Fatalf("%d sequences after a failed start", m.Len())
	}
}

// Requests of one sequence are serialised; different sequences run in
// parallel (each of two sequences waits inside fn for the other).
func TestSerialisedPerSequenceParallelAcross(t *testing.T) {
	ctx := context.Background()
	m := sequence.NewManager(sequence.Options{Name: "m/"}, newCounter)
	for _, id := range []uint64{1, 2} {
		if _, err := m.Run(ctx, id, sequence.Start, func(any) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// Parallel: both must be inside fn at once or this deadlocks (hang
	// guard below).
	var both sync.WaitGroup
	both.Add(2)
	errc := make(chan error, 2)
	for _, id := range []uint64{1, 2} {
		go func() {
			_, err := m.Run(ctx, id, 0, func(any) error { both.Done(); both.Wait(); return nil })
			errc <- err
		}()
	}
	for range 2 {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("two sequences did not run in parallel")
		}
	}
}

func TestSerialised(t *testing.T) {
	ctx := context.Background()
	m := sequence.NewManager(sequence.Options{Name: "m/"}, func() (any, error) { return &counter{}, nil })
	if _, err := m.Run(ctx, 1, sequence.Start, func(any) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := m.Run(ctx, 1, 0, func(st any) error { st.(*counter).sum++; return nil }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var got int
	if _, err := m.Run(ctx, 1, sequence.End, add(0, &got)); err != nil || got != 400 {
		t.Fatalf("sum %d, err %v; want 400", got, err)
	}
}

func TestSweepRemovesIdleSequences(t *testing.T) {
	ctx := context.Background()
	var got int
	m := sequence.NewManager(sequence.Options{Name: "m/"}, newCounter)
	for _, id := range []uint64{1, 2} {
		if _, err := m.Run(ctx, id, sequence.Start, add(1, &got)); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Sweep(); n != 0 {
		t.Fatalf("first sweep removed %d sequences used since the start", n)
	}
	if _, err := m.Run(ctx, 1, 0, add(1, &got)); err != nil {
		t.Fatal(err)
	}
	if n := m.Sweep(); n != 1 {
		t.Fatalf("second sweep removed %d, want 1 (sequence 2 was idle)", n)
	}
	if _, err := m.Run(ctx, 2, 0, add(1, &got)); err == nil {
		t.Fatal("the swept sequence 2 still answers")
	} else {
		wantCode(t, err, sequence.NotFound, sequence.MsgNotFound)
	}
	if _, err := m.Run(ctx, 1, 0, add(1, &got)); err != nil || got != 3 {
		t.Fatalf("sequence 1 after the sweep: sum %d, err %v; want 3", got, err)
	}

	off := sequence.NewManager(sequence.Options{Name: "m/", NoIdleCleanup: true}, newCounter)
	if _, err := off.Run(ctx, 1, sequence.Start, add(1, &got)); err != nil {
		t.Fatal(err)
	}
	off.Sweep()
	if n := off.Sweep(); n != 0 || off.Len() != 1 {
		t.Fatalf("idle_sequence_cleanup false: swept %d, %d left", n, off.Len())
	}
}

func TestCloseDropsSequences(t *testing.T) {
	ctx := context.Background()
	var got int
	m := sequence.NewManager(sequence.Options{Name: "m/"}, newCounter)
	if _, err := m.Run(ctx, 1, sequence.Start, add(1, &got)); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if m.Len() != 0 {
		t.Fatalf("%d sequences after Close", m.Len())
	}
	for _, ctl := range []sequence.Control{0, sequence.Start, sequence.End} {
		if _, err := m.Run(ctx, 1, ctl, add(1, &got)); !errors.Is(err, sequence.ErrClosed) {
			t.Fatalf("control %d after Close: %v, want ErrClosed", ctl, err)
		}
	}
}

// A request waiting for its sequence gives up when its context ends.
func TestWaitRespectsContext(t *testing.T) {
	m := sequence.NewManager(sequence.Options{Name: "m/"}, newCounter)
	if _, err := m.Run(context.Background(), 1, sequence.Start, func(any) error { return nil }); err != nil {
		t.Fatal(err)
	}
	in, release := make(chan struct{}), make(chan struct{})
	go m.Run(context.Background(), 1, 0, func(any) error { close(in); <-release; return nil })
	<-in
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Run(ctx, 1, 0, func(any) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	close(release)
}

func TestParseCode(t *testing.T) {
	for c := sequence.InvalidArgument; c <= sequence.FailedPrecondition; c++ {
		if got, ok := sequence.ParseCode(c.String()); !ok || got != c || !c.Valid() {
			t.Errorf("sequence.ParseCode(%q) = %v %v", c.String(), got, ok)
		}
	}
	if _, ok := sequence.ParseCode("OK"); ok || sequence.Code(0).Valid() || sequence.Code(6).Valid() {
		t.Error("unknown classes must not parse or be valid")
	}
}
