package tensorflow

import (
	"fmt"
)

// pick selects the instance of a generic kernel for dt; nil entries are
// dtypes the op does not support.
func pick(dt dtype, f32, f64, i32, i64, i16, i8, u8 kernel) (kernel, error) {
	var k kernel
	switch dt {
	case dtFloat:
		k = f32
	case dtDouble:
		k = f64
	case dtInt32:
		k = i32
	case dtInt64:
		k = i64
	case dtInt16:
		k = i16
	case dtInt8:
		k = i8
	case dtUint8:
		k = u8
	}
	if k == nil {
		return nil, fmt.Errorf("dtype %s is not supported", dtypeName(dt))
	}
	return k, nil
}

// intsOf reads an int32/int64 tensor into dst (reused).
func intsOf(t *dense, dst []int64) ([]int64, error) {
	dst = dst[:0]
	switch t.dt {
	case dtInt32:
		for _, v := range t.i32 {
			dst = append(dst, int64(v))
		}
	case dtInt64:
		dst = append(dst, t.i64...)
	default:
		return nil, fmt.Errorf("expected an int32 or int64 tensor, got %s", dtypeName(t.dt))
	}
	return dst, nil
}

func scalarInt(t *dense) (int64, error) {
	var buf [1]int64
	v, err := intsOf(t, buf[:0])
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("expected a scalar, got shape %v", t.shape)
	}
	return v[0], nil
}

func normAxis(axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, fmt.Errorf("axis %d is out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

func isFloat(dt dtype) bool { return dt == dtFloat || dt == dtDouble }

var builders = map[string]builder{}

func init() {
	for op, b := range map[string]builder{
		"Cast":         buildCast,
		"Reshape":      buildReshape,
		"Squeeze":      buildSqueeze,
		"ExpandDims":   buildExpandDims,
		"Shape":        buildShape,
		"Size":         buildSize,
		"Rank":         buildRank,
		"ConcatV2":     buildConcat,
		"Pack":         buildPack,
		"Unpack":       buildUnpack,
		"GatherV2":     buildGather,
		"Slice":        buildSlice,
		"StridedSlice": buildStridedSlice,
		"OneHot":       buildOneHot,
		"Fill":         buildFill,
		"ZerosLike":    buildZerosLike,
		"OnesLike":     buildZerosLike,
	} {
		builders[op] = b
	}
}

// copyAs converts between numeric types.
func copyAs[S, D elem](dst []D, src []S) {
	for i, v := range src {
		dst[i] = D(v)
	}
}

func castFrom[S elem](to dtype, in, out int) kernel {
	switch to {
	case dtFloat:
		return func(v []*dense) error { copyAs(alloc[float32](v[out], to, v[in].shape), data[S](v[in])); return nil }
	case dtDouble:
		return func(v []*dense) error { copyAs(alloc[float64](v[out], to, v[in].shape), data[S](v[in])); return nil }
	case dtInt32:
		return func(v []*dense) error { copyAs(alloc[int32](v[out], to, v[in].shape), data[S](v[in])); return nil }
	case dtInt64:
		return func(v []*dense) error { copyAs(alloc[int64](v[out], to, v[in].shape), data[S](v[in])); return nil }
	case dtInt16:
		return func(v []*dense) error { copyAs(alloc[int16](v[out], to, v[in].shape), data[S](v[in])); return nil }
	case dtInt8:
		return func(v []*dense) error { copyAs(alloc[int8](v[out], to, v[in].shape), data[S](v[in])); return nil }
	case dtUint8:
		return func(v []*dense) error { copyAs(alloc[uint8](v[out], to, v[in].shape), data[S](v[in])); return nil }
	case dtBool:
		return func(v []*dense) error {
			t := v[out]
			t.dt = dtBool
			t.setShape(v[in].shape)
			src := data[S](v[in])
			t.b = growBool(t.b, len(src))
			for i, x := range src {
				t.b[i] = x != 0
			}
			return nil
		}
	}
	return nil
}

func growBool(b []bool, n int) []bool {
	if cap(b) < n {
		return make([]bool, n)
	}
	return b[:n]
}

func boolTo[D elem](to dtype, in, out int) kernel {
	return func(v []*dense) error {
		o := alloc[D](v[out], to, v[in].shape)
		for i, x := range v[in].b {
			if x {
				o[i] = 1
			} else {
				o[i] = 0
			}
		}
		return nil
	}
}

// castSlice converts the unsigned dtypes kernels do not compute in.
func castSlice[S uint16 | uint32 | uint64, D elem](to dtype, in, out int, src func(*dense) []S) kernel {
	return func(v []*dense) error {
		o := alloc[D](v[out], to, v[in].shape)
		for i, x := range src(v[in]) {
			o[i] = D(x)
		}
		return nil
	}
}

func castUnsigned[S uint16 | uint32 | uint64](to dtype, in, out int, src func(*dense) []S) kernel {
	k, _ := pick(to, castSlice[S, float32](to, in, out, src), castSlice[S, float64](to, in, out, src), castSlice[S, int32](to, in, out, src),
		castSlice[S, int64](to, in, out, src), castSlice[S, int16](to, in, out, src), castSlice[S, int8](to, in, out, src), castSlice[S, uint8](to, in, out, src))
	return k
}

// castHalf widens HALF or BFLOAT16 (as mixed-precision exports store
// constants) to FLOAT or DOUBLE, exactly.
func castHalf(from, to dtype, in, out int) kernel {
	widen := halfToFloat32
	if from == dtBfloat16 {
		widen = bfloat16ToFloat32
	}
	switch to {
	case dtFloat:
		return func(v []*dense) error {
			o := alloc[float32](v[out], to, v[in].shape)
			for i, h := range v[in].u16 {
				o[i] = widen(h)
			}
			return nil
		}
	case dtDouble:
		return func(v []*dense) error {
			o := alloc[float64](v[out], to, v[in].shape)
			for i, h := range v[in].u16 {
				o[i] = float64(widen(h))
			}
			return nil
		}
	}
	return nil
}

func buildCast(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	from := n.inTypes[0]
	to, err := n.a.typ("DstT")
	if err != nil {
		return nil, err
	}
	in, out := n.ins[0], n.out(to)
	if from == to {
		return func(v []*dense) error { v[out].shareFrom(v[in], v[in].shape); return nil }, nil
	}
	var k kernel
	switch from {
	case dtFloat:
		k = castFrom[float32](to, in, out)
	case dtDouble:
		k = castFrom[float64](to, in, out)
	case dtInt32:
		k = castFrom[int32](to, in, out)
	case dtInt64:
		k = castFrom[int64](to, in, out)
	case dtInt16:
		k = castFrom[int16](to, in, out)
	case dtInt8:
		k = castFrom[int8](to, in, out)
	case dtUint8:
		k = castFrom[uint8](to, in, out)
	case dtUint16:
		k = castUnsigned(to, in, out, func(t *dense) []uint16 { return t.u16 })
	case dtUint32:
		k = castUnsigned(to, in, out, func(t *dense) []uint32 { return t.u32 })
	case dtUint64:
		k = castUnsigned(to, in, out, func(t *dense) []uint64 { return t.u64 })
	case dtHalf, dtBfloat16:
		k = castHalf(from, to, in, out)
	case dtBool:
		k, _ = pick(to, boolTo[float32](to, in, out), boolTo[float64](to, in, out), boolTo[int32](to, in, out), boolTo[int64](to, in, out), boolTo[int16](to, in, out), boolTo[int8](to, in, out), boolTo[uint8](to, in, out))
	}
	if k == nil {
		return nil, fmt.Errorf("cast from %s to %s is not supported", dtypeName(from), dtypeName(to))
	}
	return k, nil
}

// reshapeTo computes the shape for Reshape with at most one -1.
func reshapeTo(dst []int64, in *dense, spec []int64) ([]int64, error) {
	total := int64(in.elemCount())
	known, unknown := int64(1), -1
	dst = append(dst[:0], spec...)
	for i, d := range dst {
		switch {
		case d == -1:
			if unknown >= 0 {
				return nil, fmt.Errorf("shape %v has more than one -1", spec)
			}
			unknown = i
		case d < 0:
			return nil, fmt.Errorf("shape %v has a negative dimension", spec)
		default:
			known *= d
		}
	}
	if unknown >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot reshape %d elements to %v", total, spec)
		}
		dst[unknown] = total / known
	} else if known != total {
		return nil, fmt.Errorf("cannot reshape a tensor of %d elements (shape %v) to %v", total, in.shape, spec)
	}
	return dst, nil
}

func buildReshape(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	in, sh, out := n.ins[0], n.ins[1], n.out(n.inTypes[0])
	return func(v []*dense) error {
		o := v[out]
		spec, err := intsOf(v[sh], o.scratch)
		if err != nil {
			return err
		}
		o.scratch = spec
		shape, err := reshapeTo(o.scratch2, v[in], spec)
		if err != nil {
			return err
		}
		o.scratch2 = shape
		o.shareFrom(v[in], shape)
		return nil
	}, nil
}

func buildSqueeze(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	dims := n.a.list("squeeze_dims").GetI()
	in, out := n.ins[0], n.out(n.inTypes[0])
	return func(v []*dense) error {
		t := v[in]
		o := v[out]
		shape := o.scratch[:0]
		for i, d := range t.shape {
			drop := false
			if len(dims) == 0 {
				drop = d == 1
			} else {
				for _, a := range dims {
					ax, err := normAxis(a, len(t.shape))
					if err != nil {
						return err
					}
					if ax == i {
						if d != 1 {
							return fmt.Errorf("cannot squeeze dimension %d of size %d", i, d)
						}
						drop = true
					}
				}
			}
			if !drop {
				shape = append(shape, d)
			}
		}
		o.scratch = shape
		o.shareFrom(t, shape)
		return nil
	}, nil
}

func buildExpandDims(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	in, ax, out := n.ins[0], n.ins[1], n.out(n.inTypes[0])
	return func(v []*dense) error {
		t := v[in]
		a, err := scalarInt(v[ax])
		if err != nil {
			return err
		}
		axis, err := normAxis(a, len(t.shape)+1)
		if err != nil {
			return err
		}
		o := v[out]
		shape := append(o.scratch[:0], t.shape[:axis]...)
		shape = append(shape, 1)
		shape = append(shape, t.shape[axis:]...)
		o.scratch = shape
		o.shareFrom(t, shape)
		return nil
	}, nil
}

func writeInts(o *dense, dt dtype, vals []int64, shape []int64) {
	if dt == dtInt64 {
		copy(alloc[int64](o, dt, shape), vals)
		return
	}
	copyAs(alloc[int32](o, dtInt32, shape), vals)
}

func buildShape(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	dt := n.a.typOr("out_type", dtInt32)
	in, out := n.ins[0], n.out(dt)
	return func(v []*dense) error {
		o := v[out]
		s := v[in].shape
		o.scratch = append(o.scratch[:0], int64(len(s)))
		writeInts(o, dt, s, o.scratch)
		return nil
	}, nil
}

func buildSize(n *nodeCtx) (kernel, error) {
	dt := n.a.typOr("out_type", dtInt32)
	in, out := n.ins[0], n.out(dt)
	return func(v []*dense) error {
		o := v[out]
		o.scratch = append(o.scratch[:0], int64(v[in].elemCount()))
		writeInts(o, dt, o.scratch, nil)
		return nil
	}, nil
}

func buildRank(n *nodeCtx) (kernel, error) {
	in, out := n.ins[0], n.out(dtInt32)
	return func(v []*dense) error {
		alloc[int32](v[out], dtInt32, nil)[0] = int32(len(v[in].shape))
		return nil
	}, nil
}

// concatInto concatenates parts along axis into o.
func concatInto[T elem](o *dense, dt dtype, parts []*dense, axis int) error {
	first := parts[0]
	rank := len(first.shape)
	shape := append(o.scratch[:0], first.shape...)
	shape[axis] = 0
	for i, p := range parts {
		if len(p.shape) != rank {
			return fmt.Errorf("input %d has rank %d, input 0 has rank %d", i, len(p.shape), rank)
		}
		for d := range rank {
			if d != axis && p.shape[d] != first.shape[d] {
				return fmt.Errorf("input %d has shape %v, input 0 has %v (they may differ only in dimension %d)", i, p.shape, first.shape, axis)
			}
		}
		shape[axis] += p.shape[axis]
	}
	o.scratch = shape
	outer := 1
	for _, d := range shape[:axis] {
		outer *= int(d)
	}
	inner := 1
	for _, d := range shape[axis+1:] {
		inner *= int(d)
	}
	dst := alloc[T](o, dt, shape)
	pos := 0
	for r := range outer {
		for _, p := range parts {
			w := int(p.shape[axis]) * inner
			src := data[T](p)
			pos += copy(dst[pos:pos+w], src[r*w:(r+1)*w])
		}
	}
	return nil
}

func concatKernel[T elem](dt dtype, ins []int, out int, axisOf func(v []*dense, rank int) (int, error), pack bool) kernel {
	return func(v []*dense) error {
		o := v[out]
		parts := o.parts[:0]
		for _, s := range ins {
			parts = append(parts, v[s])
		}
		o.parts = parts
		rank := len(parts[0].shape)
		if pack {
			rank++
		}
		axis, err := axisOf(v, rank)
		if err != nil {
			return err
		}
		if pack {
			// Pack is a concat of the inputs each given a new dimension.
			views := o.views[:0]
			for i, p := range parts {
				if len(p.shape) != len(parts[0].shape) {
					return fmt.Errorf("input %d has shape %v, input 0 has %v", i, p.shape, parts[0].shape)
				}
				views = append(views, dense{})
				sh := append([]int64{}, p.shape[:axis]...)
				sh = append(sh, 1)
				sh = append(sh, p.shape[axis:]...)
				views[i].shareFrom(p, sh)
			}
			o.views = views
			for i := range views {
				parts[i] = &views[i]
			}
		}
		for i, p := range parts {
			if p.dt != dt {
				return fmt.Errorf("input %d is %s, expected %s", i, dtypeName(p.dt), dtypeName(dt))
			}
		}
		return concatInto[T](o, dt, parts, axis)
	}
}

func pickConcat(dt dtype, ins []int, out int, axisOf func(v []*dense, rank int) (int, error), pack bool) (kernel, error) {
	return pick(dt, concatKernel[float32](dt, ins, out, axisOf, pack), concatKernel[float64](dt, ins, out, axisOf, pack),
		concatKernel[int32](dt, ins, out, axisOf, pack), concatKernel[int64](dt, ins, out, axisOf, pack),
		concatKernel[int16](dt, ins, out, axisOf, pack), concatKernel[int8](dt, ins, out, axisOf, pack), concatKernel[uint8](dt, ins, out, axisOf, pack))
}

func buildConcat(n *nodeCtx) (kernel, error) {
	if len(n.ins) < 2 {
		return nil, fmt.Errorf("takes at least 2 inputs")
	}
	vals := n.ins[:len(n.ins)-1]
	ax := n.ins[len(n.ins)-1]
	dt := n.inTypes[0]
	out := n.out(dt)
	axisOf := func(v []*dense, rank int) (int, error) {
		a, err := scalarInt(v[ax])
		if err != nil {
			return 0, err
		}
		return normAxis(a, rank)
	}
	return pickConcat(dt, vals, out, axisOf, false)
}

func buildPack(n *nodeCtx) (kernel, error) {
	if len(n.ins) < 1 {
		return nil, fmt.Errorf("takes at least 1 input")
	}
	dt := n.inTypes[0]
	axis := n.a.i("axis", 0)
	out := n.out(dt)
	axisOf := func(v []*dense, rank int) (int, error) { return normAxis(axis, rank) }
	return pickConcat(dt, n.ins, out, axisOf, true)
}

func unpackKernel[T elem](dt dtype, in int, outs []int, axis int64) kernel {
	return func(v []*dense) error {
		t := v[in]
		ax, err := normAxis(axis, len(t.shape))
		if err != nil {
			return err
		}
		if int(t.shape[ax]) != len(outs) {
			return fmt.Errorf("dimension %d is %d, the op unpacks %d", ax, t.shape[ax], len(outs))
		}
		outer := numElems(t.shape[:ax])
		inner := numElems(t.shape[ax+1:])
		src := data[T](t)
		for k, s := range outs {
			o := v[s]
			shape := append(append(o.scratch[:0], t.shape[:ax]...), t.shape[ax+1:]...)
			o.scratch = shape
			dst := alloc[T](o, dt, shape)
			for r := range outer {
				copy(dst[r*inner:(r+1)*inner], src[(r*len(outs)+k)*inner:])
			}
		}
		return nil
	}
}

func buildUnpack(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	num := n.a.i("num", -1)
	if num < 0 || num > 1<<16 {
		return nil, fmt.Errorf("bad num %d", num)
	}
	outs := make([]int, num)
	for i := range outs {
		outs[i] = n.out(dt)
	}
	axis := n.a.i("axis", 0)
	in := n.ins[0]
	return pick(dt, unpackKernel[float32](dt, in, outs, axis), unpackKernel[float64](dt, in, outs, axis), unpackKernel[int32](dt, in, outs, axis),
		unpackKernel[int64](dt, in, outs, axis), unpackKernel[int16](dt, in, outs, axis), unpackKernel[int8](dt, in, outs, axis), unpackKernel[uint8](dt, in, outs, axis))
}

// gather takes slices of params along axis at indices (batch_dims 0).
func gather[T elem](o, params, indices *dense, axis int) error {
	if axis >= len(params.shape) {
		return fmt.Errorf("axis %d is out of range for params of shape %v", axis, params.shape)
	}
	idx, err := intsOf(indices, o.scratch2)
	if err != nil {
		return err
	}
	o.scratch2 = idx
	limit := params.shape[axis]
	shape := append(o.scratch[:0], params.shape[:axis]...)
	shape = append(shape, indices.shape...)
	shape = append(shape, params.shape[axis+1:]...)
	o.scratch = shape
	outer := numElems(params.shape[:axis])
	inner := numElems(params.shape[axis+1:])
	src := data[T](params)
	dst := alloc[T](o, params.dt, shape)
	if params.file != nil && outer == 1 {
		// A memory-mapped table: rows read from its file (fileView).
		if ok, err := params.file.readRows(bytesOf(dst), bytesOf(src), idx, limit, inner*elemBytes[T]()); ok {
			return err
		}
	}
	pos := 0
	for r := range outer {
		base := r * int(limit) * inner
		for _, i := range idx {
			if i < 0 || i >= limit {
				return fmt.Errorf("index %d is out of range [0, %d)", i, limit)
			}
			pos += copy(dst[pos:pos+inner], src[base+int(i)*inner:])
		}
	}
	return nil
}

func gatherFunc(dt, idxType dtype) (func(o, params, indices *dense, axis int) error, error) {
	if idxType != dtInt32 && idxType != dtInt64 {
		return nil, fmt.Errorf("indices of dtype %s are not supported", dtypeName(idxType))
	}
	switch dt {
	case dtFloat:
		return gather[float32], nil
	case dtDouble:
		return gather[float64], nil
	case dtInt32:
		return gather[int32], nil
	case dtInt64:
		return gather[int64], nil
	case dtInt16:
		return gather[int16], nil
	case dtInt8:
		return gather[int8], nil
	case dtUint8:
		return gather[uint8], nil
	}
	return nil, fmt.Errorf("dtype %s is not supported", dtypeName(dt))
}

func buildGather(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	if bd := n.a.i("batch_dims", 0); bd != 0 {
		return buildBatchGather(n, bd)
	}
	g, err := gatherFunc(n.inTypes[0], n.inTypes[1])
	if err != nil {
		return nil, err
	}
	p, ix, ax, out := n.ins[0], n.ins[1], n.ins[2], n.out(n.inTypes[0])
	return func(v []*dense) error {
		a, err := scalarInt(v[ax])
		if err != nil {
			return err
		}
		axis, err := normAxis(a, len(v[p].shape))
		if err != nil {
			return err
		}
		return g(v[out], v[p], v[ix], axis)
	}, nil
}

// buildBatchGather is GatherV2 with batch_dims b != 0: the first b
// dimensions of params and indices are batch dimensions they share, and
// batch i gathers from params[i] with indices[i]. The output has shape
// params[:axis] + indices[b:] + params[axis+1:].
func buildBatchGather(n *nodeCtx, batchDims int64) (kernel, error) {
	if n.inTypes[1] != dtInt32 && n.inTypes[1] != dtInt64 {
		return nil, fmt.Errorf("indices of dtype %s are not supported", dtypeName(n.inTypes[1]))
	}
	if _, err := moverFor(n.inTypes[0]); err != nil {
		return nil, err
	}
	p, ix, ax, out := n.ins[0], n.ins[1], n.ins[2], n.out(n.inTypes[0])
	return func(v []*dense) error {
		o, params, indices := v[out], v[p], v[ix]
		a, err := scalarInt(v[ax])
		if err != nil {
			return fmt.Errorf("axis: %w", err)
		}
		axis, err := normAxis(a, len(params.shape))
		if err != nil {
			return err
		}
		b := batchDims
		if ir := int64(len(indices.shape)); b < -ir || b > ir {
			return fmt.Errorf("batch_dims %d is out of range [%d, %d] for indices of shape %v", batchDims, -ir, ir, indices.shape)
		} else if b < 0 {
			b += ir
		}
		if b > int64(axis) {
			return fmt.Errorf("batch_dims %d must not be larger than axis %d", b, axis)
		}
		for d := range b {
			if params.shape[d] != indices.shape[d] {
				return fmt.Errorf("params of shape %v and indices of shape %v differ in batch dimension %d", params.shape, indices.shape, d)
			}
		}
		idx, err := intsOf(indices, o.scratch2)
		if err != nil {
			return err
		}
		o.scratch2 = idx
		shape := append([]int64(nil), params.shape[:axis]...)
		shape = append(shape, indices.shape[b:]...)
		shape = append(shape, params.shape[axis+1:]...)
		if err := growShape(shape); err != nil {
			return err
		}
		batches := numElems(params.shape[:b])
		outer := numElems(params.shape[b:axis])
		limit := params.shape[axis]
		inner := int64(numElems(params.shape[axis+1:]))
		perBatch := len(idx) / max(batches, 1)
		src := o.scratch[:0]
		for bi := range batches {
			for r := range outer {
				base := (int64(bi)*int64(outer) + int64(r)) * limit * inner
				for _, i := range idx[bi*perBatch : (bi+1)*perBatch] {
					if i < 0 || i >= limit {
						return fmt.Errorf("index %d is out of range [0, %d)", i, limit)
					}
					for k := range inner {
						src = append(src, base+i*inner+k)
					}
				}
			}
		}
		o.scratch = src
		return moveElems(o, params, shape, src)
	}, nil
}

// stridedCopy copies the box begin/stride/size of src into o.
func stridedCopy[T elem](o, src *dense, begin, stride, size, outShape []int64) {
	dst := alloc[T](o, src.dt, outShape)
	s := data[T](src)
	rank := len(src.shape)
	if len(dst) == 0 {
		return
	}
	if rank == 0 {
		dst[0] = s[0]
		return
	}
	strides := make([]int64, rank)
	acc := int64(1)
	for d := rank - 1; d >= 0; d-- {
		strides[d] = acc
		acc *= src.shape[d]
	}
	idx := make([]int64, rank)
	for i := range dst {
		off := int64(0)
		for d := range rank {
			off += (begin[d] + idx[d]*stride[d]) * strides[d]
		}
		dst[i] = s[off]
		for d := rank - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < size[d] {
				break
			}
			idx[d] = 0
		}
	}
}

type boxCopy func(o, src *dense, begin, stride, size, outShape []int64)

func pickBox(dt dtype) (boxCopy, error) {
	switch dt {
	case dtFloat:
		return stridedCopy[float32], nil
	case dtDouble:
		return stridedCopy[float64], nil
	case dtInt32:
		return stridedCopy[int32], nil
	case dtInt64:
		return stridedCopy[int64], nil
	case dtInt16:
		return stridedCopy[int16], nil
	case dtInt8:
		return stridedCopy[int8], nil
	case dtUint8:
		return stridedCopy[uint8], nil
	}
	return nil, fmt.Errorf("dtype %s is not supported", dtypeName(dt))
}

func buildSlice(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	cp, err := pickBox(n.inTypes[0])
	if err != nil {
		return nil, err
	}
	in, b, sz, out := n.ins[0], n.ins[1], n.ins[2], n.out(n.inTypes[0])
	return func(v []*dense) error {
		t := v[in]
		begin, err := intsOf(v[b], nil)
		if err != nil {
			return err
		}
		size, err := intsOf(v[sz], nil)
		if err != nil {
			return err
		}
		if len(begin) != len(t.shape) || len(size) != len(t.shape) {
			return fmt.Errorf("begin %v and size %v must have the rank of the input %v", begin, size, t.shape)
		}
		stride := make([]int64, len(begin))
		for d := range begin {
			stride[d] = 1
			if size[d] == -1 {
				size[d] = t.shape[d] - begin[d]
			}
			if begin[d] < 0 || size[d] < 0 || begin[d]+size[d] > t.shape[d] {
				return fmt.Errorf("slice begin %v size %v is out of bounds for shape %v", begin, size, t.shape)
			}
		}
		cp(v[out], t, begin, stride, size, size)
		return nil
	}, nil
}

func buildStridedSlice(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(4); err != nil {
		return nil, err
	}
	cp, err := pickBox(n.inTypes[0])
	if err != nil {
		return nil, err
	}
	masks := [5]int64{n.a.i("begin_mask", 0), n.a.i("end_mask", 0), n.a.i("ellipsis_mask", 0), n.a.i("new_axis_mask", 0), n.a.i("shrink_axis_mask", 0)}
	in, bi, ei, si, out := n.ins[0], n.ins[1], n.ins[2], n.ins[3], n.out(n.inTypes[0])
	return func(v []*dense) error {
		t := v[in]
		begin, err := intsOf(v[bi], nil)
		if err != nil {
			return err
		}
		end, err := intsOf(v[ei], nil)
		if err != nil {
			return err
		}
		strides, err := intsOf(v[si], nil)
		if err != nil {
			return err
		}
		b, st, size, outShape, err := stridedSpec(t.shape, begin, end, strides, masks)
		if err != nil {
			return err
		}
		cp(v[out], t, b, st, size, outShape)
		return nil
	}, nil
}

// stridedSpec resolves StridedSlice's sparse spec against a shape into a
// dense box (begin, stride, size per input dimension) and the output shape.
func stridedSpec(shape, begin, end, strides []int64, m [5]int64) (b, st, size, outShape []int64, err error) {
	beginMask, endMask, ellipsisMask, newAxisMask, shrinkMask := m[0], m[1], m[2], m[3], m[4]
	if len(begin) != len(end) || len(begin) != len(strides) {
		return nil, nil, nil, nil, fmt.Errorf("begin, end and strides differ in length")
	}
	rank := len(shape)
	b, st, size = make([]int64, rank), make([]int64, rank), make([]int64, rank)
	outShape = []int64{}
	// Count dims the sparse spec names explicitly (not new axes, not the ellipsis).
	named := 0
	for i := range begin {
		if ellipsisMask&(1<<i) == 0 && newAxisMask&(1<<i) == 0 {
			named++
		}
	}
	d := 0
	seenEllipsis := false
	for i := range begin {
		bit := int64(1) << i
		switch {
		case ellipsisMask&bit != 0:
			if seenEllipsis {
				return nil, nil, nil, nil, fmt.Errorf("more than one ellipsis")
			}
			seenEllipsis = true
			fill := rank - named
			for k := 0; k < fill && d < rank; k++ {
				b[d], st[d], size[d] = 0, 1, shape[d]
				outShape = append(outShape, shape[d])
				d++
			}
			continue
		case newAxisMask&bit != 0:
			outShape = append(outShape, 1)
			continue
		}
		if d >= rank {
			return nil, nil, nil, nil, fmt.Errorf("slice spec has more dimensions than the input's %d", rank)
		}
		dim := shape[d]
		s := strides[i]
		if s == 0 {
			return nil, nil, nil, nil, fmt.Errorf("stride 0")
		}
		if shrinkMask&bit != 0 {
			x := begin[i]
			if x < 0 {
				x += dim
			}
			if x < 0 || x >= dim {
				return nil, nil, nil, nil, fmt.Errorf("index %d is out of range for dimension %d of size %d", begin[i], d, dim)
			}
			b[d], st[d], size[d] = x, 1, 1
			d++
			continue
		}
		clamp := func(x int64, isBegin bool) int64 {
			if x < 0 {
				x += dim
			}
			if s > 0 {
				return max(0, min(x, dim))
			}
			return max(-1, min(x, dim-1))
		}
		var lo, hi int64
		if beginMask&bit != 0 {
			if s > 0 {
				lo = 0
			} else {
				lo = dim - 1
			}
		} else {
			lo = clamp(begin[i], true)
		}
		if endMask&bit != 0 {
			if s > 0 {
				hi = dim
			} else {
				hi = -1
			}
		} else {
			hi = clamp(end[i], false)
		}
		var cnt int64
		if s > 0 && hi > lo {
			cnt = (hi - lo + s - 1) / s
		} else if s < 0 && lo > hi {
			cnt = (lo - hi + (-s) - 1) / (-s)
		}
		b[d], st[d], size[d] = lo, s, cnt
		outShape = append(outShape, cnt)
		d++
	}
	for ; d < rank; d++ {
		b[d], st[d], size[d] = 0, 1, shape[d]
		outShape = append(outShape, shape[d])
	}
	return b, st, size, outShape, nil
}

func oneHotKernel[T elem](dt dtype, in, dep, on, off, out int, axis int64) kernel {
	return func(v []*dense) error {
		t := v[in]
		depth, err := scalarInt(v[dep])
		if err != nil {
			return err
		}
		if depth < 0 || depth > maxModelElements {
			return fmt.Errorf("depth %d", depth)
		}
		onv, offv := data[T](v[on]), data[T](v[off])
		if len(onv) != 1 || len(offv) != 1 {
			return fmt.Errorf("on_value and off_value must be scalars")
		}
		idx, err := intsOf(t, v[out].scratch2)
		if err != nil {
			return err
		}
		o := v[out]
		o.scratch2 = idx
		rank := len(t.shape) + 1
		ax := int(axis)
		if axis == -1 {
			ax = rank - 1
		}
		if ax < 0 || ax >= rank {
			return fmt.Errorf("axis %d is out of range", axis)
		}
		shape := append(o.scratch[:0], t.shape[:ax]...)
		shape = append(shape, depth)
		shape = append(shape, t.shape[ax:]...)
		o.scratch = shape
		if int64(numElems(t.shape))*depth > maxModelElements {
			return fmt.Errorf("output too large")
		}
		dst := alloc[T](o, dt, shape)
		outer := numElems(t.shape[:ax])
		inner := numElems(t.shape[ax:])
		for r := range outer {
			for k := int64(0); k < depth; k++ {
				for j := range inner {
					x := offv[0]
					if idx[r*inner+j] == k {
						x = onv[0]
					}
					dst[(r*int(depth)+int(k))*inner+j] = x
				}
			}
		}
		return nil
	}
}

func buildOneHot(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(4); err != nil {
		return nil, err
	}
	dt := n.inTypes[2]
	axis := n.a.i("axis", -1)
	in, dep, on, off, out := n.ins[0], n.ins[1], n.ins[2], n.ins[3], n.out(dt)
	return pick(dt, oneHotKernel[float32](dt, in, dep, on, off, out, axis), oneHotKernel[float64](dt, in, dep, on, off, out, axis),
		oneHotKernel[int32](dt, in, dep, on, off, out, axis), oneHotKernel[int64](dt, in, dep, on, off, out, axis),
		oneHotKernel[int16](dt, in, dep, on, off, out, axis), oneHotKernel[int8](dt, in, dep, on, off, out, axis), oneHotKernel[uint8](dt, in, dep, on, off, out, axis))
}

func fillKernel[T elem](dt dtype, dims, val, out int) kernel {
	return func(v []*dense) error {
		o := v[out]
		shape, err := intsOf(v[dims], o.scratch)
		if err != nil {
			return err
		}
		o.scratch = shape
		if _, err := checkShape(shape); err != nil {
			return err
		}
		x := data[T](v[val])
		if len(x) != 1 {
			return fmt.Errorf("value must be a scalar")
		}
		dst := alloc[T](o, dt, shape)
		for i := range dst {
			dst[i] = x[0]
		}
		return nil
	}
}

func checkShape(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in %v", shape)
		}
		if d > 0 && n > maxModelElements/d {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		n *= d
	}
	return n, nil
}

func buildFill(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt := n.inTypes[1]
	d, val, out := n.ins[0], n.ins[1], n.out(dt)
	return pick(dt, fillKernel[float32](dt, d, val, out), fillKernel[float64](dt, d, val, out), fillKernel[int32](dt, d, val, out),
		fillKernel[int64](dt, d, val, out), fillKernel[int16](dt, d, val, out), fillKernel[int8](dt, d, val, out), fillKernel[uint8](dt, d, val, out))
}

func likeKernel[T elem](dt dtype, in, out int, one bool) kernel {
	return func(v []*dense) error {
		dst := alloc[T](v[out], dt, v[in].shape)
		var x T
		if one {
			x = 1
		}
		for i := range dst {
			dst[i] = x
		}
		return nil
	}
}

func buildZerosLike(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	one := n.nd.Op == "OnesLike"
	in, out := n.ins[0], n.out(dt)
	return pick(dt, likeKernel[float32](dt, in, out, one), likeKernel[float64](dt, in, out, one), likeKernel[int32](dt, in, out, one),
		likeKernel[int64](dt, in, out, one), likeKernel[int16](dt, in, out, one), likeKernel[int8](dt, in, out, one), likeKernel[uint8](dt, in, out, one))
}
