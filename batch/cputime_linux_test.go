package batch

import (
	"runtime"
	"syscall"
	"testing"
)

// rusageThread is RUSAGE_THREAD: the CPU time of the calling thread only.
const rusageThread = 1

// reportCPUTime runs the benchmark loop body with the goroutine locked to
// its thread and reports the thread's CPU time per op ("cpu-ns/op") next to
// the wall time: on a loaded machine wall time mostly measures waiting for a
// core, thread CPU time measures the work.
func reportCPUTime(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(rusageThread, &before)
	n := 0
	for b.Loop() {
		body()
		n++
	}
	if syscall.Getrusage(rusageThread, &after) == nil && n > 0 {
		ns := func(r syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
		b.ReportMetric(float64(ns(after)-ns(before))/float64(n), "cpu-ns/op")
	}
}
