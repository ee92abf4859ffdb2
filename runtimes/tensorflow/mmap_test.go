package tensorflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// embeddingModel is a SavedModel whose serving_default gathers rows of a
// [rows, dim] float32 table (variable "table", by GatherV2 on its read
// value, or ResourceGather) at int64 ids [-1]. A variable "a_prefix" of
// prefix int8 bytes sorts before the table in the bundle, so the table's
// offset in the data shard is prefix (mod 4: its alignment).
func embeddingModel(t testing.TB, rows, dim, prefix int, resource bool) map[string][]byte {
	t.Helper()
	files, err := buildEmbeddingModel(rows, dim, prefix, resource)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func buildEmbeddingModel(rows, dim, prefix int, resource bool) (map[string][]byte, error) {
	b := tfsave.NewBuilder()
	ids := b.Placeholder("serving_default_ids", tensor.Int64, []int64{-1})
	p := make([]int8, prefix)
	for i := range p {
		p[i] = int8(i + 1)
	}
	pre := b.Variable("a_prefix", tensor.New("", []int64{int64(prefix)}, p))
	table := make([]float32, rows*dim)
	for i := range table {
		table[i] = float32(i%9973)*0.25 - float32(i%7)
	}
	v := b.Variable("table", tensor.New("", []int64{int64(rows), int64(dim)}, table))
	var g string
	if resource {
		g = b.OpNamed("lookup", "ResourceGather", []string{v.Handle, ids}, map[string]any{"dtype": tensor.Float})
	} else {
		g = b.OpNamed("lookup", "GatherV2", []string{v.Value, ids, tfsave.ConstOf[int32](b, "axis", []int64{}, 0)}, nil)
	}
	out := b.OpNamed("emb", "Identity", []string{g}, nil)
	pc := b.OpNamed("prefix_out", "Identity", []string{pre.Value}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"ids": ids}, map[string]string{"emb": out, "prefix": pc})
	return b.Files()
}

func loadWith(t *testing.T, cfg driver.Config, files map[string][]byte) *model {
	t.Helper()
	m, err := New(cfg).Load(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	return m.(*model)
}

func predictIDs(t *testing.T, m *model, ids ...int64) []tensor.Tensor {
	t.Helper()
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("ids", []int64{int64(len(ids))}, ids)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMappedVariablesServeSameAnswers(t *testing.T) {
	for _, resource := range []bool{false, true} {
		files := embeddingModel(t, 1000, 16, 4, resource)
		dir := t.TempDir()
		heap := loadWith(t, driver.Config{}, files)
		mapped := loadWith(t, driver.Config{MapVariablesDir: dir}, files)
		ids := []int64{0, 999, 17, 17, 500}
		want, got := predictIDs(t, heap, ids...), predictIDs(t, mapped, ids...)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("resource=%v: mapped answers %v, in-heap %v", resource, got, want)
		}
		// The table's values, as written.
		row := got[0].Data.([]float32)[16:32] // id 999
		for j, v := range row {
			i := 999*16 + j
			if w := float32(i%9973)*0.25 - float32(i%7); math.Float32bits(v) != math.Float32bits(w) {
				t.Fatalf("row 999[%d] = %v, want %v", j, v, w)
			}
		}
		wm := mapped.WeightMemory()
		if wm.MappedBytes < 1000*16*4 {
			t.Errorf("resource=%v: %d bytes mapped, want at least the table's %d", resource, wm.MappedBytes, 1000*16*4)
		}
		if hm := heap.WeightMemory(); forceMapDir == "" && (hm.MappedBytes != 0 || hm.CopiedBytes < 1000*16*4) {
			t.Errorf("in-heap model reports %+v", hm)
		}
		// The file is unlinked at once: nothing is left in the directory.
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s holds %d files after the load, want none (unlinked)", dir, len(ents))
		}
		if err := mapped.Close(); err != nil {
			t.Fatal(err)
		}
		if err := heap.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A table at an unaligned offset cannot be a []float32 view of the mapping:
// it is copied, answers are the same, and the report says so.
func TestMappedVariablesUnalignedFallsBackToCopy(t *testing.T) {
	files := embeddingModel(t, 300, 8, 3, false)
	heap := loadWith(t, driver.Config{}, files)
	mapped := loadWith(t, driver.Config{MapVariablesDir: t.TempDir()}, files)
	defer mapped.Close()
	ids := []int64{299, 0, 150}
	if want, got := predictIDs(t, heap, ids...), predictIDs(t, mapped, ids...); !reflect.DeepEqual(want, got) {
		t.Fatalf("mapped answers %v, in-heap %v", got, want)
	}
	wm := mapped.WeightMemory()
	if wm.CopiedBytes < 300*8*4 {
		t.Errorf("unaligned table: %+v, want its %d bytes copied", wm, 300*8*4)
	}
	if wm.MappedBytes >= 300*8*4 {
		t.Errorf("unaligned table: %+v, it cannot be mapped", wm)
	}
}

// Shards under MapVariablesMinBytes stay in the heap.
func TestMappedVariablesMinBytes(t *testing.T) {
	files := embeddingModel(t, 100, 4, 4, false)
	m := loadWith(t, driver.Config{MapVariablesDir: t.TempDir(), MapVariablesMinBytes: 1 << 20}, files)
	defer m.Close()
	if wm := m.WeightMemory(); wm.MappedBytes != 0 || wm.CopiedBytes == 0 {
		t.Errorf("a shard smaller than the minimum: %+v, want all copied", wm)
	}
}

// A mapped tensor's CRC32C is checked like a copied one's.
func TestMappedVariablesChecksum(t *testing.T) {
	files := embeddingModel(t, 256, 8, 4, false)
	data := "variables/variables.data-00000-of-00001"
	b := append([]byte(nil), files[data]...)
	b[len(b)/2] ^= 0x40 // inside the table
	files[data] = b
	dir := t.TempDir()
	_, err := New(driver.Config{MapVariablesDir: dir}).Load(context.Background(), files)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("load of a corrupt mapped table: %v, want ErrChecksum", err)
	}
}

// A directory the runtime cannot write fails the load naming the file.
func TestMappedVariablesBadDir(t *testing.T) {
	files := embeddingModel(t, 16, 4, 4, false)
	_, err := New(driver.Config{MapVariablesDir: filepath.Join(t.TempDir(), "missing")}).Load(context.Background(), files)
	if err == nil {
		t.Fatal("load mapped into a missing directory succeeded")
	}
	t.Log(err)
}

// mapAllEnv, set to a directory, maps every checkpoint shard of every
// model the package's tests load into it (forceMapDir):
// TestMappedVariablesWholeSuite runs the tests so, and any kernel writing
// into a restored tensor then faults.
const mapAllEnv = "INFERBID_TF_TEST_MAP_ALL"

func init() { forceMapDir = os.Getenv(mapAllEnv) }

// TestMappedVariablesWholeSuite runs this package's tests again in a child
// process with every checkpoint shard mapped read-only: a kernel that
// wrote into a restored variable's memory would crash it (SIGSEGV), and
// every answer must be what the in-heap tests expect.
func TestMappedVariablesWholeSuite(t *testing.T) {
	if forceMapDir != "" {
		t.Skip("already the child")
	}
	if testing.Short() || raceEnabled {
		t.Skip("runs the package's tests again (not under -short or the race detector)")
	}
	cmd := exec.Command(os.Args[0], "-test.run", ".", "-test.skip", "Fuzz", "-test.short")
	dir := t.TempDir()
	cmd.Env = append(os.Environ(), mapAllEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the package's tests with every shard mapped failed: %v\n%s", err, tail(out, 4000))
	}
	if !bytes.Contains(out, []byte("PASS")) {
		t.Fatalf("no PASS in the child's output:\n%s", tail(out, 4000))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%d files left in the mapping directory (each is unlinked once mapped)", len(ents))
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// FuzzCheckpointTensors: any index bytes give a list or an error, never a
// panic; seeds are the indexes of the test models.
func FuzzCheckpointTensors(f *testing.F) {
	for _, mk := range []func(tfsave.Options) (map[string][]byte, error){tfsave.PCTRModel, tfsave.PCVRModel, tfsave.MLP} {
		files, err := mk(tfsave.Options{})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(files["variables/variables.index"])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, index []byte) {
		ts, err := CheckpointTensors(index)
		if err == nil {
			for _, v := range ts {
				if v.Name == "" && len(ts) > 1 {
					t.Errorf("an empty name among %d tensors", len(ts))
				}
			}
		}
	})
}

// A streamed registration's files (LoadDisk) serve the same answers, the
// table from a mapping, and the received files can go once it returns.
// writeDisk writes files under a new directory as the sidecar receives
// them and returns their local paths.
func writeDisk(t *testing.T, files map[string][]byte) (driver.DiskFiles, string) {
	t.Helper()
	recv := t.TempDir()
	disk := driver.DiskFiles{}
	for name, b := range files {
		local := filepath.Join(recv, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, b, 0o600); err != nil {
			t.Fatal(err)
		}
		disk[name] = local
	}
	return disk, recv
}

// LoadDisk maps the received shard in place: nothing is written to the
// mapping directory, the model serves the heap model's answers after the
// received files are removed, and a missing file is an error naming it.
func TestMappedVariablesLoadDisk(t *testing.T) {
	for _, resource := range []bool{false, true} {
		files := embeddingModel(t, 1000, 16, 4, resource)
		disk, recv := writeDisk(t, files)
		dir := t.TempDir()
		heap := loadWith(t, driver.Config{}, files)
		defer heap.Close()
		bm, err := New(driver.Config{MapVariablesDir: dir}).LoadDisk(context.Background(), disk)
		if err != nil {
			t.Fatal(err)
		}
		m := bm.(*model)
		defer m.Close()
		missing := maps.Clone(disk)
		missing["saved_model.pb"] = filepath.Join(recv, "gone")
		if _, err := New(driver.Config{MapVariablesDir: dir}).LoadDisk(context.Background(), missing); err == nil || !strings.Contains(err.Error(), "saved_model.pb") {
			t.Fatalf("LoadDisk of a missing file: %v, want an error naming it", err)
		}
		if err := os.RemoveAll(recv); err != nil {
			t.Fatal(err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("LoadDisk wrote %d files to the mapping directory; it maps the received files in place", len(ents))
		}
		ids := []int64{0, 999, 17, 500}
		if want, got := predictIDs(t, heap, ids...), predictIDs(t, m, ids...); !reflect.DeepEqual(want, got) {
			t.Fatalf("resource=%v: LoadDisk answers %v, Load %v", resource, got, want)
		}
		if wm := m.WeightMemory(); wm.MappedBytes < 1000*16*4 {
			t.Errorf("%d bytes mapped, want at least the table's %d", wm.MappedBytes, 1000*16*4)
		}
		if _, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("ids", []int64{1}, []int64{1000})}); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("resource=%v: id 1000 of 1000 rows: %v, want out of range", resource, err)
		}
	}
}

// A gather over a mapped table reads its rows from the file (fileView):
// it maps no page of the table into the process, and answers as the
// heap model does, for both gathers and both ways of mapping.
func TestMappedGatherMapsNoPage(t *testing.T) {
	const rows, dim = 4096, 64 // 1 MiB: 256 pages
	for _, resource := range []bool{false, true} {
		files := embeddingModel(t, rows, dim, 4, resource)
		heap := loadWith(t, driver.Config{}, files)
		defer heap.Close()
		disk, _ := writeDisk(t, files)
		bm, err := New(driver.Config{MapVariablesDir: t.TempDir()}).LoadDisk(context.Background(), disk)
		if err != nil {
			t.Fatal(err)
		}
		inPlace := bm.(*model)
		defer inPlace.Close()
		copied := loadWith(t, driver.Config{MapVariablesDir: t.TempDir()}, files)
		defer copied.Close()
		viaMapping := loadWith(t, driver.Config{MapVariablesDir: t.TempDir(), MapVariablesGatherFromMapping: true}, files)
		defer viaMapping.Close()
		ids := make([]int64, 0, 512)
		for i := int64(0); i < rows; i += 8 { // a row in every other page
			ids = append(ids, i)
		}
		for name, m := range map[string]*model{"LoadDisk": inPlace, "Load": copied} {
			if len(m.maps.regions) != 1 {
				t.Fatalf("%s: %d mapped regions, want 1", name, len(m.maps.regions))
			}
			// Every call also outputs a_prefix, in the shard's first page.
			predictIDs(t, m, 0)
			before := mappingRss(t, m.maps.regions[0])
			if want, got := predictIDs(t, heap, ids...), predictIDs(t, m, ids...); !reflect.DeepEqual(want, got) {
				t.Fatalf("resource=%v %s: the mapped model answers otherwise than the heap one", resource, name)
			}
			if rss := mappingRss(t, m.maps.regions[0]); rss != before {
				t.Errorf("resource=%v %s: %d KiB of the mapped table are mapped into the process after %d lookups, %d KiB before: want no more (rows are read with pread)", resource, name, rss>>10, len(ids), before>>10)
			}
		}
		// MapVariablesGatherFromMapping reads through the mapping.
		predictIDs(t, viaMapping, 0)
		before := mappingRss(t, viaMapping.maps.regions[0])
		if want, got := predictIDs(t, heap, ids...), predictIDs(t, viaMapping, ids...); !reflect.DeepEqual(want, got) {
			t.Fatalf("resource=%v: gathering through the mapping answers otherwise than the heap model", resource)
		}
		if rss := mappingRss(t, viaMapping.maps.regions[0]); rss <= before {
			t.Errorf("resource=%v: MapVariablesGatherFromMapping: the mapping's RSS stayed at %d KiB after %d lookups; want it to grow (read through the mapping)", resource, rss>>10, len(ids))
		}
	}
}

// mappingRss is the Rss of the mapping that starts at r's first byte
// (/proc/self/smaps).
func mappingRss(t *testing.T, r []byte) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(unsafe.SliceData(r))))
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && strings.Contains(f[0], "-") {
			in = strings.HasPrefix(f[0], start)
			continue
		}
		if in && len(f) == 3 && f[0] == "Rss:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping at %s in /proc/self/smaps", start)
	return 0
}

// A received shard mapped in place is trusted to the checksum the host
// verified: its CRC32C is checked only with MapVariablesVerifyCRC, which
// then refuses a corrupt table.
func TestMappedVariablesLoadDiskVerifyCRC(t *testing.T) {
	files := embeddingModel(t, 256, 8, 4, false)
	data := "variables/variables.data-00000-of-00001"
	b := append([]byte(nil), files[data]...)
	b[len(b)/2] ^= 0x40 // inside the table
	files[data] = b
	disk, _ := writeDisk(t, files)
	_, err := New(driver.Config{MapVariablesDir: t.TempDir(), MapVariablesVerifyCRC: true}).LoadDisk(context.Background(), disk)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("LoadDisk of a corrupt mapped table with MapVariablesVerifyCRC: %v, want ErrChecksum", err)
	}
	m, err := New(driver.Config{MapVariablesDir: t.TempDir()}).LoadDisk(context.Background(), disk)
	if err != nil {
		t.Fatalf("LoadDisk without MapVariablesVerifyCRC: %v (the CRC is not checked)", err)
	}
	m.Close()
}

// A received shard file with another hard link (an owner who might write
// it in place) is copied, not mapped in place: writing the file after the
// load changes no answer.
func TestMappedVariablesLoadDiskSharedFileIsCopied(t *testing.T) {
	files := embeddingModel(t, 1000, 16, 4, false)
	disk, recv := writeDisk(t, files)
	shard := disk["variables/variables.data-00000-of-00001"]
	if err := os.Link(shard, filepath.Join(recv, "other-link")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	loadDiskIsCopied(t, files, disk, shard)
}

// A received shard file with other hard links is mapped in place all the
// same when it is read-only (the sidecar supervisor's replay store seals
// its files 0400, and the sidecar links them): nobody can write it through
// another name. The mapping is of the file itself (/proc/self/maps names
// it), and the answers are the heap model's.
func TestMappedVariablesLoadDiskReadOnlyLinkedFileIsMappedInPlace(t *testing.T) {
	files := embeddingModel(t, 1000, 16, 4, false)
	disk, recv := writeDisk(t, files)
	shard := disk["variables/variables.data-00000-of-00001"]
	if err := os.Link(shard, filepath.Join(recv, "replay-store-link")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if err := os.Chmod(shard, 0o400); err != nil {
		t.Fatal(err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(recv, &fs); err != nil || fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC {
		t.Skipf("the test's temporary directory is in memory (%v): files there are always copied", err)
	}
	heap := loadWith(t, driver.Config{}, files)
	defer heap.Close()
	bm, err := New(driver.Config{MapVariablesDir: t.TempDir()}).LoadDisk(context.Background(), disk)
	if err != nil {
		t.Fatal(err)
	}
	m := bm.(*model)
	defer m.Close()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	if !strings.Contains(string(maps), shard) {
		t.Errorf("no mapping of %s itself: a read-only file with another link was copied, not mapped in place", shard)
	}
	ids := []int64{0, 999, 17, 500}
	if want, got := predictIDs(t, heap, ids...), predictIDs(t, m, ids...); !reflect.DeepEqual(want, got) {
		t.Fatalf("LoadDisk answers %v, Load %v", got, want)
	}
}

// A received shard file on tmpfs is copied to MapVariablesDir, not mapped
// in place (which would keep it in memory): writing the file after the
// load changes no answer.
func TestMappedVariablesLoadDiskTmpfsFileIsCopied(t *testing.T) {
	var fs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		t.Skipf("/dev/shm is not tmpfs here (%v)", err)
	}
	files := embeddingModel(t, 1000, 16, 4, false)
	recv, err := os.MkdirTemp("/dev/shm", "inferbid-test-*")
	if err != nil {
		t.Skipf("cannot write /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(recv) })
	disk := driver.DiskFiles{}
	for name, b := range files {
		local := filepath.Join(recv, strconv.Itoa(len(disk)))
		if err := os.WriteFile(local, b, 0o600); err != nil {
			t.Fatal(err)
		}
		disk[name] = local
	}
	loadDiskIsCopied(t, files, disk, disk["variables/variables.data-00000-of-00001"])
}

// loadDiskIsCopied loads disk with LoadDisk, writes junk into the shard
// file in place, and checks the model still answers as the heap one.
func loadDiskIsCopied(t *testing.T, files map[string][]byte, disk driver.DiskFiles, shard string) {
	t.Helper()
	heap := loadWith(t, driver.Config{}, files)
	defer heap.Close()
	bm, err := New(driver.Config{MapVariablesDir: t.TempDir()}).LoadDisk(context.Background(), disk)
	if err != nil {
		t.Fatal(err)
	}
	m := bm.(*model)
	defer m.Close()
	f, err := os.OpenFile(shard, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0x7f}, len(files["variables/variables.data-00000-of-00001"])-8)
	if _, err := f.WriteAt(junk, 8); err != nil { // the table, in place
		t.Fatal(err)
	}
	f.Close()
	ids := []int64{0, 999, 17, 500}
	if want, got := predictIDs(t, heap, ids...), predictIDs(t, m, ids...); !reflect.DeepEqual(want, got) {
		t.Fatalf("a shard file written after the load changed the answers (it was mapped in place): %v, want %v", got, want)
	}
	if wm := m.WeightMemory(); wm.MappedBytes < 1000*16*4 {
		t.Errorf("%d bytes mapped, want the table's copy mapped (%d bytes)", wm.MappedBytes, 1000*16*4)
	}
}

// Gathers over a mapped table from many goroutines at once (rows read
// with pread from one shared file) answer as the heap model does; run
// under -race.
func TestMappedGatherConcurrent(t *testing.T) {
	files := embeddingModel(t, 2048, 16, 4, true)
	heap := loadWith(t, driver.Config{}, files)
	defer heap.Close()
	disk, _ := writeDisk(t, files)
	bm, err := New(driver.Config{MapVariablesDir: t.TempDir()}).LoadDisk(context.Background(), disk)
	if err != nil {
		t.Fatal(err)
	}
	m := bm.(*model)
	defer m.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				ids := []int64{int64(g*97+i) % 2048, int64(i*31+g) % 2048, 2047, 0}
				in := []tensor.Tensor{tensor.New("ids", []int64{4}, ids)}
				want, err1 := heap.Predict(context.Background(), in)
				got, err2 := m.Predict(context.Background(), in)
				if err := errors.Join(err1, err2); err != nil {
					errs <- err
					return
				}
				if !reflect.DeepEqual(want, got) {
					errs <- fmt.Errorf("ids %v: mapped %v, heap %v", ids, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Gathers on mapped tables of every dtype read the rows with pread at the
// right offsets (rows of 3 elements, so no row is page- or word-sized,
// after a prefix variable so no table starts the shard), and refuse a
// negative or too large id as the heap gather does: row -1 of a table
// would otherwise be the bytes of the tensor before it in the file.
func TestMappedGatherEveryDtypeAndBadIDs(t *testing.T) {
	const rows, dim = 48, 3 // 48: every table's offset aligned for its dtype
	b := tfsave.NewBuilder()
	ids := b.Placeholder("serving_default_ids", tensor.Int64, []int64{-1})
	p := make([]int8, 256)
	for i := range p {
		p[i] = int8(i)
	}
	b.Variable("a_prefix", tensor.New("", []int64{int64(len(p))}, p))
	outs := map[string]string{}
	add := func(name string, data any) {
		var v tfsave.Var
		switch d := data.(type) {
		case []float64:
			v = b.Variable(name, tensor.New("", []int64{rows, dim}, d))
		case []int64:
			v = b.Variable(name, tensor.New("", []int64{rows, dim}, d))
		case []int32:
			v = b.Variable(name, tensor.New("", []int64{rows, dim}, d))
		case []int16:
			v = b.Variable(name, tensor.New("", []int64{rows, dim}, d))
		case []int8:
			v = b.Variable(name, tensor.New("", []int64{rows, dim}, d))
		}
		g := b.OpNamed(name+"_lookup", "GatherV2", []string{v.Value, ids, tfsave.ConstOf[int32](b, name+"_axis", []int64{}, 0)}, nil)
		outs[name] = b.OpNamed(name+"_out", "Identity", []string{g}, nil)
	}
	f64, i64, i32, i16, i8 := make([]float64, rows*dim), make([]int64, rows*dim), make([]int32, rows*dim), make([]int16, rows*dim), make([]int8, rows*dim)
	for i := range rows * dim {
		f64[i], i64[i], i32[i], i16[i], i8[i] = float64(i)+0.5, int64(i)<<33|int64(i), int32(i)*-7, int16(i*3), int8(i)
	}
	add("t_f64", f64)
	add("t_i64", i64)
	add("t_i32", i32)
	add("t_i16", i16)
	add("t_i8", i8)
	b.Signature(tfsave.ServingSignature, map[string]string{"ids": ids}, outs)
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	heap := loadWith(t, driver.Config{}, files)
	defer heap.Close()
	copied := loadWith(t, driver.Config{MapVariablesDir: t.TempDir()}, files)
	defer copied.Close()
	disk, _ := writeDisk(t, files)
	bm, err := New(driver.Config{MapVariablesDir: t.TempDir()}).LoadDisk(context.Background(), disk)
	if err != nil {
		t.Fatal(err)
	}
	inPlace := bm.(*model)
	defer inPlace.Close()
	for name, m := range map[string]*model{"Load": copied, "LoadDisk": inPlace} {
		if wm := m.WeightMemory(); wm.MappedBytes < rows*dim*(8+8+4+2+1) {
			t.Fatalf("%s: %d bytes mapped, want every table's", name, wm.MappedBytes)
		}
		if want, got := predictIDs(t, heap, 47, 0, 17, 17, 1), predictIDs(t, m, 47, 0, 17, 17, 1); !reflect.DeepEqual(want, got) {
			t.Fatalf("%s: the mapped model answers %v, the heap one %v", name, got, want)
		}
		for _, id := range []int64{-1, -2, rows, math.MinInt64, math.MaxInt64} {
			in := []tensor.Tensor{tensor.New("ids", []int64{2}, []int64{3, id})}
			want := fmt.Sprintf("index %d is out of range [0, %d)", id, rows)
			_, werr := heap.Predict(context.Background(), in)
			_, gerr := m.Predict(context.Background(), in)
			if werr == nil || gerr == nil || !strings.Contains(werr.Error(), want) || !strings.Contains(gerr.Error(), want) {
				t.Errorf("%s: id %d: mapped %v, heap %v; want both %q", name, id, gerr, werr, want)
			}
		}
	}
}
