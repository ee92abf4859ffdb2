package tfsave

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/golang/snappy"
)

// tableWriter writes a LevelDB-format table as TensorFlow's
// tensorflow/core/lib/io/table_builder.cc does for tensor-bundle indexes.
// goleveldb's table.Writer writes the same format but, with compression on,
// compresses every block; TensorFlow 1.x (like LevelDB) snappy-compresses a
// block only when that saves at least an eighth of it (TensorFlow 2 never
// compresses), so the writer is here and goleveldb's reader checks it in
// the tests.
type tableWriter struct {
	out          bytes.Buffer
	block        blockBuilder
	index        blockBuilder
	lastKey      []byte
	pendingIndex bool
	pendingBH    []byte
	entries      int
	snappy       bool
}

const (
	tableBlockSize       = 256 << 10 // TensorFlow's table::Options default
	tableRestartInterval = 16
	tableMagic           = 0xdb4775248b80fb57
	blockTypeRaw         = 0
	blockTypeSnappy      = 1
	footerLen            = 48 // two padded block handles (40) + magic (8)
)

func newTableWriter(snappy bool) *tableWriter {
	return &tableWriter{snappy: snappy, block: blockBuilder{interval: tableRestartInterval}, index: blockBuilder{interval: 1}}
}

// add appends a key, which must sort after the previous one.
func (w *tableWriter) add(key, value []byte) error {
	if w.entries > 0 && bytes.Compare(key, w.lastKey) <= 0 {
		return fmt.Errorf("tfsave: index keys out of order: %q after %q", key, w.lastKey)
	}
	if w.pendingIndex {
		sep := shortestSeparator(w.lastKey, key)
		w.index.add(sep, w.pendingBH)
		w.pendingIndex = false
	}
	w.lastKey = append(w.lastKey[:0], key...)
	w.entries++
	w.block.add(key, value)
	if w.block.sizeEstimate() >= tableBlockSize {
		w.flush()
	}
	return nil
}

func (w *tableWriter) flush() {
	if w.block.empty() {
		return
	}
	w.pendingBH = w.writeBlock(w.block.finish())
	w.block.reset()
	w.pendingIndex = true
}

// finish writes the last data block, the (empty) metaindex block, the index
// block and the footer, and returns the table.
func (w *tableWriter) finish() []byte {
	w.flush()
	meta := blockBuilder{interval: tableRestartInterval}
	metaBH := w.writeBlock(meta.finish())
	if w.pendingIndex {
		w.index.add(shortSuccessor(w.lastKey), w.pendingBH)
		w.pendingIndex = false
	}
	indexBH := w.writeBlock(w.index.finish())
	footer := make([]byte, 0, footerLen)
	footer = append(footer, metaBH...)
	footer = append(footer, indexBH...)
	footer = append(footer, make([]byte, footerLen-8-len(footer))...)
	footer = binary.LittleEndian.AppendUint64(footer, tableMagic)
	w.out.Write(footer)
	return w.out.Bytes()
}

// writeBlock writes contents with its trailer (type byte, masked CRC32C of
// contents and type) and returns the encoded block handle.
func (w *tableWriter) writeBlock(raw []byte) []byte {
	contents, typ := raw, byte(blockTypeRaw)
	if w.snappy {
		if c := snappy.Encode(nil, raw); len(c) < len(raw)-len(raw)/8 {
			contents, typ = c, blockTypeSnappy
		}
	}
	handle := binary.AppendUvarint(nil, uint64(w.out.Len()))
	handle = binary.AppendUvarint(handle, uint64(len(contents)))
	w.out.Write(contents)
	crc := crc32.Update(crc32.Checksum(contents, castagnoli), castagnoli, []byte{typ})
	var trailer [5]byte
	trailer[0] = typ
	binary.LittleEndian.PutUint32(trailer[1:], MaskCRC(crc))
	w.out.Write(trailer[:])
	return handle
}

// blockBuilder builds one block with prefix-compressed keys and restart
// points, as LevelDB's BlockBuilder.
type blockBuilder struct {
	interval int
	buf      []byte
	restarts []uint32
	counter  int
	lastKey  []byte
}

func (b *blockBuilder) empty() bool { return len(b.buf) == 0 }

func (b *blockBuilder) reset() {
	b.buf, b.restarts, b.counter, b.lastKey = b.buf[:0], b.restarts[:0], 0, b.lastKey[:0]
}

func (b *blockBuilder) sizeEstimate() int {
	n := len(b.restarts)
	if n == 0 {
		n = 1
	}
	return len(b.buf) + 4*n + 4
}

func (b *blockBuilder) add(key, value []byte) {
	if len(b.restarts) == 0 {
		b.restarts = append(b.restarts, 0)
	}
	shared := 0
	if b.counter < b.interval {
		for shared < len(key) && shared < len(b.lastKey) && key[shared] == b.lastKey[shared] {
			shared++
		}
	} else {
		b.restarts = append(b.restarts, uint32(len(b.buf)))
		b.counter = 0
	}
	b.buf = binary.AppendUvarint(b.buf, uint64(shared))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(key)-shared))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(value)))
	b.buf = append(b.buf, key[shared:]...)
	b.buf = append(b.buf, value...)
	b.lastKey = append(b.lastKey[:0], key...)
	b.counter++
}

func (b *blockBuilder) finish() []byte {
	if len(b.restarts) == 0 {
		b.restarts = append(b.restarts, 0)
	}
	for _, r := range b.restarts {
		b.buf = binary.LittleEndian.AppendUint32(b.buf, r)
	}
	return binary.LittleEndian.AppendUint32(b.buf, uint32(len(b.restarts)))
}

// shortestSeparator is LevelDB's bytewise FindShortestSeparator: a short key
// k with start <= k < limit.
func shortestSeparator(start, limit []byte) []byte {
	n := 0
	for n < len(start) && n < len(limit) && start[n] == limit[n] {
		n++
	}
	if n < len(start) && n < len(limit) {
		if c := start[n]; c < 0xff && c+1 < limit[n] {
			sep := append([]byte(nil), start[:n+1]...)
			sep[n]++
			return sep
		}
	}
	return append([]byte(nil), start...)
}

// shortSuccessor is LevelDB's bytewise FindShortSuccessor: a short key >=
// key.
func shortSuccessor(key []byte) []byte {
	for i, c := range key {
		if c != 0xff {
			s := append([]byte(nil), key[:i+1]...)
			s[i]++
			return s
		}
	}
	return append([]byte(nil), key...)
}
