package varstore_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/varstore"
)

// BenchmarkRows: a batch of 64 random ids of a [100000, 64] float32 table
// on a real 3-master Redis Cluster on loopback, with no cache (every row a
// round trip: one pipeline per shard) and with every row cached (the
// cache's cost per row is ns/op / 64). p50/p99 are reported.
//
//	go test -run '^$' -bench Rows ./varstore/
func BenchmarkRows(b *testing.B) {
	rc := testhelp.StartRedisCluster(b, 3)
	const rows, dim = 100000, 64
	rowBytes := dim * 4
	ctx := context.Background()
	w, err := varstore.Open(rc.URL(), varstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	tab := table(rows, dim, 3)
	for first := 0; first < rows; first += 5000 {
		if err := w.PutRows(ctx, "sum", "emb", int64(first), tab[first*rowBytes:(first+5000)*rowBytes], rowBytes); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		cache int
		warm  bool
	}{{"uncached", -1, false}, {"cached", rows, true}} {
		b.Run(c.name+"/batch=64", func(b *testing.B) {
			st, err := varstore.Open(rc.URL(), varstore.Options{CacheRows: c.cache})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			r := rand.New(rand.NewPCG(1, 2))
			ids := make([]int64, 64)
			out := make([]byte, len(ids)*rowBytes)
			if c.warm {
				all := make([]int64, rows)
				for i := range all {
					all[i] = int64(i)
				}
				for i := 0; i < rows; i += 1000 {
					if err := st.Rows(ctx, "sum", "emb", all[i:i+1000], rowBytes, make([]byte, 1000*rowBytes)); err != nil {
						b.Fatal(err)
					}
				}
			}
			cctx, cancel := context.WithTimeout(ctx, time.Hour)
			defer cancel()
			benchlat.Loop(b, func() error {
				for i := range ids {
					ids[i] = r.Int64N(rows)
				}
				return st.Rows(cctx, "sum", "emb", ids, rowBytes, out)
			})
		})
	}
}
