package benchlat

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(i))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 100}, {0.99, 198}, {1, 200}, {0.001, 1}} {
		if got := Percentile(d, c.q); got != c.want {
			t.Errorf("Percentile(1..200, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := Percentile(nil, 0.5); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
	if got := Percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("Percentile([7], 0.99) = %v, want 7", got)
	}
}

// TestRecorderConcurrent records from many goroutines (run with -race)
// and checks every successful call is kept and failed ones are not.
func TestRecorderConcurrent(t *testing.T) {
	var r Recorder
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				r.Time(func() {})
				err := r.TimeErr(func() error {
					if (g+i)%2 == 0 {
						return errTest
					}
					return nil
				})
				if (err != nil) != ((g+i)%2 == 0) {
					t.Errorf("TimeErr returned %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := len(r.lat), 8*100+8*50; got != want {
		t.Fatalf("recorded %d calls, want %d", got, want)
	}
	if r.last.Before(r.first) {
		t.Fatalf("first %v after last %v", r.first, r.last)
	}
}

func TestStats(t *testing.T) {
	var r Recorder
	if got := r.Stats(); got != (Stats{}) {
		t.Fatalf("empty Recorder: Stats() = %+v, want zero", got)
	}
	base := time.Unix(1000, 0)
	// 100 calls of 1..100 µs, back to back: the wall time is their sum.
	at := base
	for i := 100; i >= 1; i-- {
		d := time.Duration(i) * time.Microsecond
		r.record(at, at.Add(d))
		at = at.Add(d)
	}
	s := r.Stats()
	if s.Calls != 100 || s.P50 != 50*time.Microsecond || s.P99 != 99*time.Microsecond {
		t.Fatalf("Stats() = %+v, want 100 calls, p50 50µs, p99 99µs", s)
	}
	wall := at.Sub(base).Seconds()
	if want := 100 / wall; s.CallsPerSec < want*0.999 || s.CallsPerSec > want*1.001 {
		t.Fatalf("CallsPerSec = %v, want %v", s.CallsPerSec, want)
	}
}

type testError struct{}

func (testError) Error() string { return "test error" }

var errTest error = testError{}

func BenchmarkRecorder(b *testing.B) {
	var r Recorder
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Time(func() { time.Sleep(time.Microsecond) })
		}
	})
	r.Report(b)
}

func TestPidCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Burn CPU until the kernel's tick counter moves.
	before := PidCPU(os.Getpid())
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for PidCPU(os.Getpid()) == before && time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
	}
	after := PidCPU(os.Getpid())
	if after <= before {
		t.Fatalf("PidCPU did not grow while burning CPU: %v then %v (x=%d)", before, after, x)
	}
	if self := ProcessCPU(); after > self+20*time.Millisecond {
		t.Errorf("PidCPU(self) = %v, more than getrusage's %v", after, self)
	}
	if got := PidCPU(-1); got != 0 {
		t.Errorf("PidCPU(-1) = %v, want 0", got)
	}
}

func TestRunCalls(t *testing.T) {
	var r Recorder
	var calls atomic.Int64
	if _, err := RunCalls(100, 4, &r, func() error { calls.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 100 || r.Stats().Calls != 100 {
		t.Errorf("%d calls, %d recorded; want 100", calls.Load(), r.Stats().Calls)
	}
	boom := errors.New("boom")
	_, err := RunCalls(100, 4, &Recorder{}, func() error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}
