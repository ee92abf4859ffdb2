package sidecar

import (
	"runtime"
	"testing"
)

// TestRunNiced: fn runs at a lower priority (loaderNice more, at most 19),
// and neither the caller's thread nor another goroutine's gets it.
func TestRunNiced(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadNice()
	if err != nil {
		t.Fatal(err)
	}
	var inside int
	runNiced(func() {}) // starts the pool
	for range 100 {     // the pool's goroutines wait for jobs
		runNiced(func() { inside, err = threadNice() })
		if inside != before {
			break
		}
		runtime.Gosched()
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := min(before+loaderNice, 19); inside != want {
		t.Errorf("nice inside runNiced = %d, want %d (caller's %d)", inside, want, before)
	}
	if after, _ := threadNice(); after != before {
		t.Errorf("the caller's nice changed from %d to %d", before, after)
	}
	// The niced threads stay with their goroutines: fresh goroutines run
	// at the process's priority.
	for range 20 {
		ch := make(chan int)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			n, _ := threadNice()
			ch <- n
		}()
		if n := <-ch; n != before {
			t.Fatalf("a goroutine after runNiced runs at nice %d, want %d", n, before)
		}
	}
}
