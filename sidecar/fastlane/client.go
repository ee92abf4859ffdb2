package fastlane

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

// ClientOptions configure a Client; the zero value of each field means its
// default.
type ClientOptions struct {
	// MaxConns bounds the connections of the pool, idle and busy; callers
	// beyond it wait for one (or for their deadline). 0 = 4*GOMAXPROCS.
	MaxConns int
	// MaxFrameBytes caps a frame's payload in either direction; 0 =
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
	// SpinWait is how long a call polls its connection for the answer
	// before it parks (see DefaultSpinWait, false); 0 = DefaultSpinWait, < 0 =
	// never poll.
	SpinWait time.Duration
}

// Client is a pool of fast-lane connections to one socket. A call checks
// out an idle connection (or dials one), writes its request, reads its
// answer on the calling goroutine and checks the connection back in. It is
// safe for concurrent use and does no I/O until the first call.
type Client struct {
	socket string
	opts   ClientOptions
	slots  chan struct{} // one per connection a caller may hold

	inFlight atomic.Int32 // calls in Predict
	paused   atomic.Bool  // SetPolling(false)

	mu     sync.Mutex
	idle   []*clientConn // most recently used last
	all    map[*clientConn]struct{}
	closed bool
}

// NewClient returns a client for the Unix socket at socketPath (used as
// given: no URL parsing).
func NewClient(socketPath string, opts ClientOptions) *Client {
	if opts.MaxConns <= 0 {
		opts.MaxConns = 4 * runtime.GOMAXPROCS(0)
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if opts.SpinWait == 0 {
		opts.SpinWait = DefaultSpinWait
	}
	return &Client{
		socket: socketPath,
		opts:   opts,
		slots:  make(chan struct{}, opts.MaxConns),
		all:    map[*clientConn]struct{}{},
	}
}

// Predict sends req and returns the sidecar's answer. Every error is typed:
// a whole-call error the sidecar answered keeps the type and message it had
// there; a failure to reach the sidecar, a transport or protocol failure, a
// cancellation or a passed deadline is a GRPC error naming the socket.
//
// The ctx deadline travels in the request (the sidecar stops the call when
// it passes) and bounds the wait here; a call abandoned by its ctx closes
// its connection. A call that fails on a pooled connection before any byte
// of the answer arrived (the sidecar restarted, say) is retried once on a
// new connection.
func (c *Client) Predict(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.ctxError(ctx)
	}
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	select {
	case c.slots <- struct{}{}:
	default:
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, c.errorf("no connection free before the call was abandoned: %w", context.Cause(ctx))
		}
	}
	defer func() { <-c.slots }()
	written := false // some attempt wrote the whole request
	for attempt := 0; ; attempt++ {
		cc, pooled, err := c.get(ctx)
		if err != nil {
			if !written && ctx.Err() == nil {
				return nil, fmt.Errorf("%w (%w)", err, ErrNotSent)
			}
			return nil, err
		}
		resp, err := cc.roundTrip(ctx, req)
		if cc.poisoned || pastDeadline(ctx) {
			// The ctx ended before the call returned, maybe with the
			// answer already in (its timer can fire late): the caller
			// gets its ctx error, as from gRPC. A connection whose I/O
			// the ctx's end may have interrupted, or that failed, is not
			// reused.
			var te *transportError
			if cc.poisoned || errors.As(err, &te) {
				c.discard(cc)
			} else {
				c.put(cc)
			}
			return nil, c.ctxError(ctx)
		}
		if err == nil {
			c.put(cc)
			return resp, nil
		}
		var te *transportError
		if !errors.As(err, &te) {
			c.put(cc) // the sidecar answered with an error: the connection is fine
			return nil, err
		}
		c.discard(cc)
		written = written || te.written
		switch {
		case ctx.Err() != nil:
			return nil, c.ctxError(ctx)
		case errors.Is(te.err, context.DeadlineExceeded):
			return nil, c.errorf("call abandoned: %w", te.err)
		case attempt == 0 && pooled && !te.answered && peerGone(te.err):
			// The connection died while idle: the sidecar is likely a new
			// one, so every idle connection is stale.
			c.closeIdle()
			continue
		}
		if !written {
			return nil, c.errorf("%w (%w)", te.err, ErrNotSent)
		}
		return nil, c.errorf("%w", te.err)
	}
}

// ErrNotSent is wrapped by the transport errors of a call whose request
// never reached the sidecar whole (its connection could not be made, or
// every write failed): the sidecar cannot have run it, so it is safe to
// retry once the sidecar is back.
var ErrNotSent = errors.New("the request was not sent")

// Wake tells the sidecar that a Predict is likely to follow soon, so that
// its reader polls for it instead of parking: the wake-up of the sidecar
// (tens of microseconds on an idle virtual CPU) then overlaps the caller's
// own work before the call, such as a script building its request. It
// writes one empty frame on the connection the next call will most
// likely use (the most recently used idle one) and returns; with no idle
// connection, or on any failure, it does nothing (a failed connection is
// dropped). It never blocks on the sidecar.
func (c *Client) Wake() {
	if c.paused.Load() {
		return
	}
	c.mu.Lock()
	n := len(c.idle)
	if c.closed || n == 0 {
		c.mu.Unlock()
		return
	}
	cc := c.idle[n-1]
	c.idle = c.idle[:n-1]
	c.mu.Unlock()
	var b [len(Magic) + HeaderLen]byte
	w := b[:0]
	if !cc.hello { // its first call failed before writing (an encoding error)
		w = append(w, Magic...)
	}
	w = AppendHeader(w, Frame{Kind: KindWake}, 0)
	// An idle connection's send buffer is empty, so 24 bytes never block.
	if _, err := cc.w.Write(w); err != nil {
		c.discard(cc)
		return
	}
	cc.hello = true
	c.put(cc)
}

// SetPolling turns the client's polling on (the default) or off: off, its
// calls park for their answers at once and Wake does nothing. A caller
// that knows the machine's CPUs are all in use (a JS worker whose host
// runs other chunks at the same time: jsworker) turns it off, so that
// neither its polling nor the sidecar's, which a wake starts, takes a CPU
// another process needs.
func (c *Client) SetPolling(on bool) { c.paused.Store(!on) }

func (c *Client) errorf(format string, args ...any) error {
	return inferr.Errorf(inferr.GRPC, "sidecar fast lane %q: "+format, append([]any{c.socket}, args...)...)
}

// ctxError is the error of a call whose ctx ended (or whose deadline
// passed before its timer fired).
func (c *Client) ctxError(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	return c.errorf("call abandoned: %w", cause)
}

func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// peerGone reports whether err says the peer closed the connection.
func peerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// get checks out an idle connection (pooled) or dials a new one.
func (c *Client) get(ctx context.Context) (*clientConn, bool, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false, c.errorf("the client is closed")
	}
	if n := len(c.idle); n > 0 {
		cc := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return cc, true, nil
	}
	c.mu.Unlock()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, c.ctxError(ctx)
		}
		return nil, false, c.errorf("dial: %w", err)
	}
	cc := &clientConn{nc: nc, max: c.opts.MaxFrameBytes}
	cc.br = bufio.NewReaderSize(&cc.counter, 16<<10)
	cc.w = NewConnWriter(nc)
	sr := newSpinReader(nc, c.opts.SpinWait, false, &c.inFlight, 1, processSlots)
	sr.paused = &c.paused
	cc.counter.r = sr
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, false, c.errorf("the client is closed")
	}
	c.all[cc] = struct{}{}
	c.mu.Unlock()
	return cc, false, nil
}

func (c *Client) put(cc *clientConn) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cc.nc.Close()
		return
	}
	c.idle = append(c.idle, cc)
	c.mu.Unlock()
}

func (c *Client) discard(cc *clientConn) {
	cc.nc.Close()
	c.mu.Lock()
	delete(c.all, cc)
	c.mu.Unlock()
}

func (c *Client) closeIdle() {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	for _, cc := range idle {
		delete(c.all, cc)
	}
	c.mu.Unlock()
	for _, cc := range idle {
		cc.nc.Close()
	}
}

// Close closes every connection; calls in flight fail with GRPC errors and
// later calls too.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	all := c.all
	c.all = map[*clientConn]struct{}{}
	c.idle = nil
	c.mu.Unlock()
	for cc := range all {
		cc.nc.Close()
	}
	return nil
}

// clientConn is one connection, used by one caller at a time.
type clientConn struct {
	nc      net.Conn
	w       *ConnWriter // writes nc
	br      *bufio.Reader
	counter countingReader
	max     int
	wbuf    []byte // magic, header and request, reused
	rbuf    []byte // the answer's payload, reused
	nextID  uint64
	hello   bool // the magic has been sent
	// poisoned: the ctx ended during the call (its AfterFunc ran and set
	// a past deadline on nc): the call fails and nc is not reused.
	poisoned bool
}

// countingReader counts the bytes read, to tell a connection that died
// before the answer started from one that died within it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// transportError is a failure of the connection (not an answer).
type transportError struct {
	err      error
	answered bool // some bytes of the answer had arrived
	written  bool // the whole request was written
}

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// aLongTimeAgo is a deadline in the past, to unblock I/O at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip writes one request and reads its answer. A non-transport
// error is the sidecar's typed answer.
func (cc *clientConn) roundTrip(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
	cc.nextID++
	id := cc.nextID
	f := Frame{Kind: KindRequest, ID: id}
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, &transportError{err: context.DeadlineExceeded}
		}
		f.TimeoutMicros = uint64((left + time.Microsecond - 1) / time.Microsecond)
	}
	b := append(cc.wbuf[:0], Magic...)
	b, err := proto.MarshalOptions{}.MarshalAppend(AppendHeader(b, f, 0), req)
	if err != nil {
		return nil, inferr.Errorf(inferr.InputParsing, "fast lane: cannot encode the request: %v", err)
	}
	n := len(b) - len(Magic) - HeaderLen
	if n > cc.max {
		return nil, inferr.Errorf(inferr.GRPC, "fast lane: the request is %d bytes, more than the cap of %d", n, cc.max)
	}
	binary.LittleEndian.PutUint32(b[len(Magic)+4:], uint32(n))
	if cap(b) <= chunk {
		cc.wbuf = b
	}
	if !cc.hello {
		cc.hello = true
	} else {
		b = b[len(Magic):]
	}

	// The ctx's end (its deadline included: its own timer fires then)
	// unblocks the I/O below through a deadline in the past. A deadline
	// set on the connection per call would arm runtime timers per call,
	// which cost microseconds here (measured; see the package doc).
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { cc.nc.SetDeadline(aLongTimeAgo) })
		defer func() {
			if !stop() {
				cc.poisoned = true
			}
		}()
	}

	before := cc.counter.n
	written := false
	fail := func(err error) error {
		return &transportError{err: err, answered: cc.counter.n > before, written: written}
	}
	if _, err := cc.w.Write(b); err != nil {
		return nil, fail(err)
	}
	written = true
	ans, err := ReadFrame(cc.br, cc.rbuf, cc.max)
	if err != nil {
		return nil, fail(err)
	}
	if cap(ans.Payload) <= chunk {
		cc.rbuf = ans.Payload[:0]
	}
	if ans.ID != id || (ans.Kind != KindResponse && ans.Kind != KindError) {
		return nil, fail(fmt.Errorf("protocol error: a %s frame for call %d answered call %d", ans.Kind, ans.ID, id))
	}
	if ans.Kind == KindError {
		var e inferencepb.Error
		if err := proto.Unmarshal(ans.Payload, &e); err != nil {
			return nil, fail(fmt.Errorf("protocol error: an error frame that does not decode: %v", err))
		}
		t := inferr.Type(e.GetType())
		if t.String() != e.GetType().String() {
			t = inferr.Unknown
		}
		return nil, &inferr.Error{Type: t, Msg: e.GetDescription()}
	}
	resp := &inferencepb.PredictResponse{}
	if err := proto.Unmarshal(ans.Payload, resp); err != nil {
		return nil, fail(fmt.Errorf("protocol error: an answer that does not decode: %v", err))
	}
	return resp, nil
}
