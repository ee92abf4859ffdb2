package fastlane

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/proto/inferencepb"
)

func TestFrameRoundTrip(t *testing.T) {
	frames := []Frame{
		{Kind: KindRequest, ID: 1, TimeoutMicros: 2500, Payload: []byte("request")},
		{Kind: KindRequest, ID: math.MaxUint64, Payload: []byte{}},
		{Kind: KindResponse, ID: 7, Payload: bytes.Repeat([]byte{0xab}, 5000)},
		{Kind: KindError, ID: 8, Payload: []byte("error")},
		{Kind: KindCancel, ID: 9},
		{Kind: KindWake},
	}
	var stream []byte
	for _, f := range frames {
		stream = AppendFrame(stream, f)
	}
	if got, want := len(stream), len(frames)*HeaderLen+7+5000+5; got != want {
		t.Fatalf("encoded %d bytes, want %d", got, want)
	}
	for _, name := range []string{"plain", "bufio", "small bufio"} {
		var r io.Reader = bytes.NewReader(stream)
		switch name {
		case "bufio":
			r = bufio.NewReaderSize(r, 64)
		case "small bufio": // smaller than a header: read by copying
			r = bufio.NewReaderSize(r, 16)
		}
		buf := make([]byte, 0, 16)
		for i, want := range frames {
			got, err := ReadFrame(r, buf, 1<<20)
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			if got.Kind != want.Kind || got.ID != want.ID || got.TimeoutMicros != want.TimeoutMicros || !bytes.Equal(got.Payload, want.Payload) {
				t.Errorf("%s: frame %d = %+v, want %+v", name, i, got, want)
			}
			if len(want.Payload) <= cap(buf) && len(got.Payload) > 0 && &got.Payload[0] != &buf[:1][0] {
				t.Errorf("%s: frame %d: a payload that fits the buffer was not read into it", name, i)
			}
		}
		if _, err := ReadFrame(r, buf, 1<<20); err != io.EOF {
			t.Errorf("%s: after the last frame: %v, want io.EOF", name, err)
		}
	}
}

func header(kind, flags byte, reserved uint16, n uint32, id, timeout uint64) []byte {
	h := []byte{kind, flags}
	h = binary.LittleEndian.AppendUint16(h, reserved)
	h = binary.LittleEndian.AppendUint32(h, n)
	h = binary.LittleEndian.AppendUint64(h, id)
	return binary.LittleEndian.AppendUint64(h, timeout)
}

func TestParseHeaderRejects(t *testing.T) {
	cases := []struct {
		name string
		h    []byte
		want error
	}{
		{"kind 0", header(0, 0, 0, 0, 1, 0), ErrBadHeader},
		{"kind 6", header(6, 0, 0, 0, 1, 0), ErrBadHeader},
		{"payload on a wake", header(5, 0, 0, 1, 0, 0), ErrBadHeader},
		{"id on a wake", header(5, 0, 0, 0, 1, 0), ErrBadHeader},
		{"timeout on a wake", header(5, 0, 0, 0, 0, 5), ErrBadHeader},
		{"flags", header(1, 1, 0, 0, 1, 0), ErrBadHeader},
		{"reserved", header(1, 0, 1, 0, 1, 0), ErrBadHeader},
		{"timeout on a response", header(2, 0, 0, 0, 1, 5), ErrBadHeader},
		{"timeout on a cancel", header(4, 0, 0, 0, 1, 5), ErrBadHeader},
		{"payload on a cancel", header(4, 0, 0, 1, 1, 0), ErrBadHeader},
		{"over the cap", header(1, 0, 0, 1001, 1, 0), ErrFrameTooLarge},
		{"4 GiB", header(2, 0, 0, math.MaxUint32, 1, 0), ErrFrameTooLarge},
		{"short", header(1, 0, 0, 0, 1, 0)[:23], ErrBadHeader},
	}
	for _, c := range cases {
		if _, _, err := ParseHeader(c.h, 1000); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	f, n, err := ParseHeader(header(1, 0, 0, 1000, 42, 7), 1000)
	if err != nil || n != 1000 || f.ID != 42 || f.TimeoutMicros != 7 || f.Kind != KindRequest {
		t.Errorf("a valid header at the cap: %+v %d %v", f, n, err)
	}
}

func TestReadFrameTruncated(t *testing.T) {
	full := AppendFrame(nil, Frame{Kind: KindResponse, ID: 3, Payload: []byte("payload")})
	for cut := 1; cut < len(full); cut++ {
		for _, name := range []string{"plain", "bufio"} {
			var r io.Reader = bytes.NewReader(full[:cut])
			if name == "bufio" {
				r = bufio.NewReader(r)
			}
			if _, err := ReadFrame(r, nil, 100); err != io.ErrUnexpectedEOF {
				t.Errorf("%s: cut at %d: %v, want io.ErrUnexpectedEOF", name, cut, err)
			}
		}
	}
}

// A header that declares more than the cap costs nothing but its error: no
// payload is allocated and no byte of it is read.
func TestReadFrameOverCapAllocatesNothing(t *testing.T) {
	stream := append(header(1, 0, 0, math.MaxUint32, 1, 0), make([]byte, 100)...)
	src := bytes.NewReader(stream)
	br := bufio.NewReader(src)
	const runs = 100
	var before, after runtimeMem
	before.read()
	for range runs {
		src.Reset(stream)
		br.Reset(src)
		if _, err := ReadFrame(br, nil, 1<<20); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("err %v, want ErrFrameTooLarge", err)
		}
	}
	after.read()
	if per := (after.total - before.total) / runs; per > 512 {
		t.Errorf("%d bytes allocated per rejected frame", per)
	}
	if br.Buffered() != 100 {
		t.Errorf("read %d payload bytes of a rejected frame", 100-br.Buffered())
	}
}

// A large declared payload is allocated as its bytes arrive, never all at
// once up front.
func TestReadFrameLargePayloadGrowsWithData(t *testing.T) {
	const declared = 64 << 20
	stream := append(header(2, 0, 0, declared, 1, 0), make([]byte, 3<<20)...)
	var before, after runtimeMem
	before.read()
	_, err := ReadFrame(bytes.NewReader(stream), nil, declared)
	after.read()
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("err %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.total - before.total; got > 16<<20 {
		t.Errorf("allocated %d bytes for 3 MiB of a 64 MiB payload", got)
	}
	payload := bytes.Repeat([]byte("x"), 5<<20)
	f, err := ReadFrame(bytes.NewReader(AppendFrame(nil, Frame{Kind: KindResponse, ID: 2, Payload: payload})), nil, 8<<20)
	if err != nil || !bytes.Equal(f.Payload, payload) || cap(f.Payload) != len(payload) {
		t.Errorf("5 MiB payload: len %d cap %d, %v", len(f.Payload), cap(f.Payload), err)
	}
}

func TestAppendHeaderLayout(t *testing.T) {
	got := AppendHeader(nil, Frame{Kind: KindRequest, ID: 0x0102030405060708, TimeoutMicros: 0x1112131415161718}, 0x21222324)
	want := []byte{
		1, 0, 0, 0,
		0x24, 0x23, 0x22, 0x21,
		8, 7, 6, 5, 4, 3, 2, 1,
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
	}
	if !bytes.Equal(got, want) {
		t.Errorf("header % x, want % x", got, want)
	}
	if len(Magic) != 8 || HTTP2Preface[:8] == Magic {
		t.Errorf("the magic must be 8 bytes and differ from the HTTP/2 preface's start")
	}
}

// FuzzReadFrame: ReadFrame never panics, never returns a payload larger
// than the cap (or than its declared length), agrees with itself through a
// bufio.Reader, and what it accepts re-encodes to the bytes it read.
func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, Frame{Kind: KindRequest, ID: 1, TimeoutMicros: 1000, Payload: []byte("\x12\x00")}))
	f.Add(AppendFrame(AppendFrame(nil, Frame{Kind: KindResponse, ID: 2, Payload: []byte("ok")}), Frame{Kind: KindCancel, ID: 3}))
	f.Add(header(1, 0, 0, 2000, 1, 0))
	f.Add(header(4, 0, 0, 1, 1, 0))
	f.Add([]byte(Magic))
	f.Add([]byte(HTTP2Preface))
	// A request carrying every v2-only dtype (BOOL, UINT8-64, FP16, BYTES).
	v2, _ := proto.Marshal(&inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{
		Requests: []*inferencepb.ModelRequest{{ModelPath: "m/", Tensors: v2DTypeTensors()}}}}})
	f.Add(AppendFrame(nil, Frame{Kind: KindRequest, ID: 7, TimeoutMicros: 500, Payload: v2}))
	const maxPayload = 1024
	f.Fuzz(func(t *testing.T, data []byte) {
		plain := bytes.NewReader(data)
		buffered := bufio.NewReaderSize(bytes.NewReader(data), 32)
		consumed := 0
		for {
			a, errA := ReadFrame(plain, nil, maxPayload)
			b, errB := ReadFrame(buffered, make([]byte, 0, 8), maxPayload)
			if (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
				t.Fatalf("plain reader: %v; bufio reader: %v", errA, errB)
			}
			if errA != nil {
				if errA == io.EOF && consumed != len(data) {
					t.Fatalf("io.EOF with %d bytes left", len(data)-consumed)
				}
				return
			}
			if cap(a.Payload) > maxPayload || len(a.Payload) != cap(a.Payload) {
				t.Fatalf("payload len %d cap %d, cap is %d", len(a.Payload), cap(a.Payload), maxPayload)
			}
			if a.Kind != b.Kind || a.ID != b.ID || a.TimeoutMicros != b.TimeoutMicros || !bytes.Equal(a.Payload, b.Payload) {
				t.Fatalf("readers disagree: %+v vs %+v", a, b)
			}
			enc := AppendFrame(nil, a)
			if !bytes.Equal(enc, data[consumed:consumed+len(enc)]) {
				t.Fatalf("re-encoding % x differs from the input % x", enc, data[consumed:consumed+len(enc)])
			}
			consumed += len(enc)
		}
	})
}

// runtimeMem reads the bytes allocated so far.
type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.total = s.TotalAlloc
}
