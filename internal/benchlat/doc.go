// Package benchlat records per-call latency in benchmarks and reports it
// the same way everywhere: p50-µs and p99-µs (nearest-rank percentiles of
// the timed calls) and calls/s (timed calls over the wall time from the
// first call's start to the last call's end, so a RunParallel benchmark
// reports the throughput of all its goroutines together).
//
// A zero Recorder is ready to use; one Recorder serves one benchmark run:
//
//	var r benchlat.Recorder
//	for b.Loop() {
//		r.Time(func() { ... })
//	}
//	r.Report(b)
//
// Time and TimeErr are safe to call from RunParallel's goroutines.
package benchlat
