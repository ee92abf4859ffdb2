package fastlane

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
)

// Handler runs one Predict call. Its error fails the whole call and must be
// typed (inferr): the client gets its type and message exactly.
type Handler func(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error)

// ServerOptions configure a Server; the zero value of each field means its
// default.
type ServerOptions struct {
	Handler Handler // required
	Logger  *slog.Logger
	// MaxFrameBytes caps a frame's payload in either direction; 0 =
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
	// SniffTimeout bounds the wait for the first bytes of a new
	// connection; 0 = 10s.
	SniffTimeout time.Duration
	// FrameTimeout bounds the rest of a frame once its first byte has
	// arrived, and each write of an answer; 0 = 10s.
	FrameTimeout time.Duration
	// SpinWait is how long a connection's reader polls for the next
	// request before it parks (see DefaultSpinWait); 0 = DefaultSpinWait,
	// < 0 = never poll.
	SpinWait time.Duration
	// WakeSpinWait is how long a reader polls for the request a wake frame
	// announced; 0 = DefaultWakeSpinWait, < 0 = wake frames are ignored.
	WakeSpinWait time.Duration
}

// ErrServerClosed is what Serve returns when the server was stopped before
// Serve was called.
var ErrServerClosed = errors.New("fast lane: server closed")

// Server serves the fast lane on a listener it shares with an HTTP/2
// server: it reads the first bytes of each new connection and serves
// fast-lane connections itself, hands HTTP/2 connections (bytes replayed)
// to HTTP2Listener, and closes anything else.
type Server struct {
	opts ServerOptions
	log  *slog.Logger
	h2   *chanListener

	mu       sync.Mutex
	lis      net.Listener
	stopped  bool
	done     chan struct{} // closed when stopped
	sniffing map[net.Conn]struct{}
	conns    map[*serverConn]struct{}

	readers   sync.WaitGroup // connection goroutines: sniffing, then reading frames
	handlers  sync.WaitGroup // calls in flight
	spinSlots *spinSlots     // the readers' polling slots (newServerSlots)

	watchIdle atomic.Bool   // the watchdog sleeps until watchWake
	watchWake chan struct{} // buffered 1
	watchDone chan struct{} // closed when the server has stopped
	watchOnce sync.Once
}

// NewServer returns a server; it serves nothing until Serve.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Handler == nil {
		return nil, errors.New("fastlane: ServerOptions.Handler is nil")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if opts.SniffTimeout <= 0 {
		opts.SniffTimeout = 10 * time.Second
	}
	if opts.FrameTimeout <= 0 {
		opts.FrameTimeout = 10 * time.Second
	}
	if opts.SpinWait == 0 {
		opts.SpinWait = DefaultSpinWait
	}
	if opts.WakeSpinWait == 0 {
		opts.WakeSpinWait = DefaultWakeSpinWait
	}
	return &Server{
		opts:      opts,
		log:       opts.Logger.With("component", "fastlane"),
		h2:        newChanListener(),
		sniffing:  map[net.Conn]struct{}{},
		conns:     map[*serverConn]struct{}{},
		done:      make(chan struct{}),
		watchWake: make(chan struct{}, 1),
		watchDone: make(chan struct{}),
		spinSlots: newServerSlots(),
	}, nil
}

// HTTP2Listener yields the connections that opened with the HTTP/2 client
// preface, which they replay to their reader; give it to grpc.Server.Serve.
// It closes when its server (the gRPC one) closes it; connections that
// arrive after that are closed.
func (s *Server) HTTP2Listener() net.Listener { return s.h2 }

// Serve accepts connections on lis until GracefulStop or Stop (then it
// returns nil) or until Accept fails for good (then it closes
// HTTP2Listener and returns the error). It closes lis when it returns.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.stopped || s.lis != nil {
		s.mu.Unlock()
		lis.Close()
		return ErrServerClosed
	}
	s.lis = lis
	addr := lis.Addr()
	s.h2.addr.Store(&addr)
	s.mu.Unlock()
	defer lis.Close()
	go s.watch()
	var delay time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			if s.isStopped() {
				return nil
			}
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			s.h2.Close()
			return err
		}
		delay = 0
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.sniffing[nc] = struct{}{}
		s.readers.Add(1)
		s.mu.Unlock()
		go s.handshake(nc)
	}
}

func (s *Server) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// handshake reads the first bytes of a new connection (within
// SniffTimeout) and routes it. It runs in the connection's own goroutine,
// which goes on to read a fast-lane connection's frames.
func (s *Server) handshake(nc net.Conn) {
	if c := s.sniff(nc); c != nil {
		c.read()
	} else {
		s.readers.Done()
	}
}

// sniff routes a new connection; it returns it when it is a fast-lane one.
func (s *Server) sniff(nc net.Conn) *serverConn {
	var p [len(HTTP2Preface)]byte
	nc.SetReadDeadline(time.Now().Add(s.opts.SniffTimeout))
	n, err := io.ReadFull(nc, p[:len(Magic)])
	if err == nil && string(p[:n]) == HTTP2Preface[:len(Magic)] {
		var m int
		m, err = io.ReadFull(nc, p[len(Magic):])
		n += m
	}
	s.mu.Lock()
	delete(s.sniffing, nc)
	stopped := s.stopped
	s.mu.Unlock()
	switch {
	case stopped:
		nc.Close()
		return nil
	case err != nil:
		if n == 0 && errors.Is(err, io.EOF) {
			s.log.Debug("connection closed before it sent anything")
		} else {
			s.log.Warn("closing a connection that sent no complete preface", "bytes", n, "start", inferr.ClipN(p[:n], 24), "err", err)
		}
		nc.Close()
		return nil
	case string(p[:n]) == HTTP2Preface:
		nc.SetReadDeadline(time.Time{})
		s.h2.deliver(&prefixConn{Conn: nc, prefix: p[:]}, s.done)
		return nil
	case string(p[:n]) == Magic:
		nc.SetReadDeadline(time.Time{})
	default:
		s.log.Warn("closing a connection that is neither fast lane nor HTTP/2", "start", inferr.ClipN(p[:n], 24))
		nc.Close()
		return nil
	}
	c := newServerConn(s, nc)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		c.close()
		return nil
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return c
}

// GracefulStop stops accepting, answers the calls in flight, closes every
// connection as it falls idle and returns once all are closed. Requests
// that arrive meanwhile are answered with a GRPC error. It does not close
// HTTP2Listener: the HTTP/2 server does.
func (s *Server) GracefulStop() {
	conns := s.stop()
	for _, c := range conns {
		c.drain()
	}
	s.readers.Wait()
	s.handlers.Wait()
	s.stopWatch()
}

// Stop closes the listener and every connection at once: calls in flight
// are cancelled and their answers lost. It does not wait for them.
func (s *Server) Stop() {
	conns := s.stop()
	for _, c := range conns {
		c.close()
	}
	s.stopWatch()
}

func (s *Server) stopWatch() { s.watchOnce.Do(func() { close(s.watchDone) }) }

// stop marks the server stopped, closes the listener and the connections
// still being sniffed, and returns the fast-lane connections.
func (s *Server) stop() []*serverConn {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.done)
	}
	lis := s.lis
	for nc := range s.sniffing {
		nc.Close()
	}
	conns := make([]*serverConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if lis != nil {
		lis.Close()
	}
	return conns
}

// chanListener is a net.Listener fed by deliver.
type chanListener struct {
	addr atomic.Pointer[net.Addr]
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	l := &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
	var a net.Addr = &net.UnixAddr{Net: "unix"}
	l.addr.Store(&a)
	return l
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return *l.addr.Load() }

// deliver hands c to Accept, or closes it once the listener is closed or
// stop is.
func (l *chanListener) deliver(c net.Conn, stop <-chan struct{}) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	case <-stop:
		c.Close()
	}
}

// prefixConn replays the bytes the sniffer read before its reads.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
