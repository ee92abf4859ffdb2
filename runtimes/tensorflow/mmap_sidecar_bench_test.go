package tensorflow

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// BenchmarkMappedEmbeddingSidecar measures memory-mapped variables as a
// user sees them: the benchmark model of BenchmarkMappedEmbedding
// (INFERBID_BENCH_TABLE_MB, default 1200, written with tfsave into a temp
// dir) is registered from disk through a Supervisor (RegisterModelFiles: a
// copy into the replay store, sealed read-only, then registered by path:
// the sidecar links the stored file and loads it from there, as it does
// the bucket watcher's linked downloads) into a real
// inference-sidecar-tensorflow process, four times in one run: "copied"
// with --map_variables_min_bytes -1 (the heap runtime), "mapped" with the
// defaults, "mapped-crc" with --map_variables_verify_crc and
// "mapped-fault" with --map_variables_gather_from_mapping. Each serves 10k random ids (batches of 64 over the fast
// lane). Reported per mode: the registration's wall time, the sidecar's
// own load time (GetModels' load_ms), the sidecar's RSS growth over its
// start once it is steady (anon and file-backed, from /proc/PID/status;
// the mapped shards' own Rss from /proc/PID/smaps), its peak, and the
// lookups' time; and the ratios of one run:
//
//	go test -run '^$' -bench MappedEmbeddingSidecar -benchtime 1x ./runtimes/tensorflow/
func BenchmarkMappedEmbeddingSidecar(b *testing.B) {
	mb := benchTableMB(b)
	dir := b.TempDir()
	rows := int64(mb) << 20 / (2 * 64 * 4)
	size, err := writeTwoTableModel(dir, rows, 64)
	if err != nil {
		b.Fatal(err)
	}
	files, err := modelfiles.LocalFiles(dir)
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "inference-sidecar-tensorflow")
	build := exec.Command("go", "build", "-o", bin, "./cmd/inference-sidecar-tensorflow")
	build.Dir = testhelp.ModuleRoot(b)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	res := map[string]sidecarResult{}
	for _, mode := range sidecarModes {
		r := runSidecarMode(b, bin, mode.name, mode.flags, files, rows)
		res[mode.name] = r
		b.Logf("%s: model %d MiB; registration %v (sidecar load %v); RSS +%d MiB after it and 10k lookups (%.3fx the model; anon %+d MiB, file %+d MiB, of which the mapped shards %d MiB), peak %d MiB; lookups %v (%v per batch of 64); %d MiB mapped, %d MiB copied; loadavg %s",
			mode.name, size>>20, r.register.Round(time.Millisecond), r.load.Round(time.Millisecond), r.rss>>20, float64(r.rss)/float64(size),
			r.anon>>20, r.file>>20, r.shards>>20, r.peak>>20, r.lookups.Round(time.Millisecond), (r.lookups / time.Duration(r.batches)).Round(time.Microsecond), r.mapped>>20, r.copied>>20, loadAvg())
	}
	c, m := res["copied"], res["mapped"]
	for _, mode := range sidecarModes[2:] {
		r := res[mode.name]
		b.ReportMetric(float64(r.rss)/float64(size), mode.name+"-rss/model")
		b.ReportMetric(float64(r.load)/float64(c.load), mode.name+"/copied-load")
	}
	b.ReportMetric(float64(size>>20), "model-MiB")
	b.ReportMetric(float64(c.rss)/float64(size), "copied-rss/model")
	b.ReportMetric(float64(m.rss)/float64(size), "mapped-rss/model")
	b.ReportMetric(float64(c.load)/1e6, "copied-load-ms")
	b.ReportMetric(float64(m.load)/1e6, "mapped-load-ms")
	b.ReportMetric(float64(m.load)/float64(c.load), "mapped/copied-load")
	b.ReportMetric(float64(c.register)/1e6, "copied-register-ms")
	b.ReportMetric(float64(m.register)/1e6, "mapped-register-ms")
	b.ReportMetric(float64(m.register)/float64(c.register), "mapped/copied-register")
}

func benchTableMB(b *testing.B) int {
	mb := 1200
	if s := os.Getenv("INFERBID_BENCH_TABLE_MB"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("INFERBID_BENCH_TABLE_MB=%q: want a positive number", s)
		}
		mb = v
	}
	return mb
}

// sidecarModes are the sidecars BenchmarkMappedEmbeddingSidecar compares:
// the heap runtime, mapping with the defaults, and the mapping's two
// options.
var sidecarModes = []struct {
	name  string
	flags []string
}{
	{"copied", []string{"--map_variables_min_bytes", "-1"}},
	{"mapped", nil},
	{"mapped-crc", []string{"--map_variables_verify_crc"}},
	{"mapped-fault", []string{"--map_variables_gather_from_mapping"}},
}

type sidecarResult struct {
	batches                 int
	register, load, lookups time.Duration
	rss, anon, file, shards int64
	peak, mapped, copied    int64
}

// runSidecarMode starts a sidecar through a Supervisor, registers the
// model's files from disk, serves 10k lookups and measures it.
func runSidecarMode(b *testing.B, bin, mode string, flags []string, files map[string]string, vocab int64) sidecarResult {
	b.Helper()
	exe := bin
	if len(flags) > 0 {
		// The Supervisor passes no runtime flags: a wrapper adds them.
		exe = filepath.Join(b.TempDir(), "sidecar-"+mode)
		script := "#!/bin/sh\nexec " + strconv.Quote(bin) + " " + strings.Join(flags, " ") + " \"$@\"\n"
		if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
		BinaryPath: exe, SocketPath: filepath.Join(testhelp.ShortDir(b), "s.sock"), TempDir: b.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	pid := sup.Pid()
	base, baseAnon, baseFile := testhelp.ProcStatus(b, pid, "VmRSS"), testhelp.ProcStatus(b, pid, "RssAnon"), testhelp.ProcStatus(b, pid, "RssFile")
	start := time.Now()
	if err := sup.RegisterModelFiles(ctx, "emb/", files, "", nil); err != nil {
		b.Fatalf("%s: register: %v", mode, err)
	}
	var r sidecarResult
	r.register = time.Since(start)
	infos, err := sup.Client().Models(ctx, "emb/")
	if err != nil || len(infos) != 1 {
		b.Fatalf("%s: models: %v %v", mode, infos, err)
	}
	r.load, r.mapped, r.copied = infos[0].Load, infos[0].MappedBytes, infos[0].CopiedBytes
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int64, 64)
	start = time.Now()
	for done := 0; done < 10000; done += len(ids) {
		for i := range ids {
			ids[i] = rng.Int64N(vocab)
		}
		res, err := sup.Client().Predict(ctx, []batch.Entry{{ModelPath: "emb/", Tensors: []tensor.Tensor{tensor.New("ids", []int64{64}, ids)}}})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		if err != nil {
			b.Fatalf("%s: predict: %v", mode, err)
		}
		r.batches++
	}
	r.lookups = time.Since(start)
	// The sidecar returns a registration's garbage to the OS a second
	// after it (releaseDelay): wait until the RSS is steady.
	prev := int64(-1)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		cur := testhelp.ProcStatus(b, pid, "VmRSS")
		if prev >= 0 && prev-cur < 1<<20 && time.Since(start) > 3*time.Second {
			break
		}
		prev = cur
	}
	r.rss = testhelp.ProcStatus(b, pid, "VmRSS") - base
	r.anon = testhelp.ProcStatus(b, pid, "RssAnon") - baseAnon
	r.file = testhelp.ProcStatus(b, pid, "RssFile") - baseFile
	r.peak = testhelp.ProcStatus(b, pid, "VmHWM")
	r.shards = deletedMappingsRss(b, pid)
	return r
}

// deletedMappingsRss sums the Rss of the process's mappings of deleted
// files (/proc/PID/smaps): the mapped checkpoint shards, unlinked.
func deletedMappingsRss(b *testing.B, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	var sum int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		fields := strings.Fields(l)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = strings.HasSuffix(l, "(deleted)")
			continue
		}
		if in && len(fields) == 3 && fields[0] == "Rss:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			sum += kb << 10
		}
	}
	return sum
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
