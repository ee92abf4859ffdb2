package tensorflow

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

func randomFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestMatMulSplitIdentical checks that splitting a MatMul by row blocks
// gives bit-identical results to the serial kernel, for edge sizes (rows
// not a multiple of 4, one column, columns not a multiple of 4 or 8) and
// every block count, with and without the fused bias and Relu.
func TestMatMulSplitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, m := range []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 31, 64, 67} {
		for _, k := range []int{1, 3, 8, 33} {
			for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 12, 17} {
				a, b := randomFloats(r, m*k), randomFloats(r, k*n)
				pb := packB(nil, b, k, n)
				bias := randomFloats(r, n)
				e := &epilogue{bias: bias, biasPad: make([]float32, (n+3)/4*4), relu: true}
				copy(e.biasPad, bias)
				for _, ep := range []*epilogue{nil, e} {
					want := make([]float32, m*n)
					matmul32(want, a, pb, m, k, n, ep)
					wantVec := make([]float32, m)
					matvec32(wantVec, a, b[:k], m, k)
					for w := 2; w <= 9; w++ {
						got := make([]float32, m*n)
						splitRows(m, w, func(lo, hi int) { matmul32(got[lo*n:hi*n], a[lo*k:hi*k], pb, hi-lo, k, n, ep) })
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("m=%d k=%d n=%d blocks=%d epilogue=%v: element %d is %v, serial %v", m, k, n, w, ep != nil, i, got[i], want[i])
							}
						}
						gotVec := make([]float32, m)
						splitRows(m, w, func(lo, hi int) { matvec32(gotVec[lo:hi], a[lo*k:hi*k], b[:k], hi-lo, k) })
						for i := range wantVec {
							if math.Float32bits(gotVec[i]) != math.Float32bits(wantVec[i]) {
								t.Fatalf("matvec m=%d k=%d blocks=%d: element %d is %v, serial %v", m, k, w, i, gotVec[i], wantVec[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestSplitRowsBlocks checks that the blocks cover every row once, start
// at multiples of 4, number at most w, and that a panic in a block reaches
// the caller.
func TestSplitRowsBlocks(t *testing.T) {
	for _, m := range []int{1, 4, 5, 17, 100, 1024, 1027} {
		for w := 1; w <= 8; w++ {
			seen := make([]atomic.Int32, m)
			var blocks atomic.Int32
			splitRows(m, w, func(lo, hi int) {
				blocks.Add(1)
				if lo%4 != 0 || lo >= hi {
					t.Errorf("m=%d w=%d: block [%d,%d)", m, w, lo, hi)
				}
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
			})
			if b := int(blocks.Load()); b > w || b < 1 {
				t.Errorf("m=%d w=%d: %d blocks", m, w, b)
			}
			for i := range seen {
				if seen[i].Load() != 1 {
					t.Fatalf("m=%d w=%d: row %d done %d times", m, w, i, seen[i].Load())
				}
			}
		}
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "boom") {
			t.Fatalf("recovered %v, want the block's panic", r)
		}
	}()
	splitRows(64, 4, func(lo, hi int) {
		if lo > 0 {
			panic("boom")
		}
	})
}

// TestIntraopWorkers checks the goroutine count: num_intraop_threads 1 is
// serial, small MatMuls (batch-1 serving) stay serial, N bounds the count
// and 0 means GOMAXPROCS.
func TestIntraopWorkers(t *testing.T) {
	for _, c := range []struct {
		threads, m, k, n int
		want             int
	}{
		{1, 1024, 256, 256, 1},
		{4, 1, 256, 256, 1}, // batch 1: below the work threshold
		{4, 64, 8, 16, 1},   // the benchmark MLP's first layer at batch 64
		{4, 1024, 256, 256, 4},
		{3, 1024, 256, 256, 3},
		{64, 8, 1024, 1024, 2}, // at least 4 rows per goroutine
		{0, 1024, 256, 256, min(runtime.GOMAXPROCS(0), 256)},
	} {
		if got := (&intraop{threads: c.threads}).workers(c.m, c.k, c.n); got != c.want {
			t.Errorf("threads %d, %dx%d·%dx%d: %d goroutines, want %d", c.threads, c.m, c.k, c.k, c.n, got, c.want)
		}
	}
	if got := (*intraop)(nil).workers(1024, 256, 256); got != 1 {
		t.Errorf("no setting: %d goroutines, want 1", got)
	}
}

// TestIntraopModel loads the wide Dense model with num_intraop_threads 1,
// 3 and 0 (fused and unfused MatMul) and checks that a batch-1024 call
// answers bit-identically, also when calls run concurrently (run with
// -race); a negative setting is a load error naming it.
func TestIntraopModel(t *testing.T) {
	const in, out, batch = 96, 80, 1027
	files, err := tfsave.Dense(in, out)
	if err != nil {
		t.Fatal(err)
	}
	x := randomFloats(rand.New(rand.NewPCG(3, 4)), batch*in)
	inputs := []tensor.Tensor{tensor.New("x", []int64{batch, in}, x)}
	var want []float32
	defer func() { noFusion = false }()
	for _, fusion := range []bool{true, false} {
		noFusion = !fusion
		for _, threads := range []int{1, 3, 0} {
			m := loadFiles(t, files, driver.Config{NumIntraopThreads: threads})
			done := make(chan []float32, 4)
			for range cap(done) {
				go func() {
					res, err := m.Predict(context.Background(), inputs)
					if err != nil {
						t.Error(err)
						done <- nil
						return
					}
					y, _ := tensor.Data[float32](res[0])
					done <- y
				}()
			}
			for range cap(done) {
				got := <-done
				if got == nil {
					continue
				}
				if want == nil {
					want = got
				}
				if len(got) != batch*out {
					t.Fatalf("threads %d: %d values", threads, len(got))
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("fusion %v threads %d: y[%d] = %v, want %v", fusion, threads, i, got[i], want[i])
					}
				}
			}
		}
	}
	_, err = New(driver.Config{NumIntraopThreads: -1}).Load(context.Background(), files)
	if err == nil || !strings.Contains(err.Error(), "num_intraop_threads") {
		t.Fatalf("num_intraop_threads -1: %v", err)
	}
}

// TestMatMulKernelsIdentical checks matmul32's assembly kernels (AVX
// gemm4x16 where the CPU has it, SSE gemm4x8/gemm4x4) against the generic
// index-order float32 loop followed by the epilogue, bit for bit, for
// column counts around the 16-, 8- and 4-column blocks.
func TestMatMulKernelsIdentical(t *testing.T) {
	saved := useGemm4x16
	defer func() { useGemm4x16 = saved }()
	r := rand.New(rand.NewPCG(5, 6))
	for _, m := range []int{1, 2, 3, 4, 5, 8, 11} {
		for _, k := range []int{1, 2, 17, 64} {
			for _, n := range []int{4, 7, 8, 12, 15, 16, 17, 20, 24, 31, 32, 33, 40, 48, 100} {
				a, b := randomFloats(r, m*k), randomFloats(r, k*n)
				bias := randomFloats(r, n)
				e := &epilogue{bias: bias, biasPad: make([]float32, (n+3)/4*4), relu: true}
				copy(e.biasPad, bias)
				for _, ep := range []*epilogue{nil, e} {
					want := make([]float32, m*n)
					matmulGeneric(want, a, b, m, k, n, false, false)
					if ep != nil {
						for i := range m {
							ep.apply(want[i*n : i*n+n])
						}
					}
					for _, avx := range []bool{false, saved} {
						useGemm4x16 = avx
						got := make([]float32, m*n)
						matmul32(got, a, packB(nil, b, k, n), m, k, n, ep)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("m=%d k=%d n=%d avx=%v epilogue=%v: element %d is %v, want %v", m, k, n, avx, ep != nil, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}
