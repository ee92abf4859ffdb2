package tensorflow

import (
	"fmt"
	"math"
	"math/rand/v2"

	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// randomOps are the random ops variable initializers use. Their values are
// not TensorFlow's (its Philox streams are not reproduced): they stand in
// for initial values that a checkpoint restore replaces, or that a model
// never reads. The stateful ops draw from a PCG seeded by seed/seed2 (0
// and 0: from crypto-strength randomness, as TensorFlow draws a fresh seed);
// the stateless ones from their seed (or key and counter) inputs, so the
// same seed gives the same values. They are never folded into constants.
var randomOps = map[string]struct {
	dist      string // "uniform", "normal", "truncated"
	stateless int    // 0: stateful; 1: (shape, seed); 2: (shape, key, counter, alg)
}{
	"RandomUniform":              {"uniform", 0},
	"RandomStandardNormal":       {"normal", 0},
	"TruncatedNormal":            {"truncated", 0},
	"StatelessRandomUniform":     {"uniform", 1},
	"StatelessRandomNormal":      {"normal", 1},
	"StatelessTruncatedNormal":   {"truncated", 1},
	"StatelessRandomUniformV2":   {"uniform", 2},
	"StatelessRandomNormalV2":    {"normal", 2},
	"StatelessTruncatedNormalV2": {"truncated", 2},
}

// buildRandom emits a random op: FLOAT or DOUBLE values of the shape its
// first input gives.
func (c *compiler) buildRandom(nd *ndpb.NodeDef, a attrs, ins []int) ([]int, error) {
	spec := randomOps[nd.Op]
	want := map[int]int{0: 1, 1: 2, 2: 4}[spec.stateless]
	if len(ins) != want {
		return nil, fmt.Errorf("takes %d inputs, has %d", want, len(ins))
	}
	dt, err := a.typ("dtype")
	if err != nil {
		return nil, err
	}
	if dt != dtFloat && dt != dtDouble {
		return nil, fmt.Errorf("%w: dtype %s (only FLOAT and DOUBLE are supported)", ErrUnsupportedOp, dtypeName(dt))
	}
	seedAttr := [2]uint64{uint64(a.i("seed", 0)), uint64(a.i("seed2", 0))}
	out := newSlot(c.prog, dt, nil)
	run := func(v []*dense) error {
		shape, err := intsOf(v[ins[0]], nil)
		if err != nil {
			return fmt.Errorf("shape: %w", err)
		}
		if _, err := checkShape(shape); err != nil {
			return err
		}
		var src *rand.Rand
		switch spec.stateless {
		case 0:
			if seedAttr == [2]uint64{} {
				src = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			} else {
				src = rand.New(rand.NewPCG(seedAttr[0], seedAttr[1]))
			}
		default:
			var words []uint64
			for _, in := range ins[1:] {
				w, err := seedWords(v[in])
				if err != nil {
					return fmt.Errorf("seed: %w", err)
				}
				words = append(words, w...)
			}
			var k [2]uint64
			for i, w := range words {
				k[i%2] = k[i%2]*0x9e3779b97f4a7c15 + w
			}
			src = rand.New(rand.NewPCG(k[0], k[1]))
		}
		draw := func() float64 {
			switch spec.dist {
			case "uniform":
				return src.Float64()
			case "normal":
				return src.NormFloat64()
			}
			for { // truncated: redrawn beyond two standard deviations
				if x := src.NormFloat64(); math.Abs(x) <= 2 {
					return x
				}
			}
		}
		if dt == dtFloat {
			dst := alloc[float32](v[out], dt, shape)
			for i := range dst {
				dst[i] = float32(draw())
				if spec.dist == "uniform" && dst[i] >= 1 { // float32 rounding up to 1: [0, 1) holds
					dst[i] = math.Nextafter32(1, 0)
				}
			}
			return nil
		}
		dst := alloc[float64](v[out], dt, shape)
		for i := range dst {
			dst[i] = draw()
		}
		return nil
	}
	c.emit(nd, ins, []int{out}, run, false)
	return []int{out}, nil
}

// seedWords reads a seed, key or counter (or alg) input as 64-bit words.
func seedWords(t *dense) ([]uint64, error) {
	switch t.dt {
	case dtInt32, dtInt64:
		n, err := intsOf(t, nil)
		if err != nil {
			return nil, err
		}
		out := make([]uint64, len(n))
		for i, x := range n {
			out[i] = uint64(x)
		}
		return out, nil
	case dtUint64:
		return append([]uint64(nil), t.u64...), nil
	}
	return nil, fmt.Errorf("dtype %s is not an integer seed", dtypeName(t.dt))
}
