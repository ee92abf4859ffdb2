package tensorflow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemm512Identical checks the AVX-512 kernels against the generic
// index-order float32 loop followed by the epilogue, bit for bit, for
// shapes around their blocks: rows not a multiple of 8 (tails of 4, 2 and
// 1 row, batch 1; an odd last row runs four panels at a time when it can),
// columns not a multiple of 32 or fewer than 16 (masked
// stores), k = 1, and inputs holding zeros of both signs, infinities and
// NaNs (Relu maps NaN to 0, as the Go epilogue does).
func TestGemm512Identical(t *testing.T) {
	if !useGemm512 {
		t.Skip("the CPU has no AVX-512F")
	}
	forGemmCases(func(m, k, n int, a, b []float32, ep *epilogue) {
		want := make([]float32, m*n)
		matmulGeneric(want, a, b, m, k, n, false, false)
		if ep != nil {
			for i := range m {
				ep.apply(want[i*n : i*n+n])
			}
		}
		checkGemm(t, "gemm512", m, k, n, ep, want, func(got []float32) {
			matmul512(&gemm512Plain, got, a, packB32(nil, b, k, n), m, k, n, ep)
		})
	})
}

// TestGemmFusedIdentical checks the fused multiply-add kernels (AVX-512
// when the CPU has it, and the Go loop that runs without it) against the
// plain Go loop of fma32 in index order of k followed by the epilogue, bit
// for bit, for the shapes and inputs of TestGemm512Identical; also that
// fusing changes some results, so that the test would notice the plain
// kernels in their place.
func TestGemmFusedIdentical(t *testing.T) {
	differ := 0
	forGemmCases(func(m, k, n int, a, b []float32, ep *epilogue) {
		want := make([]float32, m*n)
		for i := range m {
			for j := range n {
				var s float32
				for p := range k {
					s = fma32(a[i*k+p], b[p*n+j], s)
				}
				want[i*n+j] = s
			}
			if ep != nil {
				ep.apply(want[i*n : i*n+n])
			}
		}
		plain := make([]float32, m*n)
		matmul32(plain, a, packB(nil, b, k, n), m, k, n, ep)
		for i := range want {
			if math.Float32bits(plain[i]) != math.Float32bits(want[i]) {
				differ++
				break
			}
		}
		if useGemm512 {
			checkGemm(t, "gemm512 FMA", m, k, n, ep, want, func(got []float32) {
				matmul512(&gemm512Fused, got, a, packB32(nil, b, k, n), m, k, n, ep)
			})
		}
		checkGemm(t, "Go FMA", m, k, n, ep, want, func(got []float32) {
			matmul32FMA(got, a, packB(nil, b, k, n), m, k, n, ep)
		})
		if n > 1 || ep != nil {
			return
		}
		checkGemm(t, "Go FMA matvec", m, k, n, ep, want, func(got []float32) {
			matvec32FMA(got, a, b, m, k)
		})
	})
	if differ == 0 {
		t.Fatal("fused and plain kernels agree on every case: the test cannot tell them apart")
	}
	t.Logf("%d cases differ between fused and plain kernels", differ)
}

// forGemmCases calls fn for each MatMul shape and epilogue of the kernel
// tests, with random inputs (some holding zeros of both signs, infinities,
// NaNs, subnormals and huge values).
func forGemmCases(fn func(m, k, n int, a, b []float32, ep *epilogue)) {
	r := rand.New(rand.NewPCG(7, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-40, 3e38}
	for _, m := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 23, 64} {
		for _, k := range []int{0, 1, 2, 7, 64, 257} {
			for _, n := range []int{1, 2, 7, 15, 16, 17, 31, 32, 33, 47, 64, 65, 100, 128, 129, 160, 257} {
				a, b := randomFloats(r, m*k), randomFloats(r, k*n)
				if m*k > 0 && k*n > 0 && r.IntN(3) == 0 {
					a[r.IntN(len(a))] = special[r.IntN(len(special))]
					b[r.IntN(len(b))] = special[r.IntN(len(special))]
				}
				bias := randomFloats(r, n)
				for _, ep := range []*epilogue{nil, {bias: bias}, {relu: true}, {bias: bias, relu: true}} {
					fn(m, k, n, a, b, ep)
				}
			}
		}
	}
}

// checkGemm runs kernel on an output one element longer than m×n and
// fails unless it wrote want exactly and left the extra element alone.
func checkGemm(t *testing.T, name string, m, k, n int, ep *epilogue, want []float32, kernel func(got []float32)) {
	t.Helper()
	got := make([]float32, m*n+1)
	got[m*n] = 42 // the kernels must not write past the output
	kernel(got)
	if got[m*n] != 42 {
		t.Fatalf("%s m=%d k=%d n=%d: wrote past the output", name, m, k, n)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s m=%d k=%d n=%d epilogue=%+v: element %d is %v, want %v", name, m, k, n, ep, i, got[i], want[i])
		}
	}
}

// BenchmarkGemmKernels times one 1024x256 · 256x256 float32 MatMul (the
// Dense benchmark's layer) on one goroutine with each kernel: the AVX
// 4x16 kernel, the AVX-512 8x32 kernel (multiply then add, what the
// runtime runs by default), and the same 8x32 kernel with fused
// multiply-adds (the fused_multiply_add opt-in), and the opt-in's Go loop.
func BenchmarkGemmKernels(b *testing.B) {
	const m, k, n = 1024, 256, 256
	r := rand.New(rand.NewPCG(9, 10))
	a, w := randomFloats(r, m*k), randomFloats(r, k*n)
	o := make([]float32, m*n)
	p4, p32 := packB(nil, w, k, n), packB32(nil, w, k, n)
	flops := func(b *testing.B) {
		b.ReportMetric(2*m*k*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	b.Run("avx4x16", func(b *testing.B) {
		if !useGemm4x16 {
			b.Skip("no AVX")
		}
		for b.Loop() {
			matmul32(o, a, p4, m, k, n, nil)
		}
		flops(b)
	})
	b.Run("go/fma=true", func(b *testing.B) {
		// The opt-in's fallback without AVX-512F.
		for b.Loop() {
			matmul32FMA(o, a, p4, m, k, n, nil)
		}
		flops(b)
	})
	for _, fma := range []bool{false, true} {
		b.Run(fmt.Sprintf("avx512x8x32/fma=%v", fma), func(b *testing.B) {
			if !useGemm512 {
				b.Skip("no AVX-512F")
			}
			ks := &gemm512Plain
			if fma {
				ks = &gemm512Fused
			}
			for b.Loop() {
				matmul512(ks, o, a, p32, m, k, n, nil)
			}
			flops(b)
		})
	}
}

// BenchmarkGemmBatch1 times one 1x256 · 256x256 float32 MatMul with the
// fused bias and Relu (the Dense benchmark's layer at batch 1) on the
// AVX-512 path (an odd row: four panels at a time), plain and fused, and
// on the AVX one.
func BenchmarkGemmBatch1(b *testing.B) {
	const k, n = 256, 256
	r := rand.New(rand.NewPCG(11, 12))
	a, w, bias := randomFloats(r, k), randomFloats(r, k*n), randomFloats(r, n)
	biasPad := append([]float32(nil), bias...)
	e := &epilogue{bias: bias, biasPad: biasPad, relu: true}
	o := make([]float32, n)
	for _, fma := range []bool{false, true} {
		b.Run(fmt.Sprintf("avx512/fma=%v", fma), func(b *testing.B) {
			if !useGemm512 {
				b.Skip("no AVX-512F")
			}
			pb := packB32(nil, w, k, n)
			ks := &gemm512Plain
			if fma {
				ks = &gemm512Fused
			}
			for b.Loop() {
				matmul512(ks, o, a, pb, 1, k, n, e)
			}
		})
	}
	b.Run("avx4x16", func(b *testing.B) {
		pb := packB(nil, w, k, n)
		for b.Loop() {
			matmul32(o, a, pb, 1, k, n, e)
		}
	})
}
