package batch

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/sequence"
	"github.com/inferbid/inferbid/tensor"
)

// AppendResponse appends {"response":[...]} for results. It fails (typed OUTPUT_PARSING) when an output
// cannot be encoded (NaN/Inf); callers then answer with AppendBatchError.
//
// On failure the returned slice is dst as it was, so AppendBatchError can
// append to it directly. A tensor whose data is not one of the six dtypes or
// whose length differs from its shape also fails: that is a runtime bug
// which must not reach JavaScript as a silently malformed tensor.
//
// Numbers follow encoding/json: integers in decimal, floats as the shortest
// text that round-trips the float64 (FLOAT outputs are widened to float64
// first, so 3.14f prints as 3.140000104904175), in exponent form below 1e-6
// and from 1e21 on.
func AppendResponse(dst []byte, results []Result) ([]byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, responseSizeHint(results))
	dst = append(dst, `{"response":[`...)
	for i := range results {
		r := &results[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"model_path":`...)
		entryErr := r.Err
		if entryErr == nil {
			entryErr = outsideContract(r)
		}
		if entryErr != nil {
			// A failed entry's path may be anything a caller sent (100 MB
			// of it): it is echoed clipped, as in the description.
			dst = appendString(dst, inferr.Clip(r.ModelPath))
			dst = append(dst, `,"error":`...)
			dst = appendError(dst, entryErr)
			dst = append(dst, '}')
			continue
		}
		dst = appendString(dst, r.ModelPath)
		dst = append(dst, `,"tensors":[`...)
		for j := range r.Tensors {
			if j > 0 {
				dst = append(dst, ',')
			}
			var problem string
			dst, problem = appendTensor(dst, &r.Tensors[j])
			if problem != "" {
				return dst[:start], inferr.Errorf(inferr.OutputParsing,
					"response[%d] (model_path %q): tensors[%d] (tensor_name %q): %s",
					i, inferr.ClipN(r.ModelPath, 120), j, inferr.ClipN(r.Tensors[j].Name, 120), problem)
			}
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}"...), nil
}

// AppendBatchError appends {"response":[{"error":{"error_type":T,"description":D}}]}.
func AppendBatchError(dst []byte, err error) []byte {
	dst = append(dst, `{"response":[{"error":`...)
	dst = appendError(dst, err)
	return append(dst, "}]}"...)
}

// Render is AppendResponse falling back to AppendBatchError.
func Render(results []Result) []byte {
	out, err := AppendResponse(nil, results)
	if err != nil {
		return AppendBatchError(out, err)
	}
	return out
}

func appendError(dst []byte, err error) []byte {
	dst = append(dst, `{"error_type":"`...)
	dst = append(dst, inferr.TypeOf(err).String()...)
	dst = append(dst, `","description":`...)
	desc := "unknown error"
	if err != nil {
		desc = inferr.Sanitize(err.Error())
	}
	dst = appendString(dst, desc)
	if c, ok := sequence.CodeOf(err); ok {
		// A stateful model's sequence error names its class too, so that a
		// script can tell "start again" (NOT_FOUND) from "retry later".
		dst = append(dst, `,"sequence_error":"`...)
		dst = append(dst, c.String()...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// responseSizeHint estimates the rendered size so that a response usually
// costs one allocation.
func responseSizeHint(results []Result) int {
	n := 16
	for i := range results {
		r := &results[i]
		if r.Err != nil {
			n += 32 + min(len(r.ModelPath), inferr.MaxEcho+32) + 256
			continue
		}
		n += 32 + len(r.ModelPath)
		for j := range r.Tensors {
			t := &r.Tensors[j]
			n += 96 + len(t.Name) + 8*len(t.Shape)
			switch t.DType() {
			case tensor.Double, tensor.Float:
				n += 20 * t.Len()
			case tensor.Int8:
				n += 5 * t.Len()
			case tensor.Int16:
				n += 7 * t.Len()
			case tensor.Int32:
				n += 12 * t.Len()
			case tensor.Int64:
				n += 21 * t.Len()
			}
		}
	}
	return n
}

// outsideContract is the OUTPUT_PARSING error of an entry whose model
// answered a dtype the batch JSON contract cannot name (BOOL, FP16, BYTES,
// ...: the v2 API carries them). It fails that entry only: the model is
// fine, only this path cannot show its answer.
func outsideContract(r *Result) error {
	for j := range r.Tensors {
		if dt := r.Tensors[j].DType(); dt != tensor.Invalid && !dt.Contract() {
			return inferr.Errorf(inferr.OutputParsing,
				"tensors[%d] (tensor_name %q): data_type %s is not one of the six dtypes of the batch JSON contract (the v2 API carries it)",
				j, inferr.ClipN(r.Tensors[j].Name, 120), dt)
		}
	}
	return nil
}

// appendTensor appends one output tensor; problem says why it cannot be
// encoded ("" on success).
func appendTensor(dst []byte, t *tensor.Tensor) ([]byte, string) {
	dt := t.DType()
	if !dt.Contract() {
		// v2-only dtypes failed their entry already (outsideContract).
		return dst, "data is not one of the six dtypes"
	}
	want := int64(1)
	for _, d := range t.Shape {
		if d < 0 {
			return dst, "tensor_shape " + tensor.FormatShape(t.Shape) + " has a negative dimension"
		}
		if d != 0 && want > math.MaxInt64/d {
			return dst, "tensor_shape " + tensor.FormatShape(t.Shape) + " overflows"
		}
		want *= d
	}
	if want != int64(t.Len()) {
		return dst, "tensor_shape " + tensor.FormatShape(t.Shape) + " needs " + strconv.FormatInt(want, 10) +
			" values, the output has " + strconv.Itoa(t.Len())
	}
	dst = append(dst, `{"tensor_name":`...)
	dst = appendString(dst, t.Name)
	dst = append(dst, `,"tensor_shape":[`...)
	for i, d := range t.Shape {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, d, 10)
	}
	dst = append(dst, `],"data_type":"`...)
	dst = append(dst, dt.String()...)
	dst = append(dst, `","tensor_content":[`...)
	problem := ""
	switch d := t.Data.(type) {
	case []float64:
		dst, problem = appendFloats(dst, d)
	case []float32:
		dst, problem = appendFloats(dst, d)
	case []int8:
		dst = appendInts(dst, d)
	case []int16:
		dst = appendInts(dst, d)
	case []int32:
		dst = appendInts(dst, d)
	case []int64:
		dst = appendInts(dst, d)
	}
	if problem != "" {
		return dst, problem
	}
	return append(dst, "]}"...), ""
}

func appendInts[T int8 | int16 | int32 | int64](dst []byte, vs []T) []byte {
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(v), 10)
	}
	return dst
}

func appendFloats[T float32 | float64](dst []byte, vs []T) ([]byte, string) {
	for i, v := range vs {
		f := float64(v) // FLOAT is widened: the reference prints the float64 value
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return dst, "tensor_content[" + strconv.Itoa(i) + "] is " + strconv.FormatFloat(f, 'g', -1, 64) +
				", which JSON cannot encode"
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendFloat(dst, f)
	}
	return dst, ""
}

// appendFloat formats f as encoding/json does (ES6 number formatting).
func appendFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does
// with HTML escaping off: quote, backslash and control characters escaped,
// invalid UTF-8 replaced by \ufffd, and U+2028/U+2029 escaped because
// JavaScript source cannot hold them raw.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
