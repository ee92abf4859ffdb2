package nativejson

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ftoa"
)

var (
	boolType     = reflect.TypeFor[bool]()
	int64Type    = reflect.TypeFor[int64]()
	float64Type  = reflect.TypeFor[float64]()
	stringType   = reflect.TypeFor[string]()
	mapType      = reflect.TypeFor[map[string]any]()
	sliceType    = reflect.TypeFor[[]any]()
	proxyExports = reflect.TypeFor[goja.Proxy]()
)

// stringify is JSON.stringify. With a replacer function or array, or a
// space argument, it is goja's. Otherwise the value is written here, doing
// exactly what goja's stringify does that a script can observe (every
// property read, every toJSON lookup and call, in the same order, the same
// errors), so that getters, toJSON methods and proxies behave the same.
//
// Plain objects, arrays, functions and primitives are written natively.
// Anything else met inside (a Proxy, a Date, a boxed primitive, a BigInt, a
// host object, a key the Go API cannot name) is handed to goja's stringify
// at the point where goja's own walk would take it up, with a replacer that
// continues the walk's cycle check (see delegate); a value that is such a
// thing itself goes to goja's stringify whole.
func (j *nativeJSON) stringify(call goja.FunctionCall) goja.Value {
	if _, isObj := call.Argument(1).(*goja.Object); isObj || !goja.IsUndefined(call.Argument(2)) {
		// goja ignores a replacer that is not an object.
		return j.origStringify(call)
	}
	v := call.Argument(0)
	if kindOf(v) == kindOther {
		return j.origStringify(call)
	}
	sc := getScratch()
	defer putScratch(sc)
	s := stringifier{j: j, buf: sc.buf[:0], stack: sc.stack[:0]}
	defer func() { sc.buf, sc.stack = s.buf, s.stack }()
	if !s.str("", v) {
		return goja.Undefined()
	}
	return j.rt.ToValue(string(s.buf))
}

type valueKind int

const (
	kindOther     valueKind = iota // goja's stringify decides (delegate)
	kindPrimitive                  // string, number, boolean, null, undefined, symbol
	kindPlain                      // an ordinary object: own enumerable keys
	kindArray                      // an ordinary array
	kindFunction                   // callable: toJSON, else nothing
)

// kindOf sorts a value without running any JS (no getter, no trap).
func kindOf(v goja.Value) valueKind {
	o, isObj := v.(*goja.Object)
	if !isObj {
		if goja.IsBigInt(v) {
			return kindOther // its toJSON is looked up on BigInt.prototype
		}
		return kindPrimitive
	}
	et := o.ExportType()
	if et == proxyExports {
		return kindOther
	}
	switch o.ClassName() {
	case "Object":
		if et == mapType {
			return kindPlain
		}
	case "Array":
		if et == sliceType {
			return kindArray
		}
	}
	if _, ok := goja.AssertFunction(o); ok {
		return kindFunction
	}
	return kindOther
}

type stringifier struct {
	j     *nativeJSON
	buf   []byte
	stack []*goja.Object // the objects being written, outermost first
}

// str writes the value v of property key (read by the caller, as goja's
// SerializeJSONProperty reads it) and reports whether it wrote anything
// (undefined, functions and symbols write nothing).
func (s *stringifier) str(key string, v goja.Value) bool {
	k := kindOf(v)
	switch k {
	case kindPrimitive:
		return s.primitive(v)
	case kindOther:
		return s.delegate(key, v, true)
	}
	o := v.(*goja.Object)
	// toJSON, looked up as goja does on every object.
	if tj, ok := o.Get("toJSON").(*goja.Object); ok {
		if f, ok := goja.AssertFunction(tj); ok {
			r, err := f(o, s.j.rt.ToValue(key))
			if err != nil {
				panic(err)
			}
			return s.afterToJSON(r)
		}
	}
	return s.object(o, k)
}

// afterToJSON writes the value a toJSON returned: no second toJSON.
func (s *stringifier) afterToJSON(v goja.Value) bool {
	o, isObj := v.(*goja.Object)
	if !isObj {
		if goja.IsBigInt(v) {
			panic(s.j.rt.NewTypeError("Do not know how to serialize a BigInt"))
		}
		return s.primitive(v)
	}
	k := kindOf(o)
	if k == kindOther {
		return s.delegate("", o, false)
	}
	return s.object(o, k)
}

func (s *stringifier) primitive(v goja.Value) bool {
	if v == nil {
		return false
	}
	switch v.ExportType() {
	case stringType:
		if _, isSym := v.(*goja.Symbol); isSym {
			return false
		}
		if !s.quoteUTF8(v.String()) {
			s.quoteUTF16(v.(goja.String))
		}
	case int64Type:
		s.buf = fmtInt(s.buf, v.ToInteger())
	case float64Type:
		f := v.ToFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			s.buf = append(s.buf, "null"...)
		} else {
			// Number.prototype.toString, as goja writes numbers.
			s.buf = ftoa.FToStr(f, ftoa.ModeStandard, 0, s.buf)
		}
	case boolType:
		if v.ToBoolean() {
			s.buf = append(s.buf, "true"...)
		} else {
			s.buf = append(s.buf, "false"...)
		}
	default:
		if !goja.IsNull(v) {
			return false // undefined
		}
		s.buf = append(s.buf, "null"...)
	}
	return true
}

func fmtInt(b []byte, i int64) []byte {
	if i >= 0 && i < 10 {
		return append(b, byte('0'+i))
	}
	var tmp [20]byte
	n := len(tmp)
	neg := i < 0
	u := uint64(i)
	if neg {
		u = -u
	}
	for u > 0 {
		n--
		tmp[n] = byte('0' + u%10)
		u /= 10
	}
	if neg {
		n--
		tmp[n] = '-'
	}
	return append(b, tmp[n:]...)
}

// object writes an object of kind k (after toJSON).
func (s *stringifier) object(o *goja.Object, k valueKind) bool {
	if k == kindFunction {
		return false
	}
	for _, a := range s.stack {
		if a == o {
			panic(s.j.rt.NewTypeError("Converting circular structure to JSON"))
		}
	}
	if len(s.stack) >= MaxDepth {
		s.j.rangeError(fmt.Sprintf("JSON.stringify: value nested deeper than %d levels", MaxDepth))
	}
	if k == kindArray {
		s.stack = append(s.stack, o)
		s.array(o)
		s.stack = s.stack[:len(s.stack)-1]
		return true
	}
	keys := o.Keys()
	for _, key := range keys {
		if !cleanKey(key) {
			// A key Keys gives as a Go string cannot be read back
			// exactly (a lone surrogate became U+FFFD): goja writes
			// this object. Nothing of it was read yet.
			return s.delegate("", o, false)
		}
	}
	s.stack = append(s.stack, o)
	s.buf = append(s.buf, '{')
	mark := len(s.buf)
	empty := true
	for _, key := range keys {
		off := len(s.buf)
		if !empty {
			s.buf = append(s.buf, ',')
		}
		s.quoteUTF8(key) // clean: checked above
		s.buf = append(s.buf, ':')
		if s.str(key, o.Get(key)) {
			empty = false
		} else {
			s.buf = s.buf[:off]
		}
	}
	if empty {
		s.buf = s.buf[:mark]
	}
	s.buf = append(s.buf, '}')
	s.stack = s.stack[:len(s.stack)-1]
	return true
}

func (s *stringifier) array(o *goja.Object) {
	n := o.Get("length").ToInteger() // an array's length: 0 .. 2^32-1
	if n <= 0 {
		s.buf = append(s.buf, "[]"...)
		return
	}
	s.buf = append(s.buf, '[')
	for i := range int(n) {
		if i > 0 {
			s.buf = append(s.buf, ',')
		}
		key := Index(i)
		if !s.str(key, o.Get(key)) {
			s.buf = append(s.buf, "null"...)
		}
	}
	s.buf = append(s.buf, ']')
}

// cleanKey: key (from Object.Keys) names the property exactly: valid UTF-8
// without U+FFFD (which may stand for a lone surrogate).
func cleanKey(key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			return utf8.ValidString(key) && !strings.ContainsRune(key, utf8.RuneError)
		}
	}
	return true
}

// quoteUTF16 writes a JS string as goja's stringify does (\" \\ \b \t \n
// \f \r, other controls as \u00xx, lone surrogates as \udxxx, the rest as
// UTF-8), reading it by UTF-16 unit: for strings whose Go form is not exact.
func (s *stringifier) quoteUTF16(str goja.String) {
	s.buf = append(s.buf, '"')
	n := str.Length()
	for i := 0; i < n; i++ {
		c := rune(str.CharAt(i))
		if utf16.IsSurrogate(c) {
			if c < 0xDC00 && i+1 < n {
				if c2 := rune(str.CharAt(i + 1)); c2 >= 0xDC00 && c2 <= 0xDFFF {
					s.buf = utf8.AppendRune(s.buf, utf16.DecodeRune(c, c2))
					i++
					continue
				}
			}
			s.buf = append(s.buf, '\\', 'u', hexDigits[c>>12], hexDigits[c>>8&0xF], hexDigits[c>>4&0xF], hexDigits[c&0xF])
			continue
		}
		s.char(c)
	}
	s.buf = append(s.buf, '"')
}

const hexDigits = "0123456789abcdef"

// plainASCII marks the bytes written as they are: printable ASCII but " and \.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// quoteUTF8 writes the Go form u of a JS string as goja's stringify writes
// the string, and reports true, when u is exact: valid UTF-8 without U+FFFD
// (the Go form of a JS string has U+FFFD for each lone surrogate). Else it
// writes nothing and reports false.
func (s *stringifier) quoteUTF8(u string) bool {
	mark := len(s.buf)
	s.buf = append(s.buf, '"')
	start := 0
	checked := false
	for i := 0; i < len(u); i++ {
		c := u[i]
		if c >= utf8.RuneSelf {
			if !checked {
				if !cleanKey(u[i:]) {
					s.buf = s.buf[:mark]
					return false
				}
				checked = true
			}
			continue
		}
		if plainASCII[c] {
			continue
		}
		s.buf = append(s.buf, u[start:i]...)
		s.char(rune(c))
		start = i + 1
	}
	s.buf = append(s.buf, u[start:]...)
	s.buf = append(s.buf, '"')
	return true
}

// char writes one character that is not a surrogate.
func (s *stringifier) char(c rune) {
	switch c {
	case '"', '\\':
		s.buf = append(s.buf, '\\', byte(c))
	case '\b':
		s.buf = append(s.buf, '\\', 'b')
	case '\t':
		s.buf = append(s.buf, '\\', 't')
	case '\n':
		s.buf = append(s.buf, '\\', 'n')
	case '\f':
		s.buf = append(s.buf, '\\', 'f')
	case '\r':
		s.buf = append(s.buf, '\\', 'r')
	default:
		if c < 0x20 {
			s.buf = append(s.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		} else {
			s.buf = utf8.AppendRune(s.buf, c)
		}
	}
}

// delegation is one call of goja's stringify on behalf of the native walk.
type delegation struct {
	first   goja.Value     // what the replacer returns for the root
	started bool           // the root was returned
	stack   []*goja.Object // the native walk's objects around it
}

// delegate has goja's stringify write v, the value of property key, where
// the native walk met it: before its toJSON lookup (beforeToJSON: v is
// wrapped as the only property key of a null-prototype object, so goja
// reads it, looks up toJSON and calls it with key as its own walk would) or
// after (v is what a toJSON returned, or an object to write as it is).
//
// goja's stringify is called on null with a replacer (j.replace) that
// returns the wrapper or v for the root and, for every value below, checks
// it against the native walk's stack of open objects, as goja's own cycle
// check would at that point, and returns it unchanged. What a replacer sees
// and when is exactly when goja's walk would check for a cycle (after
// toJSON), and the replacer itself is invisible to scripts, so the result,
// errors and side effects are those of one goja walk over the whole value.
func (s *stringifier) delegate(key string, v goja.Value, beforeToJSON bool) bool {
	j := s.j
	first := v
	if beforeToJSON {
		w := j.rt.CreateObject(nil)
		if err := w.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			panic(err)
		}
		first = w
	} else if o, ok := v.(*goja.Object); ok {
		for _, a := range s.stack {
			if a == o {
				panic(j.rt.NewTypeError("Converting circular structure to JSON"))
			}
		}
	}
	j.delegations = append(j.delegations, delegation{first: first, stack: s.stack})
	defer func() {
		j.delegations[len(j.delegations)-1] = delegation{}
		j.delegations = j.delegations[:len(j.delegations)-1]
	}()
	if j.replacer == nil {
		j.replacer = j.rt.ToValue(j.replace)
	}
	out := j.origStringify(goja.FunctionCall{This: goja.Undefined(), Arguments: []goja.Value{goja.Null(), j.replacer}})
	if goja.IsUndefined(out) {
		return false
	}
	text := out.String()
	if beforeToJSON {
		// {"key":text} or {}.
		if text == "{}" {
			return false
		}
		mark := len(s.buf)
		s.buf = append(s.buf, '{')
		s.quoteUTF8(key)
		s.buf = append(s.buf, ':')
		prefix := string(s.buf[mark:])
		s.buf = s.buf[:mark]
		if !strings.HasPrefix(text, prefix) || !strings.HasSuffix(text, "}") {
			panic(fmt.Errorf("nativejson: JSON.stringify: unexpected delegated output %q for key %q", text, key))
		}
		text = text[len(prefix) : len(text)-1]
	}
	s.buf = append(s.buf, text...)
	return true
}

// replace is the replacer of delegations (see delegate).
func (j *nativeJSON) replace(call goja.FunctionCall) goja.Value {
	d := &j.delegations[len(j.delegations)-1]
	if !d.started {
		d.started = true
		return d.first
	}
	v := call.Argument(1)
	if o, ok := v.(*goja.Object); ok {
		for _, a := range d.stack {
			if a == o {
				panic(j.rt.NewTypeError("Converting circular structure to JSON"))
			}
		}
	}
	return v
}

// Index returns the property name of array index i, as goja's Get expects
// it; the common ones (below 4096) are made once. The native stringify reads
// arrays with it, and jsbridge's walk of runInference's object argument
// shares it.
func Index(i int) string {
	if i < len(indexNames) {
		return indexNames[i]
	}
	return strconv.Itoa(i)
}

var indexNames = func() []string {
	s := make([]string, 4096)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()
