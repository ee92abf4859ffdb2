package fastlane

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestExpectReaderReads: what arrives is read whether it came before the
// read, while the read polls (Expect before or during a parked read) or
// after it parked; a read parked without an expectation is not woken by
// anything but data; the spin slot is given back; close and EOF end reads.
func TestExpectReaderReads(t *testing.T) {
	w, rc := unixPair(t)
	r := NewExpectReader(rc)
	if r.rc == nil {
		t.Fatal("a Unix connection has no raw fd: the reader would never poll")
	}
	buf := make([]byte, 8)
	readMsg := func(want []byte) {
		t.Helper()
		n, err := io.ReadFull(r, buf[:len(want)])
		if err != nil || !bytes.Equal(buf[:n], want) {
			t.Fatalf("read %q, %v; want %q", buf[:n], err, want)
		}
	}
	send := func(delay time.Duration, msg []byte) {
		go func() {
			time.Sleep(delay)
			w.Write(msg)
		}()
	}

	// Already there, no expectation.
	w.Write([]byte("a"))
	readMsg([]byte("a"))
	// Expected before the read: polled for.
	r.Expect(time.Second)
	send(time.Millisecond, []byte("b"))
	readMsg([]byte("b"))
	r.Settle()
	// Expected while the read is parked: Expect wakes it to poll.
	send(50*time.Millisecond, []byte("c"))
	go func() {
		time.Sleep(10 * time.Millisecond)
		r.Expect(time.Second)
	}()
	readMsg([]byte("c"))
	r.Settle()
	// The expectation ran out: the read parks and still gets the data.
	r.Expect(time.Millisecond)
	send(30*time.Millisecond, []byte("d"))
	readMsg([]byte("d"))
	if s := processSlots.n.Load(); s != 0 {
		t.Errorf("%d readers still counted as polling after the reads returned", s)
	}
	// A wake with nothing to read leaves the read waiting for data.
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(r, buf[:1])
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	r.Expect(time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the read returned without data: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.Write([]byte("e"))
	if err := <-done; err != nil || buf[0] != 'e' {
		t.Fatalf("read %q, %v after the wake; want e", buf[:1], err)
	}
	w.Close()
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("after the peer closed: %d, %v; want 0, EOF", n, err)
	}
}

func TestExpectReaderClose(t *testing.T) {
	_, rc := unixPair(t)
	r := NewExpectReader(rc)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	r.Expect(5 * time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	rc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("read on a closed connection: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the connection did not end the read")
	}
}

// TestExpectReaderPlainConn: a connection without a raw fd is read plainly.
func TestExpectReaderPlainConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	r := NewExpectReader(b)
	r.Expect(time.Second) // nothing to poll
	go a.Write([]byte("x"))
	buf := make([]byte, 1)
	if _, err := r.Read(buf); err != nil || buf[0] != 'x' {
		t.Fatalf("read %q, %v", buf, err)
	}
}
