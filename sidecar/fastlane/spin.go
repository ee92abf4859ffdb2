package fastlane

import (
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultSpinWait is how long a reader polls its socket for the next frame
// before it parks in the runtime's network poller (ClientOptions.SpinWait,
// ServerOptions.SpinWait).
//
// Why poll: on a quiet machine most of a round trip across two processes
// is wake-ups, not work. A reader parked in the poller costs its writer a
// wake-up (the kernel wakes the poller thread, which readies the
// goroutine, which may need another thread woken to run it), and each
// costs microseconds on a virtual CPU that has gone idle. A reader that
// polls the socket with non-blocking reads sees the bytes as soon as the
// writer's write returns, and that write wakes nobody. Measured on two
// vCPUs (bench/, one ONNX MLP call): polling on both ends took the round
// trip from 44-48µs to 15µs p50 at batch 1, and from 64-80µs to 21µs at
// batch 64; polling on the client alone changed nothing (the sidecar's
// wake-up is the cost).
//
// The price is CPU while polling, so polling is bounded:
//   - in time: SpinWait per read, then the reader parks;
//   - in number: at most one reader of a client process polls at once
//     (processSlots), and none while other calls of its client are in
//     flight: then the CPUs are theirs, and a polling reader would be
//     served ahead of the rest (measured with 8 callers: the same
//     throughput, but p99 4.5ms where it is 1.1-1.3ms without polling).
//     A server's readers, each waiting for its own client's next request,
//     have one slot per P (newServerSlots);
//   - by need: the sidecar's readers (adaptive) stop polling after a wait
//     longer than the window (a client that pauses between calls, as
//     bidding code does) and poll again when a probe (one read in
//     probeEvery) or a short wait shows the client is back to back. The
//     client always polls for its answer, so a sidecar that parked still
//     finds it polling, and the two settle back into polling (with a
//     client that parked too, both could stay parked: measured, round
//     trips stuck at 75-90µs);
//   - by courtesy: between polls the reader yields its CPU
//     (sched_yield), so on a busy machine the peer it waits for still gets
//     to run. Without the yield, round trips with other processes running
//     stuck at 140µs (the poller held the CPU its peer needed until the
//     scheduler preempted it); with it, 21-25µs.
const DefaultSpinWait = 50 * time.Microsecond

// DefaultWakeSpinWait is how long a server's reader polls for the request
// a wake frame announced (Client.Wake). Longer than DefaultSpinWait: a
// bidding script builds its request between the wake and the request,
// and at batch 64 that takes tens of microseconds in goja.
const DefaultWakeSpinWait = 200 * time.Microsecond

// spinSlots bounds how many readers poll at once.
type spinSlots struct {
	n   atomic.Int32
	max int32
}

// take counts the caller in as polling, unless max already are; the
// caller gives the slot back with give.
func (s *spinSlots) take() bool {
	for {
		n := s.n.Load()
		if n >= s.max {
			return false
		}
		if s.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *spinSlots) give() { s.n.Add(-1) }

// processSlots are the polling slots of a process's clients (Client and
// ExpectReader): one, so that the other CPUs stay free for the work being
// waited for. A server's readers have slots of their own
// (newServerSlots).
var processSlots = &spinSlots{max: 1}

// newServerSlots returns the polling slots of a server's readers: one per
// P. Each of a server's connections is a client waiting for its answers
// (a JS worker process, each with one call at a time), and a reader that
// parks costs its next request a wake-up in the network poller, which
// costs more CPU than polling: measured under load (20 interest groups per
// request, 4 JS worker processes on 2 CPUs), the sidecar's CPU per call
// fell from 31-40µs to 21-23µs with a slot per P rather than one slot
// and no polling while another call was in flight, and the request p99
// from 40-48ms to 30-31ms. A reader polls only while holding its P, so
// more slots than Ps would never be used.
func newServerSlots() *spinSlots {
	return &spinSlots{max: int32(max(1, runtime.GOMAXPROCS(0)))}
}

// spinReader reads a connection, polling it for up to spin before it
// parks in the network poller (see DefaultSpinWait). Reads on a connection
// without a raw fd (not a *net.UnixConn) or with spin <= 0 just read.
type spinReader struct {
	nc   net.Conn
	rc   syscall.RawConn
	spin time.Duration
	// adaptive: poll only while the peer is quick (the sidecar's readers,
	// waiting for a client's next request); a client waiting for its
	// answer polls every time.
	adaptive bool
	busy     *atomic.Int32 // calls in flight; nil: not counted
	alone    int32         // poll only while *busy <= alone
	slots    *spinSlots
	paused   *atomic.Bool  // set: do not poll; nil: never paused
	slow     bool          // the last read waited spin or more
	woken    time.Duration // > 0: poll the next read this long (a wake frame came)
	reads    uint32

	// The state of the read in progress, shared with readOnce.
	poll     func(fd uintptr) bool // r.readOnce
	p        []byte
	n        int
	rerr     error
	spinning bool // holds a spin slot
	start    time.Time
	window   time.Duration // spin, or the wake's
}

// probeEvery: a reader that has stopped polling still polls one read in
// this many, to see whether its peer has become quick.
const probeEvery = 16

// newSpinReader returns a reader of nc that polls for up to spin, and
// only while busy (the calls in flight of its client or server) is at
// most alone: with other calls in flight, the CPU polling would take is
// theirs, and the one reader allowed to poll would be served ahead of the
// others (measured with 8 callers: p50 17µs, p99 4.5ms; without polling
// under load, the same throughput with p99 1ms).
func newSpinReader(nc net.Conn, spin time.Duration, adaptive bool, busy *atomic.Int32, alone int32, slots *spinSlots) *spinReader {
	r := &spinReader{nc: nc, spin: spin, adaptive: adaptive, busy: busy, alone: alone, slots: slots}
	r.poll = r.readOnce
	if sc, ok := nc.(syscall.Conn); ok && spin > 0 {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
		}
	}
	return r
}

func (r *spinReader) Read(p []byte) (int, error) {
	if r.rc == nil || len(p) == 0 {
		return r.nc.Read(p)
	}
	r.reads++
	r.window = r.spin
	if r.woken > 0 {
		r.window, r.woken = r.woken, 0
		r.slow = false
	}
	r.spinning = (!r.adaptive || !r.slow || r.reads%probeEvery == 0) &&
		(r.busy == nil || r.busy.Load() <= r.alone) &&
		(r.paused == nil || !r.paused.Load()) && r.slots.take()
	r.start = time.Now()
	r.p = p
	err := r.rc.Read(r.poll)
	r.p = nil
	if r.spinning {
		r.spinning = false
		r.slots.give()
	}
	r.slow = time.Since(r.start) >= r.spin
	n, rerr := r.n, r.rerr
	r.n, r.rerr = 0, nil
	if err != nil {
		// The poller's error: a deadline passed or the connection closed.
		return 0, err
	}
	if rerr != nil {
		return 0, &net.OpError{Op: "read", Net: "unix", Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// wake makes the next read poll for d (when d > 0 and polling is on):
// the peer said a frame is coming.
func (r *spinReader) wake(d time.Duration) {
	if r.rc != nil && d > 0 {
		r.woken = d
	}
}

// readOnce is what RawConn.Read calls (bound once, in r.poll, so that a
// read allocates nothing): it reads, polling while r.spinning and the
// window lasts, and reports false to park until the socket is readable.
func (r *spinReader) readOnce(fd uintptr) bool {
	for {
		n, errno := rawRead(fd, r.p)
		if errno != syscall.EAGAIN {
			if errno == syscall.EINTR {
				continue
			}
			r.n, r.rerr = n, nil
			if errno != 0 {
				r.rerr = errno
			}
			return true
		}
		if r.spinning && time.Since(r.start) < r.window {
			// Give the CPU to any other runnable thread (the peer, on a
			// busy machine) before polling again.
			yieldCPU()
			continue
		}
		if r.spinning {
			r.spinning = false
			r.slots.give()
		}
		return false // park until readable (or the deadline)
	}
}
