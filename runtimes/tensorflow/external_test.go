package tensorflow

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
	"github.com/inferbid/inferbid/varstore"
)

const (
	adTable  = "ad_embedding/embeddings"
	pubTable = "publisher_embedding/embeddings"
)

// exportTable writes the checkpoint's rows of variable name to st under
// checksum, as inferctl export-variables does; transform, when set, edits
// the bytes first (another model version's rows).
func exportTable(t testing.TB, st *varstore.Store, checksum string, files map[string][]byte, name string, transform func([]byte)) {
	t.Helper()
	ts, err := CheckpointTensors(files["variables/variables.index"])
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range ts {
		if ct.Name != name {
			continue
		}
		data := files[fmt.Sprintf("variables/variables.data-%05d-of-00001", ct.Shard)]
		rows := append([]byte(nil), data[ct.Offset:ct.Offset+ct.Bytes]...)
		if transform != nil {
			transform(rows)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.PutRows(ctx, checksum, name, 0, rows, int(ct.Bytes/ct.Shape[0])); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no variable %q in the checkpoint", name)
}

// ckKey is the checkpoint key of variable name: name itself, or TF2's
// object-based "name/.ATTRIBUTES/VARIABLE_VALUE".
func ckKey(t testing.TB, files map[string][]byte, name string) string {
	t.Helper()
	ts, err := CheckpointTensors(files["variables/variables.index"])
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range ts {
		if ct.Name == name || ct.Name == name+"/.ATTRIBUTES/VARIABLE_VALUE" {
			return ct.Name
		}
	}
	t.Fatalf("no variable %q in the checkpoint", name)
	return ""
}

// negateFloats flips the sign of every float32 in b.
func negateFloats(b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], binary.LittleEndian.Uint32(b[i:])^0x80000000)
	}
}

// loadExt loads files with their tables in the store at url under checksum.
func loadExt(t testing.TB, b *Backend, files map[string][]byte, checksum string, ext map[string]string) (*model, error) {
	t.Helper()
	ctx := driver.WithLoadOptions(context.Background(), driver.LoadOptions{Checksum: checksum, ExternalVariables: ext})
	m, err := b.Load(ctx, files)
	if err != nil {
		return nil, err
	}
	return m.(*model), nil
}

// pctrBatch is a batch of n pCTR requests with random ids; bad, when
// >= 0, puts ad id 100 (out of range) at that row.
func pctrBatch(m *model, n int, r *rand.Rand, bad int) []tensor.Tensor {
	ad, pub, dense := make([]int64, n), make([]int64, n), make([]float32, n*tfsave.PCTRDense)
	for i := range ad {
		ad[i], pub[i] = r.Int64N(tfsave.PCTRAdVocab), r.Int64N(tfsave.PCTRPublisherVocab)
	}
	if bad >= 0 {
		ad[bad] = tfsave.PCTRAdVocab
	}
	for i := range dense {
		dense[i] = r.Float32()*2 - 1
	}
	byKey := map[string]tensor.Tensor{
		"ad_id":        tensor.New("ad_id", []int64{int64(n), 1}, ad),
		"publisher_id": tensor.New("publisher_id", []int64{int64(n), 1}, pub),
		"dense":        tensor.New("dense", []int64{int64(n), tfsave.PCTRDense}, dense),
	}
	var in []tensor.Tensor
	for _, s := range m.Signature().Inputs {
		in = append(in, byKey[s.Aliases[0]])
	}
	return in
}

func sameBits(a, b []tensor.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i].Data.([]float32), b[i].Data.([]float32)
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

// The pCTR model with both embedding tables in a real 3-master Redis
// Cluster answers bit for bit as the in-memory model, in each form the
// gathers take (TF2 ResourceGather and GatherV2 on ReadVariableOp, TF1
// VariableV2 -> Identity -> GatherV2, a Keras-style function call with a
// traced saver); the tables are not restored into memory, repeated rows
// hit the cache, and an out-of-range id fails as the in-memory gather does.
func TestExternalVariablesBitIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	variants := map[string]tfsave.Options{
		"resource":   {},
		"ref":        {Variables: tfsave.RefVariables},
		"keras-call": {FunctionCall: true, TracedSaver: true},
	}
	for name, opts := range variants {
		t.Run(name, func(t *testing.T) {
			files, err := tfsave.PCTRModel(opts)
			if err != nil {
				t.Fatal(err)
			}
			mem := loadWith(t, driver.Config{}, files)
			defer mem.Close()
			b := New(driver.Config{})
			defer b.Close()
			ad, pub := ckKey(t, files, adTable), ckKey(t, files, pubTable)
			ext := map[string]string{ad: rc.URL(), pub: rc.URL()}
			st, err := b.stores.open(rc.URL(), 0)
			if err != nil {
				t.Fatal(err)
			}
			sum := "sum-" + name
			exportTable(t, st, sum, files, ad, nil)
			exportTable(t, st, sum, files, pub, nil)
			m, err := loadExt(t, b, files, sum, ext)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, c := range m.serve.consts {
				if c != nil && c.ext != nil && (c.f32 != nil || c.i64 != nil) {
					t.Fatalf("the placeholder of %s holds data", c.ext.name)
				}
			}
			r := rand.New(rand.NewPCG(7, 7))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for range 5 {
				in := pctrBatch(m, 64, r, -1)
				want, err := mem.Predict(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.Predict(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				if !sameBits(want, got) {
					t.Fatalf("external answers %v, in-memory %v", got[0].Data, want[0].Data)
				}
			}
			s := b.ExternalVariableStats()
			if len(s) != 1 || s[0].URL != rc.URL() || s[0].Misses == 0 || s[0].Hits == 0 {
				t.Errorf("stats %+v: want one store with hits (5 batches of 64 over 100 and 50 ids) and misses", s)
			}
			in := pctrBatch(m, 8, r, 3)
			_, werr := mem.Predict(ctx, in)
			_, gerr := m.Predict(ctx, in)
			if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
				t.Errorf("out-of-range id: external %v, in-memory %v; want the same error", gerr, werr)
			}
		})
	}
}

// Two versions of a model (two checksums, different rows) served at once
// from one store and one cache read only their own rows.
func TestExternalVariablesVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := New(driver.Config{})
	defer b.Close()
	st, err := b.stores.open(rc.URL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ext := map[string]string{adTable: rc.URL(), pubTable: rc.URL()}
	for _, v := range []struct {
		sum string
		tr  func([]byte)
	}{{"v1", nil}, {"v2", negateFloats}} {
		exportTable(t, st, v.sum, files, adTable, v.tr)
		exportTable(t, st, v.sum, files, pubTable, v.tr)
	}
	mem := loadWith(t, driver.Config{}, files)
	defer mem.Close()
	m1, err := loadExt(t, b, files, "v1", ext)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := loadExt(t, b, files, "v2", ext)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 20 {
				in := pctrBatch(m1, 64, r, -1)
				want, err := mem.Predict(context.Background(), in)
				if err != nil {
					errs <- err
					return
				}
				got1, err1 := m1.Predict(context.Background(), in)
				got2, err2 := m2.Predict(context.Background(), in)
				if err1 != nil || err2 != nil {
					errs <- fmt.Errorf("v1: %v, v2: %v", err1, err2)
					return
				}
				if !sameBits(want, got1) {
					errs <- fmt.Errorf("v1 answers %v, want %v", got1[0].Data, want[0].Data)
					return
				}
				if sameBits(got1, got2) {
					errs <- fmt.Errorf("v2 (negated rows) answers as v1: %v", got2[0].Data)
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
}

// A model using an external variable other than by a gather is refused at
// load, naming the op and the node; so is a name the checkpoint does not
// hold, a registration without a checksum, and a bad store URL.
func TestExternalVariablesRefused(t *testing.T) {
	b := New(driver.Config{})
	defer b.Close()
	const url = "redis-cluster://127.0.0.1:1"
	tb := tfsave.NewBuilder()
	x := tb.Placeholder("serving_default_x", tensor.Float, []int64{-1, 4})
	w := tb.Variable("weights", tensor.New("", []int64{4, 2}, tfsave.Weight(1, 1, 8)))
	y := tb.OpNamed("dense/MatMul", "MatMul", []string{x, w.Value}, nil)
	tb.Signature(tfsave.ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	mm, err := tb.Files()
	if err != nil {
		t.Fatal(err)
	}
	pctr, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A [4, 2] "table" read otherwise than by an axis-0 gather.
	tableModel := func(use func(tb *tfsave.Builder, v tfsave.Var, ids string) string) map[string][]byte {
		tb := tfsave.NewBuilder()
		ids := tb.Placeholder("serving_default_ids", tensor.Int64, []int64{-1, 1})
		v := tb.Variable("table", tensor.New("", []int64{4, 2}, tfsave.Weight(2, 1, 8)))
		tb.Signature(tfsave.ServingSignature, map[string]string{"ids": ids}, map[string]string{"y": use(tb, v, ids)})
		files, err := tb.Files()
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	asOutput := tableModel(func(tb *tfsave.Builder, v tfsave.Var, ids string) string { return v.Value })
	axis1 := tableModel(func(tb *tfsave.Builder, v tfsave.Var, ids string) string {
		return tb.OpNamed("lookup", "GatherV2", []string{v.Value, ids, tfsave.ConstOf[int32](tb, "axis", []int64{}, 1)}, nil)
	})
	batched := tableModel(func(tb *tfsave.Builder, v tfsave.Var, ids string) string {
		return tb.OpNamed("lookup", "GatherV2", []string{v.Value, ids, tfsave.ConstOf[int32](tb, "axis", []int64{}, 1)}, map[string]any{"batch_dims": int64(1)})
	})
	for _, c := range []struct {
		name  string
		files map[string][]byte
		sum   string
		ext   map[string]string
		want  []string
	}{
		{"matmul", mm, "s", map[string]string{"weights": url}, []string{"MatMul", "dense/MatMul", `"weights"`, url, "only gathers"}},
		{"unknown", pctr, "s", map[string]string{"no/such": url}, []string{`"no/such"`, "inferctl variables"}},
		{"no checksum", pctr, "", map[string]string{adTable: url}, []string{"checksum"}},
		{"bad url", pctr, "s", map[string]string{adTable: "redis://x:1"}, []string{adTable, "redis://x:1"}},
		{"as output", asOutput, "s", map[string]string{"table": url}, []string{`"table"`, url, "output"}},
		{"axis 1", axis1, "s", map[string]string{"table": url}, []string{"GatherV2", "lookup", `"table"`, "axis"}},
		{"batch_dims", batched, "s", map[string]string{"table": url}, []string{"GatherV2", "lookup", `"table"`, "batch_dims 1"}},
	} {
		_, err := loadExt(t, b, c.files, c.sum, c.ext)
		if err == nil {
			t.Errorf("%s: loaded, want an error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", c.name, err, w)
			}
		}
	}
}

// A master killed under traffic: calls whose rows it holds fail with an
// error naming the store (never zeros), and serving resumes once it is
// back on its port.
func TestExternalVariablesMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := New(driver.Config{ExternalVariablesCacheBytes: -1}) // every row from the store
	defer b.Close()
	st, err := b.stores.open(rc.URL(), -1)
	if err != nil {
		t.Fatal(err)
	}
	exportTable(t, st, "k", files, adTable, nil)
	exportTable(t, st, "k", files, pubTable, nil)
	// Let the append-only files reach the disk (fsync every second).
	time.Sleep(1500 * time.Millisecond)
	mem := loadWith(t, driver.Config{}, files)
	defer mem.Close()
	m, err := loadExt(t, b, files, "k", map[string]string{adTable: rc.URL(), pubTable: rc.URL()})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 3))
	call := func() (bool, error) {
		in := pctrBatch(m, 64, r, -1)
		want, err := mem.Predict(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := m.Predict(ctx, in)
		if err != nil {
			return false, err
		}
		if !sameBits(want, got) {
			t.Fatalf("answers %v, want %v", got[0].Data, want[0].Data)
		}
		return true, nil
	}
	if ok, err := call(); !ok {
		t.Fatal(err)
	}
	rc.Kill(1)
	failed := 0
	for range 5 {
		if ok, err := call(); !ok {
			failed++
			if !strings.Contains(err.Error(), rc.URL()) {
				t.Errorf("error %q does not name the store", err)
			}
		}
	}
	if failed == 0 {
		t.Fatal("every call succeeded with a master down and no cache")
	}
	rc.Restart(1)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ok, err := call()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 90 s after the master came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for range 3 {
		if ok, err := call(); !ok {
			t.Fatalf("after recovery: %v", err)
		}
	}
}

// The reference pCVR model (exported by real TensorFlow) holds no
// embedding table: naming its first dense kernel external is refused,
// naming the MatMul that reads it.
func TestReferenceExternalRefused(t *testing.T) {
	files := readModelDir(t, "bidding-auction-servers/tensorflow/pcvr")
	b := New(driver.Config{})
	defer b.Close()
	const key = "layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"
	_, err := loadExt(t, b, files, "s", map[string]string{key: "redis-cluster://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "MatMul") || !strings.Contains(err.Error(), key) {
		t.Fatalf("load: %v, want a refusal naming the MatMul and the variable", err)
	}
	t.Log(err)
}

// A gather on an external variable under a TF1 tf.cond is refused at load
// rather than served without the branch's dead-tensor handling: the table
// enters the branch through a Switch, which is named (a gather step made
// dead-aware is refused too, as a second guard).
func TestExternalVariablesRefusedUnderTF1Cond(t *testing.T) {
	b := New(driver.Config{})
	defer b.Close()
	tb := tfsave.NewBuilderWith(tfsave.Options{Variables: tfsave.RefVariables})
	ids := tb.Placeholder("serving_default_ids", tensor.Int64, []int64{-1})
	pred := tb.Placeholder("serving_default_pred", tensor.Bool, []int64{})
	tab := tb.Variable("table", tensor.New("", []int64{10, 2}, tfsave.Weight(1, 1, 20)))
	axis := tfsave.ConstOf[int32](tb, "axis", []int64{}, 0)
	outs := tf1Cond(tb, "cond", pred, func(c tf1CondCtx) []string {
		return []string{tb.OpNamed("cond/lookup", "GatherV2", []string{c.in("lookup", tab.Value), c.in("lookup", ids), c.in("lookup", axis)}, nil)}
	}, func(c tf1CondCtx) []string {
		return []string{tb.OpNamed("cond/other", "GatherV2", []string{c.in("other", tab.Value), c.in("other", ids), c.in("other", axis)}, nil)}
	})
	tb.Signature(tfsave.ServingSignature, map[string]string{"ids": ids, "pred": pred}, map[string]string{"y": outs[0]})
	files, err := tb.Files()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadWith0(b, files); err != nil {
		t.Fatalf("the model without external variables: %v", err)
	}
	_, err = loadExt(t, b, files, "s", map[string]string{"table": "redis-cluster://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "op Switch") || !strings.Contains(err.Error(), `"table"`) {
		t.Fatalf("load: %v, want a refusal naming the Switch and the variable", err)
	}
}

func loadWith0(b *Backend, files map[string][]byte) (driver.Model, error) {
	return b.Load(context.Background(), files)
}

// A master of a cluster with replicas killed under traffic: once its
// replica takes over (the node timeout, 2 s, and an election) serving
// resumes by itself, with the same answers; the killed node never returns.
func TestExternalVariablesFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisClusterWithReplicas(t, 3)
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := New(driver.Config{ExternalVariablesCacheBytes: -1}) // every row from the store
	defer b.Close()
	st, err := b.stores.open(rc.URL(), -1)
	if err != nil {
		t.Fatal(err)
	}
	exportTable(t, st, "f", files, adTable, nil)
	exportTable(t, st, "f", files, pubTable, nil)
	time.Sleep(2 * time.Second) // the replicas have the rows
	mem := loadWith(t, driver.Config{}, files)
	defer mem.Close()
	m, err := loadExt(t, b, files, "f", map[string]string{adTable: rc.URL(), pubTable: rc.URL()})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	call := func() error {
		in := pctrBatch(m, 64, r, -1)
		want, err := mem.Predict(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := m.Predict(ctx, in)
		if err != nil {
			if !strings.Contains(err.Error(), rc.URL()) {
				t.Errorf("error %q does not name the store", err)
			}
			return err
		}
		if !sameBits(want, got) {
			t.Fatalf("answers %v, want %v", got[0].Data, want[0].Data)
		}
		return nil
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	master := -1
	for i := range rc.Addrs {
		if rc.IsMaster(i) {
			master = i
			break
		}
	}
	if master < 0 {
		t.Fatal("no master")
	}
	rc.Kill(master)
	start := time.Now()
	failed := 0
	for {
		err := call()
		if err == nil && time.Since(start) > 500*time.Millisecond {
			break
		}
		if err != nil {
			failed++
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("still failing 90 s after a master was killed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 5 {
		if err := call(); err != nil {
			t.Fatalf("after the failover: %v", err)
		}
	}
	t.Logf("serving resumed %v after the kill (%d calls failed meanwhile)", time.Since(start).Round(time.Millisecond), failed)
}

// A negative or too large id on an external table is the in-memory
// gather's out-of-range error, checked before the store is asked (not a
// missing row "-1" in the store, nor a key another variable could hold).
func TestExternalVariablesBadIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := New(driver.Config{})
	defer b.Close()
	st, err := b.stores.open(rc.URL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	exportTable(t, st, "bad-ids", files, adTable, nil)
	exportTable(t, st, "bad-ids", files, pubTable, nil)
	mem := loadWith(t, driver.Config{}, files)
	defer mem.Close()
	m, err := loadExt(t, b, files, "bad-ids", map[string]string{adTable: rc.URL(), pubTable: rc.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(3, 3))
	for _, id := range []int64{-1, -tfsave.PCTRAdVocab, math.MinInt64, tfsave.PCTRAdVocab, math.MaxInt64} {
		in := pctrBatch(m, 8, r, -1)
		for _, x := range in {
			if ad, ok := x.Data.([]int64); ok && x.Name == "ad_id" {
				ad[5] = id
			}
		}
		want := fmt.Sprintf("index %d is out of range [0, %d)", id, tfsave.PCTRAdVocab)
		_, werr := mem.Predict(ctx, in)
		_, gerr := m.Predict(ctx, in)
		if werr == nil || gerr == nil || !strings.Contains(werr.Error(), want) || !strings.Contains(gerr.Error(), want) {
			t.Errorf("ad id %d: external %v, in-memory %v; want both %q", id, gerr, werr, want)
		}
	}
}
