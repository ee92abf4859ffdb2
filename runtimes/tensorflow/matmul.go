package tensorflow

import (
	"fmt"
	"sync"
)

func init() {
	builders["MatMul"] = buildMatMul
	builders["BatchMatMulV2"] = buildBatchMatMul
	builders["BatchMatMul"] = buildBatchMatMul
	builders["BatchMatMulV3"] = buildBatchMatMul
}

// packB lays out a k×n row-major matrix as panels of 4 columns: panel p
// holds, for each k, columns 4p..4p+3 (zero-padded). The kernel then reads
// B contiguously. Constant weights are packed once, at load.
func packB(dst, b []float32, k, n int) []float32 {
	np := (n + 3) / 4
	size := np * k * 4
	if cap(dst) < size {
		dst = make([]float32, size)
	}
	dst = dst[:size]
	for p := range np {
		panel := dst[p*k*4 : (p+1)*k*4]
		for kk := range k {
			row := b[kk*n : kk*n+n]
			for c := range 4 {
				j := p*4 + c
				if j < n {
					panel[kk*4+c] = row[j]
				} else {
					panel[kk*4+c] = 0
				}
			}
		}
	}
	return dst
}

// epilogue is what a fused MatMul applies to its result: BiasAdd of a
// constant bias, then Relu. biasPad is the bias zero-padded to a multiple
// of 4 for the SSE kernel.
type epilogue struct {
	bias, biasPad []float32
	relu          bool
}

func (e *epilogue) none() bool { return e == nil || (e.bias == nil && !e.relu) }

// apply runs the epilogue on one output row (n values).
func (e *epilogue) apply(row []float32) {
	if e.bias != nil {
		row = row[:len(e.bias)]
		for j, b := range e.bias {
			row[j] += b
		}
	}
	if e.relu {
		for j, v := range row {
			if !(v > 0) {
				row[j] = 0
			}
		}
	}
}

// matmul32 computes o[m×n] = a[m×k] · B where pb is B packed by packB.
// Each output element accumulates in float32 in index order of k, as
// TensorFlow's CPU kernel does for these sizes; the explicit float32
// conversions keep the compiler from fusing multiply-adds. Two rows by
// four columns are kept in registers.
func matmul32(o, a, pb []float32, m, k, n int, e *epilogue) {
	np := (n + 3) / 4
	i := 0
	if hasGemm4x4 && k > 0 {
		i = matmul32SSE(o, a, pb, m, k, n, e)
		if i < m && k*n >= tailMinWork {
			matmul32Tail(o[i*n:m*n], a[i*k:m*k], pb, m-i, k, n, e)
			return
		}
	}
	first := i
	for ; i+2 <= m; i += 2 {
		a0 := a[i*k : i*k+k]
		a1 := a[(i+1)*k : (i+1)*k+k]
		a1 = a1[:len(a0)]
		for p := range np {
			panel := pb[p*k*4 : (p+1)*k*4]
			var c00, c01, c02, c03, c10, c11, c12, c13 float32
			for kk, x0 := range a0 {
				q := panel[kk*4 : kk*4+4 : kk*4+4]
				x1 := a1[kk]
				c00 = float32(c00 + float32(x0*q[0]))
				c01 = float32(c01 + float32(x0*q[1]))
				c02 = float32(c02 + float32(x0*q[2]))
				c03 = float32(c03 + float32(x0*q[3]))
				c10 = float32(c10 + float32(x1*q[0]))
				c11 = float32(c11 + float32(x1*q[1]))
				c12 = float32(c12 + float32(x1*q[2]))
				c13 = float32(c13 + float32(x1*q[3]))
			}
			j := p * 4
			if j+4 <= n {
				r0 := o[i*n+j : i*n+j+4 : i*n+j+4]
				r1 := o[(i+1)*n+j : (i+1)*n+j+4 : (i+1)*n+j+4]
				r0[0], r0[1], r0[2], r0[3] = c00, c01, c02, c03
				r1[0], r1[1], r1[2], r1[3] = c10, c11, c12, c13
				continue
			}
			c0 := [4]float32{c00, c01, c02, c03}
			c1 := [4]float32{c10, c11, c12, c13}
			for c := 0; j+c < n; c++ {
				o[i*n+j+c] = c0[c]
				o[(i+1)*n+j+c] = c1[c]
			}
		}
	}
	for ; i < m; i++ {
		a0 := a[i*k : i*k+k]
		for p := range np {
			panel := pb[p*k*4 : (p+1)*k*4]
			var c [4]float32
			for kk, x0 := range a0 {
				q := panel[kk*4 : kk*4+4 : kk*4+4]
				c[0] = float32(c[0] + float32(x0*q[0]))
				c[1] = float32(c[1] + float32(x0*q[1]))
				c[2] = float32(c[2] + float32(x0*q[2]))
				c[3] = float32(c[3] + float32(x0*q[3]))
			}
			for cc := 0; cc < 4 && p*4+cc < n; cc++ {
				o[i*n+p*4+cc] = c[cc]
			}
		}
	}
	if !e.none() {
		for r := first; r < m; r++ {
			e.apply(o[r*n : r*n+n])
		}
	}
}

// tailMinWork is the k·n from which tail rows take the padded SIMD path;
// small layers (the benchmark MLP's 8x16) keep the scalar loop, which
// needs no copy and no pool round trip.
const tailMinWork = 1024

// tailPool holds matmul32Tail's scratch: 4 rows of input and of output.
var tailPool = sync.Pool{New: func() any { return new([]float32) }}

// matmul32Tail computes the last rows (fewer than 4) of a MatMul with the
// 4-row assembly kernels on a zero-padded copy: rows are independent, so
// each output element is the same as the scalar loop's, and a batch-1
// call runs at SIMD speed.
func matmul32Tail(o, a, pb []float32, rows, k, n int, e *epilogue) {
	sp := tailPool.Get().(*[]float32)
	need := 4*k + 4*n
	if cap(*sp) < need {
		*sp = make([]float32, need)
	}
	buf := (*sp)[:need]
	pa, po := buf[:4*k], buf[4*k:]
	copy(pa, a[:rows*k])
	clear(pa[rows*k:])
	matmul32SSE(po, pa, pb, 4, k, n, e)
	copy(o[:rows*n], po[:rows*n])
	tailPool.Put(sp)
}

// matmul32SSE runs the SSE (or, for 16 columns at a time, AVX) kernels on
// blocks of four rows and returns the number of rows done. Slices are checked here: the assembly trusts them.
func matmul32SSE(o, a, pb []float32, m, k, n int, e *epilogue) int {
	np := (n + 3) / 4
	_ = a[:m*k]
	_ = o[:m*n]
	_ = pb[:np*k*4]
	relu := 0
	var biasPad []float32
	if e != nil {
		if e.relu {
			relu = 1
		}
		if biasPad = e.biasPad; biasPad != nil {
			_ = biasPad[:np*4]
		}
	}
	var tail [16]float32
	i := 0
	for ; i+4 <= m; i += 4 {
		for p := 0; p < np; p++ {
			j := p * 4
			var bias *float32
			if biasPad != nil {
				bias = &biasPad[j]
			}
			if useGemm4x16 && j+16 <= n {
				_ = o[(i+3)*n+j+15]
				_ = pb[(p+4)*k*4-1]
				gemm4x16(&o[i*n+j], n, &a[i*k], k, &pb[p*k*4], k, bias, relu)
				p += 3
				continue
			}
			if j+8 <= n {
				_ = o[(i+3)*n+j+7]
				gemm4x8(&o[i*n+j], n, &a[i*k], k, &pb[p*k*4], &pb[(p+1)*k*4], k, bias, relu)
				p++
				continue
			}
			if j+4 <= n {
				_ = o[(i+3)*n+j+3]
				gemm4x4(&o[i*n+j], n, &a[i*k], k, &pb[p*k*4], k, bias, relu)
				continue
			}
			gemm4x4(&tail[0], 4, &a[i*k], k, &pb[p*k*4], k, bias, relu)
			for r := range 4 {
				copy(o[(i+r)*n+j:(i+r)*n+n], tail[r*4:r*4+4])
			}
		}
	}
	return i
}

// matvec32 computes o[m] = a[m×k] · b[k] (n == 1): one dot product per row,
// in index order.
func matvec32(o, a, b []float32, m, k int) {
	b = b[:k]
	i := 0
	for ; i+4 <= m; i += 4 {
		a0 := a[i*k : i*k+k]
		a1 := a[(i+1)*k : (i+1)*k+k][:len(a0)]
		a2 := a[(i+2)*k : (i+2)*k+k][:len(a0)]
		a3 := a[(i+3)*k : (i+3)*k+k][:len(a0)]
		var s0, s1, s2, s3 float32
		for p, x := range a0 {
			y := b[p]
			s0 = float32(s0 + float32(x*y))
			s1 = float32(s1 + float32(a1[p]*y))
			s2 = float32(s2 + float32(a2[p]*y))
			s3 = float32(s3 + float32(a3[p]*y))
		}
		o[i], o[i+1], o[i+2], o[i+3] = s0, s1, s2, s3
	}
	for ; i < m; i++ {
		row := a[i*k : i*k+k]
		var s float32
		for p, x := range row {
			s = float32(s + float32(x*b[p]))
		}
		o[i] = s
	}
}

// matmulGeneric computes o = op(a)·op(b) for any element type, with
// optional transposes, accumulating in index order.
func matmulGeneric[T elem](o, a, b []T, m, k, n int, ta, tb bool) {
	for i := range m {
		for j := range n {
			var s T
			for p := range k {
				var x, y T
				if ta {
					x = a[p*m+i]
				} else {
					x = a[i*k+p]
				}
				if tb {
					y = b[j*k+p]
				} else {
					y = b[p*n+j]
				}
				s = T(s + T(x*y))
			}
			o[i*n+j] = s
		}
	}
}

// transpose2 writes the transpose of a rows×cols matrix into dst.
func transpose2[T elem](dst, src []T, rows, cols int) []T {
	if cap(dst) < len(src) {
		dst = make([]T, len(src))
	}
	dst = dst[:len(src)]
	for r := range rows {
		for c := range cols {
			dst[c*rows+r] = src[r*cols+c]
		}
	}
	return dst
}

func matmulK[T elem](dt dtype, par *intraop, a, b, out int, ta, tb bool) kernel {
	return func(v []*dense) error {
		x, y, o := v[a], v[b], v[out]
		if len(x.shape) != 2 || len(y.shape) != 2 {
			return fmt.Errorf("inputs must be matrices, got %v and %v", x.shape, y.shape)
		}
		m, k := int(x.shape[0]), int(x.shape[1])
		if ta {
			m, k = k, m
		}
		k2, n := int(y.shape[0]), int(y.shape[1])
		if tb {
			k2, n = n, k2
		}
		if k != k2 {
			return fmt.Errorf("matrix size-incompatible: %v and %v (transpose_a=%v, transpose_b=%v)", x.shape, y.shape, ta, tb)
		}
		o.scratch = append(o.scratch[:0], int64(m), int64(n))
		dst := alloc[T](o, dt, o.scratch)
		if d32, ok := any(dst).([]float32); ok && (!ta && !tb || par.fused()) {
			xs, ys := data[float32](x), data[float32](y)
			// Under fused_multiply_add a transposed operand is copied
			// upright, so that it too runs the fused kernels.
			if ta {
				xs = transpose2(nil, xs, k, m)
			}
			if tb {
				ys = transpose2(nil, ys, n, k)
			}
			switch {
			case n == 1:
				matvec32Par(par, d32, xs, ys, m, k)
			default:
				pb := packWeights(packedB{data: o.tmp32}, ys, k, n)
				o.tmp32 = pb.data
				matmul32Par(par, d32, xs, pb, m, k, n, nil)
			}
			return nil
		}
		matmulGeneric(dst, data[T](x), data[T](y), m, k, n, ta, tb)
		return nil
	}
}

func buildMatMul(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	if n.inTypes[1] != dt {
		return nil, fmt.Errorf("inputs are %s and %s", dtypeName(dt), dtypeName(n.inTypes[1]))
	}
	ta, tb := n.a.b("transpose_a"), n.a.b("transpose_b")
	a, b, out := n.ins[0], n.ins[1], n.out(dt)
	if dt == dtFloat && !ta {
		// Weights that are constant after folding are packed at load by
		// the fusion pass.
		n.fuse = &fusable{kind: fuseMatMul, a: a, b: b, tb: tb}
	}
	par := n.c.prog.intraop()
	return pick(dt, matmulK[float32](dt, par, a, b, out, ta, tb), matmulK[float64](dt, par, a, b, out, ta, tb), matmulK[int32](dt, par, a, b, out, ta, tb),
		matmulK[int64](dt, par, a, b, out, ta, tb), nil, nil, nil)
}

func batchMatmulK[T elem](dt dtype, a, b, out int, ta, tb bool) kernel {
	return func(v []*dense) error {
		x, y, o := v[a], v[b], v[out]
		rx, ry := len(x.shape), len(y.shape)
		if rx < 2 || ry < 2 {
			return fmt.Errorf("inputs must have rank >= 2, got %v and %v", x.shape, y.shape)
		}
		m, k := int(x.shape[rx-2]), int(x.shape[rx-1])
		if ta {
			m, k = k, m
		}
		k2, n := int(y.shape[ry-2]), int(y.shape[ry-1])
		if tb {
			k2, n = n, k2
		}
		if k != k2 {
			return fmt.Errorf("matrix size-incompatible: %v and %v", x.shape, y.shape)
		}
		batch, err := broadcast(o.scratch2, x.shape[:rx-2], y.shape[:ry-2])
		if err != nil {
			return err
		}
		o.scratch2 = batch
		shape := append(append(o.scratch[:0], batch...), int64(m), int64(n))
		o.scratch = shape
		dst := alloc[T](o, dt, shape)
		xs, ys := data[T](x), data[T](y)
		sx := bstrides(nil, x.shape[:rx-2], batch)
		sy := bstrides(nil, y.shape[:ry-2], batch)
		idx := make([]int64, len(batch))
		nb := numElems(batch)
		for bi := range nb {
			ox, oy := 0, 0
			for d := range batch {
				ox += int(idx[d] * sx[d])
				oy += int(idx[d] * sy[d])
			}
			matmulGeneric(dst[bi*m*n:(bi+1)*m*n], xs[ox*m*k:(ox+1)*m*k], ys[oy*k*n:(oy+1)*k*n], m, k, n, ta, tb)
			for d := len(batch) - 1; d >= 0; d-- {
				idx[d]++
				if idx[d] < batch[d] {
					break
				}
				idx[d] = 0
			}
		}
		return nil
	}
}

func buildBatchMatMul(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	ta, tb := n.a.b("adj_x"), n.a.b("adj_y")
	a, b, out := n.ins[0], n.ins[1], n.out(dt)
	return pick(dt, batchMatmulK[float32](dt, a, b, out, ta, tb), batchMatmulK[float64](dt, a, b, out, ta, tb), batchMatmulK[int32](dt, a, b, out, ta, tb),
		batchMatmulK[int64](dt, a, b, out, ta, tb), nil, nil, nil)
}

const (
	fuseMatMul = iota + 1
	fuseBias
	fuseRelu
	fuseConv
)

// fusable marks a float32 step the fusion pass understands.
type fusable struct {
	kind int
	// MatMul: input slots, transpose_b; with constant weights (k×n) the
	// pass sets weights (n == 1) or packed (n > 1).
	a, b    int
	tb      bool
	packed  packedB
	weights []float32
	k, n    int
	// BiasAdd: the bias slot (input 1).
	// Conv2D (float32): input slot a, filter slot b, the window geometry.
	conv *spatial
}

// fusedMatMul is MatMul followed by BiasAdd and/or Relu in one pass: the
// same float32 operations in the same order, without writing and reading
// the intermediate tensors.
func fusedMatMul(par *intraop, f *fusable, e *epilogue, out int) kernel {
	return func(v []*dense) error {
		x, o := v[f.a], v[out]
		if x.dt != dtFloat || len(x.shape) != 2 || int(x.shape[1]) != f.k {
			return fmt.Errorf("matrix size-incompatible: %v and [%d,%d]", x.shape, f.k, f.n)
		}
		m := int(x.shape[0])
		o.scratch = append(o.scratch[:0], int64(m), int64(f.n))
		dst := alloc[float32](o, dtFloat, o.scratch)
		if f.n == 1 {
			matvec32Par(par, dst, x.f32, f.weights, m, f.k)
			for r := range m {
				e.apply(dst[r : r+1])
			}
			return nil
		}
		matmul32Par(par, dst, x.f32, f.packed, m, f.k, f.n, e)
		return nil
	}
}

// fuse merges MatMul→BiasAdd(→Relu) chains whose intermediate results
// nothing else reads.
func (p *program) fuse() {
	uses := make([]int, len(p.types))
	for _, st := range p.steps {
		for _, in := range st.ins {
			uses[in]++
		}
	}
	for _, f := range p.fetches {
		uses[f] += 2 // fetched slots must stay
	}
	consumer := make(map[int]int, len(p.steps))
	for i, st := range p.steps {
		for _, in := range st.ins {
			consumer[in] = i
		}
	}
	constBias := func(st *step) []float32 {
		if st.fuse == nil || st.fuse.kind != fuseBias {
			return nil
		}
		c := p.consts[st.ins[1]]
		if c == nil || c.dt != dtFloat || len(c.shape) != 1 {
			return nil
		}
		return c.f32
	}
	dead := make([]bool, len(p.steps))
	// chain finds the BiasAdd (of a constant bias of n values) and Relu
	// that follow the result out alone, marks them dead and returns the
	// epilogue and the slot the fused step writes.
	chain := func(out, n int) (*epilogue, int) {
		e := &epilogue{}
		if j, ok := consumer[out]; ok && uses[out] == 1 && p.steps[j].ins[0] == out {
			if bias := constBias(&p.steps[j]); bias != nil && len(bias) == n {
				e.bias = bias
				e.biasPad = make([]float32, (n+3)/4*4)
				copy(e.biasPad, bias)
				dead[j] = true
				out = p.steps[j].outs[0]
				if r, ok := consumer[out]; ok && uses[out] == 1 {
					if rf := p.steps[r].fuse; rf != nil && rf.kind == fuseRelu {
						e.relu = true
						dead[r] = true
						out = p.steps[r].outs[0]
					}
				}
			}
		}
		return e, out
	}
	opName := func(op string, e *epilogue) string {
		if e.bias != nil {
			op += "+BiasAdd"
		}
		if e.relu {
			op += "+Relu"
		}
		return op
	}
	for i := range p.steps {
		st := &p.steps[i]
		if st.fuse != nil && st.fuse.kind == fuseConv && len(st.outs) == 1 {
			w := p.consts[st.fuse.b]
			if w == nil || w.dt != dtFloat || len(w.shape) != 4 {
				continue
			}
			k, n := int(w.shape[0]*w.shape[1]*w.shape[2]), int(w.shape[3])
			pb := packWeights(packedB{}, w.f32, k, n)
			if uses[st.fuse.b] == 1 {
				p.consts[st.fuse.b] = nil
			}
			e, out := chain(st.outs[0], n)
			st.run = convGemm(p.intraop(), *st.fuse.conv, st.fuse.a, append([]int64(nil), w.shape...), pb, e, out)
			st.ins = []int{st.fuse.a}
			st.outs = []int{out}
			st.op = opName("Conv2D", e)
			continue
		}
		if st.fuse == nil || st.fuse.kind != fuseMatMul || len(st.outs) != 1 {
			continue
		}
		w := p.consts[st.fuse.b]
		if w == nil || w.dt != dtFloat || len(w.shape) != 2 {
			continue
		}
		f := *st.fuse
		f.k, f.n = int(w.shape[0]), int(w.shape[1])
		f.weights = w.f32
		if f.tb {
			f.k, f.n = f.n, f.k
			f.weights = transpose2(nil, w.f32, int(w.shape[0]), int(w.shape[1]))
		}
		if f.n > 1 {
			// matmul32 reads only the packed copy; matvec32 (n == 1) only
			// the weights. Keeping both doubled a model's memory.
			f.packed = packWeights(packedB{}, f.weights, f.k, f.n)
			f.weights = nil
		}
		if uses[st.fuse.b] == 1 {
			// Nothing else reads the constant: the kernel's copy replaces
			// it, and the loaded model holds its weights once.
			p.consts[st.fuse.b] = nil
		}
		e, out := chain(st.outs[0], f.n)
		st.run = fusedMatMul(p.intraop(), &f, e, out)
		st.ins = []int{f.a}
		st.outs = []int{out}
		if e.bias != nil || e.relu {
			st.op = opName("MatMul", e)
		}
	}
	kept := p.steps[:0]
	for i, st := range p.steps {
		if !dead[i] {
			kept = append(kept, st)
		}
	}
	p.steps = kept
}
