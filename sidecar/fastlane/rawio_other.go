//go:build !linux

package fastlane

import (
	"runtime"
	"syscall"
)

// rawRead is syscall.Read on systems without the raw path of
// rawio_linux.go.
func rawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	if errno, ok := err.(syscall.Errno); ok {
		return 0, errno
	}
	return max(n, 0), 0
}

// rawWrite is syscall.Write, as rawRead.
func rawWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	if errno, ok := err.(syscall.Errno); ok {
		return 0, errno
	}
	return max(n, 0), 0
}

// yieldCPU lets other goroutines run; other systems have no portable
// sched_yield in package syscall.
func yieldCPU() { runtime.Gosched() }
