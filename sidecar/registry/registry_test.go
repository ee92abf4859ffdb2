package registry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/affine"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
)

// newTestRegistry builds a registry over a new affine runtime; maxBytes 0
// means the default cap. It checks that no model is left open once the
// registry has closed.
func newTestRegistry(t *testing.T, maxBytes int64) (*Registry, *affine.Backend) {
	rt, b := affine.NewRuntime(runtimes.Config{})
	t.Cleanup(func() { // after the registry's Close (cleanups run last first)
		if n := b.Live.Load(); n != 0 {
			t.Errorf("%d models still open after the registry closed", n)
		}
	})
	return newTestRegistryWith(t, rt, Options{MaxModelBytes: maxBytes}), b
}

func TestRegistryValidation(t *testing.T) {
	r, b := newTestRegistry(t, 100)
	ctx := context.Background()
	cases := []struct {
		name, path string
		files      runtimes.Files
		fragments  []string
	}{
		{"empty path", "", affineFiles("2 1"), []string{"model_path is empty"}},
		{"no files", "m/", runtimes.Files{}, []string{`"m/"`, "no files"}},
		{"parent dir", "m/", runtimes.Files{"../affine": []byte("2 1")}, []string{`"../affine"`}},
		{"absolute", "m/", runtimes.Files{"/etc/affine": []byte("2 1")}, []string{`"/etc/affine"`}},
		{"unclean", "m/", runtimes.Files{"a/../affine": []byte("2 1")}, []string{`"a/../affine"`}},
		{"dot", "m/", runtimes.Files{".": []byte("2 1")}, []string{`"."`}},
		{"empty file name", "m/", runtimes.Files{"": []byte("2 1")}, []string{`""`}},
		{"trailing slash", "m/", runtimes.Files{"dir/": []byte("2 1")}, []string{`"dir/"`}},
		{"too big", "m/", runtimes.Files{"affine": make([]byte, 101)}, []string{"101", "100"}},
	}
	for _, c := range cases {
		_, err := r.register(ctx, c.path, c.files, "")
		errType(t, c.name, err, inferr.InputParsing, c.fragments...)
	}
	if n := b.Loads.Load(); n != 0 {
		t.Errorf("invalid registrations loaded %d models", n)
	}
	if p := r.Paths(); len(p) != 0 {
		t.Errorf("paths after invalid registrations = %q", p)
	}
}

func TestRegistryRegisterPredictDelete(t *testing.T) {
	r, b := newTestRegistry(t, 0)
	ctx := context.Background()
	_, err := r.predict(ctx, "m/", x3(1, 2, 3))
	errType(t, "predict before register", err, inferr.ModelNotFound, `"m/"`)

	res, err := r.register(ctx, "m/", affineFiles("2 1"), warmUpJSON("m/", "x"))
	if err != nil || res.Replaced {
		t.Fatalf("register = %+v, %v", res, err)
	}
	if b.Calls.Load() != 1 {
		t.Errorf("warm-up ran %d calls, want 1", b.Calls.Load())
	}
	out, err := r.predict(ctx, "m/", x3(1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].Data.([]float32); !slices.Equal(got, []float32{3, 5, 7}) {
		t.Errorf("predict = %v, want [3 5 7]", got)
	}
	for _, p := range []string{"b/", "a/", "c"} {
		if _, err := r.register(ctx, p, affineFiles("1 0"), ""); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.Paths(), []string{"a/", "b/", "c", "m/"}; !slices.Equal(got, want) {
		t.Errorf("paths = %q, want %q", got, want)
	}
	errType(t, "delete unknown", r.Delete("nope/"), inferr.ModelNotFound, `"nope/"`)
	if err := r.Delete("m/"); err != nil {
		t.Fatal(err)
	}
	_, err = r.predict(ctx, "m/", x3(1, 2, 3))
	errType(t, "predict after delete", err, inferr.ModelNotFound, `"m/"`)
	errType(t, "second delete", r.Delete("m/"), inferr.ModelNotFound)
	r.closing.Wait()
	if got := b.Closed.Load(); got != 1 {
		t.Errorf("%d models closed after one delete, want 1", got)
	}
}

func TestRegistryLoadAndWarmUpFailuresKeepOldModel(t *testing.T) {
	r, b := newTestRegistry(t, 0)
	ctx := context.Background()
	if _, err := r.register(ctx, "m/", affineFiles("2 1"), ""); err != nil {
		t.Fatal(err)
	}
	_, err := r.register(ctx, "m/", affineFiles("not numbers"), "")
	errType(t, "corrupt model", err, inferr.ModelExecution, `"m/"`, "bad coefficients")
	_, err = r.register(ctx, "m/", affineFiles("3 0"), warmUpJSON("m/", "nope"))
	errType(t, "warm-up with an unknown input", err, inferr.InputParsing, `"m/"`, "warm-up", `"nope"`)
	_, err = r.register(ctx, "m/", affineFiles("3 0"), `{"request":[`)
	errType(t, "warm-up not JSON", err, inferr.InputParsing, `"m/"`, "warm-up")
	_, err = r.register(ctx, "m/", affineFiles("3 0"), `{"request":[{"model_path":"m/","tensors":[{"tensor_name":"x","data_type":"FLOAT","tensor_shape":[1,3],"tensor_content":["1","2"]}]}]}`)
	errType(t, "warm-up entry that does not parse", err, inferr.InputParsing, "warm-up entry 0")
	out, err := r.predict(ctx, "m/", x3(1, 1, 1))
	if err != nil || out[0].Data.([]float32)[0] != 3 {
		t.Fatalf("old model no longer serves: %v %v", out, err)
	}
	r.closing.Wait()
	// One model serves; every model loaded by a failed registration is closed.
	if live := b.Live.Load(); live != 1 {
		t.Errorf("%d models open, want 1 (failed registrations leaked)", live)
	}
}

func TestRegistryWarmUpRuns(t *testing.T) {
	r, b := newTestRegistry(t, 0)
	if _, err := r.register(context.Background(), "m/", affineFiles("2 1 0s 3"), warmUpJSON("m/", "x")); err != nil {
		t.Fatal(err)
	}
	if got := b.Calls.Load(); got != 3 {
		t.Errorf("warm-up ran %d times, want the model's WarmUpRuns() = 3", got)
	}
}

// A swap under load: every call answers from the old or the new model,
// never MODEL_NOT_FOUND, and the old model is closed only after its calls.
func TestRegistrySwapUnderLoad(t *testing.T) {
	r, b := newTestRegistry(t, 0)
	ctx := context.Background()
	if _, err := r.register(ctx, "m/", affineFiles("2 1 200us"), ""); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var v1, v2 atomic.Int64
	errs := make(chan error, 64)
	for range 16 {
		wg.Go(func() {
			for !stop.Load() {
				out, err := r.predict(ctx, "m/", x3(1, 1, 1))
				if err != nil {
					errs <- err
					return
				}
				switch out[0].Data.([]float32)[0] {
				case 3:
					v1.Add(1)
				case 4:
					v2.Add(1)
				default:
					errs <- fmt.Errorf("answer %v is from neither model", out[0].Data)
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
		if _, err := r.register(ctx, "m/", affineFiles(spec), ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v1.Load() == 0 || v2.Load() == 0 {
		t.Errorf("answers: %d from v1, %d from v2; want both", v1.Load(), v2.Load())
	}
	r.closing.Wait()
	if live := b.Live.Load(); live != 1 {
		t.Errorf("%d models open after 21 registrations of one path, want 1", live)
	}
}

// Concurrent registrations of one path serialise: exactly one model is
// left serving, it is one of those registered, and none leaks.
func TestRegistryConcurrentRegistrationsOfOnePath(t *testing.T) {
	r, b := newTestRegistry(t, 0)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if _, err := r.register(ctx, "m/", affineFiles(fmt.Sprintf("%d 0 1ms", i+1)), warmUpJSON("m/", "x")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	r.closing.Wait()
	if live := b.Live.Load(); live != 1 {
		t.Errorf("%d models open, want 1", live)
	}
	out, err := r.predict(ctx, "m/", x3(1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if a := out[0].Data.([]float32)[0]; a < 1 || a > 16 || a != float32(int(a)) {
		t.Errorf("serving model answers %v, not one of the registered ones", a)
	}
	if len(r.pathLocks) != 0 {
		t.Errorf("%d path locks left behind", len(r.pathLocks))
	}
}

func TestRegistryCloseRejectsLaterRegistrations(t *testing.T) {
	r, b := newTestRegistry(t, 0)
	ctx := context.Background()
	if _, err := r.register(ctx, "m/", affineFiles("2 1"), ""); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if live := b.Live.Load(); live != 0 {
		t.Errorf("%d models open after close", live)
	}
	_, err := r.register(ctx, "n/", affineFiles("2 1"), "")
	errType(t, "register after close", err, inferr.GRPC)
	r.closing.Wait()
	if live := b.Live.Load(); live != 0 {
		t.Errorf("the model of a registration after close leaked")
	}
}

// A call that looked up a model which is swapped out and closed before the
// call reaches it retries on the new model instead of failing.
func TestRegistryCallRacingASwapRetries(t *testing.T) {
	r, b := newTestRegistry(t, 0)
	ctx := context.Background()
	if _, err := r.register(ctx, "m/", affineFiles("2 1"), ""); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	r.afterLookup = func(string) {
		once.Do(func() {
			if _, err := r.register(ctx, "m/", affineFiles("3 1"), ""); err != nil {
				t.Error(err)
			}
			r.closing.Wait() // the looked-up model is closed now
		})
	}
	out, err := r.predict(ctx, "m/", x3(1, 1, 1))
	if err != nil {
		t.Fatalf("a call racing a swap failed: %v", err)
	}
	if got := out[0].Data.([]float32)[0]; got != 4 {
		t.Errorf("answer %v, want the new model's 4", got)
	}
	if b.Closed.Load() != 1 {
		t.Errorf("the replaced model was not closed")
	}
}

// A registration whose load options carry the files' checksum (the sidecar
// computed it for the runtime: external variables) reports that one rather
// than hashing the files again; without it, the files' own checksum.
func TestRegisterTakesTheLoadOptionsChecksum(t *testing.T) {
	r, _ := newTestRegistry(t, 0)
	files := affineFiles("2 1")
	ctx := runtimes.WithLoadOptions(context.Background(), runtimes.LoadOptions{Checksum: "from-load-options"})
	if _, err := r.register(ctx, "m/", files, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.register(context.Background(), "n/", files, ""); err != nil {
		t.Fatal(err)
	}
	infos, _ := r.Models("")
	got := map[string]string{}
	for _, mi := range infos {
		got[mi.Path] = mi.Checksum
	}
	if want := modelfiles.Checksum(files); got["m/"] != "from-load-options" || got["n/"] != want {
		t.Errorf("checksums = %q, want m/ from-load-options, n/ %q", got, want)
	}
}
