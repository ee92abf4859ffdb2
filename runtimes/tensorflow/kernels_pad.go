package tensorflow

import (
	"fmt"
)

// Kernels of the ops that grow a tensor by copying its elements: Pad,
// PadV2, MirrorPad and Tile. Like the sequence kernels they move elements
// without computing on them, so they take every dtype the runtime holds.
// Each maps every output coordinate of every dimension to a source
// coordinate (or to the pad value), then walks the output in row-major
// order. Output sizes are checked against maxModelElements before anything
// is allocated, so a few bytes of paddings or multiples cannot ask for
// gigabytes.

func init() {
	for op, b := range map[string]builder{
		"Pad":       buildPad,
		"PadV2":     buildPad,
		"MirrorPad": buildPad,
		"Tile":      buildTile,
	} {
		builders[op] = b
	}
}

// fillMover is a mover that can also fill the elements an index of -1
// names with a scalar's value.
type fillMover interface {
	// gatherFill sets o's data to src[idx[i]], or to fill's only element
	// (zero when fill is nil) where idx[i] is -1.
	gatherFill(o, src, fill *dense, idx []int64)
}

func (moverOf[T]) gatherFill(o, src, fill *dense, idx []int64) {
	d, s := growTo(field[T](o), len(idx)), *field[T](src)
	var pad T
	if fill != nil {
		pad = (*field[T](fill))[0]
	}
	for i, j := range idx {
		if j < 0 {
			d[i] = pad
		} else {
			d[i] = s[j]
		}
	}
}

// walkMapped appends the source offset of every element of an output of
// the given shape, in row-major order: coordinate i of dimension d comes
// from source coordinate coord[d][i], at stride step[d]; a coordinate of -1
// makes the element -1 (padding).
func walkMapped(idx, shape []int64, coord [][]int64, step []int64, base int64) []int64 {
	if len(shape) == 0 {
		return append(idx, base)
	}
	for i := range shape[0] {
		c := coord[0][i]
		if c < 0 || base < 0 {
			idx = walkMapped(idx, shape[1:], coord[1:], step[1:], -1)
		} else {
			idx = walkMapped(idx, shape[1:], coord[1:], step[1:], base+c*step[0])
		}
	}
	return idx
}

// growShape checks that a tensor of shape has at most maxModelElements
// elements (every dimension already non-negative).
func growShape(shape []int64) error {
	if _, err := checkShape(shape); err != nil {
		return fmt.Errorf("output %w (more than %d elements)", err, maxModelElements)
	}
	return nil
}

// padMode is how Pad, PadV2 and MirrorPad fill the new elements.
type padMode int

const (
	padConstant  padMode = iota // Pad (zeros), PadV2 (constant_values)
	padReflect                  // MirrorPad REFLECT: the edge is not repeated
	padSymmetric                // MirrorPad SYMMETRIC: the edge is repeated
)

func buildPad(n *nodeCtx) (kernel, error) {
	mode := padConstant
	switch n.nd.Op {
	case "PadV2":
		if err := n.wantInputs(3); err != nil {
			return nil, err
		}
		if n.inTypes[2] != n.inTypes[0] {
			return nil, fmt.Errorf("constant_values has dtype %s, input has %s", dtypeName(n.inTypes[2]), dtypeName(n.inTypes[0]))
		}
	case "MirrorPad":
		if err := n.wantInputs(2); err != nil {
			return nil, err
		}
		switch m := n.a.s("mode"); m {
		case "REFLECT":
			mode = padReflect
		case "SYMMETRIC":
			mode = padSymmetric
		default:
			return nil, fmt.Errorf("mode %q is not REFLECT or SYMMETRIC", m)
		}
	default:
		if err := n.wantInputs(2); err != nil {
			return nil, err
		}
	}
	m, err := moverFor(n.inTypes[0])
	if err != nil {
		return nil, err
	}
	fm := m.(fillMover)
	x, p := n.ins[0], n.ins[1]
	cv := -1
	if len(n.ins) == 3 {
		cv = n.ins[2]
	}
	out := n.out(n.inTypes[0])
	return func(v []*dense) error {
		o, t := v[out], v[x]
		rank := len(t.shape)
		pads, err := intsOf(v[p], o.scratch2)
		if err != nil {
			return fmt.Errorf("paddings: %w", err)
		}
		o.scratch2 = pads
		if ps := v[p].shape; len(ps) != 2 || ps[0] != int64(rank) || ps[1] != 2 {
			return fmt.Errorf("paddings has shape %v; input of shape %v needs [%d 2]", ps, t.shape, rank)
		}
		var fill *dense
		if cv >= 0 {
			fill = v[cv]
			if len(fill.shape) != 0 {
				return fmt.Errorf("constant_values has shape %v, want a scalar", fill.shape)
			}
		}
		shape := make([]int64, rank)
		for d := range rank {
			before, after, dim := pads[2*d], pads[2*d+1], t.shape[d]
			if before < 0 || after < 0 {
				return fmt.Errorf("paddings %v: dimension %d pads by (%d, %d), which must not be negative", pads, d, before, after)
			}
			switch limit := dim; mode {
			case padReflect:
				limit = dim - 1
				fallthrough
			case padSymmetric:
				if before > limit || after > limit {
					return fmt.Errorf("paddings %v: dimension %d of size %d pads by (%d, %d); %s padding allows at most %d",
						pads, d, dim, before, after, n.a.s("mode"), max(limit, 0))
				}
			}
			if before > maxModelElements || after > maxModelElements {
				return fmt.Errorf("paddings %v: dimension %d pads by (%d, %d), more than %d elements", pads, d, before, after, maxModelElements)
			}
			shape[d] = before + dim + after
		}
		if err := growShape(shape); err != nil {
			return err
		}
		coord := make([][]int64, rank)
		for d := range rank {
			before, dim := pads[2*d], t.shape[d]
			c := make([]int64, shape[d])
			for i := range c {
				j := int64(i) - before
				switch {
				case j >= 0 && j < dim:
				case mode == padConstant:
					j = -1
				case mode == padReflect && j < 0:
					j = -j
				case mode == padReflect:
					j = 2*(dim-1) - j
				case j < 0:
					j = -j - 1
				default:
					j = 2*dim - 1 - j
				}
				c[i] = j
			}
			coord[d] = c
		}
		step := make([]int64, rank)
		strides(step, t.shape)
		o.dt = t.dt
		o.setShape(shape)
		o.scratch = walkMapped(o.scratch[:0], shape, coord, step, 0)
		fm.gatherFill(o, t, fill, o.scratch)
		return nil
	}, nil
}

func buildTile(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	m, err := moverFor(n.inTypes[0])
	if err != nil {
		return nil, err
	}
	fm := m.(fillMover)
	x, mu := n.ins[0], n.ins[1]
	out := n.out(n.inTypes[0])
	return func(v []*dense) error {
		o, t := v[out], v[x]
		rank := len(t.shape)
		mult, err := intsOf(v[mu], o.scratch2)
		if err != nil {
			return fmt.Errorf("multiples: %w", err)
		}
		o.scratch2 = mult
		if ms := v[mu].shape; len(ms) != 1 || ms[0] != int64(rank) {
			return fmt.Errorf("multiples has shape %v; input of shape %v needs [%d]", ms, t.shape, rank)
		}
		shape := make([]int64, rank)
		for d, k := range mult {
			if k < 0 {
				return fmt.Errorf("multiples %v: %d for dimension %d must not be negative", mult, k, d)
			}
			dim := t.shape[d]
			if dim > 0 && k > maxModelElements/dim {
				return fmt.Errorf("multiples %v: dimension %d of size %d times %d is more than %d elements", mult, d, dim, k, maxModelElements)
			}
			shape[d] = dim * k
		}
		if err := growShape(shape); err != nil {
			return err
		}
		coord := make([][]int64, rank)
		for d := range rank {
			c := make([]int64, shape[d])
			for i := range c {
				c[i] = int64(i) % t.shape[d]
			}
			coord[d] = c
		}
		step := make([]int64, rank)
		strides(step, t.shape)
		o.dt = t.dt
		o.setShape(shape)
		o.scratch = walkMapped(o.scratch[:0], shape, coord, step, 0)
		fm.gatherFill(o, t, nil, o.scratch)
		return nil
	}, nil
}
