package benchlat

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Recorder collects the duration of each timed call.
type Recorder struct {
	mu          sync.Mutex
	lat         []time.Duration
	first, last time.Time // start of the earliest call, end of the latest
}

// Time runs fn and records how long it took.
func (r *Recorder) Time(fn func()) {
	start := time.Now()
	fn()
	r.record(start, time.Now())
}

// TimeErr runs fn, records how long it took and returns its error. A
// failed call is not recorded: its latency says nothing about the path
// being measured.
func (r *Recorder) TimeErr(fn func() error) error {
	start := time.Now()
	err := fn()
	if err == nil {
		r.record(start, time.Now())
	}
	return err
}

// Loop times call on every iteration of b.Loop and reports, failing the
// benchmark on the first error: the whole body of a serial latency
// benchmark.
func Loop(b *testing.B, call func() error) {
	var r Recorder
	for b.Loop() {
		if err := r.TimeErr(call); err != nil {
			b.Fatal(err)
		}
	}
	r.Report(b)
}

func (r *Recorder) record(start, end time.Time) {
	r.mu.Lock()
	if len(r.lat) == 0 || start.Before(r.first) {
		r.first = start
	}
	if end.After(r.last) {
		r.last = end
	}
	r.lat = append(r.lat, end.Sub(start))
	r.mu.Unlock()
}

// Stats summarises the recorded calls: what Report reports, for code
// that compares runs (ratios, tables).
type Stats struct {
	Calls       int           // successful calls recorded
	P50, P99    time.Duration // nearest-rank percentiles of their latencies
	CallsPerSec float64       // Calls over the wall time they spanned; 0 when none
}

// Stats returns the summary of the calls recorded so far; the zero Stats
// when none was.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.lat)
	if n == 0 {
		return Stats{}
	}
	slices.Sort(r.lat)
	s := Stats{Calls: n, P50: Percentile(r.lat, 0.50), P99: Percentile(r.lat, 0.99)}
	if wall := r.last.Sub(r.first); wall > 0 {
		s.CallsPerSec = float64(n) / wall.Seconds()
	}
	return s
}

// Report adds p50-µs, p99-µs and calls/s to b's results. It does nothing
// when no call was recorded.
func (r *Recorder) Report(b *testing.B) {
	s := r.Stats()
	if s.Calls == 0 {
		return
	}
	b.ReportMetric(s.P50.Seconds()*1e6, "p50-µs")
	b.ReportMetric(s.P99.Seconds()*1e6, "p99-µs")
	if s.CallsPerSec > 0 {
		b.ReportMetric(s.CallsPerSec, "calls/s")
	}
}

// Percentile is the nearest-rank q-quantile (0 < q <= 1) of sorted
// durations; 0 for none.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ProcessCPU is the process's user+system CPU time. On a loaded machine,
// CPU time per call says more about the code than wall time.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RunCalls makes n calls from callers goroutines at once, each timed into
// r, and returns the wall time they took; it stops at the first error.
func RunCalls(n, callers int, r *Recorder, call func() error) (time.Duration, error) {
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := r.TimeErr(call); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

// PidCPU is the user+system CPU time of process pid, at the kernel's tick
// resolution (10 ms); 0 when unknown (no such process, not Linux).
func PidCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: state is field 3, utime and stime are fields 14 and 15.
	i := bytes.LastIndex(b, []byte(") "))
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const ticksPerSecond = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}
