package tensorflow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"

	"github.com/syndtr/goleveldb/leveldb/iterator"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/storage"
	"github.com/syndtr/goleveldb/leveldb/table"
	"google.golang.org/protobuf/proto"

	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// checkpoint is a TensorFlow tensor bundle (variables.index + data shards)
// held in memory. Tensors are decoded and checksummed when read.
type checkpoint struct {
	entries map[string]*cpb.BundleEntryProto
	shards  [][]byte
	// mapped[i] says shard i is a read-only mapping (mmap.go), whose
	// tensors are views where their dtype allows; maps holds the model's
	// mappings and counts (nil when nothing is mapped).
	mapped []bool
	maps   *mappings
	// src[i] is the bytes mapped shard i was written from, while the
	// load has them (CRCs are computed over them); nil after the load,
	// and for a received file mapped in place (LoadDisk).
	src [][]byte
	// files[i] is the file mapped shard i maps (fileView); verifyCRC
	// checks the tensors of a file mapped in place (mapOptions).
	files     []*os.File
	verifyCRC bool
	// external are the variables served from a store (external.go): read
	// gives their placeholders.
	external externalVars
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// maskCRC is LevelDB's/TensorFlow's masked CRC32C.
func maskCRC(c uint32) uint32 { return ((c >> 15) | (c << 17)) + 0xa282ead8 }

// readIndex reads a bundle's index (the LevelDB table variables.index,
// named name in errors): its entries and its header, which it checks is
// there. parseCheckpoint and CheckpointTensors read indexes with it.
func readIndex(index []byte, name string) (entries map[string]*cpb.BundleEntryProto, header *cpb.BundleHeaderProto, err error) {
	defer func() {
		if r := recover(); r != nil {
			entries, header, err = nil, nil, fmt.Errorf("%w: %s: table reader failed: %v", ErrCorruptCheckpoint, name, r)
		}
	}()
	if err := checkTable(index); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrCorruptCheckpoint, name, err)
	}
	o := &opt.Options{Strict: opt.StrictAll}
	r, err := table.NewReader(bytes.NewReader(index), int64(len(index)), storage.FileDesc{Type: storage.TypeTable}, nil, nil, o)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrCorruptCheckpoint, name, err)
	}
	defer r.Release()
	it := r.NewIterator(nil, nil)
	defer it.Release()
	ck := &checkpoint{entries: map[string]*cpb.BundleEntryProto{}}
	if err := readEntries(it, ck, &header); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrCorruptCheckpoint, name, err)
	}
	if header == nil {
		return nil, nil, fmt.Errorf("%w: %s: no bundle header", ErrCorruptCheckpoint, name)
	}
	return ck.entries, header, nil
}

// parseCheckpoint reads the bundle whose index is index and whose data
// shards are named prefix + ".data-XXXXX-of-YYYYY" in files.
func parseCheckpoint(index []byte, prefix string, files map[string][]byte) (*checkpoint, error) {
	entries, header, err := readIndex(index, prefix+".index")
	if err != nil {
		return nil, err
	}
	ck := &checkpoint{entries: entries}
	if header.Endianness != cpb.BundleHeaderProto_LITTLE {
		return nil, fmt.Errorf("%w: %s.index: big-endian bundles are not supported", ErrCorruptCheckpoint, prefix)
	}
	n := int(header.NumShards)
	if n < 0 || n > 1<<16 {
		return nil, fmt.Errorf("%w: %s.index: num_shards %d", ErrCorruptCheckpoint, prefix, header.NumShards)
	}
	ck.shards = make([][]byte, n)
	for i := range n {
		name := fmt.Sprintf("%s.data-%05d-of-%05d", prefix, i, n)
		b, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("%w: missing checkpoint shard %s", ErrCorruptCheckpoint, name)
		}
		ck.shards[i] = b
	}
	for key, e := range ck.entries {
		if len(e.Slices) > 0 {
			return nil, fmt.Errorf("%w: %s.index: tensor %q is partitioned (slices), not supported", ErrCorruptCheckpoint, prefix, key)
		}
		if e.ShardId < 0 || int(e.ShardId) >= n || e.Offset < 0 || e.Size < 0 || e.Offset > int64(len(ck.shards[e.ShardId]))-e.Size {
			return nil, fmt.Errorf("%w: %s.index: tensor %q points outside its data shard (shard %d, offset %d, size %d)", ErrCorruptCheckpoint, prefix, key, e.ShardId, e.Offset, e.Size)
		}
	}
	return ck, nil
}

func readEntries(it iterator.Iterator, ck *checkpoint, header **cpb.BundleHeaderProto) error {
	for it.Next() {
		key, val := it.Key(), it.Value()
		if len(key) == 0 {
			h := &cpb.BundleHeaderProto{}
			if err := proto.Unmarshal(val, h); err != nil {
				return fmt.Errorf("bundle header: %v", err)
			}
			*header = h
			continue
		}
		e := &cpb.BundleEntryProto{}
		if err := proto.Unmarshal(val, e); err != nil {
			return fmt.Errorf("entry %q: %v", key, err)
		}
		ck.entries[string(key)] = e
	}
	return it.Error()
}

// read decodes the tensor stored under key, checking its CRC, dtype and,
// when want is not nil, its shape.
func (ck *checkpoint) read(key string, want dtype) (*dense, error) {
	e, ok := ck.entries[key]
	if !ok {
		return nil, fmt.Errorf("%w: tensor %q is not in the checkpoint", ErrCorruptCheckpoint, key)
	}
	if want != 0 && e.Dtype != want {
		return nil, fmt.Errorf("%w: tensor %q is %s in the checkpoint, the graph restores it as %s", ErrCorruptCheckpoint, key, dtypeName(e.Dtype), dtypeName(want))
	}
	if x := ck.external[key]; x != nil {
		return x.placeholder(e)
	}
	mapped := ck.mapped != nil && ck.mapped[e.ShardId]
	shape, err := shapeOf(e.Shape)
	if err != nil && mapped {
		shape, err = shapeWithin(e.Shape, maxMappedElements)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %v", ErrCorruptCheckpoint, key, err)
	}
	b := ck.shards[e.ShardId][e.Offset : e.Offset+e.Size]
	if mapped {
		if t, ok, err := ck.readMapped(key, e, shape, b); ok {
			return t, err
		}
		if n := numElems(shape); n > maxModelElements {
			return nil, fmt.Errorf("%w: tensor %q has %d elements of %s, which cannot be served from the mapping (dtype or alignment) and are too many to copy (more than %d)", ErrCorruptCheckpoint, key, n, dtypeName(e.Dtype), maxModelElements)
		}
		if ck.src != nil && ck.src[e.ShardId] != nil {
			b = ck.src[e.ShardId][e.Offset : e.Offset+e.Size] // copy from the heap bytes
		}
	}
	t, crc, err := decodeBundleTensor(e.Dtype, shape, b)
	if err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %v", ErrCorruptCheckpoint, key, err)
	}
	if ck.maps != nil {
		ck.maps.copied.Add(int64(len(b)))
	}
	if maskCRC(crc) != e.Crc32C {
		return nil, fmt.Errorf("%w: tensor %q: crc32c %08x, index says %08x", ErrChecksum, key, maskCRC(crc), e.Crc32C)
	}
	return t, nil
}

// decodeBundleTensor decodes a tensor's bytes and returns the (unmasked)
// CRC32C the bundle format defines for it.
func decodeBundleTensor(dt dtype, shape []int64, b []byte) (*dense, uint32, error) {
	n := numElems(shape)
	t := &dense{dt: dt, shape: shape}
	if dt == dtString {
		return decodeBundleStrings(t, n, b)
	}
	size := elemSize(dt)
	if size == 0 {
		return nil, 0, fmt.Errorf("dtype %s is not supported", dtypeName(dt))
	}
	if len(b) != n*size {
		return nil, 0, fmt.Errorf("%d bytes for %d elements of %s", len(b), n, dtypeName(dt))
	}
	if err := decodeRaw(t, b); err != nil {
		return nil, 0, err
	}
	return t, crc32.Checksum(b, crcTable), nil
}

// decodeBundleStrings reads varint64 lengths, a masked CRC of the lengths
// (each hashed as a little-endian uint32), then the bytes.
func decodeBundleStrings(t *dense, n int, b []byte) (*dense, uint32, error) {
	lens := make([]uint64, n)
	var crc uint32
	pos := 0
	var le [4]byte
	for i := range n {
		v, k := binary.Uvarint(b[pos:])
		if k <= 0 {
			return nil, 0, errors.New("bad string length")
		}
		pos += k
		lens[i] = v
		binary.LittleEndian.PutUint32(le[:], uint32(v))
		crc = crc32.Update(crc, crcTable, le[:])
	}
	if len(b)-pos < 4 {
		return nil, 0, errors.New("string tensor truncated")
	}
	lenCRC := binary.LittleEndian.Uint32(b[pos:])
	if lenCRC != maskCRC(crc) {
		return nil, 0, fmt.Errorf("%w: string lengths crc32c mismatch", ErrChecksum)
	}
	crc = crc32.Update(crc, crcTable, b[pos:pos+4])
	pos += 4
	t.s = make([]string, n)
	for i, l := range lens {
		if l > uint64(len(b)-pos) {
			return nil, 0, errors.New("string tensor truncated")
		}
		t.s[i] = string(b[pos : pos+int(l)])
		crc = crc32.Update(crc, crcTable, b[pos:pos+int(l)])
		pos += int(l)
	}
	if pos != len(b) {
		return nil, 0, fmt.Errorf("%d trailing bytes after string tensor", len(b)-pos)
	}
	return t, crc, nil
}

func elemSize(dt dtype) int {
	switch dt {
	case dtFloat, dtInt32:
		return 4
	case dtDouble, dtInt64:
		return 8
	case dtInt16:
		return 2
	case dtInt8, dtUint8, dtBool:
		return 1
	}
	return 0
}

// decodeRaw fills t (dtype and shape set) from little-endian bytes whose
// length matches.
func decodeRaw(t *dense, b []byte) error {
	n := numElems(t.shape)
	switch t.dt {
	case dtFloat:
		t.f32 = make([]float32, n)
		for i := range t.f32 {
			t.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case dtDouble:
		t.f64 = make([]float64, n)
		for i := range t.f64 {
			t.f64[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case dtInt32:
		t.i32 = make([]int32, n)
		for i := range t.i32 {
			t.i32[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case dtInt64:
		t.i64 = make([]int64, n)
		for i := range t.i64 {
			t.i64[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case dtInt16:
		t.i16 = make([]int16, n)
		for i := range t.i16 {
			t.i16[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case dtInt8:
		t.i8 = make([]int8, n)
		for i := range t.i8 {
			t.i8[i] = int8(b[i])
		}
	case dtUint8:
		t.u8 = append([]uint8(nil), b[:n]...)
	case dtBool:
		t.b = make([]bool, n)
		for i := range t.b {
			t.b[i] = b[i] != 0
		}
	default:
		return fmt.Errorf("dtype %s is not supported", dtypeName(t.dt))
	}
	return nil
}
