package tensorflow

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// extBenchModel is an embedding model: ids INT64 [-1] -> GatherV2 of a
// rows x dim FLOAT table -> MatMul by a dim x 1 kernel -> Sigmoid.
func extBenchModel(tb testing.TB, rows, dim int) map[string][]byte {
	tb.Helper()
	b := tfsave.NewBuilder()
	ids := b.Placeholder("serving_default_ids", tensor.Int64, []int64{-1})
	tab := b.Variable("table", tensor.New("", []int64{int64(rows), int64(dim)}, tfsave.Weight(1, 0.5, rows*dim)))
	w := b.Variable("kernel", tensor.New("", []int64{int64(dim), 1}, tfsave.Weight(2, 0.5, dim)))
	g := b.OpNamed("lookup", "GatherV2", []string{tab.Value, ids, tfsave.ConstOf[int32](b, "axis", []int64{}, 0)}, nil)
	y := b.OpNamed("score", "MatMul", []string{g, w.Value}, nil)
	y = b.OpNamed("prob", "Sigmoid", []string{y}, nil)
	b.Signature(tfsave.ServingSignature, map[string]string{"ids": ids}, map[string]string{"p": y})
	files, err := b.Files()
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// latencies runs n calls of batch random ids in [0, span) and returns
// their sorted durations.
func latencies(tb testing.TB, m *model, n, batch int, span int64, seed uint64) []time.Duration {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	ds := make([]time.Duration, n)
	ids := make([]int64, batch)
	for i := range ds {
		for j := range ids {
			ids[j] = r.Int64N(span)
		}
		in := []tensor.Tensor{tensor.New("ids", []int64{int64(batch)}, ids)}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t0 := time.Now()
		_, err := m.Predict(ctx, in)
		ds[i] = time.Since(t0)
		cancel()
		if err != nil {
			tb.Fatal(err)
		}
	}
	slices.Sort(ds)
	return ds
}

func pct(ds []time.Duration, p float64) time.Duration { return ds[int(p*float64(len(ds)-1))] }

// BenchmarkExternalEmbedding (make bench, -benchtime 1x): batch 64 over a
// 200k x 16 float32 table on a 3-master Redis Cluster on loopback versus
// the same model in memory: the latency a lookup in the store adds (p50,
// p99; every row a cache miss: a first sight of the batch's ids) and what
// a cache hit costs per row (the batch's 64 rows all cached). Targets
// (issue 32): added p50 <= 1 ms, p99 <= 3 ms; hits <= 2 µs per row.
func BenchmarkExternalEmbedding(b *testing.B) {
	rc := testhelp.StartRedisCluster(b, 3)
	const rows, dim, batch, calls = 200_000, 16, 64, 2000
	files := extBenchModel(b, rows, dim)
	bm, err := New(driver.Config{}).Load(context.Background(), files)
	if err != nil {
		b.Fatal(err)
	}
	mem := bm.(*model)
	defer mem.Close()
	cold := New(driver.Config{ExternalVariablesCacheBytes: -1})
	defer cold.Close()
	warm := New(driver.Config{})
	defer warm.Close()
	st, err := cold.stores.open(rc.URL(), -1)
	if err != nil {
		b.Fatal(err)
	}
	exportTable(b, st, "bench", files, "table", nil)
	ext := map[string]string{"table": rc.URL()}
	mc, err := loadExt(b, cold, files, "bench", ext)
	if err != nil {
		b.Fatal(err)
	}
	defer mc.Close()
	mw, err := loadExt(b, warm, files, "bench", ext)
	if err != nil {
		b.Fatal(err)
	}
	defer mw.Close()
	const hot = 4096 // ids the warm runs draw from: all cached after warming
	latencies(b, mw, hot/batch*4, batch, hot, 99)
	for range b.N {
		// Interleaved rounds, so that load on the shared machine falls on
		// all three alike.
		var m0, m1, m2 []time.Duration
		for round := range 4 {
			m0 = append(m0, latencies(b, mem, calls/4, batch, rows, uint64(round))...)
			m1 = append(m1, latencies(b, mc, calls/4, batch, rows, uint64(round))...)
			m2 = append(m2, latencies(b, mw, calls/4, batch, hot, uint64(round))...)
		}
		for _, d := range [][]time.Duration{m0, m1, m2} {
			slices.Sort(d)
		}
		add50, add99 := pct(m1, 0.5)-pct(m0, 0.5), pct(m1, 0.99)-pct(m0, 0.99)
		hit := float64(pct(m2, 0.5)-pct(m0, 0.5)) / batch
		b.Logf("batch %d, %d calls each: in memory p50 %v p99 %v; store (misses) p50 %v p99 %v; cached p50 %v p99 %v",
			batch, len(m0), pct(m0, 0.5), pct(m0, 0.99), pct(m1, 0.5), pct(m1, 0.99), pct(m2, 0.5), pct(m2, 0.99))
		b.Logf("added by the store: p50 %v (target <= 1ms), p99 %v (target <= 3ms); a cache hit: %.2f µs per row (target <= 2µs)",
			add50, add99, hit/1e3)
		b.ReportMetric(float64(add50.Microseconds()), "added-p50-µs")
		b.ReportMetric(float64(add99.Microseconds()), "added-p99-µs")
		b.ReportMetric(hit/1e3, "hit-µs/row")
		s := warm.ExternalVariableStats()
		if len(s) == 1 {
			b.ReportMetric(float64(s[0].Hits)/float64(s[0].Hits+s[0].Misses), "warm-hit-ratio")
		}
	}
}
