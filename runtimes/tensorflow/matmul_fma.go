package tensorflow

import "math"

// The fused multiply-add opt-in (driver.Config.FusedMultiplyAdd): every
// float32 MatMul and Conv2D-as-GEMM step is c = fma32(a, b, c), one
// rounding per step, in index order of k, from +0; bias and Relu follow as
// before. The AVX-512 kernels do it with VFMADD231PS; without AVX-512 the Go
// loops below compute the same bits.

// fma32 returns a*b+c rounded once to float32 (round to nearest even), as
// VFMADD231PS does.
//
// float32(math.FMA(float64(a), float64(b), float64(c))) is not this: it
// rounds to float64 first, then to float32, and the first rounding can
// land exactly on a float32 halfway point the exact value was not on
// (a*b = 1+2⁻²⁴, c = 2⁻⁸⁰ gives 1 instead of 1+2⁻²³). Instead: a*b is
// exact in float64 (24+24 significand bits ≤ 53); s = p+c rounded to float64
// and its error e = (p+c)-s are exact by TwoSum; if e ≠ 0, s is replaced by
// whichever float64 neighbour of p+c has an odd last bit (round to odd).
// Round to odd at 53 bits followed by round to nearest at 24 ≤ 53-2 bits is
// the correctly rounded result (Boldo and Melquiond, "Emulation of FMA and
// correctly rounded sums: proved algorithms using rounding to odd", 2008).
// Float64 neither overflows nor underflows here: |a*b| < 2²⁵⁶, and a
// nonzero |a*b| ≥ 2⁻²⁹⁸ lies far above float64's subnormals.
//
// Fast path: when s is not a float32 halfway point (its low 29 bits are not
// 1<<28) and lies in float32's normal range, float32(s) is already right:
// every halfway point is a float64, and none lies strictly between p+c and
// its nearest float64 s, so both round to the same float32.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	cc := float64(c)
	s := p + cc
	if bits := math.Float64bits(s); bits&(1<<29-1) != 1<<28 && bits&(1<<63-1) >= 0x381<<52 {
		return float32(s) // also Inf and NaN: their low bits are not 1<<28
	}
	// TwoSum: e is exactly p+cc-s.
	bv := s - p
	e := (p - (s - bv)) + (cc - bv)
	if e != 0 && !math.IsInf(s, 0) && !math.IsNaN(s) {
		bits := math.Float64bits(s)
		if bits&1 == 0 {
			// s is even: step one ulp towards the exact value. s and e are
			// nonzero here (|e| ≤ ulp(s)/2 and s = 0 only when p+cc = 0), so
			// moving away from zero is bits+1, towards zero bits-1.
			if (e > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}

// matmul32FMA is matmul32 (B packed by packB, 4-column panels) with one
// fused multiply-add per step, then the epilogue: the pure-Go form of the
// fused kernels.
func matmul32FMA(o, a, pb []float32, m, k, n int, e *epilogue) {
	np := (n + 3) / 4
	for i := range m {
		row := a[i*k : i*k+k]
		for p := range np {
			panel := pb[p*k*4 : (p+1)*k*4]
			var c0, c1, c2, c3 float32
			for kk, x := range row {
				q := panel[kk*4 : kk*4+4 : kk*4+4]
				c0 = fma32(x, q[0], c0)
				c1 = fma32(x, q[1], c1)
				c2 = fma32(x, q[2], c2)
				c3 = fma32(x, q[3], c3)
			}
			c := [4]float32{c0, c1, c2, c3}
			for cc := 0; cc < 4 && p*4+cc < n; cc++ {
				o[i*n+p*4+cc] = c[cc]
			}
		}
		if !e.none() {
			e.apply(o[i*n : i*n+n])
		}
	}
}

// matvec32FMA is matvec32 with one fused multiply-add per step.
func matvec32FMA(o, a, b []float32, m, k int) {
	b = b[:k]
	for i := range m {
		row := a[i*k : i*k+k]
		var s float32
		for p, x := range row {
			s = fma32(x, b[p], s)
		}
		o[i] = s
	}
}
