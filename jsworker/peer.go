package jsworker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/fastlane"
)

// maxFrameBytes bounds a frame between host and worker: the fast lane's cap.
const maxFrameBytes = fastlane.DefaultMaxFrameBytes

// errPeerGone: the other end closed the connection or died.
var errPeerGone = errors.New("jsworker: the other end of the connection is gone")

// peer is one end of a host-worker connection. Both ends send requests and
// answer the other's: the host sends Config and BidsRequest, the worker
// sends HostCall. Frames are the fast lane's (sidecar/fastlane): a request
// and its answer (response or error) share an id chosen by the requester;
// each end numbers its own requests, odd on the host, even on the worker,
// so that the ids of the two directions never meet.
type peer struct {
	conn net.Conn
	w    *fastlane.ConnWriter // writes conn, under wmu
	er   *fastlane.ExpectReader
	br   *bufio.Reader

	wmu  sync.Mutex
	wbuf []byte

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan fastlane.Frame
	err     error // set once the read loop ended

	done chan struct{} // closed when the read loop ends

	// onRequest handles a request frame of the other end (on its own
	// goroutine when it may block); onCancel a cancel frame.
	onRequest func(f fastlane.Frame)
	onCancel  func(id uint64)
}

func newPeer(conn net.Conn, firstID uint64) *peer {
	er := fastlane.NewExpectReader(conn)
	return &peer{
		conn:    conn,
		w:       fastlane.NewConnWriter(conn),
		er:      er,
		br:      bufio.NewReaderSize(er, 64<<10),
		nextID:  firstID,
		pending: map[uint64]chan fastlane.Frame{},
		done:    make(chan struct{}),
	}
}

// readLoop reads frames until the connection ends; it fails every pending
// call then.
func (p *peer) readLoop() {
	var err error
	for {
		var f fastlane.Frame
		f, err = fastlane.ReadFrame(p.br, nil, maxFrameBytes)
		if err != nil {
			break
		}
		// The frame the owner expected (if any) came: stop polling.
		p.er.Settle()
		switch f.Kind {
		case fastlane.KindResponse, fastlane.KindError:
			p.mu.Lock()
			ch := p.pending[f.ID]
			delete(p.pending, f.ID)
			p.mu.Unlock()
			if ch != nil {
				ch <- f
			}
		case fastlane.KindRequest:
			if p.onRequest != nil {
				p.onRequest(f)
			}
		case fastlane.KindCancel:
			if p.onCancel != nil {
				p.onCancel(f.ID)
			}
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = errPeerGone
	}
	p.mu.Lock()
	p.err = fmt.Errorf("%w (%v)", errPeerGone, err)
	for id, ch := range p.pending {
		close(ch)
		delete(p.pending, id)
	}
	p.mu.Unlock()
	close(p.done)
}

// write sends one frame whose payload is msg (nil: none).
func (p *peer) write(kind fastlane.Kind, id uint64, timeout time.Duration, msg proto.Message) error {
	var payload []byte
	if msg != nil {
		var err error
		if payload, err = proto.Marshal(msg); err != nil {
			return fmt.Errorf("jsworker: encode %T: %w", msg, err)
		}
	}
	f := fastlane.Frame{Kind: kind, ID: id, Payload: payload}
	if kind == fastlane.KindRequest && timeout > 0 {
		f.TimeoutMicros = uint64(timeout.Microseconds())
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.wbuf = fastlane.AppendFrame(p.wbuf[:0], f)
	_, err := p.w.Write(p.wbuf)
	if cap(p.wbuf) > 1<<20 {
		p.wbuf = nil // do not keep a large request's buffer
	}
	return err
}

// start sends a request and returns its id and the channel its answer
// arrives on (closed when the connection ends first).
func (p *peer) start(msg proto.Message, timeout time.Duration) (uint64, chan fastlane.Frame, error) {
	return p.startExpect(msg, timeout, 0)
}

// startExpect is start, with the read loop polling for the answer for up
// to spin (see expect).
func (p *peer) startExpect(msg proto.Message, timeout, spin time.Duration) (uint64, chan fastlane.Frame, error) {
	ch := make(chan fastlane.Frame, 1)
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return 0, nil, err
	}
	id := p.nextID
	p.nextID += 2
	p.pending[id] = ch
	p.mu.Unlock()
	// Before the write: an answer that comes before the expectation was
	// set would leave the read loop polling for nothing.
	p.expect(spin)
	if err := p.write(fastlane.KindRequest, id, timeout, msg); err != nil {
		p.forget(id)
		return 0, nil, fmt.Errorf("%w: %v", errPeerGone, err)
	}
	return id, ch, nil
}

func (p *peer) forget(id uint64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// call sends a request and waits for its answer, decoded into out; an error
// frame comes back as its typed error. ctx bounds the wait (a cancel frame
// is sent when it ends first).
func (p *peer) call(ctx context.Context, msg, out proto.Message) error {
	var timeout time.Duration
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Microsecond)
	}
	id, ch, err := p.start(msg, timeout)
	if err != nil {
		return err
	}
	select {
	case f, ok := <-ch:
		return p.decode(f, ok, out)
	case <-ctx.Done():
		p.forget(id)
		_ = p.write(fastlane.KindCancel, id, 0, nil)
		return ctx.Err()
	}
}

// decode reads an answer frame into out.
func (p *peer) decode(f fastlane.Frame, ok bool, out proto.Message) error {
	if !ok {
		p.mu.Lock()
		err := p.err
		p.mu.Unlock()
		return err
	}
	if f.Kind == fastlane.KindError {
		var e inferencepb.Error
		if err := proto.Unmarshal(f.Payload, &e); err != nil {
			return inferr.Errorf(inferr.GRPC, "jsworker: undecodable error frame: %v", err)
		}
		return sidecar.ErrorFromProto(&e)
	}
	if err := proto.Unmarshal(f.Payload, out); err != nil {
		return fmt.Errorf("jsworker: decode %T: %w", out, err)
	}
	return nil
}

// expect makes the read loop poll for the next frame for up to spin
// (fastlane.ExpectReader): the other end is about to send one. The next
// frame read ends the polling. spin <= 0: no polling.
func (p *peer) expect(spin time.Duration) { p.er.Expect(spin) }

// answer sends the answer to the other end's request id: msg, or err as an
// error frame.
func (p *peer) answer(id uint64, msg proto.Message, err error) {
	if err != nil {
		_ = p.write(fastlane.KindError, id, 0, sidecar.ErrorToProto(err))
		return
	}
	_ = p.write(fastlane.KindResponse, id, 0, msg)
}

func (p *peer) close() error { return p.conn.Close() }
