package tensorflow

// panelWidth512 is the number of columns in one panel of the AVX-512
// kernels: two zmm registers of float32.
const panelWidth512 = 32

// packB32 lays out a k×n row-major matrix as panels of 32 columns: panel p
// holds, for each k, columns 32p..32p+31 (zero-padded), so the gemm512
// kernels read B contiguously, two cache lines per k.
func packB32(dst, b []float32, k, n int) []float32 {
	np := (n + panelWidth512 - 1) / panelWidth512
	size := np * k * panelWidth512
	if cap(dst) < size {
		dst = make([]float32, size)
	}
	dst = dst[:size]
	for p := range np {
		j := p * panelWidth512
		cols := min(panelWidth512, n-j)
		panel := dst[p*k*panelWidth512 : (p+1)*k*panelWidth512]
		for kk := range k {
			d := panel[kk*panelWidth512 : (kk+1)*panelWidth512]
			copy(d, b[kk*n+j:kk*n+j+cols])
			clear(d[cols:])
		}
	}
	return dst
}

// packedB is a k×n weight matrix packed for the kernels this CPU runs:
// 32-column panels for gemm512 (wide) or 4-column panels for the SSE/AVX
// kernels and the Go loop.
type packedB struct {
	wide bool
	data []float32
}

// packWeights packs b (k×n) for the fastest kernel, reusing dst's memory.
func packWeights(dst packedB, b []float32, k, n int) packedB {
	if useGemm512 {
		return packedB{wide: true, data: packB32(dst.data, b, k, n)}
	}
	return packedB{data: packB(dst.data, b, k, n)}
}

// gemm32 computes o[m×n] = a[m×k] · B (+ epilogue) with the kernel pb was
// packed for. Every kernel accumulates each element the same way (float32,
// index order of k, multiply then add; with fma, one fused multiply-add
// per step), so the results are bit-identical whichever runs, and a row's
// result does not depend on the batch it came in.
func gemm32(o, a []float32, pb packedB, m, k, n int, e *epilogue, fma bool) {
	switch {
	case pb.wide && fma:
		matmul512(&gemm512Fused, o, a, pb.data, m, k, n, e)
	case pb.wide:
		matmul512(&gemm512Plain, o, a, pb.data, m, k, n, e)
	case fma:
		matmul32FMA(o, a, pb.data, m, k, n, e)
	default:
		matmul32(o, a, pb.data, m, k, n, e)
	}
}

// gemm512Kernels is one set of AVX-512 kernels: multiply then add, or
// fused multiply-add.
type gemm512Kernels struct {
	r8, r4, r2, r1, r1x4 func(c *float32, ldc int, a *float32, lda int, panel *float32, k int, bias *float32, relu int, mask int)
}

var (
	gemm512Plain = gemm512Kernels{gemm512r8, gemm512r4, gemm512r2, gemm512r1, gemm512r1x4}
	gemm512Fused = gemm512Kernels{gemm512r8FMA, gemm512r4FMA, gemm512r2FMA, gemm512r1FMA, gemm512r1x4FMA}
)

// matmul512 is matmul32 for B packed by packB32, with the AVX-512 kernels ks:
// 8-row blocks (16 zmm accumulators), then 4 and 2 rows, the last
// panel's columns under a mask; an odd last row (batch 1) takes four full
// panels at a time (gemm512r1x4), then single panels. Panels are the outer loop so
// that one panel (k×32 floats, 32 KiB at k = 256) stays in L1 while every
// row block reads it. Slices are checked here: the assembly trusts them.
func matmul512(ks *gemm512Kernels, o, a, pb []float32, m, k, n int, e *epilogue) {
	if m == 0 || n == 0 {
		return
	}
	o = o[:m*n]
	if k == 0 {
		clear(o)
		if !e.none() {
			for r := range m {
				e.apply(o[r*n : r*n+n])
			}
		}
		return
	}
	np := (n + panelWidth512 - 1) / panelWidth512
	_ = a[:m*k]
	_ = pb[:np*k*panelWidth512]
	relu := 0
	var bias []float32
	if e != nil {
		if e.relu {
			relu = 1
		}
		if bias = e.bias; bias != nil {
			_ = bias[:n]
		}
	}
	// The last row, when m is odd, is done apart: four panels at a time.
	pairs := m &^ 1
	for p := range np {
		j := p * panelWidth512
		mask := 1<<min(panelWidth512, n-j) - 1
		panel := &pb[p*k*panelWidth512]
		var bp *float32
		if bias != nil {
			bp = &bias[j]
		}
		i := 0
		for ; i+8 <= pairs; i += 8 {
			ks.r8(&o[i*n+j], n, &a[i*k], k, panel, k, bp, relu, mask)
		}
		if i+4 <= pairs {
			ks.r4(&o[i*n+j], n, &a[i*k], k, panel, k, bp, relu, mask)
			i += 4
		}
		if i+2 <= pairs {
			ks.r2(&o[i*n+j], n, &a[i*k], k, panel, k, bp, relu, mask)
		}
	}
	if pairs == m {
		return
	}
	i := pairs
	for p := 0; p < np; {
		j := p * panelWidth512
		var bp *float32
		if bias != nil {
			bp = &bias[j]
		}
		if j+4*panelWidth512 <= n {
			ks.r1x4(&o[i*n+j], n, &a[i*k], k, &pb[p*k*panelWidth512], k, bp, relu, -1)
			p += 4
			continue
		}
		ks.r1(&o[i*n+j], n, &a[i*k], k, &pb[p*k*panelWidth512], k, bp, relu, 1<<min(panelWidth512, n-j)-1)
		p++
	}
}
