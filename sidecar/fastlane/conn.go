package fastlane

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/timerless"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

// handoffDelay is how long a request may run on the goroutine that read it
// before the watchdog gives the reading of its connection to a new
// goroutine (which then sees cancel frames and the connection's end), and
// the watchdog's tick while calls are in flight. It matches the ONNX
// backend's cancelableRun: a call shorter than this is not worth stopping.
var handoffDelay = 5 * time.Millisecond

// watchIdleTicks is how many ticks without a call in flight the watchdog
// waits before it sleeps until the next call.
const watchIdleTicks = 100

// epoch anchors nanotime.
var epoch = time.Now()

// nanotime is a monotonic clock reading, in nanoseconds since epoch (never
// 0 in practice, which the atomics below use for "none").
func nanotime() int64 { return int64(time.Since(epoch)) + 1 }

// serverConn is one fast-lane connection.
type serverConn struct {
	s      *Server
	nc     net.Conn
	w      *ConnWriter // writes nc, under wmu
	br     *bufio.Reader
	sr     *spinReader     // under br
	ctx    context.Context // cancelled when the connection ends
	cancel context.CancelFunc

	// inline is the sequence number of the request running on the reading
	// goroutine (0: none), inlineSince when it started; the watchdog
	// swaps inline to 0 to take the reading over.
	inline      atomic.Uint64
	inlineSince atomic.Int64
	seq         uint64 // of inline calls, owned by the reading goroutine

	wmu          sync.Mutex   // serialises writes
	writingSince atomic.Int64 // when the write in progress began (0: none)

	mu       sync.Mutex
	calls    map[uint64]*serverCall // in flight, by id
	draining bool
	closed   bool
}

func newServerConn(s *Server, nc net.Conn) *serverConn {
	sr := newSpinReader(nc, s.opts.SpinWait, true, nil, 0, s.spinSlots)
	c := &serverConn{s: s, nc: nc, w: NewConnWriter(nc), sr: sr, br: bufio.NewReaderSize(sr, 16<<10), calls: map[uint64]*serverCall{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// read reads frames until the connection ends, then closes it, which
// cancels its calls. A request runs on the reading goroutine itself (no
// goroutine start, no timer: each cost microseconds per call, measured);
// when it runs past handoffDelay, the watchdog starts a new reading
// goroutine and this one returns once its request is answered. A request
// that finds another frame already buffered behind it gets a goroutine of
// its own at once.
func (c *serverConn) read() {
	for {
		f, err := c.readFrame()
		if err != nil {
			c.logReadError(err)
			c.end()
			return
		}
		switch f.Kind {
		case KindRequest:
			ctx, ok := c.start(f)
			if !ok {
				c.end()
				return
			}
			if ctx == nil {
				continue // answered at once: the server is stopping
			}
			if c.br.Buffered() > 0 {
				go c.run(ctx, f)
				continue
			}
			c.seq++
			tok := c.seq
			c.inlineSince.Store(nanotime())
			c.inline.Store(tok)
			c.run(ctx, f) // start woke the watchdog
			if !c.inline.CompareAndSwap(tok, 0) {
				return // the watchdog handed the reading to a new goroutine
			}
		case KindWake:
			c.sr.wake(c.s.opts.WakeSpinWait)
		case KindCancel:
			c.mu.Lock()
			if sc := c.calls[f.ID]; sc != nil {
				sc.cancel(context.Canceled)
			}
			c.mu.Unlock()
		default:
			c.s.log.Warn("closing a fast-lane connection that sent a frame a client may not send", "kind", f.Kind, "id", f.ID)
			c.end()
			return
		}
	}
}

// end closes the connection after its reading has ended.
func (c *serverConn) end() {
	c.close()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	c.s.readers.Done()
}

// readFrame waits without a deadline for a frame to start, then reads it
// within FrameTimeout (no deadline is set when it is already buffered).
func (c *serverConn) readFrame() (Frame, error) {
	if _, err := c.br.Peek(1); err != nil {
		return Frame{}, err
	}
	need := HeaderLen
	if c.br.Buffered() >= HeaderLen {
		h, _ := c.br.Peek(HeaderLen)
		_, n, err := ParseHeader(h, c.s.opts.MaxFrameBytes)
		if err != nil {
			return Frame{}, err
		}
		need += n
	}
	if c.br.Buffered() < need {
		c.nc.SetReadDeadline(time.Now().Add(c.s.opts.FrameTimeout))
		defer c.nc.SetReadDeadline(time.Time{})
	}
	return ReadFrame(c.br, nil, c.s.opts.MaxFrameBytes)
}

func (c *serverConn) logReadError(err error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	switch {
	case closed, errors.Is(err, io.EOF):
		c.s.log.Debug("fast-lane connection ended", "err", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.s.log.Warn("closing a fast-lane connection that stalled mid-frame", "timeout", c.s.opts.FrameTimeout)
	default:
		c.s.log.Warn("closing a fast-lane connection", "err", err)
	}
}

// start registers a request and returns the context to run it with, or
// nil when it was answered at once (the server is stopping). It reports
// false when the connection must end (a duplicate id).
func (c *serverConn) start(f Frame) (context.Context, bool) {
	c.mu.Lock()
	if _, dup := c.calls[f.ID]; dup {
		c.mu.Unlock()
		c.s.log.Warn("closing a fast-lane connection that reused the id of a call in flight", "id", f.ID)
		return nil, false
	}
	if c.draining {
		c.mu.Unlock()
		c.writeError(f.ID, inferr.Errorf(inferr.GRPC, "the sidecar is shutting down"))
		return nil, true
	}
	// A call with a timeout has no timer of its own (arming one per call
	// cost the round trip microseconds: BenchmarkRoundTrip/
	// fastlane-deadline): the watchdog, ticking every handoffDelay while
	// calls are in flight, ends it once its deadline has passed. Its
	// caller has had its error by then (the client keeps its own deadline
	// exactly), so stopping a few milliseconds late costs only work.
	sc := &serverCall{}
	var ctx context.Context
	if f.TimeoutMicros > 0 {
		timeout := time.Duration(min(f.TimeoutMicros, uint64(1<<62)/1000)) * time.Microsecond
		sc.deadline = nanotime() + int64(timeout)
		ctx, sc.cancel = timerless.WithDeadline(c.ctx, time.Now().Add(timeout))
	} else {
		ctx, sc.cancel = context.WithCancelCause(c.ctx)
	}
	c.calls[f.ID] = sc
	c.s.handlers.Add(1)
	c.mu.Unlock()
	c.s.busy()
	return ctx, true
}

// serverCall is a call in flight.
type serverCall struct {
	cancel   context.CancelCauseFunc
	deadline int64 // nanotime; 0 = none
}

// run decodes and runs a request and writes its answer.
func (c *serverConn) run(ctx context.Context, f Frame) {
	defer c.s.handlers.Done()
	defer c.finish(f.ID)
	req := &inferencepb.PredictRequest{}
	if err := proto.Unmarshal(f.Payload, req); err != nil {
		c.writeError(f.ID, inferr.Errorf(inferr.InputParsing, "fast lane: request %d is not a PredictRequest: %v", f.ID, err))
		return
	}
	resp, err := c.s.opts.Handler(ctx, req)
	if err != nil {
		c.writeError(f.ID, err)
		return
	}
	c.write(Frame{Kind: KindResponse, ID: f.ID}, resp)
}

// finish forgets a call; the last call of a draining connection closes it.
func (c *serverConn) finish(id uint64) {
	c.mu.Lock()
	sc := c.calls[id]
	delete(c.calls, id)
	idle := c.draining && len(c.calls) == 0
	c.mu.Unlock()
	sc.cancel(context.Canceled)
	if idle {
		c.close()
	}
}

func (c *serverConn) writeError(id uint64, err error) {
	// Sanitized: protobuf cannot encode a string that is not UTF-8, and
	// the error would be lost with its frame.
	c.write(Frame{Kind: KindError, ID: id}, &inferencepb.Error{Type: inferencepb.ErrorType(inferr.TypeOf(err)), Description: inferr.Sanitize(err.Error())})
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// write sends f with msg as its payload under the write lock; the
// watchdog closes the connection when the write blocks past FrameTimeout
// (a deadline per write would arm a timer per call). A payload over the
// cap is answered with a GRPC error instead; a failed write closes the
// connection.
func (c *serverConn) write(f Frame, msg proto.Message) {
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= chunk {
			bufPool.Put(bp)
		}
	}()
	b, err := proto.MarshalOptions{}.MarshalAppend(AppendHeader((*bp)[:0], f, 0), msg)
	switch {
	case err != nil:
		err = inferr.Errorf(inferr.OutputParsing, "fast lane: cannot encode the answer: %v", err)
	case len(b)-HeaderLen > c.s.opts.MaxFrameBytes:
		err = inferr.Errorf(inferr.GRPC, "fast lane: the answer is %d bytes, more than the cap of %d", len(b)-HeaderLen, c.s.opts.MaxFrameBytes)
	}
	if err != nil {
		if f.Kind == KindError {
			c.s.log.Error("fast lane: cannot send an error frame; closing the connection", "err", err)
			c.close()
			return
		}
		c.writeError(f.ID, err)
		return
	}
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-HeaderLen))
	*bp = b
	c.wmu.Lock()
	c.writingSince.Store(nanotime())
	c.s.busy()
	_, err = c.w.Write(b)
	c.writingSince.Store(0)
	c.wmu.Unlock()
	if err != nil {
		c.s.log.Debug("fast lane: writing an answer failed; closing the connection", "id", f.ID, "err", err)
		c.close()
	}
}

// drain closes the connection once its calls in flight have answered.
func (c *serverConn) drain() {
	c.mu.Lock()
	c.draining = true
	idle := len(c.calls) == 0
	c.mu.Unlock()
	if idle {
		c.close()
	}
}

// close ends the connection and cancels its calls in flight.
func (c *serverConn) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	// The connection first: a call that its cancellation ends must not get
	// its answer out (the client would read the handler's "canceled" as
	// the sidecar's answer instead of seeing the connection end).
	c.nc.Close()
	c.cancel()
}

// busy wakes the watchdog if it sleeps. Called when a call or a write
// starts: an atomic load, unless the watchdog was idle.
func (s *Server) busy() {
	if s.watchIdle.Load() && s.watchIdle.CompareAndSwap(true, false) {
		select {
		case s.watchWake <- struct{}{}:
		default:
		}
	}
}

// watch is the watchdog: every handoffDelay while calls or writes are in
// flight, it gives the reading of a connection whose inline call has run
// past handoffDelay to a new goroutine, cancels the calls whose deadline
// has passed, and closes a connection whose write has been blocked past
// FrameTimeout. After watchIdleTicks quiet
// ticks it sleeps until busy wakes it. It returns when watchDone closes.
func (s *Server) watch() {
	tick := time.NewTicker(handoffDelay)
	defer tick.Stop()
	quiet := 0
	for {
		select {
		case <-s.watchDone:
			return
		case <-tick.C:
		}
		if s.sweep() {
			quiet = 0
			continue
		}
		if quiet++; quiet < watchIdleTicks {
			continue
		}
		// Publish idleness, then look once more: a call that started
		// before it was published is seen here; one after calls busy.
		s.watchIdle.Store(true)
		if s.sweep() {
			s.watchIdle.Store(false)
			quiet = 0
			continue
		}
		tick.Stop()
		select {
		case <-s.watchDone:
			return
		case <-s.watchWake:
		}
		quiet = 0
		tick.Reset(handoffDelay)
	}
}

// sweep does one round of the watchdog; it reports whether anything was
// in flight.
func (s *Server) sweep() bool {
	now := nanotime()
	busy := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if tok := c.inline.Load(); tok != 0 {
			busy = true
			if now-c.inlineSince.Load() >= int64(handoffDelay) && c.inline.CompareAndSwap(tok, 0) {
				go c.read() // the reading role moves; readers is unchanged
			}
		}
		c.mu.Lock()
		for _, sc := range c.calls {
			busy = true
			if sc.deadline != 0 && now >= sc.deadline {
				sc.cancel(context.DeadlineExceeded)
			}
		}
		c.mu.Unlock()
		if since := c.writingSince.Load(); since != 0 {
			busy = true
			if now-since > int64(s.opts.FrameTimeout) {
				s.log.Warn("closing a fast-lane connection whose peer does not read its answers", "timeout", s.opts.FrameTimeout)
				c.close()
			}
		}
	}
	return busy
}
