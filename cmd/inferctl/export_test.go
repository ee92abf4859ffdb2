package main

import (
	"bytes"
	"hash/crc32"
	"math/rand"
	"testing"

	"github.com/inferbid/inferbid/runtimes/tensorflow"
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

// TestTableRows: export-variables takes a table of non-empty rows and
// refuses what would divide by zero (zero-byte rows) or allocate a
// negative buffer (a negative size), as a crafted index can say.
func TestTableRows(t *testing.T) {
	for _, c := range []struct {
		ct             tensorflow.CheckpointTensor
		rows, rowBytes int64
		ok             bool
	}{
		{tensorflow.CheckpointTensor{DType: "FLOAT", Shape: []int64{100, 4}, Bytes: 1600}, 100, 16, true},
		{tensorflow.CheckpointTensor{DType: "FLOAT", Shape: []int64{5, 0}, Bytes: 0}, 0, 0, false},
		{tensorflow.CheckpointTensor{DType: "FLOAT", Shape: []int64{100, 4}, Bytes: -100}, 0, 0, false},
		{tensorflow.CheckpointTensor{DType: "FLOAT", Shape: []int64{100, 4}, Bytes: 1600, Offset: -8}, 0, 0, false},
		{tensorflow.CheckpointTensor{DType: "FLOAT", Shape: []int64{3}, Bytes: 10}, 0, 0, false},
		{tensorflow.CheckpointTensor{DType: "STRING", Shape: []int64{3}, Bytes: 30}, 0, 0, false},
		{tensorflow.CheckpointTensor{DType: "FLOAT", Bytes: 4}, 0, 0, false},
	} {
		rows, rowBytes, ok := tableRows(&c.ct)
		if rows != c.rows || rowBytes != c.rowBytes || ok != c.ok {
			t.Errorf("tableRows(%+v) = %d, %d, %v; want %d, %d, %v", c.ct, rows, rowBytes, ok, c.rows, c.rowBytes, c.ok)
		}
	}
}
