package jsworker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/examples"
)

// BenchmarkWorkerVersions measures what loading every version eagerly in
// each worker costs: the time to start a worker (and so a swap) and its
// resident memory, for 1 to 100 versions of the example module.
func BenchmarkWorkerVersions(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			mods := make([]Module, n)
			for i := range mods {
				mods[i] = Module{Name: fmt.Sprintf("v%d.js", i), Source: examples.GenerateBidJS + fmt.Sprintf("\n// version %d\n", i)}
			}
			opts := Options{Modules: mods, Workers: 1, Spares: -1, Logger: slog.New(slog.NewTextHandler(&bufLogger{}, nil))}
			var rss int64
			start := time.Now()
			for b.Loop() {
				h, err := Start(context.Background(), opts)
				if err != nil {
					b.Fatal(err)
				}
				rss = max(rss, workerRSS(h.PIDs()[0]))
				h.Close()
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/start")
			b.ReportMetric(float64(rss)/(1<<20), "MiB-RSS")
		})
	}
}

// workerRSS is a process's resident set in bytes (0 if unknown).
func workerRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
