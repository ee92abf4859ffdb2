package tensorflow

import (
	"fmt"
	"math"
	"slices"
)

func init() {
	for _, op := range []string{"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "Minimum", "Maximum", "SquaredDifference", "Pow", "FloorDiv", "FloorMod"} {
		builders[op] = buildArith
	}
	for _, op := range []string{"Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual"} {
		builders[op] = buildCompare
	}
	for _, op := range []string{"Neg", "Abs", "Relu", "Relu6", "Sigmoid", "Tanh", "Exp", "Log", "Log1p", "Sqrt", "Rsqrt", "Square", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Softplus", "Elu", "Selu", "LeakyRelu", "Erf"} {
		builders[op] = buildUnary
	}
	for _, op := range []string{"Sum", "Mean", "Max", "Min", "Prod"} {
		builders[op] = buildReduce
	}
	builders["Softmax"] = buildSoftmax
	builders["LogSoftmax"] = buildSoftmax
	builders["BiasAdd"] = buildBiasAdd
	builders["LogicalAnd"] = buildLogical
	builders["LogicalOr"] = buildLogical
	builders["LogicalNot"] = buildLogicalNot
	builders["Select"] = buildSelect
	builders["SelectV2"] = buildSelect
}

// broadcast computes the broadcast shape of a and b (NumPy rules) into dst.
func broadcast(dst, a, b []int64) ([]int64, error) {
	r := max(len(a), len(b))
	dst = dst[:0]
	for i := range r {
		da, db := int64(1), int64(1)
		if j := i - (r - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (r - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			dst = append(dst, da)
		case da == 1:
			dst = append(dst, db)
		default:
			return nil, fmt.Errorf("shapes %v and %v are not broadcastable", a, b)
		}
	}
	return dst, nil
}

// bstrides returns, for an operand of shape s broadcast to out, the element
// stride of each output dimension (0 where broadcast).
func bstrides(dst, s, out []int64) []int64 {
	dst = dst[:0]
	off := len(out) - len(s)
	acc := int64(1)
	for range out {
		dst = append(dst, 0)
	}
	for d := len(out) - 1; d >= 0; d-- {
		j := d - off
		if j < 0 {
			continue
		}
		if s[j] != 1 {
			dst[d] = acc
		}
		acc *= s[j]
	}
	return dst
}

// forEachRow walks out (rank >= 1) row by row (the last dimension) and calls
// f with the offsets of each operand's first element and its step along the
// row.
func forEachRow(out []int64, strides [][]int64, idx []int64, offs []int, f func(offs []int, steps []int, n int)) {
	rank := len(out)
	if rank == 0 {
		steps := make([]int, len(strides))
		for k := range offs {
			offs[k] = 0
		}
		f(offs, steps, 1)
		return
	}
	inner := int(out[rank-1])
	steps := make([]int, len(strides))
	for k, st := range strides {
		steps[k] = int(st[rank-1])
	}
	idx = idx[:rank-1]
	for i := range idx {
		idx[i] = 0
	}
	rows := numElems(out[:rank-1])
	for range rows {
		for k, st := range strides {
			o := 0
			for d := range rank - 1 {
				o += int(idx[d] * st[d])
			}
			offs[k] = o
		}
		f(offs, steps, inner)
		for d := rank - 2; d >= 0; d-- {
			idx[d]++
			if idx[d] < out[d] {
				break
			}
			idx[d] = 0
		}
	}
}

const (
	opAdd = iota
	opSub
	opMul
	opDiv
	opDivNoNan
	opMin
	opMax
	opSqDiff
	opPow
	opFloorDiv
	opFloorMod
)

var arithOps = map[string]int{"Add": opAdd, "AddV2": opAdd, "Sub": opSub, "Mul": opMul, "RealDiv": opDiv, "Div": opDiv, "DivNoNan": opDivNoNan,
	"Minimum": opMin, "Maximum": opMax, "SquaredDifference": opSqDiff, "Pow": opPow, "FloorDiv": opFloorDiv, "FloorMod": opFloorMod}

func arithRow[T elem](op int, o, a, b []T, sa, sb int) {
	switch op {
	case opAdd:
		if sa == 1 && sb == 1 {
			b = b[:len(o)]
			a = a[:len(o)]
			for i := range o {
				o[i] = a[i] + b[i]
			}
			return
		}
		for i := range o {
			o[i] = a[i*sa] + b[i*sb]
		}
	case opSub:
		for i := range o {
			o[i] = a[i*sa] - b[i*sb]
		}
	case opMul:
		if sa == 1 && sb == 1 {
			b = b[:len(o)]
			a = a[:len(o)]
			for i := range o {
				o[i] = a[i] * b[i]
			}
			return
		}
		for i := range o {
			o[i] = a[i*sa] * b[i*sb]
		}
	case opDiv:
		for i := range o {
			o[i] = a[i*sa] / b[i*sb]
		}
	case opDivNoNan:
		for i := range o {
			if y := b[i*sb]; y == 0 {
				o[i] = 0
			} else {
				o[i] = a[i*sa] / y
			}
		}
	case opMin:
		for i := range o {
			x, y := a[i*sa], b[i*sb]
			if y < x || y != y {
				x = y
			}
			o[i] = x
		}
	case opMax:
		for i := range o {
			x, y := a[i*sa], b[i*sb]
			if y > x || y != y {
				x = y
			}
			o[i] = x
		}
	case opSqDiff:
		for i := range o {
			d := a[i*sa] - b[i*sb]
			o[i] = d * d
		}
	case opPow:
		for i := range o {
			o[i] = T(math.Pow(float64(a[i*sa]), float64(b[i*sb])))
		}
	case opFloorDiv:
		for i := range o {
			o[i] = T(math.Floor(float64(a[i*sa]) / float64(b[i*sb])))
		}
	case opFloorMod:
		for i := range o {
			x, y := float64(a[i*sa]), float64(b[i*sb])
			m := math.Mod(x, y)
			if m != 0 && (m < 0) != (y < 0) {
				m += y
			}
			o[i] = T(m)
		}
	}
}

// binaryKernel applies a row function with broadcasting.
func binaryKernel[T, R elem](outDT dtype, a, b, out int, row func(o []R, x, y []T, sx, sy int)) kernel {
	return func(v []*dense) error {
		ta, tb, o := v[a], v[b], v[out]
		x, y := data[T](ta), data[T](tb)
		if slices.Equal(ta.shape, tb.shape) {
			row(alloc[R](o, outDT, ta.shape), x, y, 1, 1)
			return nil
		}
		// A one-element operand broadcasts to the other's shape only when
		// its rank is not larger: a scalar plus a [1,1] batch is [1,1],
		// not [] (a one-row batch once came back as a scalar).
		if len(y) == 1 && len(tb.shape) <= len(ta.shape) {
			row(alloc[R](o, outDT, ta.shape), x, y, 1, 0)
			return nil
		}
		if len(x) == 1 && len(ta.shape) <= len(tb.shape) {
			row(alloc[R](o, outDT, tb.shape), x, y, 0, 1)
			return nil
		}
		shape, err := broadcast(o.scratch, ta.shape, tb.shape)
		if err != nil {
			return err
		}
		o.scratch = shape
		dst := alloc[R](o, outDT, shape)
		sa := bstrides(nil, ta.shape, shape)
		sb := bstrides(nil, tb.shape, shape)
		pos := 0
		forEachRow(shape, [][]int64{sa, sb}, make([]int64, len(shape)), make([]int, 2), func(offs, steps []int, n int) {
			row(dst[pos:pos+n], x[offs[0]:], y[offs[1]:], steps[0], steps[1])
			pos += n
		})
		return nil
	}
}

func arithK[T elem](dt dtype, op, a, b, out int) kernel {
	k := binaryKernel[T, T](dt, a, b, out, func(o []T, x, y []T, sx, sy int) { arithRow(op, o, x, y, sx, sy) })
	if isFloat(dt) || (op != opDiv && op != opFloorDiv && op != opFloorMod && op != opPow) {
		return k
	}
	// Integer Pow, FloorDiv and FloorMod in integer arithmetic (through
	// float64 they lose low bits past 2^53 and saturate on overflow);
	// powers by repeated squaring wrap around as TensorFlow's do.
	var intOp func(x, y int64) int64
	switch op {
	case opPow:
		intOp = intPow
	case opFloorDiv:
		intOp = func(x, y int64) int64 {
			q := x / y
			if (x%y != 0) && ((x < 0) != (y < 0)) {
				q--
			}
			return q
		}
	case opFloorMod:
		intOp = func(x, y int64) int64 {
			m := x % y
			if m != 0 && ((m < 0) != (y < 0)) {
				m += y
			}
			return m
		}
	}
	if intOp != nil {
		k = binaryKernel[T, T](dt, a, b, out, func(o []T, x, y []T, sx, sy int) {
			for i := range o {
				o[i] = T(intOp(int64(x[i*sx]), int64(y[i*sy])))
			}
		})
	}
	// TensorFlow's integer kernels refuse a zero divisor and a negative
	// exponent (an error, not a crash: Go's integer division by zero
	// panics, and a negative power has no integer answer).
	return func(v []*dense) error {
		for _, y := range data[T](v[b]) {
			if op == opPow && y < 0 {
				return fmt.Errorf("integers to negative integer powers are not allowed (exponent %v)", y)
			}
			if op != opPow && y == 0 {
				return fmt.Errorf("integer division by zero")
			}
		}
		return k(v)
	}
}

// intPow is x**y for y >= 0 in int64 arithmetic, wrapping on overflow;
// truncated to a narrower type it is that type's wrapped power.
func intPow(x, y int64) int64 {
	r := int64(1)
	for y > 0 {
		if y&1 == 1 {
			r *= x
		}
		x *= x
		y >>= 1
	}
	return r
}

func buildArith(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	if n.inTypes[1] != dt {
		return nil, fmt.Errorf("inputs are %s and %s", dtypeName(dt), dtypeName(n.inTypes[1]))
	}
	op := arithOps[n.nd.Op]
	if n.nd.Op == "RealDiv" && !isFloat(dt) {
		return nil, fmt.Errorf("RealDiv of %s", dtypeName(dt))
	}
	a, b, out := n.ins[0], n.ins[1], n.out(dt)
	return pick(dt, arithK[float32](dt, op, a, b, out), arithK[float64](dt, op, a, b, out), arithK[int32](dt, op, a, b, out),
		arithK[int64](dt, op, a, b, out), arithK[int16](dt, op, a, b, out), arithK[int8](dt, op, a, b, out), arithK[uint8](dt, op, a, b, out))
}

// Comparisons produce bool tensors, stored as uint8 while computing and then
// exposed as bools.
func compareRow[T elem](op string) func(o []bool, x, y []T, sx, sy int) {
	return func(o []bool, x, y []T, sx, sy int) {
		for i := range o {
			a, b := x[i*sx], y[i*sy]
			var r bool
			switch op {
			case "Greater":
				r = a > b
			case "GreaterEqual":
				r = a >= b
			case "Less":
				r = a < b
			case "LessEqual":
				r = a <= b
			case "Equal":
				r = a == b
			case "NotEqual":
				r = a != b
			}
			o[i] = r
		}
	}
}

// boolBinary is binaryKernel for bool outputs.
func boolBinary[T elem](a, b, out int, row func(o []bool, x, y []T, sx, sy int)) kernel {
	return func(v []*dense) error {
		ta, tb, o := v[a], v[b], v[out]
		x, y := data[T](ta), data[T](tb)
		shape, err := broadcast(o.scratch, ta.shape, tb.shape)
		if err != nil {
			return err
		}
		o.scratch = shape
		o.dt = dtBool
		o.setShape(shape)
		o.b = growBool(o.b, numElems(shape))
		sa := bstrides(nil, ta.shape, shape)
		sb := bstrides(nil, tb.shape, shape)
		pos := 0
		forEachRow(shape, [][]int64{sa, sb}, make([]int64, len(shape)), make([]int, 2), func(offs, steps []int, n int) {
			row(o.b[pos:pos+n], x[offs[0]:], y[offs[1]:], steps[0], steps[1])
			pos += n
		})
		return nil
	}
}

func buildCompare(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	a, b, out := n.ins[0], n.ins[1], n.out(dtBool)
	op := n.nd.Op
	if dt == dtBool && (op == "Equal" || op == "NotEqual") {
		return func(v []*dense) error {
			return logicalOp(v[a], v[b], v[out], func(x, y bool) bool { return (x == y) == (op == "Equal") })
		}, nil
	}
	return pick(dt, boolBinary(a, b, out, compareRow[float32](op)), boolBinary(a, b, out, compareRow[float64](op)),
		boolBinary(a, b, out, compareRow[int32](op)), boolBinary(a, b, out, compareRow[int64](op)),
		boolBinary(a, b, out, compareRow[int16](op)), boolBinary(a, b, out, compareRow[int8](op)), boolBinary(a, b, out, compareRow[uint8](op)))
}

func logicalOp(ta, tb, o *dense, f func(x, y bool) bool) error {
	shape, err := broadcast(o.scratch, ta.shape, tb.shape)
	if err != nil {
		return err
	}
	o.scratch = shape
	o.dt = dtBool
	o.setShape(shape)
	o.b = growBool(o.b, numElems(shape))
	sa := bstrides(nil, ta.shape, shape)
	sb := bstrides(nil, tb.shape, shape)
	pos := 0
	forEachRow(shape, [][]int64{sa, sb}, make([]int64, len(shape)), make([]int, 2), func(offs, steps []int, n int) {
		for i := range n {
			o.b[pos+i] = f(ta.b[offs[0]+i*steps[0]], tb.b[offs[1]+i*steps[1]])
		}
		pos += n
	})
	return nil
}

func buildLogical(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	if n.inTypes[0] != dtBool || n.inTypes[1] != dtBool {
		return nil, fmt.Errorf("inputs must be bool")
	}
	and := n.nd.Op == "LogicalAnd"
	a, b, out := n.ins[0], n.ins[1], n.out(dtBool)
	return func(v []*dense) error {
		return logicalOp(v[a], v[b], v[out], func(x, y bool) bool {
			if and {
				return x && y
			}
			return x || y
		})
	}, nil
}

func buildLogicalNot(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	a, out := n.ins[0], n.out(dtBool)
	return func(v []*dense) error {
		o := v[out]
		o.dt = dtBool
		o.setShape(v[a].shape)
		o.b = growBool(o.b, len(v[a].b))
		for i, x := range v[a].b {
			o.b[i] = !x
		}
		return nil
	}, nil
}

func selectKernel[T elem](dt dtype, c, a, b, out int, v1 bool) kernel {
	return func(v []*dense) error {
		tc, ta, tb, o := v[c], v[a], v[b], v[out]
		if tc.dt != dtBool {
			return fmt.Errorf("condition is %s, not bool", dtypeName(tc.dt))
		}
		x, y := data[T](ta), data[T](tb)
		if v1 && !slices.Equal(ta.shape, tb.shape) {
			return fmt.Errorf("then %v and else %v differ in shape", ta.shape, tb.shape)
		}
		if v1 && len(tc.shape) == 1 && len(ta.shape) > 1 {
			// Select with a vector condition picks whole rows.
			if tc.shape[0] != ta.shape[0] {
				return fmt.Errorf("condition %v does not match %v", tc.shape, ta.shape)
			}
			dst := alloc[T](o, dt, ta.shape)
			inner := len(dst) / max(1, int(ta.shape[0]))
			for r, take := range tc.b {
				src := y
				if take {
					src = x
				}
				copy(dst[r*inner:(r+1)*inner], src[r*inner:])
			}
			return nil
		}
		shape, err := broadcast(o.scratch, ta.shape, tb.shape)
		if err == nil {
			shape, err = broadcast(shape, shape, tc.shape)
		}
		if err != nil {
			return err
		}
		o.scratch = shape
		dst := alloc[T](o, dt, shape)
		sc := bstrides(nil, tc.shape, shape)
		sa := bstrides(nil, ta.shape, shape)
		sb := bstrides(nil, tb.shape, shape)
		pos := 0
		forEachRow(shape, [][]int64{sc, sa, sb}, make([]int64, len(shape)), make([]int, 3), func(offs, steps []int, n int) {
			for i := range n {
				if tc.b[offs[0]+i*steps[0]] {
					dst[pos+i] = x[offs[1]+i*steps[1]]
				} else {
					dst[pos+i] = y[offs[2]+i*steps[2]]
				}
			}
			pos += n
		})
		return nil
	}
}

func buildSelect(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	dt := n.inTypes[1]
	v1 := n.nd.Op == "Select"
	c, a, b, out := n.ins[0], n.ins[1], n.ins[2], n.out(dt)
	return pick(dt, selectKernel[float32](dt, c, a, b, out, v1), selectKernel[float64](dt, c, a, b, out, v1),
		selectKernel[int32](dt, c, a, b, out, v1), selectKernel[int64](dt, c, a, b, out, v1),
		selectKernel[int16](dt, c, a, b, out, v1), selectKernel[int8](dt, c, a, b, out, v1), selectKernel[uint8](dt, c, a, b, out, v1))
}

// sigmoidCutoff is where Eigen's float logistic saturates to 1.
const sigmoidCutoff = 16.635532333438687426013570

// sigmoid32 is Eigen's float32 logistic: e = exp(min(x, cutoff)); e/(1+e).
func sigmoid32(x float32) float32 {
	x = min(x, float32(sigmoidCutoff))
	e := float32(math.Exp(float64(x)))
	return e / (1 + e)
}

func unaryFloat[T float32 | float64](op string, alpha float64) func(o, x []T) {
	f := func(g func(float64) float64) func(o, x []T) {
		return func(o, x []T) {
			for i, v := range x {
				o[i] = T(g(float64(v)))
			}
		}
	}
	switch op {
	case "Sigmoid":
		var z T
		if _, is32 := any(z).(float32); is32 {
			return func(o, x []T) {
				for i, v := range x {
					o[i] = T(sigmoid32(float32(v)))
				}
			}
		}
		return f(func(v float64) float64 { return 1 / (1 + math.Exp(-v)) })
	case "Tanh":
		return f(math.Tanh)
	case "Exp":
		return f(math.Exp)
	case "Log":
		return f(math.Log)
	case "Log1p":
		return f(math.Log1p)
	case "Sqrt":
		return f(math.Sqrt)
	case "Rsqrt":
		return func(o, x []T) {
			for i, v := range x {
				o[i] = 1 / T(math.Sqrt(float64(v)))
			}
		}
	case "Reciprocal":
		return func(o, x []T) {
			for i, v := range x {
				o[i] = 1 / v
			}
		}
	case "Floor":
		return f(math.Floor)
	case "Ceil":
		return f(math.Ceil)
	case "Round":
		return f(math.RoundToEven)
	case "Softplus":
		return f(func(v float64) float64 {
			if v > 20 {
				return v
			}
			return math.Log1p(math.Exp(v))
		})
	case "Elu":
		return f(func(v float64) float64 {
			if v < 0 {
				return math.Expm1(v)
			}
			return v
		})
	case "Selu":
		return f(func(v float64) float64 {
			const scale, a = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
			if v < 0 {
				return scale * a * math.Expm1(v)
			}
			return scale * v
		})
	case "LeakyRelu":
		return func(o, x []T) {
			for i, v := range x {
				if v < 0 {
					v *= T(alpha)
				}
				o[i] = v
			}
		}
	case "Erf":
		return f(math.Erf)
	}
	return nil
}

func unaryAny[T elem](op string) func(o, x []T) {
	switch op {
	case "Neg":
		return func(o, x []T) {
			for i, v := range x {
				o[i] = -v
			}
		}
	case "Abs":
		return func(o, x []T) {
			for i, v := range x {
				if v < 0 {
					v = -v
				}
				o[i] = v
			}
		}
	case "Relu":
		return func(o, x []T) {
			x = x[:len(o)]
			for i, v := range x {
				if !(v > 0) {
					v = 0
				}
				o[i] = v
			}
		}
	case "Relu6":
		return func(o, x []T) {
			for i, v := range x {
				o[i] = min(max(v, 0), 6)
			}
		}
	case "Square":
		return func(o, x []T) {
			for i, v := range x {
				o[i] = v * v
			}
		}
	case "Sign":
		var one T = 1
		return func(o, x []T) {
			for i, v := range x {
				switch {
				case v > 0:
					o[i] = 1
				case v < 0:
					o[i] = -one
				default:
					o[i] = v
				}
			}
		}
	}
	return nil
}

func unaryK[T elem](dt dtype, f func(o, x []T), in, out int) kernel {
	if f == nil {
		return nil
	}
	return func(v []*dense) error {
		f(alloc[T](v[out], dt, v[in].shape), data[T](v[in]))
		return nil
	}
}

func buildUnary(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	op := n.nd.Op
	in, out := n.ins[0], n.out(dt)
	alpha := float64(n.a.f("alpha", 0.2))
	if op == "Relu" && dt == dtFloat {
		n.fuse = &fusable{kind: fuseRelu}
	}
	f32, f64 := unaryAny[float32](op), unaryAny[float64](op)
	if f32 == nil {
		f32, f64 = unaryFloat[float32](op, alpha), unaryFloat[float64](op, alpha)
		if f32 == nil {
			return nil, fmt.Errorf("%w %q", ErrUnsupportedOp, op)
		}
		return pick(dt, unaryK(dt, f32, in, out), unaryK(dt, f64, in, out), nil, nil, nil, nil, nil)
	}
	return pick(dt, unaryK(dt, f32, in, out), unaryK(dt, f64, in, out), unaryK(dt, unaryAny[int32](op), in, out),
		unaryK(dt, unaryAny[int64](op), in, out), unaryK(dt, unaryAny[int16](op), in, out), unaryK(dt, unaryAny[int8](op), in, out), unaryK(dt, unaryAny[uint8](op), in, out))
}

func biasAddK[T elem](dt dtype, a, b, out int, nchw bool) kernel {
	return func(v []*dense) error {
		x, bias := v[a], data[T](v[b])
		if len(x.shape) < 1 {
			return fmt.Errorf("input must have rank >= 1")
		}
		ch := len(x.shape) - 1
		if nchw && len(x.shape) >= 3 {
			ch = 1
		}
		if x.shape[ch] != int64(len(bias)) {
			return fmt.Errorf("bias has %d elements, input dimension %d is %d", len(bias), ch, x.shape[ch])
		}
		o := alloc[T](v[out], dt, x.shape)
		src := data[T](x)
		if ch == len(x.shape)-1 {
			nb := len(bias)
			if nb == 0 {
				return nil
			}
			for r := 0; r+nb <= len(src); r += nb {
				row, dst := src[r:r+nb:r+nb], o[r:r+nb:r+nb]
				row, dst = row[:len(bias)], dst[:len(bias)]
				for j, bv := range bias {
					dst[j] = row[j] + bv
				}
			}
			return nil
		}
		inner := numElems(x.shape[2:])
		for i := range src {
			o[i] = src[i] + bias[(i/inner)%len(bias)]
		}
		return nil
	}
}

func buildBiasAdd(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	nchw := n.a.s("data_format") == "NCHW"
	a, b, out := n.ins[0], n.ins[1], n.out(dt)
	if dt == dtFloat && !nchw {
		n.fuse = &fusable{kind: fuseBias}
	}
	return pick(dt, biasAddK[float32](dt, a, b, out, nchw), biasAddK[float64](dt, a, b, out, nchw), biasAddK[int32](dt, a, b, out, nchw),
		biasAddK[int64](dt, a, b, out, nchw), biasAddK[int16](dt, a, b, out, nchw), biasAddK[int8](dt, a, b, out, nchw), biasAddK[uint8](dt, a, b, out, nchw))
}

func lowest[T elem]() T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(math.Inf(-1))
	case *float64:
		*p = math.Inf(-1)
	case *int32:
		*p = math.MinInt32
	case *int64:
		*p = math.MinInt64
	case *int16:
		*p = math.MinInt16
	case *int8:
		*p = math.MinInt8
	}
	return z
}

func highest[T elem]() T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(math.Inf(1))
	case *float64:
		*p = math.Inf(1)
	case *int32:
		*p = math.MaxInt32
	case *int64:
		*p = math.MaxInt64
	case *int16:
		*p = math.MaxInt16
	case *int8:
		*p = math.MaxInt8
	case *uint8:
		*p = math.MaxUint8
	}
	return z
}

func reduceK[T elem](dt dtype, op string, in, ax, out int, keep bool) kernel {
	return func(v []*dense) error {
		t, o := v[in], v[out]
		axes, err := intsOf(v[ax], o.scratch2)
		if err != nil {
			return err
		}
		o.scratch2 = axes
		rank := len(t.shape)
		var red [64]bool
		if rank > len(red) {
			return fmt.Errorf("rank %d is too large", rank)
		}
		for _, a := range axes {
			d, err := normAxis(a, max(rank, 1))
			if err != nil {
				return err
			}
			if rank > 0 {
				red[d] = true
			}
		}
		shape := o.scratch[:0]
		for d := range rank {
			if !red[d] {
				shape = append(shape, t.shape[d])
			} else if keep {
				shape = append(shape, 1)
			}
		}
		o.scratch = shape
		dst := alloc[T](o, dt, shape)
		var init T
		switch op {
		case "Prod":
			init = 1
		case "Max":
			init = lowest[T]()
		case "Min":
			init = highest[T]()
		}
		for i := range dst {
			dst[i] = init
		}
		src := data[T](t)
		// Output stride of each input dimension (0 for reduced ones).
		ostr := make([]int, rank)
		acc := 1
		for d := rank - 1; d >= 0; d-- {
			if !red[d] {
				ostr[d] = acc
				acc *= int(t.shape[d])
			}
		}
		idx := make([]int64, rank)
		off := 0
		for _, x := range src {
			switch op {
			case "Sum", "Mean":
				dst[off] += x
			case "Prod":
				dst[off] *= x
			case "Max":
				if x > dst[off] || x != x {
					dst[off] = x
				}
			case "Min":
				if x < dst[off] || x != x {
					dst[off] = x
				}
			}
			for d := rank - 1; d >= 0; d-- {
				idx[d]++
				off += ostr[d]
				if idx[d] < t.shape[d] {
					break
				}
				off -= ostr[d] * int(t.shape[d])
				idx[d] = 0
			}
		}
		if op == "Mean" && len(dst) > 0 {
			cnt := len(src) / len(dst)
			// Floats average nothing to NaN (0/0), as TensorFlow does.
			if cnt > 0 || isFloat(dt) {
				for i := range dst {
					dst[i] /= T(cnt)
				}
			}
		}
		return nil
	}
}

func buildReduce(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	op := n.nd.Op
	keep := n.a.b("keep_dims")
	in, ax, out := n.ins[0], n.ins[1], n.out(dt)
	return pick(dt, reduceK[float32](dt, op, in, ax, out, keep), reduceK[float64](dt, op, in, ax, out, keep), reduceK[int32](dt, op, in, ax, out, keep),
		reduceK[int64](dt, op, in, ax, out, keep), reduceK[int16](dt, op, in, ax, out, keep), reduceK[int8](dt, op, in, ax, out, keep), reduceK[uint8](dt, op, in, ax, out, keep))
}

// softmaxK follows TensorFlow's functor: shift by the row max, exp, divide
// by the row sum (LogSoftmax: shifted - log(sum)).
func softmaxK[T float32 | float64](dt dtype, in, out int, logSM bool) kernel {
	return func(v []*dense) error {
		t := v[in]
		if len(t.shape) < 1 {
			return fmt.Errorf("logits must have rank >= 1")
		}
		src := data[T](t)
		o := alloc[T](v[out], dt, t.shape)
		nc := int(t.shape[len(t.shape)-1])
		if nc == 0 {
			return nil
		}
		for r := 0; r+nc <= len(src); r += nc {
			row, dst := src[r:r+nc], o[r:r+nc]
			m := row[0]
			for _, x := range row {
				m = max(m, x)
			}
			var sum T
			for j, x := range row {
				e := T(math.Exp(float64(x - m)))
				if !logSM {
					dst[j] = e
				} else {
					dst[j] = x - m
				}
				sum += e
			}
			if logSM {
				ls := T(math.Log(float64(sum)))
				for j := range dst {
					dst[j] -= ls
				}
			} else {
				for j := range dst {
					dst[j] /= sum
				}
			}
		}
		return nil
	}
}

func buildSoftmax(n *nodeCtx) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	dt := n.inTypes[0]
	lg := n.nd.Op == "LogSoftmax"
	in, out := n.ins[0], n.out(dt)
	return pick(dt, softmaxK[float32](dt, in, out, lg), softmaxK[float64](dt, in, out, lg), nil, nil, nil, nil, nil)
}
