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
}
