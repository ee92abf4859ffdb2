package registry

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// checkBatchedAnswers checks, on a real runtime, that batched calls answer
// bit for bit what unbatched calls do. The model (input "x" FLOAT [-1,cols])
// is registered twice: at "full/", where a batch runs only when full, so
// that every caller lands in one merged call whatever the timing; and at
// "busy/", with a short delay, under many callers of different row counts.
// names are the input names callers use in turn.
func checkBatchedAnswers(t *testing.T, runtimeName string, cfg runtimes.Config, files runtimes.Files, cols int, names ...string) {
	const callers = 24
	rowsOf := func(i int) int { return 1 + i%5 }
	total := 0
	for i := range callers {
		total += rowsOf(i)
	}
	settings := batching(map[string]BatchSettings{
		"full/": {MaxBatchSize: total, MaxDelayMicros: forever},
		"busy/": {MaxBatchSize: 16, MaxDelayMicros: 300},
	})
	rt, err := runtimes.Open(runtimeName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	r, _ := batchingRegistry(t, rt, settings)
	register(t, r, "full/", files)
	register(t, r, "busy/", files)
	ctx := context.Background()
	ref, err := rt.Load(ctx, "ref/", files)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	inputs := make([][]tensor.Tensor, callers)
	want := make([][]tensor.Tensor, callers)
	for i := range inputs {
		x := make([]float32, rowsOf(i)*cols)
		for j := range x {
			x[j] = float32(rng.NormFloat64())
		}
		inputs[i] = []tensor.Tensor{tensor.New(names[i%len(names)], []int64{int64(rowsOf(i)), int64(cols)}, x)}
		if want[i], err = ref.Predict(ctx, inputs[i]); err != nil {
			t.Fatal(err)
		}
	}

	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			out, err := r.predict(ctx, "full/", inputs[i])
			if e := sameAnswer(out, err, want[i], nil); e != nil {
				t.Errorf("full/ caller %d (%d rows): %v", i, rowsOf(i), e)
			}
		})
	}
	wg.Wait()
	if st := batcherOf(t, r, "full/").stats(); st.Batches != 1 || st.Merged != callers || st.Rows != int64(total) {
		t.Errorf("full/: %+v, want one merged call of %d callers and %d rows", st, callers, total)
	}

	for g := range 2 * callers {
		wg.Go(func() {
			for round := range 20 {
				i := (g + round) % callers
				out, err := r.predict(ctx, "busy/", inputs[i])
				if e := sameAnswer(out, err, want[i], nil); e != nil {
					t.Errorf("busy/ caller %d (%d rows): %v", i, rowsOf(i), e)
					return
				}
			}
		})
	}
	wg.Wait()
	st := batcherOf(t, r, "busy/").stats()
	t.Logf("busy/: %+v", st)
	if st.Fallbacks != 0 || st.Off {
		t.Errorf("busy/: %+v; no merged call should have failed", st)
	}
}

func TestBatchedAnswersBitIdenticalTensorFlow(t *testing.T) {
	files, err := tfsave.MLP(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Callers name the input by signature key and by graph tensor name.
	checkBatchedAnswers(t, tensorflow.Name, runtimes.Config{}, files, 8, "x", "serving_default_x:0")
}

// pctrInput is an input of the example pCTR model with the given rows per
// input (ad_id, publisher_id, dense) and ad_id value.
func pctrInput(adRows, pubRows, denseRows int, adID int64) []tensor.Tensor {
	ad := make([]int64, adRows)
	for i := range ad {
		ad[i] = (adID + int64(i)) % 1000
	}
	pub := make([]int64, pubRows)
	for i := range pub {
		pub[i] = int64(i*7) % 50
	}
	dense := make([]float32, denseRows*6)
	for i := range dense {
		dense[i] = float32(int(adID)+i) / 16
	}
	return []tensor.Tensor{
		tensor.New("ad_id", []int64{int64(adRows), 1}, ad),
		tensor.New("publisher_id", []int64{int64(pubRows), 1}, pub),
		tensor.New("dense", []int64{int64(denseRows), 6}, dense),
	}
}

// A call whose input fails the model must not fail the calls it is merged
// with; calls that cannot be merged run unbatched. Every caller gets what
// an unbatched call gets, error text included.
func TestBatchingBadInputFailsAlone(t *testing.T) {
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   []tensor.Tensor
		rows int // 0: not mergeable
	}{
		{"good, 1 row", pctrInput(1, 1, 1, 3), 1},
		{"good, 3 rows", pctrInput(3, 3, 3, 11), 3},
		{"good, 2 rows", pctrInput(2, 2, 2, 42), 2},
		{"good, 4 rows", pctrInput(4, 4, 4, 90), 4},
		{"ad_id out of range: fails in the runtime", pctrInput(2, 2, 2, 999), 2},
		{"row counts differ between inputs", pctrInput(2, 3, 2, 5), 0},
		{"wrong inner dimension", append(pctrInput(1, 1, 1, 5)[:2], tensor.New("dense", []int64{1, 5}, make([]float32, 5))), 0},
		{"unknown input", append(pctrInput(1, 1, 1, 5), tensor.New("nope", []int64{1, 1}, []float32{1})), 0},
	}
	total := 0
	for _, c := range cases {
		total += c.rows
	}
	settings := batching(map[string]BatchSettings{
		"p/": {MaxBatchSize: total, MaxDelayMicros: forever},
	})
	rt, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := batchingRegistry(t, rt, settings)
	register(t, r, "p/", files)
	ctx := context.Background()
	ref, err := rt.Load(ctx, "p/", files) // unbatched, at the same path: errors name it
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()

	var wg sync.WaitGroup
	for _, c := range cases {
		want, wantErr := ref.Predict(ctx, c.in)
		if c.name[:4] == "good" && wantErr != nil {
			t.Fatalf("%s: %v", c.name, wantErr)
		}
		if c.name[:4] != "good" && wantErr == nil {
			t.Fatalf("%s: no error unbatched", c.name)
		}
		wg.Go(func() {
			out, err := r.predict(ctx, "p/", c.in)
			if e := sameAnswer(out, err, want, wantErr); e != nil {
				t.Errorf("%s: %v", c.name, e)
			}
		})
	}
	wg.Wait()
	if st := batcherOf(t, r, "p/").stats(); st.Batches != 0 || st.Fallbacks != 5 || st.Off {
		t.Errorf("stats %+v; want the five mergeable calls merged, failed and run alone", st)
	}
}

// A model whose outputs are not per row (here: sums over the batch, under
// a signature that claims [-1,-1]) is found out by its first merged call:
// its members run unbatched, and so does every later call.
func TestBatchingUnsplittableOutputsRunUnbatched(t *testing.T) {
	settings := batching(map[string]BatchSettings{
		"sum/": {MaxBatchSize: 4, MaxDelayMicros: forever},
	})
	rt, _ := newRowsRuntime(runtimes.Config{})
	r, logs := batchingRegistry(t, rt, settings)
	register(t, r, "sum/", rowsFiles("sum"))
	ref, err := rt.Load(context.Background(), "sum/", rowsFiles("sum"))
	if err != nil {
		t.Fatal(err)
	}
	calls := func(rows ...int) {
		var wg sync.WaitGroup
		for i, n := range rows {
			in := rowsInput(i, n, 3)
			want, _ := ref.Predict(context.Background(), in)
			wg.Go(func() {
				out, err := r.predict(context.Background(), "sum/", in)
				if e := sameAnswer(out, err, want, nil); e != nil {
					t.Errorf("call %d (%d rows): %v", i, n, e)
				}
			})
		}
		wg.Wait()
	}
	calls(1, 3) // one full batch: merged, found out, run alone
	st := batcherOf(t, r, "sum/").stats()
	if !st.Off || st.Fallbacks != 2 || st.Batches != 0 {
		t.Errorf("stats %+v; want batching off after two fallbacks", st)
	}
	calls(1, 1, 1) // would wait forever if still batched
	if st2 := batcherOf(t, r, "sum/").stats(); st2 != st {
		t.Errorf("stats went from %+v to %+v; later calls must bypass the batcher", st, st2)
	}
	wantLog(t, logs, "dynamic batching stopped for this model", 1)
	wantLog(t, logs, `shape=[1,3] batch_rows=4`, 1)
}

// Batching applies where the config turns it on and the model can take it;
// otherwise registration logs why not and calls run unbatched.
func TestBatchingConfigAndEligibility(t *testing.T) {
	settings := Settings{DynamicBatching: &DynamicBatching{
		Default: BatchSettings{MaxBatchSize: 8, MaxDelayMicros: 100},
		Models:  map[string]BatchSettings{"off/": {}, "custom/": {MaxBatchSize: 3, MaxDelayMicros: 7}},
	}}
	rt, _ := newRowsRuntime(runtimes.Config{})
	r, logs := batchingRegistry(t, rt, settings)
	for path, mode := range map[string]string{"d/": "double", "off/": "double", "custom/": "double", "fixedout/": "fixedout", "fixedin/": "fixedin"} {
		register(t, r, path, rowsFiles(mode))
	}
	tf, err := runtimes.Open(tensorflow.Name, runtimes.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rtf, tfLogs := batchingRegistry(t, tf, settings)
	counter, err := tfsave.CounterModel(tfsave.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	register(t, rtf, "counter/", counter)

	stats := r.BatchingStats()
	if got := slices.Sorted(maps.Keys(stats)); !slices.Equal(got, []string{"custom/", "d/"}) {
		t.Errorf("models with a batcher: %v, want custom/ and d/", got)
	}
	if s := stats["custom/"]; s.MaxBatchSize != 3 || s.MaxDelay != 7*time.Microsecond {
		t.Errorf("custom/ batches with %+v, want its own settings", s)
	}
	if s := stats["d/"]; s.MaxBatchSize != 8 || s.MaxDelay != 100*time.Microsecond {
		t.Errorf("d/ batches with %+v, want the default", s)
	}
	wantLog(t, logs, `model_path=fixedout/ reason="output 0 (\"y\") has shape [1,-1], not a variable leading (batch) dimension"`, 1)
	wantLog(t, logs, `model_path=fixedin/ reason="input 0 (\"x\") has shape [2,-1], not a variable leading (batch) dimension"`, 1)
	wantLog(t, logs, "model_path=off/", 0)
	wantLog(t, tfLogs, `model_path=counter/ reason="the model is stateful"`, 1)
	if len(rtf.BatchingStats()) != 0 {
		t.Errorf("the stateful model batches")
	}
	// The unbatched models still answer.
	for _, path := range []string{"off/", "fixedout/", "fixedin/"} {
		in := rowsInput(1, 2, 3)
		if path == "fixedin/" {
			in = rowsInput(1, 2, 2)
		}
		if _, err := r.predict(context.Background(), path, in); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// doubled is the rows model's answer to in.
func doubled(in []tensor.Tensor) []tensor.Tensor {
	x := in[0].Data.([]float32)
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = 2*v + 1
	}
	return []tensor.Tensor{tensor.New("y", slices.Clone(in[0].Shape), y)}
}

// A caller whose context ends while its batch waits leaves it: it gets the
// error an unbatched call gets, and the batch runs without its rows.
func TestBatchingCallerLeavesWhileWaiting(t *testing.T) {
	settings := batching(map[string]BatchSettings{"d/": {MaxBatchSize: 4, MaxDelayMicros: forever}})
	rt, backend := newRowsRuntime(runtimes.Config{})
	r, _ := batchingRegistry(t, rt, settings)
	register(t, r, "d/", rowsFiles("double"))
	b := batcherOf(t, r, "d/")

	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() {
		_, err := r.predict(ctxA, "d/", rowsInput(1, 1, 2))
		errA <- err
	}()
	waitPending(t, b, 1)
	var wg sync.WaitGroup
	in := []([]tensor.Tensor){rowsInput(2, 1, 2), rowsInput(3, 3, 2)}
	wg.Go(func() {
		out, err := r.predict(context.Background(), "d/", in[0])
		if e := sameAnswer(out, err, doubled(in[0]), nil); e != nil {
			t.Errorf("B: %v", e)
		}
	})
	waitPending(t, b, 2)
	cancelA()
	errType(t, "the caller that left", <-errA, inferr.GRPC, `model "d/"`, "context canceled")
	waitPending(t, b, 1)
	wg.Go(func() { // fills the batch: B's row and these three
		out, err := r.predict(context.Background(), "d/", in[1])
		if e := sameAnswer(out, err, doubled(in[1]), nil); e != nil {
			t.Errorf("C: %v", e)
		}
	})
	wg.Wait()
	if st := b.stats(); st.Left != 1 || st.Batches != 1 || st.Merged != 2 || st.Rows != 4 {
		t.Errorf("stats %+v; want one left, and a merged call of the other two", st)
	}
	if n := backend.maxRows.Load(); n != 4 {
		t.Errorf("the merged call had %d rows, want 4", n)
	}
}

// The merged call runs until its last member has left: one member leaving
// does not end it, all of them leaving cancels it.
func TestBatchingMergedCallContextEndsWithItsLastMember(t *testing.T) {
	settings := batching(map[string]BatchSettings{"g/": {MaxBatchSize: 2, MaxDelayMicros: forever}})
	rt, backend := newRowsRuntime(runtimes.Config{})
	r, _ := batchingRegistry(t, rt, settings)
	register(t, r, "g/", rowsFiles("gate"))

	type answer struct {
		out []tensor.Tensor
		err error
	}
	start := func(ctx context.Context, seed int) chan answer {
		ch := make(chan answer, 1)
		go func() {
			out, err := r.predict(ctx, "g/", rowsInput(seed, 1, 2))
			ch <- answer{out, err}
		}()
		return ch
	}

	ctxA, cancelA := context.WithCancel(context.Background())
	a, b := start(ctxA, 1), start(context.Background(), 2)
	merged := <-backend.entered
	cancelA()
	errType(t, "A, gone while the merged call ran", (<-a).err, inferr.GRPC, "context canceled")
	if merged.Err() != nil {
		t.Fatal("the merged call's context ended while B still waits")
	}
	backend.gate <- struct{}{}
	got := <-b
	if e := sameAnswer(got.out, got.err, doubled(rowsInput(2, 1, 2)), nil); e != nil {
		t.Errorf("B: %v", e)
	}

	ctxC, cancelC := context.WithCancel(context.Background())
	ctxD, cancelD := context.WithCancel(context.Background())
	c, d := start(ctxC, 3), start(ctxD, 4)
	merged = <-backend.entered
	cancelC()
	errType(t, "C", (<-c).err, inferr.GRPC, "context canceled")
	cancelD()
	errType(t, "D", (<-d).err, inferr.GRPC, "context canceled")
	<-merged.Done()
	for backend.cancelled.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
}

// Calls whose inputs differ in layout from the open batch run unbatched;
// a batch never grows past the element cap.
func TestBatchingLayoutAndElementCap(t *testing.T) {
	t.Run("layout", func(t *testing.T) {
		settings := batching(map[string]BatchSettings{"d/": {MaxBatchSize: 4, MaxDelayMicros: forever}})
		rt, _ := newRowsRuntime(runtimes.Config{})
		r, _ := batchingRegistry(t, rt, settings)
		register(t, r, "d/", rowsFiles("double"))
		b := batcherOf(t, r, "d/")
		var wg sync.WaitGroup
		call := func(in []tensor.Tensor) {
			out, err := r.predict(context.Background(), "d/", in)
			if e := sameAnswer(out, err, doubled(in), nil); e != nil {
				t.Errorf("%s: %v", tensor.FormatShape(in[0].Shape), e)
			}
		}
		wg.Go(func() { call(rowsInput(1, 1, 3)) })
		waitPending(t, b, 1)
		call(rowsInput(2, 1, 4)) // another inner dimension: runs now, alone
		wg.Go(func() { call(rowsInput(3, 3, 3)) })
		wg.Wait()
		if st := b.stats(); st.Batches != 1 || st.Merged != 2 || st.Rows != 4 {
			t.Errorf("stats %+v; want the two [_,3] calls merged", st)
		}
	})
	t.Run("element cap", func(t *testing.T) {
		settings := batching(map[string]BatchSettings{"d/": {MaxBatchSize: 64, MaxDelayMicros: 500}})
		cfg := runtimes.Config{MaxTensorElements: 12}
		rt, backend := newRowsRuntime(cfg)
		r, _ := batchingRegistry(t, rt, settings)
		register(t, r, "d/", rowsFiles("double"))
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 10 {
					in := rowsInput(g*10+i, 1+(g+i)%3, 3)
					out, err := r.predict(context.Background(), "d/", in)
					if e := sameAnswer(out, err, doubled(in), nil); e != nil {
						t.Errorf("%v", e)
						return
					}
				}
			})
		}
		wg.Wait()
		if n := backend.maxRows.Load(); n > 4 {
			t.Errorf("a call of %d rows of 3 reached the model; the cap is 12 elements", n)
		}
		t.Logf("stats %+v", batcherOf(t, r, "d/").stats())
	})
}

// A swap or a deletion runs the open batch at once on the model it was
// made for; later calls go to the new model (or find none).
func TestBatchingSwapAndDeleteRunTheOpenBatch(t *testing.T) {
	settings := batching(map[string]BatchSettings{"m/": {MaxBatchSize: 64, MaxDelayMicros: forever}})
	rt, backend := newAffineRuntime()
	r, logs := batchingRegistry(t, rt, settings)
	register(t, r, "m/", affineFiles("2 1"))
	ctx := context.Background()

	waiting := func(want float32) *sync.WaitGroup {
		b := batcherOf(t, r, "m/")
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				out, err := r.predict(ctx, "m/", x3(1, 1, 1))
				if err != nil {
					t.Error(err)
					return
				}
				if got := out[0].Data.([]float32); got[0] != want {
					t.Errorf("answer %v, want %v from the model the batch was made for", got, want)
				}
			})
		}
		waitPending(t, b, 3)
		return &wg
	}
	wg := waiting(3)
	register(t, r, "m/", affineFiles("3 1"))
	wg.Wait()
	// 64 rows run straight away, on the new model.
	out, err := r.predict(ctx, "m/", x3(slices.Repeat([]float32{1}, 64*3)...))
	if err != nil || out[0].Data.([]float32)[0] != 4 {
		t.Fatalf("after the swap: %v, %v; want the new model's 4", out, err)
	}

	wg = waiting(4)
	if err := r.Delete("m/"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	_, err = r.predict(ctx, "m/", x3(1, 1, 1))
	errType(t, "after the delete", err, inferr.ModelNotFound, `"m/"`)
	r.closing.Wait()
	if n := backend.Live.Load(); n != 0 {
		t.Errorf("%d models open after the delete", n)
	}
	wantLog(t, logs, "dynamic batching stats", 2)
	wantLog(t, logs, "batches=1 merged_calls=3 rows=3", 2)
}

// Under load with swaps, every call answers from the old or the new model,
// never MODEL_NOT_FOUND; a call racing a swap retries on the new model.
func TestBatchingSwapUnderLoad(t *testing.T) {
	settings := batching(map[string]BatchSettings{"m/": {MaxBatchSize: 8, MaxDelayMicros: 300}})
	rt, backend := newAffineRuntime()
	r, _ := batchingRegistry(t, rt, settings)
	register(t, r, "m/", affineFiles("2 1 200us"))
	ctx := context.Background()
	var stop atomic.Bool
	var v1, v2 atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			x := slices.Repeat([]float32{1}, 3*(1+g%3))
			for !stop.Load() {
				out, err := r.predict(ctx, "m/", x3(x...))
				if err != nil {
					t.Error(err)
					return
				}
				y := out[0].Data.([]float32)
				if len(y) != len(x) {
					t.Errorf("%d values for %d", len(y), len(x))
					return
				}
				switch y[0] {
				case 3:
					v1.Add(1)
				case 4:
					v2.Add(1)
				default:
					t.Errorf("answer %v is from neither model", y)
					return
				}
			}
		})
	}
	for i := range 20 {
		spec := "2 1 200us"
		if i%2 == 0 {
			spec = "3 1 200us"
		}
		register(t, r, "m/", affineFiles(spec))
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if v1.Load() == 0 || v2.Load() == 0 {
		t.Errorf("answers: %d from v1, %d from v2; want both", v1.Load(), v2.Load())
	}

	var once sync.Once
	r.afterLookup = func(string) {
		once.Do(func() {
			register(t, r, "m/", affineFiles("5 1"))
			r.closing.Wait() // the looked-up model and its batcher are closed now
		})
	}
	out, err := r.predict(ctx, "m/", x3(1, 1, 1))
	if err != nil || out[0].Data.([]float32)[0] != 6 {
		t.Errorf("a call racing a swap: %v, %v; want the new model's 6", out, err)
	}
	r.afterLookup = nil
	r.closing.Wait()
	if live := backend.Live.Load(); live != 1 {
		t.Errorf("%d models open, want 1", live)
	}
}

// Closing the registry runs the open batch and answers its calls.
func TestBatchingRegistryCloseRunsTheOpenBatch(t *testing.T) {
	settings := batching(map[string]BatchSettings{"d/": {MaxBatchSize: 64, MaxDelayMicros: forever}})
	rt, _ := newRowsRuntime(runtimes.Config{})
	r, _ := batchingRegistry(t, rt, settings)
	register(t, r, "d/", rowsFiles("double"))
	b := batcherOf(t, r, "d/")
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			in := rowsInput(i, 1, 2)
			out, err := r.predict(context.Background(), "d/", in)
			if e := sameAnswer(out, err, doubled(in), nil); e != nil {
				t.Error(e)
			}
		})
	}
	waitPending(t, b, 2)
	r.Close()
	wg.Wait()
	if st := b.stats(); st.Batches != 1 {
		t.Errorf("stats %+v", st)
	}
	if _, err := r.predict(context.Background(), "d/", rowsInput(0, 1, 2)); inferr.TypeOf(err) != inferr.ModelNotFound {
		t.Errorf("after close: %v", err)
	}
}
