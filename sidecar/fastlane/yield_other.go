//go:build !linux

package fastlane

import "runtime"

// yieldCPU lets other goroutines run; other systems have no portable
// sched_yield in package syscall.
func yieldCPU() { runtime.Gosched() }
