package fastlane

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// ExpectReader reads a connection that one goroutine reads all the time (a
// read loop, as both ends of a JS worker's connection have), polling it
// while its owner expects a frame soon and parking in the network poller
// otherwise.
//
// A read loop is parked in the poller most of the time, so a frame sent to
// it costs the same wake-ups that DefaultSpinWait describes. The owner
// knows when an answer is due (it just sent the request) or the next
// request likely (it just answered one): Expect(d) makes reads poll for
// the next d, with non-blocking reads and the CPU yielded between them, and
// wakes a read parked in the poller to do so (through a read deadline in
// the past, which the read clears: the owner must set no deadline of its
// own on the connection). Settle ends the polling early. Polling counts
// against the process's polling readers (at most one at a time, shared
// with the fast lane's clients and servers): a reader that finds the slot
// taken parks.
//
// Read is for the read loop alone; Expect and Settle may be called from
// any goroutine.
type ExpectReader struct {
	nc net.Conn
	rc syscall.RawConn

	// until is the nanotime until which reads poll; 0: none.
	until atomic.Int64
	// parked is set while a read is parked in the poller (or about to
	// park): Expect wakes it.
	parked atomic.Bool

	// The state of the read in progress, shared with readOnce.
	poll     func(fd uintptr) bool // r.readOnce
	p        []byte
	n        int
	rerr     error
	spinning bool // holds a spin slot
}

// NewExpectReader returns a reader of nc. A connection without a raw file
// descriptor (not a *net.UnixConn) is read plainly: Expect does nothing.
func NewExpectReader(nc net.Conn) *ExpectReader {
	r := &ExpectReader{nc: nc}
	r.poll = r.readOnce
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
		}
	}
	return r
}

// Expect makes reads poll for the next d (d <= 0: nothing changes): a
// frame is expected. A read parked in the poller is woken to poll.
func (r *ExpectReader) Expect(d time.Duration) {
	if r.rc == nil || d <= 0 {
		return
	}
	r.until.Store(nanotime() + int64(d))
	if r.parked.Load() {
		_ = r.nc.SetReadDeadline(aLongTimeAgo)
	}
}

// Settle ends the polling Expect started: the frame came.
func (r *ExpectReader) Settle() { r.until.Store(0) }

// Read reads into p: at once what has arrived, else polling while a frame
// is expected, else parked until something arrives.
func (r *ExpectReader) Read(p []byte) (int, error) {
	if r.rc == nil || len(p) == 0 {
		return r.nc.Read(p)
	}
	r.p = p
	var err error
	for {
		err = r.rc.Read(r.poll)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		// Expect woke the parked read (no other deadline is ever set):
		// clear the deadline and read again, polling now.
		_ = r.nc.SetReadDeadline(time.Time{})
	}
	r.p = nil
	r.parked.Store(false)
	r.stopSpinning()
	n, rerr := r.n, r.rerr
	r.n, r.rerr = 0, nil
	if err != nil {
		return 0, err // the poller's: the connection closed
	}
	if rerr != nil {
		return 0, &net.OpError{Op: "read", Net: "unix", Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// wantPoll reports whether the read should poll again rather than park,
// taking a spin slot for it when it holds none.
func (r *ExpectReader) wantPoll() bool {
	until := r.until.Load()
	if until == 0 || nanotime() >= until {
		return false
	}
	if !r.spinning {
		r.spinning = processSlots.take()
	}
	return r.spinning
}

func (r *ExpectReader) stopSpinning() {
	if r.spinning {
		r.spinning = false
		processSlots.give()
	}
}

// readOnce is what RawConn.Read calls: it reads, polling while a frame is
// expected, and reports false to park until the socket is readable (or
// Expect wakes it).
func (r *ExpectReader) readOnce(fd uintptr) bool {
	r.parked.Store(false)
	for {
		// syscall.Read, not rawRead: a JS worker's frame from its host
		// starts a chunk, and this system call is what wakes the
		// runtime's monitor (sysmon) from its deep sleep in a worker
		// whose one P was idle. Asleep, sysmon neither preempts a script
		// that loops nor polls the network for the host's cancel frame
		// (with GOMAXPROCS 1 no other P does): with rawRead here,
		// jsworker's TestCancelledRequest failed (a loop cancelled at
		// 200ms ran to its 5s deadline). It costs once per chunk, not
		// per call.
		r.n, r.rerr = syscall.Read(int(fd), r.p)
		if r.rerr != syscall.EAGAIN {
			if r.rerr == syscall.EINTR {
				continue
			}
			if r.rerr != nil {
				r.n = 0
			}
			return true
		}
		if r.wantPoll() {
			yieldCPU()
			continue
		}
		r.stopSpinning()
		// Announce the park, then look once more: an Expect that came
		// before the announcement is seen here, one after it sees parked
		// and wakes the read.
		r.parked.Store(true)
		if r.wantPoll() {
			r.parked.Store(false)
			continue
		}
		return false
	}
}
