package tensorflow

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes/driver"
)

// Memory-mapped variables. A checkpoint data shard of at least
// MapVariablesMinBytes is mapped read-only (MAP_SHARED, PROT_READ,
// MADV_RANDOM): when the model comes from disk (LoadDisk, a streamed
// registration), the received file itself, where it is, kept after the
// sidecar unlinks it (the open file and the mapping keep the inode);
// when it comes as bytes (Load), a copy written once to a file in
// MapVariablesDir and unlinked at once. Either way nothing is left behind
// when the process dies, and the disk space returns when the model is
// closed. Tensors whose dtype has a fixed size and whose offset in the
// shard is aligned for it are then slices of the mapping (numeric dtypes
// are little-endian in the bundle, as on every platform Go supports
// here); the others (strings, bools, unaligned offsets) are copied as
// before. A copy's tensors are CRC32C-checked over the bytes it was
// written from; a received file's only with MapVariablesVerifyCRC (doc.go
// says why), so loading it reads none of its pages. At the end of the
// load every mapped page is dropped from the process (MADV_DONTNEED).
//
// Gathers (GatherV2 along axis 0, ResourceGather) over a mapped table
// read their rows with pread from its file (fileView), not through the
// mapping: a read fault maps the cached pages around the faulting one
// (fault_around_bytes, 64 KiB; since Linux 6.18 the whole large folio,
// which is the whole 1 MiB write that made it), so random lookups
// through the mapping soon map most of a table into the process
// (BenchmarkMappedRowReads). MapVariablesGatherFromMapping reads through
// the mapping instead: a hot row then costs a memory read, not a system
// call.
//
// Nothing may write into a mapped tensor: a write faults (SIGSEGV, fatal in
// Go). Restored tensors were already never written (variables.go: values
// are replaced, not written in place; AssignAdd/Sub make a new tensor,
// Assign and AssignVariableOp take a restored tensor as is, every other
// kernel writes only its own output slots, and outputs are copied out).
// TestMappedVariablesWholeSuite runs the package's model tests with every
// shard mapped to keep it so. Nor may anyone write a received file in
// place once LoadDisk has it (driver.DiskLoader): the sidecar only
// removes them, and a file with other hard links is copied, not mapped.

// littleEndian is true on little-endian hosts, where a bundle's numeric
// bytes are the in-memory representation.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// maxMappedElements bounds the element count of a mapped checkpoint
// tensor: the mapping, not the heap, holds it, so the heap's bound
// (maxModelElements) does not apply.
const maxMappedElements = 1 << 40

// mapOptions say where and from what size shards are mapped; dir == ""
// maps nothing.
type mapOptions struct {
	dir      string
	minBytes int64
	// verifyCRC checks the CRC32C of the tensors served from a received
	// file mapped in place (LoadDisk), which reads every page of it.
	verifyCRC bool
	// fromMapping: gathers read rows through the mapping, not with pread
	// (no fileView).
	fromMapping bool
	// disk are the shards LoadDisk mapped from the received files, by the
	// address of their first byte: mapShards serves them in place.
	disk map[*byte]*diskShard
}

func mapOptionsOf(cfg driver.Config) mapOptions {
	return mapOptions{dir: cfg.MapVariablesDir, minBytes: cfg.MapVariablesMinBytes, verifyCRC: cfg.MapVariablesVerifyCRC, fromMapping: cfg.MapVariablesGatherFromMapping}
}

// diskShard is a received data shard file LoadDisk mapped; adopted once
// mapShards hands it to the model's mappings (which then unmap and close
// it).
type diskShard struct {
	f    *os.File
	data []byte
	// copy: a file with other hard links, whose other owner might write
	// it in place, or a file in memory (tmpfs), which would hold the
	// model in memory for as long as it serves: it is copied to
	// MapVariablesDir (mapShards), not mapped in place.
	copy    bool
	adopted bool
}

// forceMapDir, when set (by tests only), maps every shard of every model
// loaded with no map directory of its own.
var forceMapDir string

// mappings are a model's mapped regions and the files they map (kept
// open: gathers read rows from them, fileView); close unmaps and closes
// them once.
type mappings struct {
	mu      sync.Mutex
	regions [][]byte
	files   []*os.File
	// mapped and copied count the checkpoint bytes served from the
	// mapping and those decoded into the heap.
	mapped, copied atomic.Int64
}

func (m *mappings) add(b []byte, f *os.File) {
	m.mu.Lock()
	m.regions = append(m.regions, b)
	m.files = append(m.files, f)
	m.mu.Unlock()
}

// close unmaps every region. The caller guarantees that nothing reads a
// tensor of the model any more (driver.Model.Close's contract).
func (m *mappings) close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, r := range m.regions {
		if err := unix.Munmap(r); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range m.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	m.regions, m.files = nil, nil
	return errors.Join(errs...)
}

// dropAll drops every mapped page from the process (dropPages): at the end
// of a load, whatever the load read (folding, MatMul weights packed into
// the kernels' own heap copy) leaves the RSS; serving faults in what it
// reads.
func (m *mappings) dropAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.regions {
		dropPages(r)
	}
}

// writeChunk is the size of the writes that fill a mapped shard's file.
const writeChunk = 64 << 10

// mapShard writes b to a new file in dir, maps it read-only, unlinks the
// file and returns the mapping and the file (open, read-only use). An
// empty b is not mapped.
func mapShard(dir, name string, b []byte) (_ []byte, _ *os.File, err error) {
	f, err := os.CreateTemp(dir, "tfvars-*")
	if err != nil {
		return nil, nil, fmt.Errorf("mapping %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	// Unlinked now: the open descriptor, then the mapping, keep the file.
	if err := os.Remove(f.Name()); err != nil {
		return nil, nil, fmt.Errorf("mapping %s: %w", name, err)
	}
	// Written in pieces of the kernel's fault-around size: one large
	// write fills the page cache with large folios, and a read fault then
	// maps a whole folio (up to 2 MiB) where a lookup needs one row.
	for off := 0; off < len(b); off += writeChunk {
		if _, err := f.Write(b[off:min(off+writeChunk, len(b))]); err != nil {
			return nil, nil, fmt.Errorf("mapping %s: writing %s: %w", name, f.Name(), err)
		}
	}
	data, err := mmapFile(f, int64(len(b)))
	if err != nil {
		return nil, nil, fmt.Errorf("mapping %s: %w", name, err)
	}
	return data, f, nil
}

// mmapFile maps the first size bytes of f read-only (MAP_SHARED).
// Lookups read rows at random: no readahead when pages come back from
// disk, and no huge-page mappings. (The kernel still maps the pages
// around a faulting one that are in the page cache: at least 64 KiB, its
// fault_around_bytes, and since Linux 6.18 the whole large folio; hence
// gathers read rows with pread instead, fileView.)
func mmapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, fmt.Errorf("mmap: size %d", size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap (%d bytes): %w", size, err)
	}
	_ = unix.Madvise(data, unix.MADV_RANDOM)
	_ = unix.Madvise(data, unix.MADV_NOHUGEPAGE)
	_ = unix.Fadvise(int(f.Fd()), 0, size, unix.FADV_RANDOM)
	return data, nil
}

// viewMapped makes t (dtype and shape set) a view of b when t's dtype has
// a fixed size, b is aligned for it and the host is little-endian;
// otherwise it returns false and t is untouched.
func viewMapped(t *dense, b []byte) bool {
	if !littleEndian || len(b) == 0 {
		return false
	}
	n := len(b) / max(elemSize(t.dt), 1)
	p := unsafe.Pointer(unsafe.SliceData(b))
	aligned := func(a uintptr) bool { return uintptr(p)%a == 0 }
	switch t.dt {
	case dtFloat:
		if !aligned(4) {
			return false
		}
		t.f32 = unsafe.Slice((*float32)(p), n)
	case dtDouble:
		if !aligned(8) {
			return false
		}
		t.f64 = unsafe.Slice((*float64)(p), n)
	case dtInt32:
		if !aligned(4) {
			return false
		}
		t.i32 = unsafe.Slice((*int32)(p), n)
	case dtInt64:
		if !aligned(8) {
			return false
		}
		t.i64 = unsafe.Slice((*int64)(p), n)
	case dtInt16:
		if !aligned(2) {
			return false
		}
		t.i16 = unsafe.Slice((*int16)(p), n)
	case dtInt8:
		t.i8 = unsafe.Slice((*int8)(p), n)
	case dtUint8:
		t.u8 = b
	default: // strings, and bools (a byte other than 0 or 1 is no Go bool)
		return false
	}
	return true
}

// dropPages tells the kernel the process no longer needs the whole pages
// inside b (a part of a read-only file mapping): they leave the process's
// RSS and fault back in from the page cache (or the file) when read.
func dropPages(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(len(b))
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}

// mapShards replaces the shards of at least opts.minBytes (all of them
// when minBytes <= 0) with read-only mappings of a copy written to
// opts.dir (none when dir is ""). The returned mappings belong to the
// model and count its mapped and copied bytes; on error, nothing stays
// mapped.
func (ck *checkpoint) mapShards(opts mapOptions, prefix string) (*mappings, error) {
	maps := &mappings{}
	if ck == nil {
		return maps, nil
	}
	ck.maps = maps
	if opts.dir == "" {
		return maps, nil
	}
	mapped := make([]bool, len(ck.shards))
	src := make([][]byte, len(ck.shards))
	files := make([]*os.File, len(ck.shards))
	for i, b := range ck.shards {
		if len(b) == 0 || int64(len(b)) < opts.minBytes {
			continue
		}
		if d := opts.disk[unsafe.SliceData(b)]; d != nil && len(d.data) == len(b) && !d.adopted && !d.copy {
			// A received file, mapped where it is: served in place.
			d.adopted = true
			maps.add(d.data, d.f)
			files[i], mapped[i] = d.f, true
			continue
		}
		name := fmt.Sprintf("%s.data-%05d-of-%05d", prefix, i, len(ck.shards))
		data, f, err := mapShard(opts.dir, name, b)
		if err != nil {
			_ = maps.close()
			return nil, err
		}
		maps.add(data, f)
		src[i], files[i] = b, f
		ck.shards[i], mapped[i] = data, true
	}
	if opts.fromMapping {
		files = make([]*os.File, len(ck.shards)) // no fileView
	}
	ck.mapped, ck.src, ck.files, ck.verifyCRC = mapped, src, files, opts.verifyCRC
	return maps, nil
}

// readMapped serves the tensor under key from its mapped shard's bytes b:
// ok is false when it cannot be a view (dtype, alignment or size), and the
// caller decodes a copy instead.
func (ck *checkpoint) readMapped(key string, e *cpb.BundleEntryProto, shape []int64, b []byte) (_ *dense, ok bool, _ error) {
	// The CRC of a shard mapped from a copy is computed over the bytes the
	// copy was written from while the load still has them, so the load
	// does not read the mapping. A received file mapped in place (LoadDisk)
	// is checked only with verifyCRC: see doc.go.
	sum, check := b, ck.verifyCRC
	if ck.src != nil && ck.src[e.ShardId] != nil {
		sum, check = ck.src[e.ShardId][e.Offset:e.Offset+e.Size], true
	}
	size := elemSize(e.Dtype)
	if size == 0 || int64(len(b)) != int64(numElems(shape))*int64(size) {
		return nil, false, nil
	}
	t := &dense{dt: e.Dtype, shape: shape}
	if !viewMapped(t, b) {
		return nil, false, nil
	}
	if check {
		crc := crc32.Checksum(sum, crcTable)
		if len(sum) > 0 && &sum[0] == &b[0] {
			dropPages(b) // read through the mapping: not kept in the RSS
		}
		if maskCRC(crc) != e.Crc32C {
			return nil, true, fmt.Errorf("%w: tensor %q: crc32c %08x, index says %08x", ErrChecksum, key, maskCRC(crc), e.Crc32C)
		}
	}
	if f := ck.files[e.ShardId]; f != nil {
		t.file = &fileView{f: f, off: e.Offset, base: unsafe.SliceData(b), size: len(b)}
	}
	ck.maps.mapped.Add(int64(len(b)))
	return t, true, nil
}

// WeightMemory reports how the model's checkpoint tensors are held:
// served from the mapping, or decoded into the heap (unmapped shards,
// strings, bools, unaligned tensors). A model loaded without mapping
// reports every checkpoint tensor it read as copied.
func (m *model) WeightMemory() driver.WeightMemory {
	return driver.WeightMemory{MappedBytes: m.maps.mapped.Load(), CopiedBytes: m.maps.copied.Load()}
}

// MapsFile reports whether a model file is a checkpoint data shard
// (".../variables/variables.data-NNNNN-of-NNNNN") this backend maps.
func (b *Backend) MapsFile(name string, size int64) bool {
	if b.cfg.MapVariablesDir == "" || size < b.cfg.MapVariablesMinBytes || size == 0 {
		return false
	}
	dir, base := path.Split(name)
	return path.Base(dir) == "variables" && strings.HasPrefix(base, "variables.data-")
}

var _ driver.DiskLoader = (*Backend)(nil)

// LoadDisk (driver.DiskLoader) is Load from the files of a streamed
// registration. The data shards this backend maps (MapsFile) are mapped
// read-only (MAP_SHARED) where they are, and the model keeps the mappings
// and the open files: the caller may then unlink them (the inode lives on
// until Close), but must never write them in place. (A file with other
// hard links, which another owner might write, or on tmpfs, is copied to
// MapVariablesDir through a temporary mapping instead, as Load does:
// mapInPlace.) Otherwise nothing is copied to MapVariablesDir and no
// CRC32C is computed over them unless MapVariablesVerifyCRC is set
// (doc.go says why), so the load reads none of their pages. Other files
// are read into memory, as Runtime.LoadDisk does for backends that
// cannot.
func (b *Backend) LoadDisk(ctx context.Context, files driver.DiskFiles) (driver.Model, error) {
	mem := make(driver.Files, len(files))
	disk := map[*byte]*diskShard{}
	defer func() {
		// Those the model did not adopt (a load that failed, a file that
		// was no shard of the checkpoint after all).
		for _, d := range disk {
			if !d.adopted {
				_ = unix.Munmap(d.data)
				_ = d.f.Close()
			}
		}
	}()
	for name, local := range files {
		st, err := os.Stat(local)
		if err != nil {
			return nil, fmt.Errorf("file %s: %w", name, err)
		}
		if !b.MapsFile(name, st.Size()) {
			if mem[name], err = os.ReadFile(local); err != nil {
				return nil, fmt.Errorf("file %s: %w", name, err)
			}
			continue
		}
		f, err := os.Open(local)
		if err != nil {
			return nil, fmt.Errorf("file %s: %w", name, err)
		}
		data, err := mmapFile(f, st.Size())
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("file %s: %w", name, err)
		}
		d := &diskShard{f: f, data: data, copy: !mapInPlace(f, st)}
		if d.copy {
			_ = unix.Madvise(data, unix.MADV_SEQUENTIAL) // read once, in order, by the copy
		}
		disk[unsafe.SliceData(data)] = d
		mem[name] = data
	}
	if b.cfg.NumIntraopThreads < 0 {
		return nil, fmt.Errorf("num_intraop_threads is %d, want >= 0 (0: all cores)", b.cfg.NumIntraopThreads)
	}
	mo := mapOptionsOf(b.cfg)
	mo.disk = disk
	return b.load(ctx, mo, mem)
}

// mapInPlace reports whether a received file may be served from a
// mapping of itself: it is read-only (no write permission for anyone: the
// sidecar supervisor's replay store seals its files so, and the sidecar
// links them) or has no other hard link (an owner who might write it in
// place), and it is not in memory (tmpfs, ramfs: the mapping would keep
// the model in memory for as long as it serves, where a copy in
// MapVariablesDir, on disk, leaves only what the page cache can spare).
func mapInPlace(f *os.File, st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || (sys.Nlink != 1 && st.Mode().Perm()&0o222 != 0) {
		return false
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return false
	}
	return fs.Type != unix.TMPFS_MAGIC && fs.Type != unix.RAMFS_MAGIC
}

// fileView says where a mapped tensor's bytes are in the file its
// mapping maps, so that a gather reads its rows with pread (readRows)
// rather than through the mapping: a read fault maps every page of the
// page cache around the faulting one (fault_around_bytes, 64 KiB, and on
// Linux 6.18 the whole large folio, up to 2 MiB for a file written in
// large pieces), so random row lookups through the mapping soon map most
// of a table into the process; pread copies just the row out of the page
// cache and maps nothing.
type fileView struct {
	f    *os.File
	off  int64 // the tensor's offset in the file
	base *byte // the tensor's first byte in the mapping
	size int   // the tensor's bytes
}

// readRows is a gather along axis 0 from src, the bytes of a tensor of
// limit rows of rowBytes each that fv describes: it reads the rows at idx
// into dst (len(idx)*rowBytes bytes) with pread. ok is false when fv does
// not describe src (a view a kernel made of the tensor: the caller reads
// the memory then).
func (fv *fileView) readRows(dst []byte, src []byte, idx []int64, limit int64, rowBytes int) (ok bool, _ error) {
	if fv == nil || len(src) != fv.size || unsafe.SliceData(src) != fv.base || int64(rowBytes)*limit != int64(fv.size) {
		return false, nil
	}
	for k, i := range idx {
		if i < 0 || i >= limit {
			return true, fmt.Errorf("index %d is out of range [0, %d)", i, limit)
		}
		if _, err := fv.f.ReadAt(dst[k*rowBytes:(k+1)*rowBytes], fv.off+i*int64(rowBytes)); err != nil {
			return true, fmt.Errorf("reading row %d of a memory-mapped tensor from its file: %w", i, err)
		}
	}
	return true, nil
}

// bytesOf views a slice's elements as bytes.
func bytesOf[T elem](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*elemBytes[T]())
}

// elemBytes is the size of a T.
func elemBytes[T elem]() int {
	var z T
	return int(unsafe.Sizeof(z))
}
