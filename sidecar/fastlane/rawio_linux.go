package fastlane

import (
	"syscall"
	"unsafe"
)

// rawRead is a non-blocking read(2) of fd without the runtime's syscall
// bookkeeping (see ConnWriter). p must not be empty.
func rawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// rawWrite is a non-blocking write(2) of fd, as rawRead. p must not be
// empty.
func rawWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// yieldCPU gives the CPU to any other runnable thread on it: the peer a
// polling reader waits for, on a busy machine. Raw, like rawRead: a
// yield that gives the CPU away for a while must not look to the
// runtime like a blocking call whose P it should hand off.
func yieldCPU() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
