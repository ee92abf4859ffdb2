package batch

import "math"

// Fast paths for the numbers bidding code sends: short decimals such as
// "0.45" or "-12". They parse in one pass without strconv's generic reader
// (hex, underscores, special names) and are exact by construction; anything
// else returns ok false and goes to strconv, which has the final word.

var float64Pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

var float32Pow10 = [...]float32{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}

// fastFloat parses s = [+-]digits[.digits][(e|E)[+-]digits] when the
// decimal mantissa is exactly representable at the given precision (< 2^53
// for 64 bits, < 2^24 for 32) and the power of ten is too (|exp| <= 22, or
// 10): then one IEEE multiply or divide rounds correctly, the classic exact
// path strconv also takes (Clinger 1990).
func fastFloat(s string, bits int) (float64, bool) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	var mant uint64
	digits, exp := 0, 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		mant = mant*10 + uint64(s[i]-'0')
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isDigit(s[i]); i++ {
			mant = mant*10 + uint64(s[i]-'0')
			digits++
			exp--
		}
	}
	// 19 decimal digits always fit in a uint64 without wrapping.
	if digits == 0 || digits > 19 {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			eneg = s[i] == '-'
			i++
		}
		e, edigits := 0, 0
		for ; i < len(s) && isDigit(s[i]); i++ {
			e = e*10 + int(s[i]-'0')
			edigits++
			if edigits > 4 {
				return 0, false
			}
		}
		if edigits == 0 {
			return 0, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(s) {
		return 0, false
	}
	if bits == 32 {
		if mant>>24 != 0 || exp < -10 || exp > 10 {
			return fastFloat32Via64(mant, exp, neg)
		}
		f := float32(mant)
		if exp > 0 {
			f *= float32Pow10[exp]
		} else if exp < 0 {
			f /= float32Pow10[-exp]
		}
		if neg {
			f = -f
		}
		return float64(f), true
	}
	return exact64(mant, exp, neg)
}

// exact64 is Clinger's exact path for float64.
func exact64(mant uint64, exp int, neg bool) (float64, bool) {
	if mant>>53 != 0 || exp < -22 || exp > 22 {
		return 0, false
	}
	f := float64(mant)
	if exp > 0 {
		f *= float64Pow10[exp]
	} else if exp < 0 {
		f /= float64Pow10[-exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// fastFloat32Via64 covers FLOAT values with more digits than float32's own
// exact path takes (a float32's shortest text often has 8-9 digits): round
// to float64 exactly, then to float32. Rounding twice can differ from
// rounding once only when the float64 lands exactly on a midpoint between
// two float32s (a midpoint strictly between the value and its float64 would
// be a closer float64), so those fall back to strconv. The exact path keeps
// magnitudes within [1e-22, 2^53*1e22], where float32 is normal and finite.
func fastFloat32Via64(mant uint64, exp int, neg bool) (float64, bool) {
	f, ok := exact64(mant, exp, neg)
	if !ok {
		return 0, false
	}
	const dropped = 52 - 23 // fraction bits float32 does not keep
	if math.Float64bits(f)&(1<<dropped-1) == 1<<(dropped-1) {
		return 0, false
	}
	return float64(float32(f)), true
}

// fastInt parses s = [+-]digits with at most 18 digits (which cannot
// overflow int64) and checks it fits in bits; otherwise ok is false and
// strconv decides (and words the error).
func fastInt(s string, bits int) (int64, bool) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) || len(s)-i > 18 {
		return 0, false
	}
	var v int64
	for ; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	if bits < 64 {
		lim := int64(1) << (bits - 1)
		if v < -lim || v >= lim {
			return 0, false
		}
	}
	return v, true
}
