package tensorflow

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// BenchmarkMappedEmbedding measures what memory-mapped variables buy on a
// model that is mostly embedding table: two [rows, 64] float32 tables
// (INFERBID_BENCH_TABLE_MB in total, default 1200; two, because the heap
// runtime caps one tensor at 2^28 elements), gathered at int64 ids and
// concatenated. The model is written with tfsave into a temp dir at bench
// time; each mode then runs in a child process (a clean RSS): it reads the
// files into memory as the sidecar receives them, loads them (copied: the
// heap runtime; mapped: MapVariablesDir), drops the files, returns freed
// memory to the OS, serves 10k random lookups (batches of 64 ids) and
// reports its RSS growth over its start, the peak, and the load time.
// This is the runtime alone, loading from bytes (mapped: the copy to
// MapVariablesDir); BenchmarkMappedEmbeddingSidecar measures a real
// sidecar registered from disk (the shard mapped in place). The ratios
// are of one run:
//
//	go test -run '^$' -bench MappedEmbedding -benchtime 1x ./runtimes/tensorflow/
func BenchmarkMappedEmbedding(b *testing.B) {
	mb := benchTableMB(b)
	dir := b.TempDir()
	rows := int64(mb) << 20 / (2 * 64 * 4)
	size, err := writeTwoTableModel(dir, rows, 64)
	if err != nil {
		b.Fatal(err)
	}
	debug.FreeOSMemory()
	res := map[string]childResult{}
	for _, mode := range []string{"copied", "mapped"} {
		r, err := runBenchChild(dir, mode, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		res[mode] = r
		b.Logf("%s: model %d MiB; load %v; RSS +%d MiB after load and 10k lookups (%.3fx the model; anon %+d MiB, file %+d MiB), peak %d MiB; %d MiB mapped, %d MiB copied",
			mode, size>>20, time.Duration(r.LoadNanos), r.RSSGrowth>>20, float64(r.RSSGrowth)/float64(size), r.AnonGrowth>>20, r.FileGrowth>>20, r.Peak>>20, r.Mapped>>20, r.Copied>>20)
	}
	c, m := res["copied"], res["mapped"]
	b.ReportMetric(float64(size>>20), "model-MiB")
	b.ReportMetric(float64(c.RSSGrowth)/float64(size), "copied-rss/model")
	b.ReportMetric(float64(m.RSSGrowth)/float64(size), "mapped-rss/model")
	b.ReportMetric(float64(c.LoadNanos)/1e6, "copied-load-ms")
	b.ReportMetric(float64(m.LoadNanos)/1e6, "mapped-load-ms")
	b.ReportMetric(float64(m.LoadNanos)/float64(c.LoadNanos), "mapped/copied-load")
}

// writeTwoTableModel writes the benchmark's SavedModel into dir and returns
// its size in bytes.
func writeTwoTableModel(dir string, rows, dim int64) (int64, error) {
	bl := tfsave.NewBuilderWith(tfsave.Options{FunctionCall: true}) // as Keras exports: no initial values in the graph
	ids := bl.Placeholder("serving_default_ids", tensor.Int64, []int64{-1})
	axis := tfsave.ConstOf[int32](bl, "axis", []int64{}, 0)
	var looks []string
	for i, name := range []string{"ad_embedding", "publisher_embedding"} {
		data := make([]float32, rows*dim)
		r := rand.New(rand.NewPCG(uint64(i), 7))
		for j := range data {
			data[j] = r.Float32() - 0.5
		}
		v := bl.Variable(name+"/embeddings", tensor.New("", []int64{rows, dim}, data))
		looks = append(looks, bl.OpNamed(name+"/embedding_lookup", "GatherV2", []string{v.Value, ids, axis}, nil))
	}
	cat := bl.OpNamed("concat", "ConcatV2", []string{looks[0], looks[1], tfsave.ConstOf[int32](bl, "concat/axis", []int64{}, 1)}, nil)
	bl.Signature(tfsave.ServingSignature, map[string]string{"ids": ids}, map[string]string{"emb": cat})
	files, err := bl.Files()
	if err != nil {
		return 0, err
	}
	var size int64
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return 0, err
		}
		size += int64(len(data))
	}
	return size, nil
}

type childResult struct {
	LoadNanos, RSSGrowth, Peak, Mapped, Copied int64
	// AnonGrowth and FileGrowth split RSSGrowth: heap and mapped pages.
	AnonGrowth, FileGrowth int64
	// LoadFileGrowth is FileGrowth before the lookups.
	LoadFileGrowth int64
}

const benchChildEnv = "INFERBID_TF_MAP_BENCH_CHILD"

func runBenchChild(modelDir, mode, mapDir string) (childResult, error) {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestMappedEmbeddingBenchChild$", "-test.v")
	cmd.Env = append(os.Environ(), benchChildEnv+"="+mode+","+modelDir+","+mapDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return childResult{}, fmt.Errorf("%s child: %v\n%s", mode, err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "RESULT "); ok {
			var r childResult
			return r, json.Unmarshal([]byte(line), &r)
		}
	}
	return childResult{}, fmt.Errorf("%s child printed no RESULT:\n%s", mode, out)
}

// TestMappedEmbeddingBenchChild is BenchmarkMappedEmbedding's child
// process; it does nothing in a plain test run.
func TestMappedEmbeddingBenchChild(t *testing.T) {
	spec := os.Getenv(benchChildEnv)
	if spec == "" {
		t.Skip("the child of BenchmarkMappedEmbedding")
	}
	mode, rest, _ := strings.Cut(spec, ",")
	modelDir, mapDir, _ := strings.Cut(rest, ",")
	debug.FreeOSMemory()
	base, baseAnon, baseFile := selfStatus(t, "VmRSS"), selfStatus(t, "RssAnon"), selfStatus(t, "RssFile")
	files := driver.Files{}
	err := filepath.WalkDir(modelDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(modelDir, p)
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := driver.Config{}
	if mode == "mapped" {
		cfg.MapVariablesDir = mapDir
	}
	start := time.Now()
	dm, err := New(cfg).Load(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	m := dm.(*model)
	files = nil
	runtime.GC()
	debug.FreeOSMemory()
	afterLoad := selfStatus(t, "RssFile") - baseFile
	vocab := m.tableRows(t)
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int64, 64)
	lookups := 10000
	if s := os.Getenv("INFERBID_TF_MAP_BENCH_LOOKUPS"); s != "" {
		lookups, _ = strconv.Atoi(s)
	}
	for done := 0; done < lookups; done += len(ids) {
		for i := range ids {
			ids[i] = r.Int64N(vocab)
		}
		if _, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("ids", []int64{64}, ids)}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	debug.FreeOSMemory()
	wm := m.WeightMemory()
	res := childResult{LoadNanos: int64(load), RSSGrowth: selfStatus(t, "VmRSS") - base, Peak: selfStatus(t, "VmHWM"), Mapped: wm.MappedBytes, Copied: wm.CopiedBytes,
		AnonGrowth: selfStatus(t, "RssAnon") - baseAnon, FileGrowth: selfStatus(t, "RssFile") - baseFile,
		LoadFileGrowth: afterLoad}
	js, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", js)
}

// tableRows is the row count of the benchmark model's first table.
func (m *model) tableRows(t *testing.T) int64 {
	for _, c := range m.serve.consts {
		if c != nil && c.dt == dtFloat && len(c.shape) == 2 && c.shape[1] == 64 {
			return c.shape[0]
		}
	}
	t.Fatal("no [rows, 64] table among the serving constants")
	return 0
}

// selfStatus is a /proc/self/status field in bytes.
func selfStatus(t testing.TB, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// BenchmarkMappedRowReads shows why gathers over a mapped table read rows
// with pread (fileView) rather than through the mapping: a 600 MiB file
// (INFERBID_BENCH_TABLE_MB/2) written as the sidecar receives a streamed
// registration (1 MiB writes) or as mapShard writes a copy (64 KiB writes)
// is mapped (MADV_RANDOM), and 10k random 256-byte rows are read through
// the mapping or with pread. It reports the process's file-backed RSS
// growth over the file's size and the time per row of each:
//
//	go test -run '^$' -bench MappedRowReads -benchtime 1x ./runtimes/tensorflow/
func BenchmarkMappedRowReads(b *testing.B) {
	size := benchTableMB(b) / 2 << 20
	const row, reads = 256, 10000
	for _, chunk := range []int{1 << 20, writeChunk} {
		for _, how := range []string{"fault", "pread"} {
			f, err := os.CreateTemp(b.TempDir(), "rows-*")
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, chunk)
			for off := 0; off < size; off += chunk {
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			data, err := mmapFile(f, int64(size))
			if err != nil {
				b.Fatal(err)
			}
			base := selfStatus(b, "RssFile")
			dst := make([]byte, row)
			pass := func() time.Duration {
				r := rand.New(rand.NewPCG(1, 2))
				start := time.Now()
				for range reads {
					off := r.IntN(size/row) * row
					if how == "fault" {
						copy(dst, data[off:off+row])
					} else if _, err := f.ReadAt(dst, int64(off)); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			first := pass()
			grown := selfStatus(b, "RssFile") - base
			again := pass() // the same rows: what a hot row costs
			b.Logf("%d KiB writes, %s: RSS +%d MiB after %d random rows (%.3fx the %d MiB file); %v per row, %v when read again",
				chunk>>10, how, grown>>20, reads, float64(grown)/float64(size), size>>20, first/reads, again/reads)
			b.ReportMetric(float64(grown)/float64(size), fmt.Sprintf("%s-%dKiB-rss/file", how, chunk>>10))
			b.ReportMetric(float64(again.Nanoseconds())/reads, fmt.Sprintf("%s-%dKiB-hot-ns/row", how, chunk>>10))
			_ = unix.Munmap(data)
			f.Close()
		}
	}
}
