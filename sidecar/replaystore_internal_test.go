package sidecar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes"
)

// TestPutFilesCopyCheckedByStream: putFiles does not read its copy back;
// the stream that follows it is that check, so a stored copy that differs
// from what was read from the source (same size, other bytes) must fail it.
func TestPutFilesCopyCheckedByStream(t *testing.T) {
	src := filepath.Join(t.TempDir(), "model.onnx")
	data := []byte(strings.Repeat("weights ", 1000))
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := newReplayStore(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.putFiles("m/", runtimes.DiskFiles{"model.onnx": src})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := m.stream(0, func(b []byte) bool { got = append(got, b...); return true }); err != nil {
		t.Fatalf("stream of an intact copy: %v", err)
	}
	if string(got) != string(data) {
		t.Fatalf("streamed %d bytes, not the %d of the source", len(got), len(data))
	}
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 1
	if err := os.WriteFile(m.files[0].blob, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	err = m.stream(0, func([]byte) bool { return true })
	if err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("stream of a copy that differs: %v, want a SHA-256 mismatch", err)
	}
}
