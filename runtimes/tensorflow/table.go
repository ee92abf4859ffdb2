package tensorflow

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/golang/snappy"
)

// TensorFlow's variables.index is a LevelDB table (read with goleveldb).
// goleveldb allocates each block at the size its handle claims before
// reading it, so a corrupt handle could ask for terabytes: checkTable
// first checks that the footer's and the index block's handles lie inside
// the file and that blocks are uncompressed (TensorFlow writes them so).

const (
	tableFooterLen  = 48
	tableMagic      = 0xdb4775248b80fb57
	blockTrailerLen = 5 // compression type + crc32c
)

type blockHandle struct{ offset, size uint64 }

func readHandle(b []byte) (blockHandle, int, error) {
	off, n := binary.Uvarint(b)
	if n <= 0 {
		return blockHandle{}, 0, errors.New("bad block handle")
	}
	size, m := binary.Uvarint(b[n:])
	if m <= 0 {
		return blockHandle{}, 0, errors.New("bad block handle")
	}
	return blockHandle{off, size}, n + m, nil
}

// maxSnappyRatio bounds how much a snappy block may claim to expand (a
// 3-byte copy op yields at most 64 bytes).
const maxSnappyRatio = 32

// tableBlock returns the block's contents after checking it fits in the
// file and, when snappy-compressed (TensorFlow 1.x), that its decoded size
// is plausible; compressed blocks are decoded.
func tableBlock(file []byte, h blockHandle, end uint64) ([]byte, error) {
	if h.offset > end || h.size > end-h.offset || end-h.offset-h.size < blockTrailerLen {
		return nil, fmt.Errorf("block at %d of %d bytes is outside the table (%d bytes)", h.offset, h.size, end)
	}
	raw := file[h.offset : h.offset+h.size]
	switch c := file[h.offset+h.size]; c {
	case 0:
		return raw, nil
	case 1:
		n, err := snappy.DecodedLen(raw)
		if err != nil || uint64(n) > maxSnappyRatio*h.size+64 {
			return nil, fmt.Errorf("block at %d: bad snappy data", h.offset)
		}
		dec, err := snappy.Decode(nil, raw)
		if err != nil {
			return nil, fmt.Errorf("block at %d: %v", h.offset, err)
		}
		return dec, nil
	default:
		return nil, fmt.Errorf("block at %d has unknown compression type %d", h.offset, c)
	}
}

func checkTable(file []byte) error {
	if len(file) < tableFooterLen {
		return fmt.Errorf("%d bytes is too short for a table", len(file))
	}
	footer := file[len(file)-tableFooterLen:]
	if binary.LittleEndian.Uint64(footer[40:]) != tableMagic {
		return errors.New("bad table magic number")
	}
	end := uint64(len(file) - tableFooterLen)
	meta, n, err := readHandle(footer)
	if err != nil {
		return err
	}
	index, _, err := readHandle(footer[n:])
	if err != nil {
		return err
	}
	if _, err := tableBlock(file, meta, end); err != nil {
		return fmt.Errorf("metaindex: %w", err)
	}
	ib, err := tableBlock(file, index, end)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	// Walk the index block's entries: each value is a data block handle.
	if len(ib) < 4 {
		return errors.New("index block too short")
	}
	nRestarts := uint64(binary.LittleEndian.Uint32(ib[len(ib)-4:]))
	if nRestarts*4+4 > uint64(len(ib)) {
		return errors.New("index block restart array is out of range")
	}
	entries := ib[:uint64(len(ib))-4-nRestarts*4]
	for pos := 0; pos < len(entries); {
		var hdr [3]uint64
		for i := range hdr {
			v, k := binary.Uvarint(entries[pos:])
			if k <= 0 {
				return errors.New("bad index block entry")
			}
			hdr[i] = v
			pos += k
		}
		nonShared, valueLen := hdr[1], hdr[2]
		if nonShared > uint64(len(entries)-pos) || valueLen > uint64(len(entries)-pos)-nonShared {
			return errors.New("index block entry is out of range")
		}
		pos += int(nonShared)
		h, _, err := readHandle(entries[pos : pos+int(valueLen)])
		if err != nil {
			return fmt.Errorf("index block entry: %w", err)
		}
		if _, err := tableBlock(file, h, end); err != nil {
			return fmt.Errorf("data %w", err)
		}
		pos += int(valueLen)
	}
	return nil
}
