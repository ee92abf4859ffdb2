package registry

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// wakeTimer calls fire once after each set, with the precision of a Linux
// timerfd. Go's own timers cannot do sub-millisecond waits: when every
// goroutine is parked, the runtime sleeps in epoll_wait, whose timeout is
// whole milliseconds, so a 50 µs time.Sleep or time.AfterFunc takes about
// 1.1 ms (golang/go#44343). A timerfd read through Go's netpoller wakes
// epoll_wait itself when it expires: a 50 µs wait takes about 60-100 µs.
// Where a timerfd cannot be had, wakeTimer falls back to time.AfterFunc.
type wakeTimer struct {
	fd       int
	f        *os.File
	fallback *time.Timer
}

func newWakeTimer(fire func()) *wakeTimer {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		t := time.AfterFunc(time.Hour, fire)
		t.Stop()
		return &wakeTimer{fd: -1, fallback: t}
	}
	// A non-blocking descriptor makes a pollable *os.File: Read parks the
	// goroutine in the netpoller rather than a thread in read(2).
	w := &wakeTimer{fd: fd, f: os.NewFile(uintptr(fd), "batch-timerfd")}
	go func() {
		var expirations [8]byte
		for {
			if _, err := w.f.Read(expirations[:]); err != nil {
				return // closed
			}
			fire()
		}
	}()
	return w
}

// set arms the timer to fire once after d (> 0), replacing any earlier
// setting.
func (w *wakeTimer) set(d time.Duration) {
	if w.fallback != nil {
		w.fallback.Reset(d)
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
		// Only a closed descriptor fails here; nothing waits on it then.
		return
	}
}

// close stops the timer; fire is not called after close returns, except
// by a call already under way.
func (w *wakeTimer) close() {
	if w.fallback != nil {
		w.fallback.Stop()
		return
	}
	w.f.Close()
}
