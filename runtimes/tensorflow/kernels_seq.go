package tensorflow

import (
	"fmt"
)

// Kernels of the ops Keras LSTM/GRU layers need besides control flow:
// Transpose, Split, SplitV, ReverseV2 and the TensorList ops. They move
// elements without computing on them, so they take every dtype the runtime
// holds (numeric, BOOL, STRING, and the bits of HALF/BFLOAT16/UINT*).

func init() {
	for op, b := range map[string]builder{
		"Transpose": buildTranspose,
		"Split":     buildSplit,
		"SplitV":    buildSplitV,
		"ReverseV2": buildReverse,
	} {
		builders[op] = b
	}
}

// anyElem is every element type a dense tensor stores.
type anyElem interface {
	elem | bool | string | uint16 | uint32 | uint64
}

// field returns a pointer to t's data field for T (uint16 holds UINT16,
// HALF and BFLOAT16).
func field[T anyElem](t *dense) *[]T {
	switch any(*new(T)).(type) {
	case bool:
		return any(&t.b).(*[]T)
	case string:
		return any(&t.s).(*[]T)
	case uint16:
		return any(&t.u16).(*[]T)
	case uint32:
		return any(&t.u32).(*[]T)
	case uint64:
		return any(&t.u64).(*[]T)
	case float32:
		return any(&t.f32).(*[]T)
	case float64:
		return any(&t.f64).(*[]T)
	case int32:
		return any(&t.i32).(*[]T)
	case int64:
		return any(&t.i64).(*[]T)
	case int16:
		return any(&t.i16).(*[]T)
	case int8:
		return any(&t.i8).(*[]T)
	default:
		return any(&t.u8).(*[]T)
	}
}

// growTo makes *p n long, keeping its contents.
func growTo[T any](p *[]T, n int) []T {
	if cap(*p) < n {
		g := make([]T, n)
		copy(g, *p)
		*p = g
	} else {
		*p = (*p)[:n]
	}
	return *p
}

// mover moves the elements of one dtype.
type mover interface {
	// gather sets o's data to src[idx[i]] (a copy of src's n elements
	// when idx is nil).
	gather(o, src *dense, n int, idx []int64)
	// zeros sets o's data to n zero values.
	zeros(o *dense, n int)
	// cloneRange returns a new tensor holding a copy of src[lo:hi].
	cloneRange(src *dense, lo, hi int) *dense
	// stack sets o's data to the items' data, inner elements each, zeros
	// for nil items.
	stack(o *dense, items []*dense, inner int)
}

type moverOf[T anyElem] struct{}

func (moverOf[T]) gather(o, src *dense, n int, idx []int64) {
	d, s := growTo(field[T](o), n), *field[T](src)
	if idx == nil {
		copy(d, s)
		return
	}
	for i, j := range idx {
		d[i] = s[j]
	}
}

func (moverOf[T]) zeros(o *dense, n int) { clear(growTo(field[T](o), n)) }

func (moverOf[T]) cloneRange(src *dense, lo, hi int) *dense {
	c := &dense{dt: src.dt}
	*field[T](c) = append([]T(nil), (*field[T](src))[lo:hi]...)
	return c
}

func (moverOf[T]) stack(o *dense, items []*dense, inner int) {
	d := growTo(field[T](o), len(items)*inner)
	for i, it := range items {
		part := d[i*inner : (i+1)*inner]
		if it == nil {
			clear(part)
		} else {
			copy(part, *field[T](it))
		}
	}
}

func moverFor(dt dtype) (mover, error) {
	switch dt {
	case dtFloat:
		return moverOf[float32]{}, nil
	case dtDouble:
		return moverOf[float64]{}, nil
	case dtInt32:
		return moverOf[int32]{}, nil
	case dtInt64:
		return moverOf[int64]{}, nil
	case dtInt16:
		return moverOf[int16]{}, nil
	case dtInt8:
		return moverOf[int8]{}, nil
	case dtUint8:
		return moverOf[uint8]{}, nil
	case dtBool:
		return moverOf[bool]{}, nil
	case dtString:
		return moverOf[string]{}, nil
	case dtUint16, dtHalf, dtBfloat16:
		return moverOf[uint16]{}, nil
	case dtUint32:
		return moverOf[uint32]{}, nil
	case dtUint64:
		return moverOf[uint64]{}, nil
	}
	return nil, fmt.Errorf("dtype %s is not supported", dtypeName(dt))
}

// moveElems makes o a tensor of src's dtype and shape holding src's
// elements at idx (a copy when idx is nil).
func moveElems(o, src *dense, shape []int64, idx []int64) error {
	m, err := moverFor(src.dt)
	if err != nil {
		return err
	}
	o.dt = src.dt
	o.setShape(shape)
	m.gather(o, src, numElems(o.shape), idx)
	return nil
}

// walk appends the source offset of every element of an output of the
// given shape, in row-major order: element (i0, i1, ...) is at base +
// i0*step[0] + i1*step[1] + ... in the source.
func walk(idx, shape, step []int64, base int64) []int64 {
	if len(shape) == 0 {
		return append(idx, base)
	}
	for i := range shape[0] {
		idx = walk(idx, shape[1:], step[1:], base+i*step[0])
	}
	return idx
}

// strides fills dst with the row-major strides of shape.
func strides(dst, shape []int64) {
	s := int64(1)
	for d := len(shape) - 1; d >= 0; d-- {
		dst[d] = s
		s *= shape[d]
	}
}

func buildTranspose(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	if _, err := moverFor(n.inTypes[0]); err != nil {
		return nil, err
	}
	x, p := n.ins[0], n.ins[1]
	out := n.out(n.inTypes[0])
	return func(v []*dense) error {
		o, t := v[out], v[x]
		perm, err := intsOf(v[p], o.scratch2)
		if err != nil {
			return fmt.Errorf("perm: %w", err)
		}
		o.scratch2 = perm
		rank := len(t.shape)
		if len(v[p].shape) != 1 || len(perm) != rank {
			return fmt.Errorf("perm has shape %v; input of shape %v needs a vector of %d dimensions", v[p].shape, t.shape, rank)
		}
		// scratch2 holds perm, the input strides and the output steps.
		buf := growTo(&o.scratch2, 3*rank)
		perm, inStride, step := buf[:rank], buf[rank:2*rank], buf[2*rank:]
		strides(inStride, t.shape)
		o.setShape(t.shape)
		for i, d := range perm {
			if d < 0 || d >= int64(rank) {
				return fmt.Errorf("perm %v: %d is out of range [0, %d)", perm, d, rank)
			}
			for _, e := range perm[:i] {
				if e == d {
					return fmt.Errorf("perm %v is not a permutation: %d appears twice", perm, d)
				}
			}
			o.shape[i] = t.shape[d]
			step[i] = inStride[d]
		}
		o.scratch = walk(o.scratch[:0], o.shape, step, 0)
		return moveElems(o, t, o.shape, o.scratch)
	}, nil
}

// splitAlong writes the pieces of t along axis, of the given sizes, to the
// output slots outs.
func splitAlong(v []*dense, outs []int, t *dense, axis int, sizes []int64) error {
	outer := numElems(t.shape[:axis])
	inner := int64(numElems(t.shape[axis+1:]))
	dim := t.shape[axis]
	start := int64(0)
	for k, z := range sizes {
		o := v[outs[k]]
		o.setShape(t.shape)
		o.shape[axis] = z
		idx := o.scratch[:0]
		for r := range int64(outer) {
			base := (r*dim + start) * inner
			for j := range z * inner {
				idx = append(idx, base+j)
			}
		}
		o.scratch = idx
		if err := moveElems(o, t, o.shape, idx); err != nil {
			return err
		}
		start += z
	}
	return nil
}

func splitOuts(n *nodeCtx, dt dtype) ([]int, error) {
	if _, err := moverFor(dt); err != nil {
		return nil, err
	}
	num := n.a.i("num_split", 0)
	if num < 1 || num > 1<<16 {
		return nil, fmt.Errorf("num_split %d is out of range [1, %d]", num, 1<<16)
	}
	outs := make([]int, num)
	for i := range outs {
		outs[i] = n.out(dt)
	}
	return outs, nil
}

func buildSplit(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dimIn, x := n.ins[0], n.ins[1]
	outs, err := splitOuts(n, n.inTypes[1])
	if err != nil {
		return nil, err
	}
	num := int64(len(outs))
	return func(v []*dense) error {
		t := v[x]
		a, err := scalarInt(v[dimIn])
		if err != nil {
			return fmt.Errorf("split_dim: %w", err)
		}
		axis, err := normAxis(a, len(t.shape))
		if err != nil {
			return fmt.Errorf("split_dim: %w", err)
		}
		size := t.shape[axis]
		if size%num != 0 {
			return fmt.Errorf("dimension %d of shape %v has size %d, which %d splits cannot divide evenly", axis, t.shape, size, num)
		}
		sizes := growTo(&v[outs[0]].scratch2, len(outs))
		for i := range sizes {
			sizes[i] = size / num
		}
		return splitAlong(v, outs, t, axis, sizes)
	}, nil
}

func buildSplitV(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	x, sz, dimIn := n.ins[0], n.ins[1], n.ins[2]
	outs, err := splitOuts(n, n.inTypes[0])
	if err != nil {
		return nil, err
	}
	return func(v []*dense) error {
		t := v[x]
		a, err := scalarInt(v[dimIn])
		if err != nil {
			return fmt.Errorf("split_dim: %w", err)
		}
		axis, err := normAxis(a, len(t.shape))
		if err != nil {
			return fmt.Errorf("split_dim: %w", err)
		}
		o0 := v[outs[0]]
		sizes, err := intsOf(v[sz], o0.scratch2)
		if err != nil {
			return fmt.Errorf("size_splits: %w", err)
		}
		o0.scratch2 = sizes
		if len(sizes) != len(outs) {
			return fmt.Errorf("size_splits %v has %d entries for num_split %d", sizes, len(sizes), len(outs))
		}
		dim := t.shape[axis]
		infer, sum := -1, int64(0)
		for i, z := range sizes {
			switch {
			case z == -1 && infer < 0:
				infer = i
			case z == -1:
				return fmt.Errorf("size_splits %v has more than one -1", sizes)
			case z < 0:
				return fmt.Errorf("size_splits %v: size %d is negative", sizes, z)
			default:
				sum += z
			}
		}
		if infer >= 0 {
			if sum > dim {
				return fmt.Errorf("size_splits %v add up to %d, more than dimension %d of shape %v", sizes, sum, axis, t.shape)
			}
			sizes[infer] = dim - sum
		} else if sum != dim {
			return fmt.Errorf("size_splits %v add up to %d, not to dimension %d of shape %v (size %d)", sizes, sum, axis, t.shape, dim)
		}
		return splitAlong(v, outs, t, axis, sizes)
	}, nil
}

func buildReverse(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	if _, err := moverFor(n.inTypes[0]); err != nil {
		return nil, err
	}
	x, ax := n.ins[0], n.ins[1]
	out := n.out(n.inTypes[0])
	return func(v []*dense) error {
		o, t := v[out], v[x]
		rank := len(t.shape)
		axes, err := intsOf(v[ax], o.scratch2)
		if err != nil {
			return fmt.Errorf("axis: %w", err)
		}
		o.scratch2 = axes
		if len(v[ax].shape) != 1 {
			return fmt.Errorf("axis has shape %v, want a vector", v[ax].shape)
		}
		na := len(axes)
		buf := growTo(&o.scratch2, na+rank)
		axes, step := buf[:na], buf[na:]
		strides(step, t.shape)
		base := int64(0)
		for i, a := range axes {
			d, err := normAxis(a, rank)
			if err != nil {
				return fmt.Errorf("axis: %w", err)
			}
			for _, e := range axes[:i] {
				if e == int64(d) {
					return fmt.Errorf("axis %v names dimension %d more than once", axes, d)
				}
			}
			axes[i] = int64(d)
			if t.shape[d] > 0 {
				base += (t.shape[d] - 1) * step[d]
			}
			step[d] = -step[d]
		}
		o.scratch = walk(o.scratch[:0], t.shape, step, base)
		return moveElems(o, t, t.shape, o.scratch)
	}, nil
}

// tensorList is a TensorList (a DT_VARIANT value): a list of tensors of one
// dtype whose shapes are compatible with elemShape. Lists are immutable:
// an op that changes one makes a new list (copying the item pointers), and
// items are copies owned by the list, so kernels stay pure and a folded
// constant list can be shared by concurrent calls.
type tensorList struct {
	dt          dtype
	unknownRank bool
	elemShape   []int64  // -1 is an unknown dimension
	items       []*dense // nil: not set yet (reads as zeros when the shape is known)
	ta          *taInfo  // set when the list is a TF1 TensorArray's (kernels_tensorarray.go)
}

func init() {
	for op, b := range map[string]builder{
		"TensorListReserve":      buildListReserve,
		"TensorListFromTensor":   buildListFromTensor,
		"TensorListSetItem":      buildListSetItem,
		"TensorListGetItem":      buildListGetItem,
		"TensorListStack":        buildListStack,
		"TensorListLength":       buildListLength,
		"TensorListElementShape": buildListElementShape,
	} {
		builders[op] = b
	}
}

// maxListElements bounds a list's length, so a hostile num_elements or
// index cannot make the runtime allocate without bound.
const maxListElements = 1 << 20

// partialShape reads an element_shape input: -1 (a scalar) is an unknown
// rank, a vector's -1 entries are unknown dimensions.
func partialShape(t *dense) (dims []int64, unknownRank bool, err error) {
	v, err := intsOf(t, nil)
	if err != nil {
		return nil, false, fmt.Errorf("element_shape: %w", err)
	}
	if len(t.shape) == 0 {
		if v[0] != -1 {
			return nil, false, fmt.Errorf("element_shape is the scalar %d; a scalar must be -1 (unknown rank)", v[0])
		}
		return nil, true, nil
	}
	if len(t.shape) != 1 {
		return nil, false, fmt.Errorf("element_shape has shape %v, want a vector or the scalar -1", t.shape)
	}
	for _, d := range v {
		if d < -1 {
			return nil, false, fmt.Errorf("element_shape %v has a dimension below -1", v)
		}
	}
	return v, false, nil
}

// mergeShape merges two partial shapes, failing when they conflict.
func mergeShape(a []int64, aUnknown bool, b []int64, bUnknown bool) ([]int64, bool, error) {
	if aUnknown {
		return b, bUnknown, nil
	}
	if bUnknown {
		return a, false, nil
	}
	if len(a) != len(b) {
		return nil, false, fmt.Errorf("shapes %s and %s have different ranks", partialString(a), partialString(b))
	}
	m := make([]int64, len(a))
	for i := range a {
		switch {
		case a[i] == -1:
			m[i] = b[i]
		case b[i] == -1 || a[i] == b[i]:
			m[i] = a[i]
		default:
			return nil, false, fmt.Errorf("shapes %s and %s differ in dimension %d", partialString(a), partialString(b), i)
		}
	}
	return m, false, nil
}

// checkElems bounds the element count of a tensor of the given shape that
// a kernel makes from a shape alone (zeros of an unset item), so a few
// bytes of graph cannot ask for a gigabyte.
func checkElems(shape []int64) error {
	n := int64(1)
	for _, d := range shape {
		if d > 0 && n > maxModelElements/d {
			return fmt.Errorf("shape %v has more than %d elements", shape, maxModelElements)
		}
		n *= d
	}
	return nil
}

func partialString(s []int64) string { return fmt.Sprint(s) }

func fullyDefined(s []int64, unknownRank bool) bool {
	if unknownRank {
		return false
	}
	for _, d := range s {
		if d < 0 {
			return false
		}
	}
	return true
}

// listOf returns the TensorList input t holds.
func listOf(t *dense, want dtype) (*tensorList, error) {
	if t.list == nil || t.list.ta != nil {
		return nil, fmt.Errorf("input handle is %s, not a TensorList", t)
	}
	if want != t.list.dt {
		return nil, fmt.Errorf("the list holds %s, the op's element_dtype is %s", dtypeName(t.list.dt), dtypeName(want))
	}
	return t.list, nil
}

func setList(o *dense, l *tensorList) {
	o.dt = dtVariant
	o.setShape(nil)
	o.list = l
}

// itemIndex checks an index input against a list of n items.
func itemIndex(t *dense, n int) (int, error) {
	i, err := scalarInt(t)
	if err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	if i < 0 || i >= int64(n) {
		return 0, fmt.Errorf("index %d is out of range for a list of %d items", i, n)
	}
	return int(i), nil
}

func listDType(n *nodeCtx, attr string) (dtype, error) {
	dt, err := n.a.typ(attr)
	if err != nil {
		return 0, err
	}
	if _, err := moverFor(dt); err != nil {
		return 0, fmt.Errorf("%s: %w", attr, err)
	}
	return dt, nil
}

func buildListReserve(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt, err := listDType(n, "element_dtype")
	if err != nil {
		return nil, err
	}
	es, num := n.ins[0], n.ins[1]
	out := n.out(dtVariant)
	return func(v []*dense) error {
		shape, unknown, err := partialShape(v[es])
		if err != nil {
			return err
		}
		k, err := scalarInt(v[num])
		if err != nil {
			return fmt.Errorf("num_elements: %w", err)
		}
		if k < 0 || k > maxListElements {
			return fmt.Errorf("num_elements %d is out of range [0, %d]", k, maxListElements)
		}
		setList(v[out], &tensorList{dt: dt, elemShape: shape, unknownRank: unknown, items: make([]*dense, k)})
		return nil
	}, nil
}

func buildListFromTensor(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	m, err := moverFor(n.inTypes[0])
	if err != nil {
		return nil, err
	}
	x, es := n.ins[0], n.ins[1]
	out := n.out(dtVariant)
	return func(v []*dense) error {
		t := v[x]
		shape, unknown, err := partialShape(v[es])
		if err != nil {
			return err
		}
		if len(t.shape) == 0 {
			return fmt.Errorf("tensor must be at least a vector, got a scalar")
		}
		if _, _, err := mergeShape(shape, unknown, t.shape[1:], false); err != nil {
			return fmt.Errorf("element_shape does not match the tensor's: %w", err)
		}
		if t.shape[0] > maxListElements {
			return fmt.Errorf("tensor of shape %v has more than %d items", t.shape, maxListElements)
		}
		items := make([]*dense, t.shape[0])
		inner := numElems(t.shape[1:])
		for i := range items {
			it := m.cloneRange(t, i*inner, (i+1)*inner)
			it.shape = append([]int64(nil), t.shape[1:]...)
			items[i] = it
		}
		setList(v[out], &tensorList{dt: t.dt, elemShape: shape, unknownRank: unknown, items: items})
		return nil
	}, nil
}

func buildListSetItem(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	m, err := moverFor(n.inTypes[2])
	if err != nil {
		return nil, err
	}
	resize := n.a.b("resize_if_index_out_of_bounds")
	h, ix, x := n.ins[0], n.ins[1], n.ins[2]
	out := n.out(dtVariant)
	return func(v []*dense) error {
		item := v[x]
		l, err := listOf(v[h], item.dt)
		if err != nil {
			return err
		}
		items := l.items
		var i int
		if resize {
			k, err := scalarInt(v[ix])
			if err != nil {
				return fmt.Errorf("index: %w", err)
			}
			if k < 0 || k >= maxListElements {
				return fmt.Errorf("index %d is out of range [0, %d)", k, maxListElements)
			}
			i = int(k)
			if i >= len(items) {
				items = append(items[:len(items):len(items)], make([]*dense, i+1-len(items))...)
			}
		} else if i, err = itemIndex(v[ix], len(items)); err != nil {
			return err
		}
		if _, _, err := mergeShape(l.elemShape, l.unknownRank, item.shape, false); err != nil {
			return fmt.Errorf("item does not match the list's element shape: %w", err)
		}
		c := m.cloneRange(item, 0, numElems(item.shape))
		c.shape = append([]int64(nil), item.shape...)
		// Copy on write: the input list stays as it was.
		next := *l
		next.items = append([]*dense(nil), items...)
		next.items[i] = c
		setList(v[out], &next)
		return nil
	}, nil
}

// itemShape is the shape of the list's items as far as the list, the
// op's element_shape and the items set so far tell.
func itemShape(l *tensorList, es *dense) ([]int64, bool, error) {
	shape, unknown, err := partialShape(es)
	if err != nil {
		return nil, false, err
	}
	shape, unknown, err = mergeShape(l.elemShape, l.unknownRank, shape, unknown)
	if err != nil {
		return nil, false, fmt.Errorf("element_shape does not match the list's: %w", err)
	}
	return shape, unknown, nil
}

func buildListGetItem(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	dt, err := listDType(n, "element_dtype")
	if err != nil {
		return nil, err
	}
	m, _ := moverFor(dt)
	h, ix, es := n.ins[0], n.ins[1], n.ins[2]
	out := n.out(dt)
	return func(v []*dense) error {
		l, err := listOf(v[h], dt)
		if err != nil {
			return err
		}
		i, err := itemIndex(v[ix], len(l.items))
		if err != nil {
			return err
		}
		if it := l.items[i]; it != nil {
			return moveElems(v[out], it, it.shape, nil)
		}
		shape, unknown, err := itemShape(l, v[es])
		if err != nil {
			return err
		}
		if !fullyDefined(shape, unknown) {
			return fmt.Errorf("item %d is not set and its shape %s is not fully defined", i, partialString(shape))
		}
		if err := checkElems(shape); err != nil {
			return fmt.Errorf("item %d is not set: %w", i, err)
		}
		o := v[out]
		o.dt = dt
		o.setShape(shape)
		m.zeros(o, numElems(shape))
		return nil
	}, nil
}

func buildListStack(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt, err := listDType(n, "element_dtype")
	if err != nil {
		return nil, err
	}
	m, _ := moverFor(dt)
	want := n.a.i("num_elements", -1)
	h, es := n.ins[0], n.ins[1]
	out := n.out(dt)
	return func(v []*dense) error {
		l, err := listOf(v[h], dt)
		if err != nil {
			return err
		}
		if want != -1 && want != int64(len(l.items)) {
			return fmt.Errorf("the list has %d items, num_elements is %d", len(l.items), want)
		}
		shape, unknown, err := itemShape(l, v[es])
		if err != nil {
			return err
		}
		for i, it := range l.items {
			if it == nil {
				continue
			}
			if shape, unknown, err = mergeShape(shape, unknown, it.shape, false); err != nil {
				return fmt.Errorf("item %d does not match the others: %w", i, err)
			}
		}
		if !fullyDefined(shape, unknown) {
			return fmt.Errorf("the items' shape %s is not fully defined (the list is empty or has unset items)", partialString(shape))
		}
		stacked := append([]int64{int64(len(l.items))}, shape...)
		if err := checkElems(stacked); err != nil {
			return err
		}
		o := v[out]
		o.dt = dt
		o.setShape(stacked)
		m.stack(o, l.items, numElems(shape))
		return nil
	}, nil
}

func buildListLength(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	h := n.ins[0]
	out := n.out(dtInt32)
	return func(v []*dense) error {
		if v[h].list == nil {
			return fmt.Errorf("input handle is %s, not a TensorList", v[h])
		}
		alloc[int32](v[out], dtInt32, nil)[0] = int32(len(v[h].list.items))
		return nil
	}, nil
}

func buildListElementShape(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	st, err := n.a.typ("shape_type")
	if err != nil {
		return nil, err
	}
	if st != dtInt32 && st != dtInt64 {
		return nil, fmt.Errorf("shape_type %s is not INT32 or INT64", dtypeName(st))
	}
	h := n.ins[0]
	out := n.out(st)
	return func(v []*dense) error {
		l := v[h].list
		if l == nil {
			return fmt.Errorf("input handle is %s, not a TensorList", v[h])
		}
		shape := []int64{-1}
		var dims []int64 // a scalar: unknown rank
		if !l.unknownRank {
			shape, dims = l.elemShape, []int64{int64(len(l.elemShape))}
		}
		if st == dtInt32 {
			copyAs(alloc[int32](v[out], st, dims), shape)
		} else {
			copy(alloc[int64](v[out], st, dims), shape)
		}
		return nil
	}, nil
}
