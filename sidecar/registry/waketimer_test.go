package registry

import (
	"testing"
	"time"
)

// A set replaces the one before it, each set fires once, and nothing fires
// after close.
func TestWakeTimer(t *testing.T) {
	fired := make(chan time.Time, 10)
	w := newWakeTimer(func() { fired <- time.Now() })
	if w.fallback != nil {
		t.Log("no timerfd here: testing the time.AfterFunc fallback")
	}
	w.set(time.Hour)
	w.set(50 * time.Microsecond)
	<-fired
	w.set(time.Millisecond)
	<-fired
	select {
	case <-fired:
		t.Fatal("one set fired twice")
	case <-time.After(20 * time.Millisecond):
	}
	w.set(10 * time.Millisecond)
	w.close()
	select {
	case <-fired:
		t.Fatal("fired after close")
	case <-time.After(30 * time.Millisecond):
	}
}
