package pytorch

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// preflight checks a TorchScript file before libtorch parses it, so that a
// corrupt or hostile file is refused with a clear error instead of making
// libtorch's reader allocate what a length field claims (a 4 GiB string
// from one flipped byte of data.pkl was found by FuzzLoad). It checks the zip
// structure (sizes that fit the file, stored or deflated entries, CRCs) and
// walks every pickle (*.pkl, *.debug_pkl) opcode by opcode, checking that
// each length and memo index fits the pickle. It allocates at most the size
// of the largest pickle.
func preflight(data []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("not a TorchScript file (zip): %w", err)
	}
	if len(zr.File) == 0 {
		return fmt.Errorf("not a TorchScript file: empty zip")
	}
	size := uint64(len(data))
	for _, f := range zr.File {
		switch f.Method {
		case zip.Store:
			if f.UncompressedSize64 != f.CompressedSize64 || f.UncompressedSize64 > size {
				return fmt.Errorf("corrupt TorchScript file: entry %q claims %d bytes stored in %d (file is %d bytes)", f.Name, f.UncompressedSize64, f.CompressedSize64, size)
			}
		case zip.Deflate:
			// Deflate expands at most 1032:1.
			if f.CompressedSize64 > size || f.UncompressedSize64 > 1032*f.CompressedSize64+1024 {
				return fmt.Errorf("corrupt TorchScript file: entry %q claims %d bytes deflated from %d", f.Name, f.UncompressedSize64, f.CompressedSize64)
			}
		default:
			return fmt.Errorf("corrupt TorchScript file: entry %q uses zip method %d", f.Name, f.Method)
		}
		isPickle := strings.HasSuffix(f.Name, ".pkl") || strings.HasSuffix(f.Name, ".debug_pkl")
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("corrupt TorchScript file: entry %q: %w", f.Name, err)
		}
		if isPickle {
			var b []byte
			b, err = io.ReadAll(io.LimitReader(rc, int64(f.UncompressedSize64)+1))
			if err == nil {
				err = checkPickle(b)
			}
		} else {
			_, err = io.Copy(io.Discard, rc) // checks the CRC
		}
		rc.Close()
		if err != nil {
			return fmt.Errorf("corrupt TorchScript file: entry %q: %w", f.Name, err)
		}
	}
	return nil
}

// Pickle opcode argument kinds.
const (
	argNone   = iota
	argFixed  // n bytes
	argLen    // an n-byte little-endian length, then that many bytes
	argLine   // one newline-terminated line
	argLines2 // two newline-terminated lines
	argMemo   // an n-byte memo index
)

type pickleOp struct {
	kind int
	n    int
}

// pickleOps are the opcodes of pickle protocols 0-5 (see Python's
// pickletools) with the shape of their arguments.
var pickleOps = func() map[byte]pickleOp {
	ops := map[byte]pickleOp{}
	for _, c := range []byte("(.012N\x88\x89)]}\x8faelt\x85\x86\x87dsu\x90\x91bo\x81\x92R\x93\x94Q\x97\x98") {
		ops[c] = pickleOp{argNone, 0}
	}
	for c, n := range map[byte]int{'K': 1, '\x80': 1, '\x82': 1, 'M': 2, '\x83': 2, 'J': 4, '\x84': 4, 'G': 8} {
		ops[c] = pickleOp{argFixed, n}
	}
	for c, n := range map[byte]int{'q': 1, 'h': 1, 'r': 4, 'j': 4} {
		ops[c] = pickleOp{argMemo, n}
	}
	for c, n := range map[byte]int{'U': 1, 'C': 1, '\x8c': 1, '\x8a': 1, 'T': 4, 'B': 4, 'X': 4, '\x8b': 4, '\x8e': 8, '\x8d': 8, '\x96': 8, '\x95': 8} {
		ops[c] = pickleOp{argLen, n}
	}
	for _, c := range "ILFSVPgp" {
		ops[byte(c)] = pickleOp{argLine, 0}
	}
	ops['c'] = pickleOp{argLines2, 0}
	ops['i'] = pickleOp{argLines2, 0}
	return ops
}()

// checkPickle walks a pickle's opcodes up to STOP.
func checkPickle(p []byte) error {
	for i := 0; i < len(p); {
		at := i
		c := p[i]
		i++
		if c == '.' {
			return nil
		}
		op, ok := pickleOps[c]
		if !ok {
			return fmt.Errorf("pickle: unknown opcode 0x%02x at byte %d", c, at)
		}
		rest := uint64(len(p) - i)
		switch op.kind {
		case argFixed, argMemo, argLen:
			if uint64(op.n) > rest {
				return fmt.Errorf("pickle: opcode 0x%02x at byte %d is cut short", c, at)
			}
			var v uint64
			var buf [8]byte
			copy(buf[:], p[i:i+op.n])
			v = binary.LittleEndian.Uint64(buf[:])
			i += op.n
			rest -= uint64(op.n)
			switch op.kind {
			case argMemo:
				// Memo indices count stored objects: never more than bytes.
				if v > uint64(len(p)) {
					return fmt.Errorf("pickle: memo index %d at byte %d exceeds the pickle's size", v, at)
				}
			case argLen:
				if c == '\x95' { // FRAME: a length of what follows, no payload of its own
					if v > rest {
						return fmt.Errorf("pickle: frame of %d bytes at byte %d, %d remain", v, at, rest)
					}
					continue
				}
				if v > rest {
					return fmt.Errorf("pickle: opcode 0x%02x at byte %d claims %d bytes, %d remain", c, at, v, rest)
				}
				i += int(v)
			}
		case argLine, argLines2:
			lines := 1
			if op.kind == argLines2 {
				lines = 2
			}
			for range lines {
				nl := bytes.IndexByte(p[i:], '\n')
				if nl < 0 {
					return fmt.Errorf("pickle: opcode 0x%02x at byte %d has no line end", c, at)
				}
				i += nl + 1
			}
		}
	}
	return fmt.Errorf("pickle: no STOP opcode")
}
