package sidecar

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// loaderNice is how much lower than the process's the priority of a
// model's transfer is: the host's copy into the replay store and its
// stream to the sidecar, and the sidecar's receipt of the stream (hashing
// and writing each chunk). On a machine whose cores the serving threads
// keep busy, the transfer then takes the cores they leave.
const loaderNice = 10

// nicedThreads bounds the transfers that run niced at once; more run at
// the normal priority rather than wait.
const nicedThreads = 4

// niced is the pool of niced OS threads (started at first use).
var niced struct {
	once sync.Once
	jobs chan func()
}

// runNiced runs fn on one of nicedThreads OS threads whose nice value is
// loaderNice more than the process's (at most 19), and returns when fn
// does; when every one is busy, fn runs on the caller's thread. Each thread
// is locked to a goroutine that never ends: a thread whose locked
// goroutine ends is terminated by the Go runtime, which would deliver the
// parent-death signal (Pdeathsig, SIGKILL) to every child process
// os/exec happened to fork from that thread (the sidecar, JS workers).
// The priority cannot be raised back (that takes CAP_SYS_NICE), so it
// stays on those threads alone. Work fn hands to other goroutines (gRPC's
// transport) runs at the normal priority. Where the priority cannot be
// set, fn runs anyway.
func runNiced(fn func()) {
	niced.once.Do(func() {
		niced.jobs = make(chan func())
		for range nicedThreads {
			go nicedWorker()
		}
	})
	done := make(chan struct{})
	select {
	case niced.jobs <- func() { defer close(done); fn() }:
		<-done
	default:
		fn()
	}
}

func nicedWorker() {
	runtime.LockOSThread() // never unlocked, and this goroutine never ends: see runNiced
	tid := unix.Gettid()
	// getpriority(2) returns 20 - nice.
	if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil {
		unix.Setpriority(unix.PRIO_PROCESS, tid, min(20-p+loaderNice, 19))
	}
	for job := range niced.jobs {
		job()
	}
}

// threadNice is the nice value of the calling OS thread (tests).
func threadNice() (int, error) {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	return 20 - p, err
}
