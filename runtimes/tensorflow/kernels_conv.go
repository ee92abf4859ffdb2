package tensorflow

import (
	"fmt"
	"math"
)

// CNN kernels: Conv2D, DepthwiseConv2dNative, MaxPool, AvgPool and
// FusedBatchNorm(V2/V3) in inference mode, NHWC only (TensorFlow's CPU
// kernels accept only NHWC for these ops too).
//
// Accumulation order, for faithful float32 rounding:
//   - Conv2D: each output sums, in the output's dtype, x*w over the window
//     in (kh, kw, in_channel) order, the order of the contraction dimension
//     of TensorFlow's im2col/GEMM (Eigen SpatialConvolution). Each product
//     is rounded before it is added (no fused multiply-add); Eigen built
//     with FMA, and its blocked GEMM for deep windows, can differ in the
//     last bits, so tests compare with a tolerance.
//   - DepthwiseConv2dNative: (kh, kw) order, as TensorFlow's depthwise CPU
//     kernel.
//   - AvgPool: sum over the window's valid (unpadded) elements in row-major
//     order, then one division by their count, as TensorFlow's SpatialAvgPool.
//   - FusedBatchNorm: y = (x - mean) * (rsqrt(variance + epsilon) * scale) +
//     offset, the factor computed once per channel, as TensorFlow's CPU
//     functor; our rsqrt is correctly rounded, Eigen's (a hardware
//     estimate and a Newton step) can be an ulp off.
func init() {
	builders["Conv2D"] = buildConv2D
	builders["DepthwiseConv2dNative"] = buildConv2D
	builders["MaxPool"] = buildPool
	builders["AvgPool"] = buildPool
	builders["FusedBatchNorm"] = buildFusedBatchNorm
	builders["FusedBatchNormV2"] = buildFusedBatchNorm
	builders["FusedBatchNormV3"] = buildFusedBatchNorm
}

// spatial is the geometry of a 2-D window op (NHWC), read from the node's
// attributes at load.
type spatial struct {
	strideH, strideW int
	dilH, dilW       int
	kH, kW           int // pools only (convs take the filter's)
	padding          string
	explicit         [4]int // top, bottom, left, right (EXPLICIT padding)
}

// fourInts reads a list(int) attribute of 4 NHWC values; def is used when
// it is absent.
func fourInts(a attrs, name string, def int) ([4]int, error) {
	var r [4]int
	l := a.list(name).GetI()
	if len(l) == 0 {
		return [4]int{def, def, def, def}, nil
	}
	if len(l) != 4 {
		return r, fmt.Errorf("attribute %s has %d values, want 4", name, len(l))
	}
	for i, v := range l {
		if v < 1 || v > math.MaxInt32 {
			return r, fmt.Errorf("attribute %s value %d out of range", name, v)
		}
		r[i] = int(v)
	}
	if r[0] != 1 || r[3] != 1 {
		return r, fmt.Errorf("attribute %s %v: batch and depth values must be 1 (NHWC)", name, l)
	}
	return r, nil
}

func readSpatial(n *nodeCtx, pool bool) (spatial, error) {
	var g spatial
	if df := n.a.s("data_format"); df != "" && df != "NHWC" {
		return g, fmt.Errorf("data_format %q is not supported (only NHWC, as on TensorFlow's CPU)", df)
	}
	st, err := fourInts(n.a, "strides", 0)
	if err != nil {
		return g, err
	}
	if st[1] == 0 {
		return g, fmt.Errorf("attribute strides is missing")
	}
	g.strideH, g.strideW = st[1], st[2]
	g.dilH, g.dilW = 1, 1
	if pool {
		ks, err := fourInts(n.a, "ksize", 0)
		if err != nil {
			return g, err
		}
		if ks[1] == 0 {
			return g, fmt.Errorf("attribute ksize is missing")
		}
		g.kH, g.kW = ks[1], ks[2]
	} else {
		d, err := fourInts(n.a, "dilations", 1)
		if err != nil {
			return g, err
		}
		g.dilH, g.dilW = d[1], d[2]
	}
	g.padding = n.a.s("padding")
	switch g.padding {
	case "SAME", "VALID":
	case "EXPLICIT":
		if pool {
			return g, fmt.Errorf("padding EXPLICIT is not supported for %s", n.nd.Op)
		}
		p := n.a.list("explicit_paddings").GetI()
		if len(p) != 8 {
			return g, fmt.Errorf("explicit_paddings has %d values, want 8", len(p))
		}
		if p[0] != 0 || p[1] != 0 || p[6] != 0 || p[7] != 0 {
			return g, fmt.Errorf("explicit_paddings %v pads the batch or depth dimension", p)
		}
		for i, v := range p[2:6] {
			if v < 0 || v > maxExplicitPad {
				return g, fmt.Errorf("explicit_paddings value %d out of range [0, %d]", v, maxExplicitPad)
			}
			g.explicit[i] = int(v)
		}
	default:
		return g, fmt.Errorf("padding %q is not supported (SAME, VALID or EXPLICIT)", g.padding)
	}
	return g, nil
}

// maxExplicitPad bounds EXPLICIT padding and maxWindowOut a window op's
// output, so a hostile attribute cannot make a kernel allocate without
// bound.
const (
	maxExplicitPad = 1 << 16
	maxWindowOut   = 1 << 30
)

// checkOut refuses an output of more than maxWindowOut elements.
func checkOut(dims ...int) error {
	n := 1
	for _, d := range dims {
		if d == 0 {
			return nil
		}
		if n > maxWindowOut/d {
			return fmt.Errorf("output %v would have more than %d elements", dims, maxWindowOut)
		}
		n *= d
	}
	return nil
}

// outSize is TensorFlow's GetWindowedOutputSize: the output length of one
// spatial dimension and the padding before it.
func outSize(in, k, stride, dil int, padding string, padBefore, padAfter int) (out, before int, err error) {
	effK := (k-1)*dil + 1
	switch padding {
	case "VALID":
		out = (in - effK + stride) / stride
		if in < effK {
			out = 0
		}
	case "SAME":
		out = (in + stride - 1) / stride
		total := max((out-1)*stride+effK-in, 0)
		before = total / 2
	case "EXPLICIT":
		padded := in + padBefore + padAfter
		if padded < effK {
			return 0, 0, fmt.Errorf("window %d is larger than the padded input %d", effK, padded)
		}
		out = (padded-effK)/stride + 1
		before = padBefore
	}
	if out < 0 {
		out = 0
	}
	return out, before, nil
}

func want4D(t *dense, what string) error {
	if len(t.shape) != 4 {
		return fmt.Errorf("%s must be 4-D (NHWC), has shape %v", what, t.shape)
	}
	return nil
}

func buildConv2D(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	g, err := readSpatial(n, false)
	if err != nil {
		return nil, err
	}
	depthwise := n.nd.Op == "DepthwiseConv2dNative"
	if depthwise && g.strideH != g.strideW {
		// TensorFlow's depthwise kernels refuse this too.
		return nil, fmt.Errorf("strides %d (rows) and %d (cols) differ: DepthwiseConv2dNative needs equal strides", g.strideH, g.strideW)
	}
	dt := n.inTypes[0]
	if n.inTypes[1] != dt {
		return nil, fmt.Errorf("filter dtype %s differs from input dtype %s", dtypeName(n.inTypes[1]), dtypeName(dt))
	}
	x, f, out := n.ins[0], n.ins[1], n.out(dt)
	switch dt {
	case dtFloat:
		if !depthwise {
			// With a constant filter the fusion pass runs it as a GEMM.
			n.fuse = &fusable{kind: fuseConv, a: x, b: f, conv: &g}
		}
		return convK[float32](dt, x, f, out, g, depthwise), nil
	case dtDouble:
		return convK[float64](dt, x, f, out, g, depthwise), nil
	}
	return nil, fmt.Errorf("dtype %s is not supported (float, double)", dtypeName(dt))
}

func convK[T float32 | float64](dt dtype, xs, fs, out int, g spatial, depthwise bool) kernel {
	return func(v []*dense) error {
		xt, ft := v[xs], v[fs]
		if err := want4D(xt, "input"); err != nil {
			return err
		}
		if err := want4D(ft, "filter"); err != nil {
			return err
		}
		c, err := convGeometry(xt.shape, ft.shape, g, depthwise)
		if err != nil {
			return err
		}
		nb, ih, iw, ic := c.nb, c.ih, c.iw, c.ic
		kh, kw, m := c.kh, c.kw, c.mult
		oh, ow, oc, pt, pl := c.oh, c.ow, c.oc, c.pt, c.pl
		x, w := data[T](xt), data[T](ft)
		o := alloc[T](v[out], dt, []int64{int64(nb), int64(oh), int64(ow), int64(oc)})
		for i := range o {
			o[i] = 0
		}
		for b := range nb {
			for y := range oh {
				for xx := range ow {
					acc := o[((b*oh+y)*ow+xx)*oc:][:oc]
					for ky := range kh {
						iy := y*g.strideH - pt + ky*g.dilH
						if iy < 0 || iy >= ih {
							continue
						}
						for kx := range kw {
							ix := xx*g.strideW - pl + kx*g.dilW
							if ix < 0 || ix >= iw {
								continue
							}
							px := x[((b*ih+iy)*iw+ix)*ic:][:ic]
							wk := w[(ky*kw+kx)*ic*m:][:ic*m]
							if depthwise {
								for c, xv := range px {
									wr := wk[c*m:][:m]
									ar := acc[c*m:][:m]
									for j, wv := range wr {
										ar[j] += T(xv * wv)
									}
								}
								continue
							}
							for c, xv := range px {
								wr := wk[c*m:][:m]
								for j, wv := range wr {
									acc[j] += T(xv * wv)
								}
							}
						}
					}
				}
			}
		}
		return nil
	}
}

// convGeom is the geometry of one Conv2D or depthwise call: input
// [nb,ih,iw,ic], filter [kh,kw,ic,mult], output [nb,oh,ow,oc], and the
// padding before the first row (pt) and column (pl).
type convGeom struct {
	nb, ih, iw, ic int
	kh, kw, mult   int
	oh, ow, oc     int
	pt, pl         int
}

// convGeometry checks a convolution's input and filter shapes against each
// other and computes its output.
func convGeometry(xs, fs []int64, g spatial, depthwise bool) (convGeom, error) {
	var c convGeom
	c.nb, c.ih, c.iw, c.ic = int(xs[0]), int(xs[1]), int(xs[2]), int(xs[3])
	var fc int
	c.kh, c.kw, fc, c.mult = int(fs[0]), int(fs[1]), int(fs[2]), int(fs[3])
	if fc != c.ic {
		return c, fmt.Errorf("filter %v has %d input channels, input %v has %d", fs, fc, xs, c.ic)
	}
	if c.kh == 0 || c.kw == 0 {
		return c, fmt.Errorf("filter %v is empty", fs)
	}
	var err error
	if c.oh, c.pt, err = outSize(c.ih, c.kh, g.strideH, g.dilH, g.padding, g.explicit[0], g.explicit[1]); err != nil {
		return c, err
	}
	if c.ow, c.pl, err = outSize(c.iw, c.kw, g.strideW, g.dilW, g.padding, g.explicit[2], g.explicit[3]); err != nil {
		return c, err
	}
	c.oc = c.mult
	if depthwise {
		c.oc = c.ic * c.mult
	}
	return c, checkOut(c.nb, c.oh, c.ow, c.oc)
}

func buildPool(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	g, err := readSpatial(n, true)
	if err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	in, out := n.ins[0], n.out(dt)
	if n.nd.Op == "AvgPool" {
		switch dt {
		case dtFloat:
			return poolK[float32](dt, in, out, g, true), nil
		case dtDouble:
			return poolK[float64](dt, in, out, g, true), nil
		}
		return nil, fmt.Errorf("dtype %s is not supported (float, double)", dtypeName(dt))
	}
	return pick(dt, poolK[float32](dt, in, out, g, false), poolK[float64](dt, in, out, g, false), poolK[int32](dt, in, out, g, false),
		poolK[int64](dt, in, out, g, false), poolK[int16](dt, in, out, g, false), poolK[int8](dt, in, out, g, false), poolK[uint8](dt, in, out, g, false))
}

// poolK is MaxPool (avg false) or AvgPool: padded positions take no part
// (a SAME window at the border covers fewer elements).
func poolK[T elem](dt dtype, ins, out int, g spatial, avg bool) kernel {
	return func(v []*dense) error {
		xt := v[ins]
		if err := want4D(xt, "input"); err != nil {
			return err
		}
		nb, ih, iw, c := int(xt.shape[0]), int(xt.shape[1]), int(xt.shape[2]), int(xt.shape[3])
		oh, pt, _ := outSize(ih, g.kH, g.strideH, 1, g.padding, 0, 0)
		ow, pl, _ := outSize(iw, g.kW, g.strideW, 1, g.padding, 0, 0)
		x := data[T](xt)
		o := alloc[T](v[out], dt, []int64{int64(nb), int64(oh), int64(ow), int64(c)})
		for b := range nb {
			for y := range oh {
				y0, y1 := max(y*g.strideH-pt, 0), min(y*g.strideH-pt+g.kH, ih)
				for xx := range ow {
					x0, x1 := max(xx*g.strideW-pl, 0), min(xx*g.strideW-pl+g.kW, iw)
					acc := o[((b*oh+y)*ow+xx)*c:][:c]
					for j := range acc {
						if avg {
							acc[j] = 0
						} else {
							acc[j] = lowest[T]()
						}
					}
					for iy := y0; iy < y1; iy++ {
						for ix := x0; ix < x1; ix++ {
							px := x[((b*ih+iy)*iw+ix)*c:][:c]
							for j, xv := range px {
								if avg {
									acc[j] += xv
								} else if xv > acc[j] {
									acc[j] = xv
								}
							}
						}
					}
					if avg {
						// A window always covers at least one element (the
						// output size guarantees it).
						cnt := T((y1 - y0) * (x1 - x0))
						for j := range acc {
							acc[j] /= cnt
						}
					}
				}
			}
		}
		return nil
	}
}

func buildFusedBatchNorm(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(5); err != nil {
		return nil, err
	}
	// An absent is_training is the OpDef's default, true (exporters strip
	// attributes equal to their default).
	if v, ok := n.a["is_training"]; !ok || v.GetB() {
		return nil, fmt.Errorf("is_training=true is not supported (only inference mode, is_training=false)")
	}
	if df := n.a.s("data_format"); df != "" && df != "NHWC" {
		return nil, fmt.Errorf("data_format %q is not supported (only NHWC)", df)
	}
	dt := n.inTypes[0]
	ut := n.inTypes[1]
	for i := 2; i < 5; i++ {
		if n.inTypes[i] != ut {
			return nil, fmt.Errorf("input %d dtype %s differs from scale dtype %s", i, dtypeName(n.inTypes[i]), dtypeName(ut))
		}
	}
	if dt != dtFloat || ut != dtFloat {
		return nil, fmt.Errorf("dtypes T=%s U=%s are not supported (float)", dtypeName(dt), dtypeName(ut))
	}
	eps := n.a.f("epsilon", 1e-4)
	ins := append([]int(nil), n.ins...)
	y := n.out(dt)
	// batch_mean, batch_variance, reserve_space_1, reserve_space_2 (and
	// reserve_space_3 for V3). In inference mode TensorFlow's CPU kernel
	// copies mean and variance to batch_mean and batch_variance (NaN when x
	// is empty), allocates reserve_space_1/2 with the scale's shape without
	// writing them (we give mean and variance, so they are at least
	// defined), and makes V3's reserve_space_3 a scalar 0.
	extra := []int{n.out(ut), n.out(ut), n.out(ut), n.out(ut)}
	if n.nd.Op == "FusedBatchNormV3" {
		extra = append(extra, n.out(ut))
	}
	return func(v []*dense) error {
		xt := v[ins[0]]
		if len(xt.shape) != 4 {
			return fmt.Errorf("x must be 4-D (NHWC), has shape %v", xt.shape)
		}
		c := int(xt.shape[3])
		if c == 0 {
			return fmt.Errorf("x %v has depth 0", xt.shape)
		}
		params := [4]*dense{v[ins[1]], v[ins[2]], v[ins[3]], v[ins[4]]}
		for i, p := range params {
			if len(p.shape) != 1 || int(p.shape[0]) != c {
				return fmt.Errorf("%s has shape %v, want [%d] (the depth of x %v)", [4]string{"scale", "offset", "mean", "variance"}[i], p.shape, c, xt.shape)
			}
		}
		scale, offset, mean, variance := params[0].f32, params[1].f32, params[2].f32, params[3].f32
		o := v[y]
		factor := o.tmp32[:0]
		for j := range c {
			r := float32(1 / math.Sqrt(float64(variance[j]+eps)))
			factor = append(factor, r*scale[j])
		}
		o.tmp32 = factor
		x := xt.f32
		out := alloc[float32](o, dtFloat, xt.shape)
		for i := 0; i < len(x); i += c {
			row, orow := x[i:i+c], out[i:i+c]
			for j, xv := range row {
				orow[j] = float32((xv-mean[j])*factor[j]) + offset[j]
			}
		}
		bm := alloc[float32](v[extra[0]], dtFloat, params[2].shape)
		bv := alloc[float32](v[extra[1]], dtFloat, params[3].shape)
		copy(bm, mean)
		copy(bv, variance)
		if len(x) == 0 {
			nan := float32(math.NaN())
			for j := range bm {
				bm[j], bv[j] = nan, nan
			}
		}
		copy(alloc[float32](v[extra[2]], dtFloat, params[2].shape), mean)
		copy(alloc[float32](v[extra[3]], dtFloat, params[3].shape), variance)
		if len(extra) == 5 {
			alloc[float32](v[extra[4]], dtFloat, nil)[0] = 0
		}
		return nil
	}, nil
}
