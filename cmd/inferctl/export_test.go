package main

import (
	"bytes"
	"hash/crc32"
	"math/rand"
	"testing"
)

// TestSectionCRC: written in writes of any sizes, sectionCRC takes the
// CRC32C of exactly the bytes at [off, off+n) and counts every byte.
func TestSectionCRC(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	b := make([]byte, 5000)
	rng.Read(b)
	for _, sec := range [][2]int64{{0, 5000}, {0, 1}, {17, 300}, {4999, 1}, {1234, 0}, {100, 4900}} {
		off, n := sec[0], sec[1]
		c := &sectionCRC{off: off, n: n}
		r := bytes.NewReader(b)
		for r.Len() > 0 {
			p := make([]byte, 1+rng.Intn(700))
			k, _ := r.Read(p)
			c.Write(p[:k])
		}
		if want := crc32.Checksum(b[off:off+n], castagnoli); c.sum != want || c.pos != int64(len(b)) {
			t.Errorf("[%d, %d): crc %08x pos %d, want %08x pos %d", off, off+n, c.sum, c.pos, want, len(b))
		}
	}
}
