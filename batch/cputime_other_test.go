//go:build !linux

package batch

import "testing"

func reportCPUTime(b *testing.B, body func()) {
	for b.Loop() {
		body()
	}
}
