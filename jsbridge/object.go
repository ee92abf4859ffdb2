package jsbridge

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/jsbridge/nativejson"
	"github.com/inferbid/inferbid/tensor"
)

// walkBatch reads a batch given as a JS object ({request:[...]}) straight
// into entries, skipping JSON.stringify and JSON parsing: the fast path for
// well-formed batches.
//
// The walk accepts only what batch.Parse provably accepts with the same
// values; on anything else (a missing or mistyped field, a bad number, a
// limit, an object with toJSON, an inherited or non-enumerable field ...) it
// reports ok == false and the caller stringifies the object and runs
// batch.Parse, so every error type and message is exactly batch.Parse's. A
// test checks the two paths against each other on valid and invalid batches.
//
// budget bounds the values walked in all (an object has no byte size to
// check against the argument limit); over it the walk gives up as well.
//
// Getters and proxies run JS; one that throws makes the walk give up too
// (JSON.stringify then meets the same throw and reports it).
func walkBatch(rt *goja.Runtime, obj *goja.Object, lim batch.Limits, budget int64) (entries []batch.Entry, ok bool) {
	w := &walker{lim: lim.WithDefaults(), budget: budget}
	if ex := rt.Try(func() { entries, ok = w.request(obj) }); ex != nil {
		return nil, false
	}
	return entries, ok
}

type walker struct {
	lim    batch.Limits
	budget int64 // values left
}

func (w *walker) request(obj *goja.Object) ([]batch.Entry, bool) {
	if !plainObject(obj) || !ownKeysAre(obj, rootKeys) {
		return nil, false
	}
	req, ok := plainArray(obj.Get("request"))
	if !ok {
		return nil, false
	}
	n := arrayLen(req)
	if n > int64(w.lim.MaxEntries) {
		return nil, false
	}
	entries := make([]batch.Entry, n)
	for i := range entries {
		if entries[i], ok = w.entry(req.Get(nativejson.Index(i))); !ok {
			return nil, false
		}
	}
	return entries, true
}

func (w *walker) entry(v goja.Value) (batch.Entry, bool) {
	var e batch.Entry
	obj, ok := v.(*goja.Object)
	if !ok || !plainObject(obj) || !ownKeysAre(obj, entryKeys) {
		return e, false
	}
	if e.ModelPath, ok = cleanString(obj.Get("model_path")); !ok {
		return e, false
	}
	ts, ok := plainArray(obj.Get("tensors"))
	if !ok {
		return e, false
	}
	nt := arrayLen(ts)
	if nt > int64(w.lim.MaxTensors) {
		return e, false
	}
	e.Tensors = make([]tensor.Tensor, nt)
	for j := range e.Tensors {
		if e.Tensors[j], ok = w.tensor(ts.Get(nativejson.Index(j))); !ok {
			return e, false
		}
	}
	return e, true
}

func (w *walker) tensor(v goja.Value) (tensor.Tensor, bool) {
	var t tensor.Tensor
	obj, ok := v.(*goja.Object)
	if !ok || !plainObject(obj) {
		return t, false
	}
	keys := obj.Keys()
	if !sameKeys(keys, tensorKeys) && !sameKeys(keys, tensorKeys[1:]) {
		return t, false
	}
	if slices.Contains(keys, "tensor_name") {
		// An undefined value is left out by JSON.stringify: absent.
		if nv := obj.Get("tensor_name"); !absent(nv) {
			if t.Name, ok = cleanString(nv); !ok {
				return t, false
			}
		}
	}
	dtName, ok := cleanString(obj.Get("data_type"))
	if !ok {
		return t, false
	}
	dt, ok := tensor.ParseDType(dtName)
	if !ok {
		return t, false
	}
	shapeArr, ok := plainArray(obj.Get("tensor_shape"))
	if !ok {
		return t, false
	}
	rank := arrayLen(shapeArr)
	if rank > batch.MaxRank {
		return t, false
	}
	t.Shape = make([]int64, rank)
	for k := range t.Shape {
		f, ok := number(shapeArr.Get(nativejson.Index(k)))
		if !ok || f != math.Trunc(f) || f < 1 || f > 1<<53 {
			return t, false
		}
		t.Shape[k] = int64(f)
	}
	n, err := tensor.NumElements(t.Shape, w.lim.MaxElements)
	if err != nil {
		return t, false
	}
	content, ok := plainArray(obj.Get("tensor_content"))
	if !ok || arrayLen(content) != n {
		return t, false
	}
	if w.budget -= n; w.budget < 0 {
		return t, false
	}
	data := tensor.MakeData(dt, int(n))
	for k := range int(n) {
		if !setElement(data, k, content.Get(nativejson.Index(k))) {
			return t, false
		}
	}
	t.Data = data
	return t, true
}

// setElement converts a JS number or a plain decimal string to element k of
// data, giving exactly the value batch.Parse gives for its JSON text.
func setElement(data any, k int, v goja.Value) bool {
	text, isString := cleanString(v)
	var f float64
	if isString {
		if !simpleDecimal(text) {
			return false
		}
	} else {
		var ok bool
		if f, ok = number(v); !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	switch d := data.(type) {
	case []float64:
		if isString {
			var err error
			if f, err = strconv.ParseFloat(text, 64); err != nil {
				return false
			}
		}
		d[k] = f
	case []float32:
		if !isString {
			g, ok := toFloat32(f)
			d[k] = g
			return ok
		}
		g, err := strconv.ParseFloat(text, 32)
		if err != nil {
			return false
		}
		d[k] = float32(g)
	case []int8:
		i, ok := toInt(text, f, isString, 8)
		d[k] = int8(i)
		return ok
	case []int16:
		i, ok := toInt(text, f, isString, 16)
		d[k] = int16(i)
		return ok
	case []int32:
		i, ok := toInt(text, f, isString, 32)
		d[k] = int32(i)
		return ok
	case []int64:
		i, ok := toInt(text, f, isString, 64)
		d[k] = i
		return ok
	default:
		return false
	}
	return true
}

// toFloat32 rounds a JS number to float32 the way batch.Parse rounds the
// number's JSON text: JSON.stringify prints the shortest decimal that
// identifies the double, and Parse rounds that decimal to float32 directly.
// Rounding the double gives the same float32 unless the double lies within a
// hair of a midpoint between two float32s (the decimal may fall on the other
// side): only then is the text made and parsed.
func toFloat32(f float64) (float32, bool) {
	g := float32(f)
	if float64(g) == f {
		return g, true
	}
	if !math.IsInf(float64(g), 0) {
		other := math.Nextafter32(g, float32(math.Inf(1)))
		if float64(g) > f {
			other = math.Nextafter32(g, float32(math.Inf(-1)))
		}
		mid := (float64(g) + float64(other)) / 2
		if math.Abs(f-mid) > math.Abs(mid)*0x1p-45 {
			return g, true
		}
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 64), 32)
	return float32(r), err == nil
}

func toInt(text string, f float64, isString bool, bits int) (int64, bool) {
	if !isString {
		if f != math.Trunc(f) {
			return 0, false
		}
		// JSON.stringify prints integers from 2^53 on with the shortest
		// digits and zeros (2^62 prints as 4611686018427388000), and
		// batch.Parse reads that text exactly: do the same.
		text = strconv.FormatFloat(f, 'f', -1, 64)
	}
	i, err := strconv.ParseInt(text, 10, bits)
	return i, err == nil
}

// simpleDecimal reports whether s is -?digits(.digits)?([eE][+-]?digits)?:
// a subset of what batch.Parse reads from a quoted number, with no
// whitespace or sign that it would trim or reject.
func simpleDecimal(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == start {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// plainObject: JSON.stringify would serialize obj's own fields as they are
// (no toJSON, not an array or a function).
func plainObject(obj *goja.Object) bool {
	if obj.ClassName() != "Object" {
		return false
	}
	return absent(obj.Get("toJSON"))
}

func plainArray(v goja.Value) (*goja.Object, bool) {
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() != "Array" || !absent(obj.Get("toJSON")) {
		return nil, false
	}
	return obj, true
}

// The own enumerable fields the walk accepts, exactly: JSON.stringify
// serializes own enumerable fields only, and any other field might fail to
// serialize (a cycle, a BigInt, a throwing toJSON) where the walk would not
// look, so an object with other fields goes to batch.Parse.
var (
	rootKeys   = []string{"request"}
	entryKeys  = []string{"model_path", "tensors"}
	tensorKeys = []string{"tensor_name", "data_type", "tensor_shape", "tensor_content"} // tensor_name optional
)

func ownKeysAre(obj *goja.Object, want []string) bool { return sameKeys(obj.Keys(), want) }

// sameKeys: keys holds exactly the names in want, in any order.
func sameKeys(keys, want []string) bool {
	if len(keys) != len(want) {
		return false
	}
	for _, k := range keys {
		if !slices.Contains(want, k) {
			return false
		}
	}
	return true
}

// cleanString returns a primitive string that round-trips through JSON
// unchanged (no lone surrogate replaced on the way).
func cleanString(v goja.Value) (string, bool) {
	s, ok := v.(goja.String)
	if !ok {
		return "", false
	}
	str := s.String()
	if strings.ContainsRune(str, '\uFFFD') {
		return "", false
	}
	return str, true
}

var (
	int64Type   = reflect.TypeFor[int64]()
	float64Type = reflect.TypeFor[float64]()
)

// number returns a primitive JS number (not a Number object), without
// boxing it through Export.
func number(v goja.Value) (float64, bool) {
	if v == nil {
		return 0, false
	}
	if _, isObj := v.(*goja.Object); isObj {
		return 0, false
	}
	if t := v.ExportType(); t != int64Type && t != float64Type {
		return 0, false
	}
	return v.ToFloat(), true
}

// absent: a missing property (nil from Get) or undefined.
func absent(v goja.Value) bool { return v == nil || goja.IsUndefined(v) }

func arrayLen(arr *goja.Object) int64 {
	return arr.Get("length").ToInteger()
}
