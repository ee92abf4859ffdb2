package varstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/varstore"
)

// table is rows x dim float32s as the checkpoint encodes them.
func table(rows, dim int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, rows*dim*4)
	for i := 0; i < rows*dim; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(r.Float32()-0.5))
	}
	return b
}

func TestRowsOnRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	const rows, dim = 2000, 16
	rowBytes := dim * 4
	tab := table(rows, dim, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st, err := varstore.Open(rc.URL(), varstore.Options{CacheRows: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutRows(ctx, "sumA", "emb", 0, tab, rowBytes); err != nil {
		t.Fatal(err)
	}
	// Idempotent: writing again changes nothing.
	if err := st.PutRows(ctx, "sumA", "emb", 0, tab[:100*rowBytes], rowBytes); err != nil {
		t.Fatal(err)
	}
	// Another version of the model: other rows under its own checksum.
	tabB := table(rows, dim, 2)
	if err := st.PutRows(ctx, "sumB", "emb", 0, tabB, rowBytes); err != nil {
		t.Fatal(err)
	}

	ids := []int64{5, 1999, 5, 0, 777, 5}
	out := make([]byte, len(ids)*rowBytes)
	for _, sum := range []string{"sumA", "sumB"} {
		src := map[string][]byte{"sumA": tab, "sumB": tabB}[sum]
		for round := 0; round < 2; round++ { // the second from the cache
			if err := st.Rows(ctx, sum, "emb", ids, rowBytes, out); err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				if !bytes.Equal(out[i*rowBytes:(i+1)*rowBytes], src[int(id)*rowBytes:int(id+1)*rowBytes]) {
					t.Fatalf("%s round %d: row %d (entry %d) differs from the table", sum, round, id, i)
				}
			}
		}
	}
	if s := st.Stats(); s.Hits != 8 || s.Misses != 8 {
		t.Errorf("cache: %+v, want 8 misses (4 unique ids x 2 versions) then 8 hits", s)
	}

	// A row nobody wrote: MODEL_EXECUTION naming the store and the row.
	err = st.Rows(ctx, "sumA", "emb", []int64{rows + 5}, rowBytes, make([]byte, rowBytes))
	if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), rc.URL()) || !strings.Contains(err.Error(), varstore.Key("sumA", "emb", rows+5)) {
		t.Fatalf("missing row: %v", err)
	}

	// A master killed: a batch that needs its rows fails naming the store,
	// within the call's deadline; rows in the cache still answer.
	rc.Kill(1)
	cold := make([]int64, 64)
	for i := range cold {
		cold[i] = int64(100 + i) // spread over every shard, none cached
	}
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	err = st.Rows(cctx, "sumA", "emb", cold, rowBytes, make([]byte, len(cold)*rowBytes))
	ccancel()
	if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), rc.URL()) {
		t.Fatalf("a batch needing a killed master's rows: %v; want MODEL_EXECUTION naming %s", err, rc.URL())
	}
	t.Logf("with a master killed: %v", err)
	if err := st.Rows(ctx, "sumA", "emb", []int64{5, 1999}, rowBytes, make([]byte, 2*rowBytes)); err != nil {
		t.Errorf("cached rows with a master killed: %v", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, bad := range []string{"redis://a:1", "redis-cluster://", "redis-cluster://a", "redis-cluster://a:0", "redis-cluster://a:1,:2", "redis-cluster://a:99999"} {
		if _, err := varstore.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted", bad)
		}
	}
	got, err := varstore.ParseURL("redis-cluster://127.0.0.1:7000,h:7001")
	if err != nil || len(got) != 2 || got[1] != "h:7001" {
		t.Errorf("ParseURL = %v, %v", got, err)
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis-cluster://127.0.0.1:7000", "redis-cluster://a:1,b:2,[::1]:3", "redis-cluster://", "redis://x:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addrs, err := varstore.ParseURL(s)
		if err == nil && len(addrs) == 0 {
			t.Errorf("ParseURL(%q): no error and no address", s)
		}
	})
}

// A cache bounded by bytes holds at most that many bytes of rows and keys,
// evicting the least recently used rows (which then miss again).
func TestCacheBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	const rows, dim = 200, 16
	rowBytes := dim * 4
	tab := table(rows, dim, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entry := int64(rowBytes + len(varstore.Key("s", "emb", 100)))
	st, err := varstore.Open(rc.URL(), varstore.Options{CacheBytes: 10 * entry})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutRows(ctx, "s", "emb", 0, tab, rowBytes); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 50)
	for i := range ids {
		ids[i] = int64(100 + i)
	}
	out := make([]byte, len(ids)*rowBytes)
	for range 2 {
		if err := st.Rows(ctx, "s", "emb", ids, rowBytes, out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, tab[100*rowBytes:150*rowBytes]) {
			t.Fatal("rows differ from the table")
		}
		if n := st.CachedBytes(); n > 10*entry || n <= 0 {
			t.Fatalf("cache holds %d bytes, bound %d", n, 10*entry)
		}
	}
	// 50 rows through a 10-row cache, twice: the second pass finds only
	// the last 10 of the first (looked up before anything is fetched).
	if s := st.Stats(); s.Hits != 10 || s.Misses != 90 {
		t.Errorf("stats %+v, want 10 hits and 90 misses", s)
	}
	// Then the last 10 fetched (ids 130..139) are the ones cached.
	if err := st.Rows(ctx, "s", "emb", ids[30:40], rowBytes, out[:10*rowBytes]); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Hits != 20 {
		t.Errorf("stats %+v, want 10 more hits", s)
	}

	// The zero Options bound the cache by bytes too (DefaultCacheBytes),
	// not by a count of rows of any size.
	def, err := varstore.Open(rc.URL(), varstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	if err := def.Rows(ctx, "s", "emb", ids[:3], rowBytes, out[:3*rowBytes]); err != nil {
		t.Fatal(err)
	}
	if n := def.CachedBytes(); n != 3*entry {
		t.Errorf("the default cache counts %d bytes after 3 rows, want %d (bounded by bytes)", n, 3*entry)
	}
}

// A master that hangs (stopped: its connections open, no answer, as
// behind a partition) fails a call needing its rows with MODEL_EXECUTION
// naming the store when the call's deadline passes: reads are bounded by
// the context, not by a read timeout (there is none), so no call hangs.
func TestRowsMasterHung(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	const rows, dim = 300, 4
	rowBytes := dim * 4
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := varstore.Open(rc.URL(), varstore.Options{CacheRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutRows(ctx, "s", "emb", 0, table(rows, dim, 4), rowBytes); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 64) // spread over every shard
	for i := range ids {
		ids[i] = int64(i * 4)
	}
	// Connections to every master are open (and the slot map known).
	if err := st.Rows(ctx, "s", "emb", ids, rowBytes, make([]byte, len(ids)*rowBytes)); err != nil {
		t.Fatal(err)
	}
	rc.Pause(1)
	t.Cleanup(func() { rc.Resume(1) })
	done := make(chan error, 1)
	go func() {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		done <- st.Rows(cctx, "s", "emb", ids, rowBytes, make([]byte, len(ids)*rowBytes))
	}()
	select {
	case err := <-done:
		if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), rc.URL()) {
			t.Fatalf("a batch needing a hung master's rows: %v; want MODEL_EXECUTION naming %s", err, rc.URL())
		}
		t.Logf("with a master hung: %v", err)
	case <-time.After(45 * time.Second):
		t.Fatal("Rows still waits on a hung master 45 s after its 2 s deadline")
	}
}

// A call whose context has no deadline (a warm-up) does not wait on a hung
// master for ever: Options.NoDeadlineTimeout bounds it.
func TestRowsMasterHungWithoutDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	const rows, dim = 300, 4
	rowBytes := dim * 4
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := varstore.Open(rc.URL(), varstore.Options{CacheRows: -1, NoDeadlineTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutRows(ctx, "s", "emb", 0, table(rows, dim, 4), rowBytes); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 64) // spread over every shard
	for i := range ids {
		ids[i] = int64(i * 4)
	}
	if err := st.Rows(ctx, "s", "emb", ids, rowBytes, make([]byte, len(ids)*rowBytes)); err != nil {
		t.Fatal(err)
	}
	rc.Pause(1)
	t.Cleanup(func() { rc.Resume(1) })
	done := make(chan error, 1)
	go func() {
		done <- st.Rows(context.Background(), "s", "emb", ids, rowBytes, make([]byte, len(ids)*rowBytes))
	}()
	select {
	case err := <-done:
		if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), rc.URL()) {
			t.Fatalf("a batch without a deadline needing a hung master's rows: %v; want MODEL_EXECUTION naming %s", err, rc.URL())
		}
	case <-time.After(45 * time.Second):
		t.Fatal("Rows without a deadline still waits on a hung master 45 s later (NoDeadlineTimeout is 1 s)")
	}
}

// Many models (checksums) read one store at once through a cache far
// smaller than their rows: every call gets its own model's rows, and the
// cache's byte count stays within its bound and matches what it holds
// (run with -race).
func TestCacheBytesConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	const rows, dim, models = 200, 8, 4
	rowBytes := dim * 4
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	entry := int64(rowBytes + len(varstore.Key("m0", "emb", 100)))
	bound := 40 * entry
	st, err := varstore.Open(rc.URL(), varstore.Options{CacheBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tabs := make([][]byte, models)
	for m := range tabs {
		tabs[m] = table(rows, dim, uint64(10+m))
		if err := st.PutRows(ctx, fmt.Sprint("m", m), "emb", 0, tabs[m], rowBytes); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*models)
	for g := range 2 * models {
		wg.Go(func() {
			m := g % models
			r := rand.New(rand.NewPCG(uint64(g), 2))
			ids := make([]int64, 32)
			out := make([]byte, len(ids)*rowBytes)
			for range 30 {
				for i := range ids {
					ids[i] = 100 + r.Int64N(100) // ids 100..199: keys of one length
				}
				if err := st.Rows(ctx, fmt.Sprint("m", m), "emb", ids, rowBytes, out); err != nil {
					errs <- err
					return
				}
				for i, id := range ids {
					if !bytes.Equal(out[i*rowBytes:(i+1)*rowBytes], tabs[m][id*int64(rowBytes):(id+1)*int64(rowBytes)]) {
						errs <- fmt.Errorf("model m%d: row %d is not its own", m, id)
						return
					}
				}
				if n := st.CachedBytes(); n > bound+int64(2*models)*entry {
					errs <- fmt.Errorf("cache counts %d bytes during calls, bound %d", n, bound)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Quiet now: the count is within the bound and is what the cache
	// holds (every entry the same size), not drifted by the races
	// between adding, counting and evicting.
	n, held := st.CachedBytes(), int64(st.CacheLen())*entry
	if n <= 0 || n > bound || n != held {
		t.Fatalf("cache counts %d bytes after the calls and holds %d; want them equal, positive, within %d", n, held, bound)
	}
}

// A batch that needs a killed master's rows and also names a row nobody
// wrote (on a live master, first in the batch) reports the store failing,
// not a missing row: go-redis' pipeline error is its first command's, a
// redis.Nil there would otherwise hide the node that did not answer (and
// skip the slot-map reload a failover needs).
func TestRowsMissingRowDoesNotHideAFailedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	const rows, dim = 300, 4
	rowBytes := dim * 4
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := varstore.Open(rc.URL(), varstore.Options{CacheRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutRows(ctx, "s", "emb", 0, table(rows, dim, 5), rowBytes); err != nil {
		t.Fatal(err)
	}
	// A missing row whose key a master other than 1 serves.
	probe := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs})
	defer probe.Close()
	missing := int64(-1)
	for id := int64(rows); id < rows+100 && missing < 0; id++ {
		c, err := probe.MasterForKey(ctx, varstore.Key("s", "emb", id))
		if err != nil {
			t.Fatal(err)
		}
		if c.Options().Addr != rc.Addrs[1] {
			missing = id
		}
	}
	if missing < 0 {
		t.Fatal("master 1 serves every probed key")
	}
	ids := []int64{missing}
	for i := range 64 { // rows on every master, 1 among them
		ids = append(ids, int64(i*4))
	}
	if err := st.Rows(ctx, "s", "emb", ids[1:], rowBytes, make([]byte, 64*rowBytes)); err != nil {
		t.Fatal(err) // connections open, slot map known
	}
	rc.Kill(1)
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	err = st.Rows(cctx, "s", "emb", ids, rowBytes, make([]byte, len(ids)*rowBytes))
	if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), rc.URL()) || strings.Contains(err.Error(), "holds no row") {
		t.Fatalf("a batch with a missing row and a killed master's rows: %v; want MODEL_EXECUTION naming %s for the master, not the missing row", err, rc.URL())
	}
	t.Logf("%v", err)
}
