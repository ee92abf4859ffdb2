package sidecar_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/sidecar/sidecartest"
	"github.com/inferbid/inferbid/tensor"
	"github.com/inferbid/inferbid/varstore"
)

const (
	extAdTable  = "ad_embedding/embeddings"
	extPubTable = "publisher_embedding/embeddings"
)

// exportRows writes the checkpoint rows of variable name in files to the
// store under the files' checksum (as inferctl export-variables does);
// shift, when not 0, writes row (i+shift) mod rows as row i (another
// version's table).
func exportRows(t testing.TB, url string, files map[string][]byte, name string, shift int64) {
	t.Helper()
	ts, err := tensorflow.CheckpointTensors(files["variables/variables.index"])
	if err != nil {
		t.Fatal(err)
	}
	st, err := varstore.Open(url, varstore.Options{CacheRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, ct := range ts {
		if ct.Name != name {
			continue
		}
		data := files["variables/variables.data-00000-of-00001"][ct.Offset : ct.Offset+ct.Bytes]
		rows, rowBytes := ct.Shape[0], ct.Bytes/ct.Shape[0]
		tab := make([]byte, 0, len(data))
		for i := range rows {
			j := (i + shift) % rows
			tab = append(tab, data[j*rowBytes:(j+1)*rowBytes]...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.PutRows(ctx, modelfiles.Checksum(files), name, 0, tab, int(rowBytes)); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no variable %q", name)
}

// pctrEntry is a pCTR batch entry of n rows for path, ad ids shifted by
// shift (mod the vocabulary).
func pctrEntry(path string, ad, pub []int64, dense []float32, shift int64) batch.Entry {
	n := int64(len(ad))
	a := make([]int64, n)
	for i := range ad {
		a[i] = (ad[i] + shift) % tfsave.PCTRAdVocab
	}
	return batch.Entry{ModelPath: path, Tensors: []tensor.Tensor{
		tensor.New("ad_id", []int64{n, 1}, a),
		tensor.New("publisher_id", []int64{n, 1}, pub),
		tensor.New("dense", []int64{n, tfsave.PCTRDense}, dense),
	}}
}

func randomPCTR(r *rand.Rand, n int) (ad, pub []int64, dense []float32) {
	ad, pub, dense = make([]int64, n), make([]int64, n), make([]float32, n*tfsave.PCTRDense)
	for i := range ad {
		ad[i], pub[i] = r.Int64N(tfsave.PCTRAdVocab), r.Int64N(tfsave.PCTRPublisherVocab)
	}
	for i := range dense {
		dense[i] = r.Float32()*2 - 1
	}
	return
}

func bitsEqual(a, b batch.Result) bool {
	if a.Err != nil || b.Err != nil || len(a.Tensors) != len(b.Tensors) {
		return false
	}
	for i := range a.Tensors {
		x, _ := tensor.Data[float32](a.Tensors[i])
		y, _ := tensor.Data[float32](b.Tensors[i])
		if len(x) != len(y) {
			return false
		}
		for j := range x {
			if math.Float32bits(x[j]) != math.Float32bits(y[j]) {
				return false
			}
		}
	}
	return true
}

func extServe(t *testing.T, cacheBytes int64) (*sidecar.Client, *testhelp.RedisCluster) {
	t.Helper()
	rc := testhelp.StartRedisCluster(t, 3)
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{ExternalVariablesCacheBytes: cacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return sidecartest.Serve(t, sidecar.ServerOptions{Runtime: rt}, sidecar.ClientOptions{}), rc
}

// Through the sidecar (a registration carrying external_variables, keyed
// by the checksum of the files the sidecar received): answers equal the
// in-memory model's bit for bit; with a master killed, the entries that
// need its rows fail alone, MODEL_EXECUTION naming the store, while the
// batch's other entries answer; serving resumes when the master is back.
func TestSidecarExternalVariablesMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c, rc := extServe(t, -1) // no cache: every row from the store
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exportRows(t, rc.URL(), files, extAdTable, 0)
	exportRows(t, rc.URL(), files, extPubTable, 0)
	time.Sleep(1500 * time.Millisecond) // the append-only files reach the disk
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.RegisterModel(ctx, "mem/", files, ""); err != nil {
		t.Fatal(err)
	}
	ext := map[string]string{extAdTable: rc.URL(), extPubTable: rc.URL()}
	if err := c.RegisterModel(runtimes.WithLoadOptions(ctx, runtimes.LoadOptions{ExternalVariables: ext}), "ext/", files, ""); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{extAdTable: "redis-cluster://nohostport"}
	if err := c.RegisterModel(runtimes.WithLoadOptions(ctx, runtimes.LoadOptions{ExternalVariables: bad}), "bad/", files, ""); inferr.TypeOf(err) != inferr.InputParsing || !strings.Contains(err.Error(), extAdTable) {
		t.Errorf("a bad store URL: %v, want INPUT_PARSING naming the variable", err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	call := func() []batch.Result {
		ad, pub, dense := randomPCTR(r, 64)
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		res, err := c.Predict(cctx, []batch.Entry{pctrEntry("mem/", ad, pub, dense, 0), pctrEntry("ext/", ad, pub, dense, 0)})
		if err != nil || len(res) != 2 {
			t.Fatalf("predict: %v, %v", res, err)
		}
		if res[0].Err != nil {
			t.Fatalf("the in-memory entry failed: %v", res[0].Err)
		}
		if res[1].Err == nil && !bitsEqual(res[0], res[1]) {
			t.Fatalf("external answers %v, in-memory %v", res[1].Tensors, res[0].Tensors)
		}
		return res
	}
	for range 3 {
		if res := call(); res[1].Err != nil {
			t.Fatal(res[1].Err)
		}
	}
	rc.Kill(2)
	failed := 0
	for range 5 {
		if res := call(); res[1].Err != nil {
			failed++
			if inferr.TypeOf(res[1].Err) != inferr.ModelExecution || !strings.Contains(res[1].Err.Error(), rc.URL()) {
				t.Errorf("entry error %v; want MODEL_EXECUTION naming %s", res[1].Err, rc.URL())
			}
		}
	}
	if failed == 0 {
		t.Fatal("no entry failed with a master down and no cache")
	}
	rc.Restart(2)
	deadline := time.Now().Add(90 * time.Second)
	for call()[1].Err != nil {
		if time.Now().After(deadline) {
			t.Fatal("the external model still fails 90 s after the master came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for range 3 {
		if res := call(); res[1].Err != nil {
			t.Fatalf("after recovery: %v", res[1].Err)
		}
	}
}

// A model version switch under traffic (same path, new files, so a new
// checksum, whose rows differ): every answer is wholly the old version's
// or wholly the new one's, and once the registration returns only the new
// one's, though the old rows sit in the cache.
func TestSidecarExternalVariablesVersionSwitch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c, rc := extServe(t, 0) // with the default cache
	v1, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v2 := map[string][]byte{"assets.extra/version": []byte("2")}
	for k, b := range v1 {
		v2[k] = b
	}
	if modelfiles.Checksum(v1) == modelfiles.Checksum(v2) {
		t.Fatal("both versions have the same checksum")
	}
	exportRows(t, rc.URL(), v1, extAdTable, 0)
	exportRows(t, rc.URL(), v1, extPubTable, 0)
	// v2's ad row i is v1's row i+1: v2 answers as v1 with ad ids + 1.
	exportRows(t, rc.URL(), v2, extAdTable, 1)
	exportRows(t, rc.URL(), v2, extPubTable, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.RegisterModel(ctx, "mem/", v1, ""); err != nil {
		t.Fatal(err)
	}
	ext := runtimes.WithLoadOptions(ctx, runtimes.LoadOptions{ExternalVariables: map[string]string{extAdTable: rc.URL(), extPubTable: rc.URL()}})
	if err := c.RegisterModel(ext, "ext/", v1, ""); err != nil {
		t.Fatal(err)
	}
	var switched atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var calls [2]atomic.Int64
	for g := range 2 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				after := switched.Load()
				ad, pub, dense := randomPCTR(r, 64)
				res, err := c.Predict(ctx, []batch.Entry{pctrEntry("ext/", ad, pub, dense, 0), pctrEntry("mem/", ad, pub, dense, 0), pctrEntry("mem/", ad, pub, dense, 1)})
				if err != nil || res[0].Err != nil {
					errs <- fmt.Errorf("predict: %v %v", err, res)
					return
				}
				old, new := bitsEqual(res[0], res[1]), bitsEqual(res[0], res[2])
				switch {
				case new:
					calls[1].Add(1)
				case old && !after:
					calls[0].Add(1)
				default:
					errs <- fmt.Errorf("an answer neither version gives (old %v, new %v, after the switch %v): %v", old, new, after, res[0].Tensors)
					return
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	if err := c.RegisterModel(ext, "ext/", v2, ""); err != nil {
		t.Fatal(err)
	}
	switched.Store(true)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if calls[0].Load() == 0 || calls[1].Load() == 0 {
		t.Errorf("%d answers of v1, %d of v2: want traffic on both sides of the switch", calls[0].Load(), calls[1].Load())
	}
	// The cache's counters and hit ratio, in the sidecar's metrics: with
	// 150 rows per version, batches of 64 mostly hit.
	mfs, err := c.Gatherer(0).Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == rc.URL() {
				got[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	hits, misses, ratio := got[sidecar.ExternalCacheHitsMetric], got[sidecar.ExternalCacheMissesMetric], got[sidecar.ExternalCacheHitRatioMetric]
	if hits <= misses || misses == 0 || math.Abs(ratio-hits/(hits+misses)) > 1e-9 {
		t.Errorf("metrics for %s: %v; want misses, more hits, and their ratio", rc.URL(), got)
	}
	t.Logf("cache: %.0f hits, %.0f misses, ratio %.3f", hits, misses, ratio)
}

// serveTensorFlowChild serves the TensorFlow runtime as a child sidecar
// (childSidecarEnv=tensorflow).
func serveTensorFlowChild() int {
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		return 1
	}
	defer rt.Close()
	return sidecartest.ServeChild(os.Args[1:], rt)
}

// The supervisor keeps a registration's external variables with the model
// and its replay after a sidecar crash registers them again: the replayed
// model still reads its rows from the store (rows exported shifted, so
// that a model loaded with its tables in memory would answer otherwise).
func TestSupervisorReplaysExternalVariables(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and kills sidecar processes")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exportRows(t, rc.URL(), files, extAdTable, 1)
	exportRows(t, rc.URL(), files, extPubTable, 0)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childSidecarEnv, tensorflow.Name) // inherited by the children only
	var log testhelp.SyncBuffer
	onRestart, replayed := onRestartTimes()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sup, err := sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{BinaryPath: exe, MinBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&log, nil)), OnRestart: onRestart})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	if err := sup.RegisterModel(ctx, "mem/", files, ""); err != nil {
		t.Fatal(err)
	}
	ext := runtimes.WithLoadOptions(ctx, runtimes.LoadOptions{ExternalVariables: map[string]string{extAdTable: rc.URL(), extPubTable: rc.URL()}})
	if err := sup.RegisterModelWithSequences(ext, "ext/", files, "", nil); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	check := func(when string) {
		ad, pub, dense := randomPCTR(r, 32)
		res, err := sup.Client().Predict(ctx, []batch.Entry{pctrEntry("ext/", ad, pub, dense, 0), pctrEntry("mem/", ad, pub, dense, 1)})
		if err != nil || len(res) != 2 {
			t.Fatalf("%s: %v, %v", when, res, err)
		}
		if !bitsEqual(res[0], res[1]) {
			t.Fatalf("%s: ext/ answers %v (err %v), want the shifted rows' %v", when, res[0].Tensors, res[0].Err, res[1].Tensors)
		}
	}
	check("before the crash")
	if err := syscall.Kill(sup.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-replayed:
	case <-time.After(time.Minute):
		t.Fatalf("the sidecar was not restarted:\n%s", log.String())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ms, err := sup.Client().Models(ctx, "ext/")
		if err == nil && len(ms) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ext/ not replayed: %v\n%s", err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	check("after the replay")
}
