package fastlane

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// unixPair returns the two ends of a real Unix socket connection.
func unixPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("unix", testhelp.SocketPath(t, "spin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestSpinReaderReadsWhatArrivesWhileItPollsAndAfterItParks(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		w, rc := unixPair(t)
		r := newSpinReader(rc, DefaultSpinWait, adaptive, nil, 0, processSlots)
		if r.rc == nil {
			t.Fatal("a Unix connection has no raw fd: the reader would never poll")
		}
		var got bytes.Buffer
		buf := make([]byte, 64)
		for i, delay := range []time.Duration{0, DefaultSpinWait / 5, 20 * DefaultSpinWait, 0} {
			msg := []byte{byte(i), 'x', 'y'}
			go func() {
				time.Sleep(delay)
				w.Write(msg)
			}()
			n, err := io.ReadFull(r, buf[:len(msg)])
			if err != nil {
				t.Fatalf("adaptive %v, message %d (sent after %v): %v", adaptive, i, delay, err)
			}
			got.Write(buf[:n])
			if !bytes.Equal(buf[:n], msg) {
				t.Fatalf("adaptive %v, message %d: read %q, want %q", adaptive, i, buf[:n], msg)
			}
		}
		w.Close()
		if n, err := r.Read(buf); n != 0 || err != io.EOF {
			t.Errorf("adaptive %v: after the peer closed: %d, %v; want 0, EOF", adaptive, n, err)
		}
		if s := processSlots.n.Load(); s != 0 {
			t.Errorf("%d readers still counted as polling after the reads returned", s)
		}
	}
}

func TestSpinReaderStopsPollingForASlowPeerAndResumesForAQuickOne(t *testing.T) {
	w, rc := unixPair(t)
	r := newSpinReader(rc, DefaultSpinWait, true, nil, 0, processSlots)
	buf := make([]byte, 1)
	readNow := func() {
		t.Helper()
		w.Write([]byte{2}) // already there when the read starts
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	read := func(delay time.Duration) {
		t.Helper()
		go func() {
			time.Sleep(delay)
			w.Write([]byte{1})
		}()
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	readNow()
	if r.slow {
		t.Fatal("slow after a read whose data was already there")
	}
	read(20 * DefaultSpinWait)
	if !r.slow {
		t.Fatalf("not slow after a read that waited %v (window %v)", 20*DefaultSpinWait, DefaultSpinWait)
	}
	readNow()
	if r.slow {
		t.Error("still slow after a read that did not wait")
	}
	// A wake makes the next read poll however slow the last one was.
	read(20 * DefaultSpinWait)
	r.wake(DefaultWakeSpinWait)
	if r.woken != DefaultWakeSpinWait {
		t.Fatalf("woken = %v after wake(%v)", r.woken, DefaultWakeSpinWait)
	}
	readNow()
	if r.woken != 0 || r.slow {
		t.Errorf("after the woken read: woken %v, slow %v; want 0, false", r.woken, r.slow)
	}
}

func TestSpinReaderHonoursDeadlinesAndClose(t *testing.T) {
	_, rc := unixPair(t)
	r := newSpinReader(rc, DefaultSpinWait, false, nil, 0, processSlots)
	rc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	start := time.Now()
	_, err := r.Read(make([]byte, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the deadline took %v to end the read", d)
	}
	rc.SetReadDeadline(time.Time{})

	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
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

func TestSpinReaderReportsAReset(t *testing.T) {
	w, rc := unixPair(t)
	r := newSpinReader(rc, DefaultSpinWait, false, nil, 0, processSlots)
	// Unread data at close makes the kernel reset the connection.
	if _, err := rc.Write([]byte("unread")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	w.Close()
	_, err := r.Read(make([]byte, 8))
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read after the peer went: %v, want EOF or ECONNRESET", err)
	}
}

func TestSpinReadersPollOneAtATime(t *testing.T) {
	const readers = 4
	var wg sync.WaitGroup
	stop := make(chan struct{})
	peak := int32(0) // written by the sampler, read after it ended
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			peak = max(peak, processSlots.n.Load())
		}
	}()
	for range readers {
		w, rc := unixPair(t)
		r := newSpinReader(rc, 5*time.Millisecond, false, nil, 0, processSlots)
		wg.Go(func() {
			buf := make([]byte, 1)
			for range 20 {
				go func() { time.Sleep(time.Millisecond); w.Write([]byte{1}) }()
				if _, err := r.Read(buf); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	if peak > processSlots.max {
		t.Errorf("%d readers polled at once, more than %d", peak, processSlots.max)
	}
	if s := processSlots.n.Load(); s != 0 {
		t.Errorf("%d readers still counted as polling", s)
	}
}

// A reader does not poll while other calls are in flight: the CPU is
// theirs, and polling would serve it ahead of them.
func TestSpinReaderDoesNotPollWhileOthersAreInFlight(t *testing.T) {
	w, rc := unixPair(t)
	var busy atomic.Int32
	busy.Store(2)
	r := newSpinReader(rc, 50*time.Millisecond, false, &busy, 1, processSlots)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 1))
		done <- err
	}()
	for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline); {
		if s := processSlots.n.Load(); s != 0 {
			t.Fatalf("%d readers polling with 2 calls in flight (alone = 1)", s)
		}
		time.Sleep(100 * time.Microsecond)
	}
	w.Write([]byte{1})
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Alone, it polls.
	busy.Store(1)
	go func() {
		_, err := r.Read(make([]byte, 1))
		done <- err
	}()
	polled := false
	for deadline := time.Now().Add(40 * time.Millisecond); time.Now().Before(deadline) && !polled; {
		polled = processSlots.n.Load() == 1
	}
	w.Write([]byte{1})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !polled {
		t.Error("a reader alone never polled")
	}
}
