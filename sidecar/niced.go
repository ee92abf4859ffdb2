package sidecar

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// loaderNice is how much lower than the process's the priority of a
// model's transfer is: the host's copy into the replay store and its
// stream to the sidecar, and the sidecar's receipt of the stream (hashing
// and writing each chunk). On a machine whose cores the serving threads
// keep busy, the load then takes the cores they leave (issue 28: a small
// model's p99 tripled while 3 x 114 MiB models loaded at the same
// priority).
const loaderNice = 10

// runNiced runs fn on an OS thread of its own whose nice value is raised
// by loaderNice (at most 19), and returns when fn does. The goroutine keeps
// the thread locked and never unlocks it, so the thread ends with the
// goroutine and the lowered priority never passes to another goroutine
// (nor can it be raised back: that takes CAP_SYS_NICE). Work fn hands to
// other goroutines (gRPC's transport) runs at normal priority. Where the
// priority cannot be set, fn runs anyway.
func runNiced(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: see above
		tid := unix.Gettid()
		// getpriority(2) returns 20 - nice.
		if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil {
			unix.Setpriority(unix.PRIO_PROCESS, tid, min(20-p+loaderNice, 19))
		}
		fn()
	}()
	<-done
}

// threadNice is the nice value of the calling OS thread (tests).
func threadNice() (int, error) {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	return 20 - p, err
}
