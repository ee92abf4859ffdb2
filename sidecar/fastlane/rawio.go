package fastlane

import (
	"net"
	"os"
	"syscall"
)

// The hot path's reads and writes (a request, an answer, a poll) are
// non-blocking system calls made through syscall.RawConn with
// RawSyscall, not through net.Conn's Read and Write, which go through
// syscall.Syscall. The difference is the runtime's bookkeeping: a
// syscall.Syscall enters the scheduler's syscall state, and in a process
// whose Ps have all gone idle (a JS worker waiting for its answer, with
// GOMAXPROCS 1) that wakes the runtime's monitor thread (sysmon), which
// then polls every 20µs until the process is idle again. Measured under
// load (20 interest groups per request, 4 JS workers on 2 CPUs), sysmon
// and its wake-ups were 5% of the machine's CPU, about 8µs per interest
// group. A non-blocking call returns at once (EAGAIN when it would
// block, and the caller then parks in the network poller as before), so
// it never needs the syscall state's hand-off of its P.

// ConnWriter writes whole buffers to a connection with raw non-blocking
// writes, parking in the network poller while the socket's buffer is
// full (deadlines set on the connection still apply). A connection
// without a raw descriptor (not a syscall.Conn: net.Pipe in tests) is
// written with its own Write.
type ConnWriter struct {
	nc net.Conn
	rc syscall.RawConn
	fn func(fd uintptr) bool // w.writeOnce, bound once: a write allocates nothing

	// The write in progress, shared with writeOnce.
	b   []byte
	off int
	err syscall.Errno
}

func NewConnWriter(nc net.Conn) *ConnWriter {
	w := &ConnWriter{nc: nc}
	w.fn = w.writeOnce
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			w.rc = rc
		}
	}
	return w
}

// Write writes all of b or fails; on failure some of b may have been
// written.
func (w *ConnWriter) Write(b []byte) (int, error) {
	if w.rc == nil {
		return w.nc.Write(b)
	}
	w.b, w.off, w.err = b, 0, 0
	err := w.rc.Write(w.fn)
	n, errno := w.off, w.err
	w.b, w.off, w.err = nil, 0, 0
	if err != nil {
		return n, err // the poller's: a deadline passed or the connection closed
	}
	if errno != 0 {
		return n, &net.OpError{Op: "write", Net: "unix", Source: w.nc.LocalAddr(), Addr: w.nc.RemoteAddr(), Err: os.NewSyscallError("write", errno)}
	}
	return n, nil
}

// writeOnce is what RawConn.Write calls: it writes until done, an error,
// or a full buffer (false: park until writable).
func (w *ConnWriter) writeOnce(fd uintptr) bool {
	for w.off < len(w.b) {
		n, errno := rawWrite(fd, w.b[w.off:])
		switch errno {
		case 0:
			w.off += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.err = errno
			return true
		}
	}
	return true
}
