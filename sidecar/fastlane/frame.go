package fastlane

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic opens every fast-lane connection: the client writes these 8 bytes
// before its first frame ("INFB" inferbid, "FL" fast lane, "01" the
// protocol version). A new version gets a new magic, so a server never
// misreads a client of another version: it closes the connection.
const Magic = "INFBFL01"

// HTTP2Preface is the client preface every HTTP/2 (so gRPC) connection
// opens with (RFC 9113, section 3.4).
const HTTP2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HeaderLen is the size of a frame header.
const HeaderLen = 24

// DefaultMaxFrameBytes bounds a frame's payload when no cap is configured;
// it equals sidecar.MaxMessageBytes, so the fast lane carries whatever the
// gRPC path does.
const DefaultMaxFrameBytes = 512 << 20

// Kind is the type of a frame.
type Kind uint8

const (
	// KindRequest (client to server) carries a PredictRequest.
	KindRequest Kind = 1
	// KindResponse (server to client) carries the PredictResponse to the
	// request with the same id.
	KindResponse Kind = 2
	// KindError (server to client) carries an Error: the whole call with
	// the same id failed (its type and message, as the gRPC status would).
	KindError Kind = 3
	// KindCancel (client to server), with no payload, cancels the call with
	// the same id; its answer still comes, typically a GRPC error.
	KindCancel Kind = 4
	// KindWake (client to server), with no payload and id 0, says a
	// request is likely to follow soon: the server's reader polls for it
	// (WakeSpinWait) instead of parking. It is answered by nothing.
	KindWake Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindResponse:
		return "response"
	case KindError:
		return "error"
	case KindCancel:
		return "cancel"
	case KindWake:
		return "wake"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Frame is one decoded frame.
type Frame struct {
	Kind Kind
	// ID pairs a response, an error or a cancel with its request; ids are
	// the client's, unique among the calls in flight on one connection.
	ID uint64
	// TimeoutMicros is the time left to a request's deadline, in
	// microseconds, when the client sent it; 0 means none. Zero in every
	// other kind.
	TimeoutMicros uint64
	Payload       []byte
}

// Errors of the codec. A connection that hits one is closed.
var (
	ErrFrameTooLarge = errors.New("fast lane: frame payload over the cap")
	ErrBadHeader     = errors.New("fast lane: malformed frame header")
)

// chunk is the largest payload ReadFrame allocates in one go before its
// bytes arrive. A larger payload starts in a chunk-sized buffer that doubles
// (up to the declared length) as it fills, so a peer that declares a large
// payload and sends little costs little.
const chunk = 1 << 20

// AppendHeader appends the 24-byte header of f, whose payload is n bytes,
// to dst. It does not check f: writers build only valid frames.
//
//	offset size field
//	0      1    kind
//	1      1    flags: 0 in protocol version 01
//	2      2    reserved: 0
//	4      4    payload length in bytes
//	8      8    id
//	16     8    timeout in microseconds (requests; else 0)
//
// Integers are little-endian: both ends run on the same host.
func AppendHeader(dst []byte, f Frame, n int) []byte {
	dst = append(dst, byte(f.Kind), 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint64(dst, f.ID)
	return binary.LittleEndian.AppendUint64(dst, f.TimeoutMicros)
}

// AppendFrame appends the header and payload of f to dst.
func AppendFrame(dst []byte, f Frame) []byte {
	dst = AppendHeader(dst, f, len(f.Payload))
	return append(dst, f.Payload...)
}

// ParseHeader decodes a header (which must be HeaderLen bytes) and returns
// the frame without its payload and the payload length. It rejects an
// unknown kind, non-zero flags or reserved bytes, a timeout outside a
// request, a payload on a cancel and a payload over maxPayload.
func ParseHeader(h []byte, maxPayload int) (Frame, int, error) {
	if len(h) != HeaderLen {
		return Frame{}, 0, fmt.Errorf("%w: %d bytes", ErrBadHeader, len(h))
	}
	f := Frame{
		Kind:          Kind(h[0]),
		ID:            binary.LittleEndian.Uint64(h[8:]),
		TimeoutMicros: binary.LittleEndian.Uint64(h[16:]),
	}
	n := binary.LittleEndian.Uint32(h[4:])
	switch {
	case f.Kind < KindRequest || f.Kind > KindWake:
		return Frame{}, 0, fmt.Errorf("%w: unknown kind %d", ErrBadHeader, h[0])
	case h[1] != 0 || h[2] != 0 || h[3] != 0:
		return Frame{}, 0, fmt.Errorf("%w: flags/reserved bytes %x, want 0", ErrBadHeader, h[1:4])
	case f.Kind != KindRequest && f.TimeoutMicros != 0:
		return Frame{}, 0, fmt.Errorf("%w: a %s frame with a timeout", ErrBadHeader, f.Kind)
	case (f.Kind == KindCancel || f.Kind == KindWake) && n != 0:
		return Frame{}, 0, fmt.Errorf("%w: a %s frame with %d payload bytes", ErrBadHeader, f.Kind, n)
	case f.Kind == KindWake && f.ID != 0:
		return Frame{}, 0, fmt.Errorf("%w: a wake frame with id %d, want 0", ErrBadHeader, f.ID)
	case uint64(n) > uint64(max(maxPayload, 0)):
		return Frame{}, 0, fmt.Errorf("%w: %d bytes, the cap is %d", ErrFrameTooLarge, n, maxPayload)
	}
	return f, int(n), nil
}

// ReadFrame reads one frame from r. Its payload lives in buf when it fits
// in cap(buf) (so a caller can reuse one buffer), else in a new slice. It
// allocates nothing for a frame whose header is rejected, and no payload
// buffer larger than the declared length, which is at most maxPayload; a
// payload over 1 MiB is allocated as its bytes arrive (see chunk). An io.EOF before the first byte is returned as is (a clean end
// between frames); an end within a frame is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte, maxPayload int) (Frame, error) {
	f, n, err := readHeader(r, maxPayload)
	if err != nil {
		return Frame{}, err
	}
	f.Payload, err = readPayload(r, buf, n)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return Frame{}, err
	}
	return f, nil
}

// readHeader reads and parses a header. From a *bufio.Reader (what both
// ends use) it reads in place, without allocating.
func readHeader(r io.Reader, maxPayload int) (Frame, int, error) {
	if br, ok := r.(*bufio.Reader); ok && br.Size() >= HeaderLen {
		h, err := br.Peek(HeaderLen)
		if err != nil {
			if len(h) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, 0, err
		}
		f, n, err := ParseHeader(h, maxPayload)
		br.Discard(HeaderLen)
		return f, n, err
	}
	h := make([]byte, HeaderLen)
	if _, err := io.ReadFull(r, h); err != nil {
		return Frame{}, 0, err
	}
	return ParseHeader(h, maxPayload)
}

// readPayload reads exactly n bytes into buf when they fit, else into a new
// slice: of n bytes when n <= chunk, else growing as the bytes arrive.
func readPayload(r io.Reader, buf []byte, n int) ([]byte, error) {
	if n <= cap(buf) {
		buf = buf[:n]
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	if n <= chunk {
		buf = make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf = make([]byte, 0, chunk)
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), n))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}
