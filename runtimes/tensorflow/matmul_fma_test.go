package tensorflow

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// exactFMA32 is a*b+c computed exactly with big.Float, then rounded once to
// the nearest float32 (big.Float.Float32 rounds to nearest even, subnormals
// included). It takes finite inputs only.
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(2000).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(2000).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(2000).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// TestFMA32CorrectlyRounded checks fma32 against the exact value rounded
// once: the double-rounding case that float32(math.FMA(...)) gets wrong,
// halfway cases, cancellations, subnormal results, overflow, and random
// operands over the whole float32 exponent range.
func TestFMA32CorrectlyRounded(t *testing.T) {
	// 2^24+1 = 97·257·673, so a·b = 1+2^-24 exactly: halfway between 1 and
	// 1+2^-23. A tiny positive c makes the exact sum round up.
	a, b := float32(97*257)/(1<<12), float32(673)/(1<<12)
	if float64(a)*float64(b) != 1+0x1p-24 {
		t.Fatalf("a*b = %v, want 1+2^-24", float64(a)*float64(b))
	}
	naive := float32(math.FMA(float64(a), float64(b), 0x1p-80))
	if got, want := fma32(a, b, 0x1p-80), float32(1+0x1p-23); got != want || naive == want {
		t.Fatalf("fma32(1+2^-24 halfway, +2^-80) = %v, want %v (naive float64 FMA: %v, must differ to show double rounding)", got, want, naive)
	}
	if got, want := fma32(a, b, -0x1p-80), float32(1); got != want {
		t.Fatalf("fma32(1+2^-24 halfway, -2^-80) = %v, want %v", got, want)
	}
	if got := fma32(a, b, 0); got != 1 {
		t.Fatalf("fma32(1+2^-24 halfway, 0) = %v, want 1 (ties to even)", got)
	}
	if got := fma32(-a, b, -0x1p-80); got != -(1 + 0x1p-23) {
		t.Fatalf("fma32(-(1+2^-24), -2^-80) = %v, want %v", got, -(1 + 0x1p-23))
	}
	cases := [][3]float32{
		{0, 5, float32(math.Copysign(0, -1))},
		{float32(math.Copysign(0, -1)), 5, float32(math.Copysign(0, -1))},
		{3, -2, 6},
		{1e-30, 1e-30, 1e-45},         // subnormal result
		{0x1p-75, 0x1p-75, -0x1p-149}, // product below the subnormals
		{math.MaxFloat32, 2, 0},       // overflow
		{math.MaxFloat32, 1, math.MaxFloat32},
		{1 + 0x1p-23, 1 - 0x1p-24, -1}, // cancellation leaves the product's low bits
		{float32(math.Inf(1)), 0, 1},   // NaN
		{float32(math.Inf(1)), 1, float32(math.Inf(-1))},
		{float32(math.NaN()), 1, 1},
	}
	for _, c := range cases {
		got := fma32(c[0], c[1], c[2])
		var want float32
		switch {
		case math.IsNaN(float64(c[0])) || math.IsInf(float64(c[0]), 0):
			want = float32(math.FMA(float64(c[0]), float64(c[1]), float64(c[2])))
		default:
			want = exactFMA32(c[0], c[1], c[2])
			if f := float64(want); math.Abs(f) > math.MaxFloat32 {
				want = float32(math.Inf(int(math.Copysign(1, f))))
			}
		}
		if math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Errorf("fma32(%g, %g, %g) = %g (%#x), want %g (%#x)", c[0], c[1], c[2], got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	randFloat := func() float32 {
		for {
			f := math.Float32frombits(r.Uint32())
			if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
				return f
			}
		}
	}
	wrongNaive := 0
	for i := range 200000 {
		a, b := randFloat(), randFloat()
		var c float32
		switch i % 4 {
		case 3:
			// a·b of at most 25 significant bits, often a float32 halfway
			// point, plus a tiny or zero c: the slow path's sticky bits and
			// ties to even.
			a = float32(math.Ldexp(float64(r.IntN(1<<12)|1<<11), r.IntN(40)-20))
			b = float32(math.Ldexp(float64(r.IntN(1<<13)|1<<12), r.IntN(40)-20))
			if r.IntN(2) == 0 {
				b = -b
			}
			c = float32(math.Ldexp(float64(r.IntN(3)-1), -70-r.IntN(20)))
		case 0:
			c = randFloat()
		case 1:
			// c near -a*b: cancellation.
			c = -float32(float64(a)*float64(b)) * (1 + float32(r.IntN(5)-2)*0x1p-23)
		default:
			// c far below a*b: the sticky bits decide.
			c = float32(float64(a) * float64(b) * math.Ldexp(1, -30-r.IntN(40)))
			if r.IntN(2) == 0 {
				c = -c
			}
		}
		if math.IsInf(float64(c), 0) || math.IsNaN(float64(c)) {
			continue
		}
		want := exactFMA32(a, b, c)
		if math.Abs(float64(want)) > math.MaxFloat32 {
			continue
		}
		got := fma32(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), want %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		if float32(math.FMA(float64(a), float64(b), float64(c))) != want {
			wrongNaive++
		}
	}
	t.Logf("float32(math.FMA(float64...)) was wrong on %d of 200000 random cases", wrongNaive)
}

// denseFMAReference is tfsave.Dense(in, out) computed with fma32 in index
// order, then the bias added and Relu: what the fused_multiply_add opt-in
// must answer, bit for bit.
func denseFMAReference(x []float32, batch, in, out int) []float32 {
	w, bias := tfsave.DenseWeights(in, out)
	y := make([]float32, batch*out)
	for i := range batch {
		for j := range out {
			var s float32
			for p := range in {
				s = fma32(x[i*in+p], w[p*out+j], s)
			}
			s += bias[j]
			if !(s > 0) {
				s = 0
			}
			y[i*out+j] = s
		}
	}
	return y
}

// TestFusedMultiplyAddModel loads Dense models (256->256, the benchmark
// layer, and 96->1, the matrix-vector path) with fused_multiply_add on,
// with the AVX-512 kernels (when the CPU has them) and with the Go
// fallback, fused and unfused graphs, num_intraop_threads 1 and 0, and
// checks that a batch of 1024 answers denseFMAReference bit for bit, that
// rows answered one at a time and in a batch of 7 are the same bits as
// inside the batch of 1024, and that the option changes some bits (it is
// honoured); with the option off the model still answers the plain loop.
func TestFusedMultiplyAddModel(t *testing.T) {
	const batch = 1024
	savedWide := useGemm512
	defer func() { useGemm512, noFusion = savedWide, false }()
	wides := []bool{false}
	if savedWide {
		wides = append(wides, true)
	}
	for _, shape := range [][2]int{{256, 256}, {96, 1}} {
		in, out := shape[0], shape[1]
		files, err := tfsave.Dense(in, out)
		if err != nil {
			t.Fatal(err)
		}
		x := randomFloats(rand.New(rand.NewPCG(uint64(in), uint64(out))), batch*in)
		want := denseFMAReference(x, batch, in, out)
		predict := func(m interface {
			Predict(context.Context, []tensor.Tensor) ([]tensor.Tensor, error)
		}, lo, hi int) []float32 {
			t.Helper()
			res, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{int64(hi - lo), int64(in)}, x[lo*in:hi*in])})
			if err != nil {
				t.Fatal(err)
			}
			y, _ := tensor.Data[float32](res[0])
			return y
		}
		check := func(name string, got []float32, lo int) {
			t.Helper()
			for i, v := range got {
				if w := want[lo*out+i]; math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("%dx%d %s: row %d col %d = %v, want %v", in, out, name, lo+i/out, i%out, v, w)
				}
			}
		}
		for _, wide := range wides {
			useGemm512 = wide
			for _, fusion := range []bool{true, false} {
				noFusion = !fusion
				for _, threads := range []int{1, 0} {
					name := fmt.Sprintf("avx512=%v fusion=%v threads=%d", wide, fusion, threads)
					m := loadFiles(t, files, driver.Config{NumIntraopThreads: threads, FusedMultiplyAdd: true})
					check(name+" batch 1024", predict(m, 0, batch), 0)
					for _, r := range []int{0, 1, 2, 7, 8, 9, 500, 1023} {
						check(name+" batch 1", predict(m, r, r+1), r)
					}
					for lo := 0; lo+7 <= batch; lo += 339 {
						check(name+" batch 7", predict(m, lo, lo+7), lo)
					}
				}
			}
			noFusion = false
			plain := predict(loadFiles(t, files, driver.Config{}), 0, batch)
			w, bias := tfsave.DenseWeights(in, out)
			ref := make([]float32, batch*out)
			matmulGeneric(ref, x, w, batch, in, out, false, false)
			e := &epilogue{bias: bias, relu: true}
			differ := 0
			for i := range batch {
				e.apply(ref[i*out : i*out+out])
			}
			for i := range plain {
				if math.Float32bits(plain[i]) != math.Float32bits(ref[i]) {
					t.Fatalf("%dx%d avx512=%v option off: y[%d] = %v, want the multiply-then-add loop's %v", in, out, wide, i, plain[i], ref[i])
				}
				if plain[i] != want[i] {
					differ++
				}
			}
			if differ == 0 {
				t.Fatalf("%dx%d: fused and plain answers agree everywhere: the test cannot tell whether the option is honoured", in, out)
			}
			t.Logf("%dx%d avx512=%v: %d of %d values differ with the option on", in, out, wide, differ, len(plain))
		}
	}
}

// TestFusedMultiplyAddConv2D loads the CNN of TestConv2DGemmModel with
// fused_multiply_add on (GEMM Conv2D with fused BiasAdd and Relu) and
// checks that each image answered alone gives the same bits as inside a
// batch of 9, with num_intraop_threads 1 and 0, with the AVX-512 kernels
// and the Go fallback, and that the option changes some bits.
func TestFusedMultiplyAddConv2D(t *testing.T) {
	files := convModel(t)
	const batch, px = 9, 12 * 12 * 3
	x := randomFloats(rand.New(rand.NewPCG(15, 16)), batch*px)
	run := func(cfg driver.Config, lo, hi int) []float32 {
		t.Helper()
		m := loadFiles(t, files, cfg)
		res, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("image", []int64{int64(hi - lo), 12, 12, 3}, x[lo*px:hi*px])})
		if err != nil {
			t.Fatal(err)
		}
		y, _ := tensor.Data[float32](res[0])
		return y
	}
	savedWide := useGemm512
	defer func() { useGemm512 = savedWide }()
	var want []float32
	for _, wide := range []bool{savedWide, false} {
		useGemm512 = wide
		for _, threads := range []int{1, 0} {
			cfg := driver.Config{NumIntraopThreads: threads, FusedMultiplyAdd: true}
			all := run(cfg, 0, batch)
			if want == nil {
				want = all
			}
			per := len(all) / batch
			for i := range batch {
				one := run(cfg, i, i+1)
				for j, v := range one {
					if math.Float32bits(v) != math.Float32bits(all[i*per+j]) || math.Float32bits(v) != math.Float32bits(want[i*per+j]) {
						t.Fatalf("avx512=%v threads %d: image %d value %d alone = %v, in the batch %v (first run %v)", wide, threads, i, j, v, all[i*per+j], want[i*per+j])
					}
				}
			}
		}
	}
	plain := run(driver.Config{}, 0, batch)
	differ := 0
	for i := range plain {
		if plain[i] != want[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("fused and plain answers agree everywhere: the test cannot tell whether the option is honoured")
	}
	t.Logf("%d of %d values differ with the option on", differ, len(plain))
}

// TestFusedMultiplyAddTransposed checks that under fused_multiply_add a
// MatMul of two fed matrices, upright or with transpose_a/transpose_b (not
// load-time constants: the per-call path), answers the fma32 loop bit for
// bit, 1 to 3 columns and batches 1 and 37.
func TestFusedMultiplyAddTransposed(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const k = 67
	for _, n := range []int{1, 3, 40} {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			b := tfsave.NewBuilder()
			xShape, yShape := []int64{-1, k}, []int64{k, int64(n)}
			if tr[0] {
				xShape = []int64{k, -1}
			}
			if tr[1] {
				yShape = []int64{int64(n), k}
			}
			x := b.Placeholder("x", tensor.Float, xShape)
			y := b.Placeholder("y", tensor.Float, yShape)
			mm := b.Op("MatMul", []string{x, y}, map[string]any{"transpose_a": tr[0], "transpose_b": tr[1]})
			b.Signature(tfsave.ServingSignature, map[string]string{"x": x, "y": y}, map[string]string{"z": mm})
			files, err := b.Files()
			if err != nil {
				t.Fatal(err)
			}
			m := loadFiles(t, files, driver.Config{FusedMultiplyAdd: true})
			for _, rows := range []int{1, 37} {
				a, w := randomFloats(r, rows*k), randomFloats(r, k*n)
				want := make([]float32, rows*n)
				for i := range rows {
					for j := range n {
						var s float32
						for p := range k {
							s = fma32(a[i*k+p], w[p*n+j], s)
						}
						want[i*n+j] = s
					}
				}
				xa, xs := a, []int64{int64(rows), k}
				if tr[0] {
					xa, xs = transpose2(nil, a, rows, k), []int64{k, int64(rows)}
				}
				yw, ysh := w, []int64{k, int64(n)}
				if tr[1] {
					yw, ysh = transpose2(nil, w, k, n), []int64{int64(n), k}
				}
				res, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", xs, xa), tensor.New("y", ysh, yw)})
				if err != nil {
					t.Fatal(err)
				}
				got, _ := tensor.Data[float32](res[0])
				if len(got) != len(want) {
					t.Fatalf("n=%d transpose %v rows %d: %d values, want %d", n, tr, rows, len(got), len(want))
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d transpose %v rows %d: z[%d] = %v, want %v", n, tr, rows, i, got[i], want[i])
					}
				}
			}
		}
	}
}
