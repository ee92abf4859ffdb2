package tensorflow

import (
	"fmt"
	"math"
)

// TF1 TensorArrays (TensorArrayV3 and the ops on its handle), as
// tf.compat.v1.nn.dynamic_rnn and TF1 while loops use them. In TensorFlow
// the handle names a mutable array in the session's resource manager and
// a float scalar "flow" threads through every write, only to order the ops
// that touch the array. Here the flow carries the array itself: its value
// is the scalar 0 (as TensorFlow's) and its list an immutable tensorList
// whose items are the array's elements. A write or scatter makes a new
// list (copy on write, as TensorListSetItem), a read looks up the flow it
// is given, and the handle only holds what TensorArrayV3 declared (dtype,
// element_shape, dynamic_size) and the array's identity. So the kernels
// stay pure, each call's arrays live in that call's slots (nothing survives
// a call or is shared by concurrent calls), and an array made from
// constants can be folded at load. Departures from TensorFlow, which only
// make this runtime accept more: an element may be read more than once
// although clear_after_read is set; a flow that went around a write (two
// writes to one flow) sees the array as of that flow, not the last write.

func init() {
	for op, b := range map[string]builder{
		"TensorArrayV3":        buildTensorArray,
		"TensorArrayWriteV3":   buildTAWrite,
		"TensorArrayScatterV3": buildTAScatter,
		"TensorArrayReadV3":    buildTARead,
		"TensorArrayGatherV3":  buildTAGather,
		"TensorArraySizeV3":    buildTASize,
		"TensorArrayCloseV3":   buildTAClose,
		"TensorArraySplitV3":   buildTASplit,
		"TensorArrayConcatV3":  buildTAConcat,
		"Range":                buildRange,
	} {
		builders[op] = b
	}
}

// taInfo is what TensorArrayV3 declared; its address is the array's
// identity, shared by the handle and every flow of the array.
type taInfo struct {
	dynamic bool
}

// shapeAttr reads a shape attr as a partial shape (-1: unknown dimension).
func shapeAttr(n *nodeCtx, name string) (dims []int64, unknownRank bool) {
	sp := n.a[name].GetShape()
	if sp == nil || sp.GetUnknownRank() {
		return nil, true
	}
	for _, d := range sp.GetDim() {
		dims = append(dims, max(d.GetSize(), -1))
	}
	return dims, false
}

// setFlow makes o a flow of the array l: the float scalar 0 carrying l.
func setFlow(o *dense, l *tensorList) {
	alloc[float32](o, dtFloat, nil)[0] = 0
	o.list = l
}

// taArray returns the array that flow holds, checking that it is handle's.
func taArray(handle, flow *dense) (*tensorList, error) {
	h := handle.list
	if h == nil || h.ta == nil {
		return nil, fmt.Errorf("handle is %s, not a TensorArray (from TensorArrayV3)", handle)
	}
	l := flow.list
	if l == nil || l.ta != h.ta {
		return nil, fmt.Errorf("flow_in is not a flow of this TensorArray (it must come from its TensorArrayV3 or a write to it)")
	}
	return l, nil
}

func buildTensorArray(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	dt, err := listDType(n, "dtype")
	if err != nil {
		return nil, err
	}
	shape, unknown := shapeAttr(n, "element_shape")
	dynamic := n.a.b("dynamic_size")
	size := n.ins[0]
	handle, flow := n.out(dtResource), n.out(dtFloat)
	return func(v []*dense) error {
		k, err := scalarInt(v[size])
		if err != nil {
			return fmt.Errorf("size: %w", err)
		}
		if k < 0 || k > maxListElements {
			return fmt.Errorf("size %d is out of range [0, %d]", k, maxListElements)
		}
		// A new identity on every run: no call sees another's array.
		l := &tensorList{dt: dt, elemShape: shape, unknownRank: unknown, items: make([]*dense, k), ta: &taInfo{dynamic: dynamic}}
		h := v[handle]
		h.dt = dtResource
		h.setShape(nil)
		h.list = l
		setFlow(v[flow], l)
		return nil
	}, nil
}

// taSet returns a copy of l with value (copied) at each index, growing a
// dynamic array; an index already written is an error, as in TensorFlow.
func taSet(l *tensorList, idx []int64, value func(i int) *dense) (*tensorList, error) {
	next := *l
	next.items = append([]*dense(nil), l.items...)
	for k, i := range idx {
		if i < 0 || i >= maxListElements {
			return nil, fmt.Errorf("index %d is out of range [0, %d)", i, maxListElements)
		}
		if i >= int64(len(next.items)) {
			if !l.ta.dynamic {
				return nil, fmt.Errorf("index %d is out of range for a TensorArray of size %d (dynamic_size is false)", i, len(l.items))
			}
			next.items = append(next.items, make([]*dense, i+1-int64(len(next.items)))...)
		}
		if next.items[i] != nil {
			return nil, fmt.Errorf("index %d was already written to (TensorFlow writes each element once)", i)
		}
		item := value(k)
		if _, _, err := mergeShape(l.elemShape, l.unknownRank, item.shape, false); err != nil {
			return nil, fmt.Errorf("value for index %d does not match the TensorArray's element_shape: %w", i, err)
		}
		next.items[i] = item
	}
	return &next, nil
}

func buildTAWrite(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(4); err != nil {
		return nil, err
	}
	m, err := moverFor(n.inTypes[2])
	if err != nil {
		return nil, err
	}
	h, ix, x, fl := n.ins[0], n.ins[1], n.ins[2], n.ins[3]
	out := n.out(dtFloat)
	return func(v []*dense) error {
		l, err := taArray(v[h], v[fl])
		if err != nil {
			return err
		}
		item := v[x]
		if item.dt != l.dt {
			return fmt.Errorf("value has dtype %s, the TensorArray holds %s", dtypeName(item.dt), dtypeName(l.dt))
		}
		i, err := scalarInt(v[ix])
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		next, err := taSet(l, []int64{i}, func(int) *dense {
			c := m.cloneRange(item, 0, numElems(item.shape))
			c.shape = append([]int64(nil), item.shape...)
			return c
		})
		if err != nil {
			return err
		}
		setFlow(v[out], next)
		return nil
	}, nil
}

func buildTAScatter(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(4); err != nil {
		return nil, err
	}
	m, err := moverFor(n.inTypes[2])
	if err != nil {
		return nil, err
	}
	h, ix, x, fl := n.ins[0], n.ins[1], n.ins[2], n.ins[3]
	out := n.out(dtFloat)
	return func(v []*dense) error {
		l, err := taArray(v[h], v[fl])
		if err != nil {
			return err
		}
		t := v[x]
		if t.dt != l.dt {
			return fmt.Errorf("value has dtype %s, the TensorArray holds %s", dtypeName(t.dt), dtypeName(l.dt))
		}
		idx, err := intsOf(v[ix], nil)
		if err != nil {
			return fmt.Errorf("indices: %w", err)
		}
		if len(v[ix].shape) != 1 {
			return fmt.Errorf("indices has shape %v, want a vector", v[ix].shape)
		}
		if len(t.shape) == 0 || t.shape[0] != int64(len(idx)) {
			return fmt.Errorf("value has shape %v; %d indices need a first dimension of %d", t.shape, len(idx), len(idx))
		}
		inner := numElems(t.shape[1:])
		next, err := taSet(l, idx, func(k int) *dense {
			c := m.cloneRange(t, k*inner, (k+1)*inner)
			c.shape = append([]int64(nil), t.shape[1:]...)
			return c
		})
		if err != nil {
			return err
		}
		setFlow(v[out], next)
		return nil
	}, nil
}

// taItem returns element i of l, or zeros when it was never written and
// the element shape is fully defined (TensorFlow's rule); nil, nil is never
// returned.
func taItem(l *tensorList, m mover, i int64, shape []int64, unknown bool) (*dense, error) {
	if i < 0 || i >= int64(len(l.items)) {
		return nil, fmt.Errorf("index %d is out of range for a TensorArray of size %d", i, len(l.items))
	}
	if it := l.items[i]; it != nil {
		return it, nil
	}
	if !fullyDefined(shape, unknown) {
		return nil, fmt.Errorf("index %d was not written to and the element shape %s is not fully defined", i, partialString(shape))
	}
	if err := checkElems(shape); err != nil {
		return nil, err
	}
	z := &dense{dt: l.dt, shape: append([]int64(nil), shape...)}
	m.zeros(z, numElems(shape))
	return z, nil
}

func buildTARead(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	dt, err := listDType(n, "dtype")
	if err != nil {
		return nil, err
	}
	m, _ := moverFor(dt)
	h, ix, fl := n.ins[0], n.ins[1], n.ins[2]
	out := n.out(dt)
	return func(v []*dense) error {
		l, err := taArray(v[h], v[fl])
		if err != nil {
			return err
		}
		if l.dt != dt {
			return fmt.Errorf("the TensorArray holds %s, the op's dtype is %s", dtypeName(l.dt), dtypeName(dt))
		}
		i, err := scalarInt(v[ix])
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		it, err := taItem(l, m, i, l.elemShape, l.unknownRank)
		if err != nil {
			return err
		}
		return moveElems(v[out], it, it.shape, nil)
	}, nil
}

func buildTAGather(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	dt, err := listDType(n, "dtype")
	if err != nil {
		return nil, err
	}
	m, _ := moverFor(dt)
	attrShape, attrUnknown := shapeAttr(n, "element_shape")
	h, ix, fl := n.ins[0], n.ins[1], n.ins[2]
	out := n.out(dt)
	return func(v []*dense) error {
		l, err := taArray(v[h], v[fl])
		if err != nil {
			return err
		}
		if l.dt != dt {
			return fmt.Errorf("the TensorArray holds %s, the op's dtype is %s", dtypeName(l.dt), dtypeName(dt))
		}
		idx, err := intsOf(v[ix], nil)
		if err != nil {
			return fmt.Errorf("indices: %w", err)
		}
		if len(v[ix].shape) != 1 {
			return fmt.Errorf("indices has shape %v, want a vector", v[ix].shape)
		}
		shape, unknown, err := mergeShape(l.elemShape, l.unknownRank, attrShape, attrUnknown)
		if err != nil {
			return fmt.Errorf("element_shape does not match the TensorArray's: %w", err)
		}
		// The written elements fix the shape of unwritten ones.
		for _, i := range idx {
			if i >= 0 && i < int64(len(l.items)) && l.items[i] != nil {
				if shape, unknown, err = mergeShape(shape, unknown, l.items[i].shape, false); err != nil {
					return fmt.Errorf("element %d does not match the others: %w", i, err)
				}
			}
		}
		items := make([]*dense, len(idx))
		for k, i := range idx {
			if items[k], err = taItem(l, m, i, shape, unknown); err != nil {
				return err
			}
		}
		if len(idx) == 0 && !fullyDefined(shape, unknown) {
			return fmt.Errorf("gathering no elements needs a fully defined element shape, have %s", partialString(shape))
		}
		if len(items) > 0 {
			shape = items[0].shape
		}
		stacked := append([]int64{int64(len(items))}, shape...)
		if err := checkElems(stacked); err != nil {
			return err
		}
		o := v[out]
		o.dt = dt
		o.setShape(stacked)
		m.stack(o, items, numElems(shape))
		return nil
	}, nil
}

func buildTASize(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	h, fl := n.ins[0], n.ins[1]
	out := n.out(dtInt32)
	return func(v []*dense) error {
		l, err := taArray(v[h], v[fl])
		if err != nil {
			return err
		}
		alloc[int32](v[out], dtInt32, nil)[0] = int32(len(l.items))
		return nil
	}, nil
}

// buildTAClose: closing frees the array in TensorFlow; here the array dies
// with the call's flows, so there is nothing to do.
func buildTAClose(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	return func([]*dense) error { return nil }, nil
}

// buildTASplit: TensorArraySplitV3 writes pieces of value along its first
// dimension, of the given lengths, to elements 0, 1, ...; as in
// TensorFlow the lengths must add up to that dimension and be as many as
// the array's size (a dynamic array grows to fit).
func buildTASplit(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(4); err != nil {
		return nil, err
	}
	m, err := moverFor(n.inTypes[1])
	if err != nil {
		return nil, err
	}
	h, x, ln, fl := n.ins[0], n.ins[1], n.ins[2], n.ins[3]
	out := n.out(dtFloat)
	return func(v []*dense) error {
		l, err := taArray(v[h], v[fl])
		if err != nil {
			return err
		}
		t := v[x]
		if t.dt != l.dt {
			return fmt.Errorf("value has dtype %s, the TensorArray holds %s", dtypeName(t.dt), dtypeName(l.dt))
		}
		if len(t.shape) == 0 {
			return fmt.Errorf("value must be at least a vector, got a scalar")
		}
		lengths, err := intsOf(v[ln], nil)
		if err != nil {
			return fmt.Errorf("lengths: %w", err)
		}
		if len(v[ln].shape) != 1 {
			return fmt.Errorf("lengths has shape %v, want a vector", v[ln].shape)
		}
		total := int64(0)
		for _, k := range lengths {
			if k < 0 || k > t.shape[0] {
				return fmt.Errorf("lengths %v: %d is out of range [0, %d]", lengths, k, t.shape[0])
			}
			total += k
		}
		if total != t.shape[0] {
			return fmt.Errorf("lengths %v add up to %d, value's first dimension is %d (shape %v)", lengths, total, t.shape[0], t.shape)
		}
		if size := len(l.items); len(lengths) != size && !(l.ta.dynamic && len(lengths) > size) {
			return fmt.Errorf("the TensorArray's size %d is not the number of lengths %d, and dynamic_size is false", size, len(lengths))
		}
		idx := make([]int64, len(lengths))
		starts := make([]int64, len(lengths))
		row := int64(numElems(t.shape[1:]))
		for i, start := 0, int64(0); i < len(lengths); i++ {
			idx[i], starts[i] = int64(i), start
			start += lengths[i]
		}
		next, err := taSet(l, idx, func(i int) *dense {
			c := m.cloneRange(t, int(starts[i]*row), int((starts[i]+lengths[i])*row))
			c.shape = append([]int64{lengths[i]}, t.shape[1:]...)
			return c
		})
		if err != nil {
			return err
		}
		setFlow(v[out], next)
		return nil
	}, nil
}

// concatMover is a mover that can join tensors' data end to end.
type concatMover interface {
	// concat sets o's data to the items' data, one after another (n
	// elements in all).
	concat(o *dense, items []*dense, n int)
}

func (moverOf[T]) concat(o *dense, items []*dense, n int) {
	d, pos := growTo(field[T](o), n), 0
	for _, it := range items {
		pos += copy(d[pos:], *field[T](it))
	}
}

// buildTAConcat: TensorArrayConcatV3 joins every element along its first
// dimension (their other dimensions must agree) and answers each
// element's first dimension as lengths (int64).
func buildTAConcat(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt, err := listDType(n, "dtype")
	if err != nil {
		return nil, err
	}
	m, _ := moverFor(dt)
	except0, except0Unknown := shapeAttr(n, "element_shape_except0")
	h, fl := n.ins[0], n.ins[1]
	out, lens := n.out(dt), n.out(dtInt64)
	return func(v []*dense) error {
		l, err := taArray(v[h], v[fl])
		if err != nil {
			return err
		}
		if l.dt != dt {
			return fmt.Errorf("the TensorArray holds %s, the op's dtype is %s", dtypeName(l.dt), dtypeName(dt))
		}
		items := make([]*dense, len(l.items))
		for i := range items {
			if items[i], err = taItem(l, m, int64(i), l.elemShape, l.unknownRank); err != nil {
				return err
			}
		}
		rest, restUnknown := except0, except0Unknown
		total := int64(0)
		for i, it := range items {
			if len(it.shape) == 0 {
				return fmt.Errorf("element %d is a scalar; concatenating needs vectors or more", i)
			}
			if rest, restUnknown, err = mergeShape(rest, restUnknown, it.shape[1:], false); err != nil {
				return fmt.Errorf("element %d does not match the others past its first dimension: %w", i, err)
			}
			total += it.shape[0]
		}
		if !fullyDefined(rest, restUnknown) {
			return fmt.Errorf("concatenating no elements needs a fully defined element_shape_except0, have %s", partialString(rest))
		}
		shape := append([]int64{total}, rest...)
		if err := checkElems(shape); err != nil {
			return err
		}
		o := v[out]
		o.dt = dt
		o.setShape(shape)
		m.(concatMover).concat(o, items, numElems(shape))
		lv := alloc[int64](v[lens], dtInt64, []int64{int64(len(items))})
		for i, it := range items {
			lv[i] = it.shape[0]
		}
		return nil
	}, nil
}

// rangeLen is the length of Range(start, limit, delta), TensorFlow's
// formula: ceil(|limit-start| / |delta|), with delta's sign agreeing.
func rangeLen(start, limit, delta float64) (int64, error) {
	switch {
	case delta == 0:
		return 0, fmt.Errorf("delta must not be 0")
	case delta > 0 && start > limit:
		return 0, fmt.Errorf("start %v is larger than limit %v with delta %v > 0", start, limit, delta)
	case delta < 0 && start < limit:
		return 0, fmt.Errorf("start %v is smaller than limit %v with delta %v < 0", start, limit, delta)
	}
	size := math.Ceil(math.Abs((limit - start) / delta))
	if !(size <= maxModelElements) { // NaN too
		return 0, fmt.Errorf("range(%v, %v, %v) has more than %d elements", start, limit, delta, maxModelElements)
	}
	return int64(size), nil
}

func rangeKernel[T int32 | int64 | float32 | float64](dt dtype, s, l, d, out int) kernel {
	return func(v []*dense) error {
		var arg [3]T
		for k, slot := range []int{s, l, d} {
			t := v[slot]
			if len(t.shape) != 0 {
				return fmt.Errorf("%s has shape %v, want a scalar", [3]string{"start", "limit", "delta"}[k], t.shape)
			}
			arg[k] = data[T](t)[0]
		}
		start, limit, delta := arg[0], arg[1], arg[2]
		var size int64
		var err error
		if isFloat(dt) {
			size, err = rangeLen(float64(start), float64(limit), float64(delta))
		} else {
			// Integer ranges in integer arithmetic: exact past 2^53.
			a, b, c := int64(start), int64(limit), int64(delta)
			if size, err = rangeLen(float64(a), float64(b), float64(c)); err == nil {
				span, step := uint64(b-a), uint64(c) // b-a wraps to |b-a| below
				if c < 0 {
					span, step = uint64(a-b), -step
				}
				size = int64(min(span/step, maxModelElements+1))
				if span%step != 0 {
					size++
				}
				if size > maxModelElements { // float64 rounding let it pass
					err = fmt.Errorf("range(%d, %d, %d) has more than %d elements", a, b, c, maxModelElements)
				}
			}
		}
		if err != nil {
			return err
		}
		dst := alloc[T](v[out], dt, []int64{size})
		x := start
		for i := range dst {
			dst[i] = x
			x += delta
		}
		return nil
	}
}

func buildRange(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	if n.inTypes[1] != dt || n.inTypes[2] != dt {
		return nil, fmt.Errorf("start, limit and delta have dtypes %s, %s, %s; they must agree", dtypeName(dt), dtypeName(n.inTypes[1]), dtypeName(n.inTypes[2]))
	}
	s, l, d := n.ins[0], n.ins[1], n.ins[2]
	out := n.out(dt)
	switch dt {
	case dtInt32:
		return rangeKernel[int32](dt, s, l, d, out), nil
	case dtInt64:
		return rangeKernel[int64](dt, s, l, d, out), nil
	case dtFloat:
		return rangeKernel[float32](dt, s, l, d, out), nil
	case dtDouble:
		return rangeKernel[float64](dt, s, l, d, out), nil
	}
	return nil, fmt.Errorf("dtype %s is not supported", dtypeName(dt))
}
