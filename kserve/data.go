package kserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/tensor"
)

// decodeData reads a JSON "data" array, flat or nested (row-major either
// way), into n elements of dtype d. raw is valid JSON (encoding/json
// checked it). The values are counted before the data is allocated, so a
// large shape with little data costs nothing; nesting deeper than
// batch.MaxRank+1 is an error. The nesting need not follow the shape,
// only the count must match it.
func decodeData(raw string, d tensor.DType, n int64) (any, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, errors.New(`"data" is not an array`)
	}
	if count, err := countValues(raw[i:], n); err != nil {
		return nil, err
	} else if count != n {
		return nil, fmt.Errorf(`"data" holds %d values, the shape describes %d`, count, n)
	}
	out := tensor.MakeData(d, int(n))
	count := int64(0)
	depth := 0
	for ; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case ' ', '\t', '\n', '\r', ',':
			continue
		case '[':
			depth++
			if depth > batch.MaxRank+1 {
				return nil, fmt.Errorf(`"data" nests deeper than %d arrays`, batch.MaxRank+1)
			}
			continue
		case ']':
			depth--
			continue
		}
		end := i
		if c == '"' { // a string, whole: it may hold delimiters
			for end++; end < len(raw) && raw[end] != '"'; end++ {
				if raw[end] == '\\' {
					end++
				}
			}
			end++
		}
		for end < len(raw) && !isDelim(raw[end]) {
			end++
		}
		tok := raw[i:end]
		if count >= n {
			return nil, fmt.Errorf(`"data" holds more than the %d values the shape describes`, n)
		}
		if err := setElement(out, count, tok); err != nil {
			return nil, fmt.Errorf(`"data" element %d: %w`, count, err)
		}
		count++
		i = end - 1
	}
	if count != n {
		return nil, fmt.Errorf(`"data" holds %d values, the shape describes %d`, count, n)
	}
	return out, nil
}

// countValues counts the scalar values of a JSON array (strings are
// skipped whole, so brackets inside them do not count), stopping past max.
func countValues(raw string, max int64) (int64, error) {
	count := int64(0)
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '[':
			depth++
			if depth > batch.MaxRank+1 {
				return 0, fmt.Errorf(`"data" nests deeper than %d arrays`, batch.MaxRank+1)
			}
		case c == ']':
			depth--
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
		default:
			count++
			if count > max {
				return 0, fmt.Errorf(`"data" holds more than the %d values the shape describes`, max)
			}
			if c == '"' {
				for i++; i < len(raw) && raw[i] != '"'; i++ {
					if raw[i] == '\\' {
						i++
					}
				}
				continue
			}
			for i+1 < len(raw) && !isDelim(raw[i+1]) {
				i++
			}
		}
	}
	return count, nil
}

func skipSpace(b string, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func isDelim(c byte) bool {
	return c == ',' || c == ']' || c == '[' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// setElement parses one JSON token (a substring of the body: no copy)
// into data[i]: a number, true/false for BOOL, a string for BYTES.
func setElement(data any, i int64, tok string) error {
	switch d := data.(type) {
	case []bool:
		switch tok {
		case "true":
			d[i] = true
		case "false":
			d[i] = false
		default:
			return fmt.Errorf("%s is not true or false", inferr.ClipN(tok, 40))
		}
		return nil
	case [][]byte:
		var s string
		if len(tok) == 0 || tok[0] != '"' || json.Unmarshal([]byte(tok), &s) != nil {
			return fmt.Errorf("%s is not a string", inferr.ClipN(tok, 40))
		}
		d[i] = []byte(s)
		return nil
	}
	if len(tok) == 0 || tok[0] == '"' || tok[0] == 't' || tok[0] == 'f' || tok[0] == 'n' || tok[0] == '{' {
		return fmt.Errorf("%s is not a number", inferr.ClipN(tok, 40))
	}
	switch d := data.(type) {
	case []float32:
		f, err := strconv.ParseFloat(tok, 32)
		if err != nil {
			return fmt.Errorf("%s is out of range for FP32", inferr.ClipN(tok, 40))
		}
		d[i] = float32(f)
	case []float64:
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			return fmt.Errorf("%s is out of range for FP64", inferr.ClipN(tok, 40))
		}
		d[i] = f
	case []int8:
		v, err := parseInt(tok, 8)
		d[i] = int8(v)
		return err
	case []int16:
		v, err := parseInt(tok, 16)
		d[i] = int16(v)
		return err
	case []int32:
		v, err := parseInt(tok, 32)
		d[i] = int32(v)
		return err
	case []int64:
		v, err := parseInt(tok, 64)
		d[i] = v
		return err
	case []uint8:
		v, err := parseUint(tok, 8)
		d[i] = uint8(v)
		return err
	case []uint16:
		v, err := parseUint(tok, 16)
		d[i] = uint16(v)
		return err
	case []uint32:
		v, err := parseUint(tok, 32)
		d[i] = uint32(v)
		return err
	case []uint64:
		v, err := parseUint(tok, 64)
		d[i] = v
		return err
	case []tensor.Float16:
		f, err := strconv.ParseFloat(tok, 32)
		h := tensor.Float16FromFloat32(float32(f))
		if err != nil || h.IsNaNOrInf() {
			return fmt.Errorf("%s is out of range for FP16", inferr.ClipN(tok, 40))
		}
		d[i] = h
	}
	return nil
}

func parseUint(tok string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(tok, 10, bits)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, strconv.ErrRange) || (len(tok) > 0 && tok[0] == '-') {
		return 0, fmt.Errorf("%s is out of range for UINT%d", inferr.ClipN(tok, 40), bits)
	}
	// 3.0 and 1e2 are integers written as JSON numbers.
	if f, ferr := strconv.ParseFloat(tok, 64); ferr == nil && f == math.Trunc(f) {
		if f < 0 || f >= math.Ldexp(1, bits) {
			return 0, fmt.Errorf("%s is out of range for UINT%d", inferr.ClipN(tok, 40), bits)
		}
		return uint64(f), nil
	}
	return 0, fmt.Errorf("%s is not an integer", inferr.ClipN(tok, 40))
}

func parseInt(tok string, bits int) (int64, error) {
	v, err := strconv.ParseInt(tok, 10, bits)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is out of range for INT%d", inferr.ClipN(tok, 40), bits)
	}
	// 3.0 and 1e2 are integers written as JSON numbers.
	if f, ferr := strconv.ParseFloat(tok, 64); ferr == nil && f == math.Trunc(f) {
		if f < -math.Ldexp(1, bits-1) || f >= math.Ldexp(1, bits-1) {
			return 0, fmt.Errorf("%s is out of range for INT%d", inferr.ClipN(tok, 40), bits)
		}
		return int64(f), nil
	}
	return 0, fmt.Errorf("%s is not an integer", inferr.ClipN(tok, 40))
}

// appendData appends a tensor's elements as a flat JSON array. NaN and
// infinities have no JSON form: they are an error naming the element.
func appendData(b []byte, t tensor.Tensor) ([]byte, error) {
	b = append(b, '[')
	switch d := t.Data.(type) {
	case []float32:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return b, fmt.Errorf("output %q element %d is %v, which JSON cannot carry", t.Name, i, v)
			}
			b = strconv.AppendFloat(b, f, 'g', -1, 32)
		}
	case []float64:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return b, fmt.Errorf("output %q element %d is %v, which JSON cannot carry", t.Name, i, v)
			}
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	case []int8:
		b = appendInts(b, d)
	case []int16:
		b = appendInts(b, d)
	case []int32:
		b = appendInts(b, d)
	case []int64:
		b = appendInts(b, d)
	case []uint8:
		b = appendUints(b, d)
	case []uint16:
		b = appendUints(b, d)
	case []uint32:
		b = appendUints(b, d)
	case []uint64:
		b = appendUints(b, d)
	case []bool:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendBool(b, v)
		}
	case []tensor.Float16:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			if v.IsNaNOrInf() {
				return b, fmt.Errorf("output %q element %d is %v, which JSON cannot carry", t.Name, i, v.Float32())
			}
			b = strconv.AppendFloat(b, float64(v.Float32()), 'g', -1, 32)
		}
	case [][]byte:
		for i, v := range d {
			if i > 0 {
				b = append(b, ',')
			}
			// JSON strings are text: binary content needs the gRPC surface.
			if !utf8.Valid(v) {
				return b, fmt.Errorf("output %q element %d is not UTF-8 text, which a JSON string cannot carry; use the gRPC API (bytes_contents or raw_output_contents)", t.Name, i)
			}
			b = appendString(b, string(v))
		}
	default:
		return b, fmt.Errorf("output %q holds no data of a known type (%T)", t.Name, t.Data)
	}
	return append(b, ']'), nil
}

func appendUints[T uint8 | uint16 | uint32 | uint64](b []byte, d []T) []byte {
	for i, v := range d {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return b
}

func appendInts[T int8 | int16 | int32 | int64](b []byte, d []T) []byte {
	for i, v := range d {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return b
}
