package tensorflow

import (
	"fmt"
	"sync"
)

// Conv2D as a GEMM: a float32 Conv2D whose filter is a load-time constant
// (a Const, or a variable nothing assigns) runs through the MatMul kernels.
// The filter [kh,kw,ic,oc] (HWIO) is already a row-major
// [kh*kw*ic, oc] matrix and is packed once, at load; each output pixel's
// window is copied into a patch row laid out [kh][kw][ic] (im2col, zeros
// where the window lies in the padding), the order the direct kernel
// accumulates in, so each output element is the same float32 sum: products
// rounded then added in (kh, kw, ic) order. A padded position adds
// 0*w = ±0, which leaves any sum unchanged; only a filter holding Inf or
// NaN makes it differ from skipping the position, as TensorFlow's own
// im2col does too.

// im2colFloats bounds one goroutine's patch buffer: output rows are
// lowered in tiles of about this many floats (at least 8 rows), so memory
// stays small whatever the image size.
const im2colFloats = 1 << 15

// im2colPool holds patch buffers between calls.
var im2colPool = sync.Pool{New: func() any { return new([]float32) }}

// convGemm is the kernel of a fused float32 Conv2D: input slot xs, the
// filter's shape fshape packed in pb, the epilogue e (BiasAdd, Relu),
// output slot out.
func convGemm(par *intraop, g spatial, xs int, fshape []int64, pb packedB, e *epilogue, out int) kernel {
	return func(v []*dense) error {
		xt := v[xs]
		if err := want4D(xt, "input"); err != nil {
			return err
		}
		if xt.dt != dtFloat {
			return fmt.Errorf("input dtype %s differs from filter dtype float", dtypeName(xt.dt))
		}
		c, err := convGeometry(xt.shape, fshape, g, false)
		if err != nil {
			return err
		}
		o := alloc[float32](v[out], dtFloat, []int64{int64(c.nb), int64(c.oh), int64(c.ow), int64(c.oc)})
		conv32Par(par, o, xt.f32, &c, &g, pb, e)
		return nil
	}
}

// conv32Par computes a float32 Conv2D into o, split by output pixels
// (rows of the GEMM) across p's goroutines as a MatMul is.
func conv32Par(p *intraop, o, x []float32, c *convGeom, g *spatial, pb packedB, e *epilogue) {
	m, k, n := c.nb*c.oh*c.ow, c.kh*c.kw*c.ic, c.oc
	if m == 0 || n == 0 {
		return
	}
	if c.kh == 1 && c.kw == 1 && g.strideH == 1 && g.strideW == 1 && c.pt == 0 && c.pl == 0 && c.oh == c.ih && c.ow == c.iw {
		// A 1x1 convolution: each input pixel is its own patch row.
		matmul32Par(p, o, x, pb, m, k, n, e)
		return
	}
	w := p.workers(m, k, n)
	if w <= 1 {
		conv32Rows(o, x, c, g, pb, e, p.fused(), 0, m)
		return
	}
	fma := p.fused()
	splitRows(m, w, func(lo, hi int) { conv32Rows(o, x, c, g, pb, e, fma, lo, hi) })
}

// conv32Rows computes output pixels [lo,hi) (in NHW order), lowering a
// tile of them at a time into a pooled patch buffer; fma selects the fused
// multiply-add kernels.
func conv32Rows(o, x []float32, c *convGeom, g *spatial, pb packedB, e *epilogue, fma bool, lo, hi int) {
	k, n := c.kh*c.kw*c.ic, c.oc
	tile := max(8, im2colFloats/max(k, 1)&^7)
	sp := im2colPool.Get().(*[]float32)
	if need := min(tile, hi-lo) * k; cap(*sp) < need {
		*sp = make([]float32, need)
	}
	for r := lo; r < hi; r += tile {
		re := min(r+tile, hi)
		patches := (*sp)[:(re-r)*k]
		im2col(patches, x, c, g, r, re)
		gemm32(o[r*n:re*n], patches, pb, re-r, k, n, e, fma)
	}
	im2colPool.Put(sp)
}

// im2col writes the windows of output pixels [lo,hi) as rows of dst, each
// [kh][kw][ic], zeros for positions in the padding.
func im2col(dst, x []float32, c *convGeom, g *spatial, lo, hi int) {
	ic := c.ic
	k := c.kh * c.kw * ic
	for r := lo; r < hi; r++ {
		b, yx := r/(c.oh*c.ow), r%(c.oh*c.ow)
		y, xx := yx/c.ow, yx%c.ow
		row := dst[(r-lo)*k : (r-lo+1)*k]
		for ky := range c.kh {
			iy := y*g.strideH - c.pt + ky*g.dilH
			seg := row[ky*c.kw*ic : (ky+1)*c.kw*ic]
			if iy < 0 || iy >= c.ih {
				clear(seg)
				continue
			}
			base := (b*c.ih + iy) * c.iw
			if ix := xx*g.strideW - c.pl; g.dilW == 1 && ix >= 0 && ix+c.kw <= c.iw {
				// The window's row lies inside the image: its kw pixels are
				// adjacent in x, one copy.
				copy(seg, x[(base+ix)*ic:(base+ix+c.kw)*ic])
				continue
			}
			for kx := range c.kw {
				ix := xx*g.strideW - c.pl + kx*g.dilW
				px := seg[kx*ic : (kx+1)*ic]
				if ix < 0 || ix >= c.iw {
					clear(px)
					continue
				}
				copy(px, x[(base+ix)*ic:(base+ix+1)*ic])
			}
		}
	}
}
