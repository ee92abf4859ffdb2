package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/tensor"
)

// Parse parses B&A batch JSON {"request":[...]} with gjson. The returned error is a whole-batch error
// (not JSON, no "request" array, too many entries): typed INPUT_PARSING.
//
// Everything wrong inside one entry (missing or mistyped field, unknown dtype, bad shape, content
// count mismatch, unparsable or out-of-range number) is that entry's Err, typed INPUT_PARSING, and
// the other entries are still returned. Parse never retains data (every string in the result is a
// copy), but data must not change while Parse runs.
//
// Numbers in tensor_content may be quoted strings (the reference's format, surrounding ASCII
// whitespace allowed as absl::SimpleAtoi/SimpleAtof allow it) or plain JSON numbers. Integers are
// parsed exactly from their text (never through float64) and range-checked for their dtype; floats
// are parsed with strconv.ParseFloat at the dtype's precision. Deliberate differences from the
// reference: NaN, Inf and values that overflow the dtype are rejected (JSON cannot carry them back
// out, and a non-finite output fails the whole batch), and a field given twice in one object is an
// error rather than "first one wins".
func Parse(data []byte, lim Limits) ([]Entry, error) {
	lim = lim.WithDefaults()
	if err := validate(data, inferr.InputParsing, "batch request"); err != nil {
		return nil, err
	}
	p := newRequestParser(lim)
	if entries, ok, err := p.requestFast(bytesView(data)); ok {
		return entries, err
	}
	slow := newRequestParser(lim)
	return slow.requestValidated(data)
}

// ParseString is Parse for batch JSON held in a string (runInference's
// argument): it reads s where it stands instead of copying it into a
// []byte first. Parse only reads its input and keeps none of it.
func ParseString(s string, lim Limits) ([]Entry, error) {
	return Parse(unsafe.Slice(unsafe.StringData(s), len(s)), lim)
}

func newRequestParser(lim Limits) parser {
	return parser{lim: lim, section: "request", typ: inferr.InputParsing, minDim: 1}
}

// requestSlow is Parse through gjson's ForEach at every level: the
// reference behaviour, used when requestFast meets anything unusual (it
// also words every whole-batch error).
func (p *parser) requestSlow(data []byte) ([]Entry, error) {
	if err := validate(data, p.typ, "batch request"); err != nil {
		return nil, err
	}
	return p.requestValidated(data)
}

// requestValidated is requestSlow for data that validate has accepted
// (Parse validates once, before trying the fast path).
func (p *parser) requestValidated(data []byte) ([]Entry, error) {
	req, err := findTopLevelArray(data, "request", p.typ, "batch request")
	if err != nil {
		return nil, err
	}
	var entries []Entry
	tooMany := false
	req.ForEach(func(_, v gjson.Result) bool {
		if len(entries) >= p.lim.MaxEntries {
			tooMany = true
			return false
		}
		entries = append(entries, p.entry(len(entries), v))
		return true
	})
	if tooMany {
		return nil, p.tooManyEntries()
	}
	if entries == nil {
		entries = []Entry{}
	}
	return entries, nil
}

func (p *parser) tooManyEntries() error {
	return inferr.Errorf(inferr.InputParsing, "batch request: the request array has more than %d entries", p.lim.MaxEntries)
}

// bytesView returns data as a string without copying. Strings cut from it
// are cloned before they are kept (see parser.keep).
func bytesView(data []byte) string {
	return unsafe.String(unsafe.SliceData(data), len(data))
}

// topLevelArray validates data and returns the array under key of its
// top-level object; every failure is a whole-document error of type typ.
func topLevelArray(data []byte, key string, typ inferr.Type, what string) (gjson.Result, error) {
	if err := validate(data, typ, what); err != nil {
		return gjson.Result{}, err
	}
	return findTopLevelArray(data, key, typ, what)
}

// findTopLevelArray is topLevelArray for data that validate has accepted.
func findTopLevelArray(data []byte, key string, typ inferr.Type, what string) (gjson.Result, error) {
	doc := gjson.Parse(bytesView(data))
	if !doc.IsObject() {
		return gjson.Result{}, inferr.Errorf(typ, "%s is %s, want an object with a %q array", what, describe(doc), key)
	}
	var arr gjson.Result
	dup := false
	doc.ForEach(func(k, v gjson.Result) bool {
		if k.Str != key {
			return true
		}
		if arr.Exists() {
			dup = true
			return false
		}
		arr = v
		return true
	})
	switch {
	case dup:
		return gjson.Result{}, inferr.Errorf(typ, "%s has the field %q more than once", what, key)
	case !arr.Exists():
		return gjson.Result{}, inferr.Errorf(typ, "%s has no %q field, want an array", what, key)
	case !arr.IsArray():
		return gjson.Result{}, inferr.Errorf(typ, "%s: %q is %s, want an array", what, key, describe(arr))
	}
	return arr, nil
}

// validate checks that data is JSON (gjson.ValidBytes) nested at most
// MaxDepth deep; the depth is checked first because gjson's validator
// recurses.
func validate(data []byte, typ inferr.Type, what string) error {
	if d := maxNesting(data); d > MaxDepth {
		return inferr.Errorf(typ, "%s: JSON nests deeper than %d levels", what, MaxDepth)
	}
	if !gjson.ValidBytes(data) {
		return inferr.Errorf(typ, "%s is not valid JSON%s (%d bytes, starting %q)", what, syntaxHint(data), len(data), inferr.ClipN(bytesView(data), 40))
	}
	return nil
}

// syntaxHint says where the JSON syntax error is, with encoding/json's
// wording; it runs only for documents already known to be invalid.
func syntaxHint(data []byte) string {
	var v json.RawMessage
	var se *json.SyntaxError
	if err := json.Unmarshal(data, &v); errors.As(err, &se) {
		return fmt.Sprintf(": %s at byte %d", se.Error(), se.Offset)
	}
	return ""
}

// maxNesting returns the deepest nesting of arrays and objects in data, or a
// cheap upper bound of it when that bound is already small: bytes.Count is
// vectorised, so well-formed batches skip the byte-by-byte scan.
func maxNesting(data []byte) int {
	if len(data) <= MaxDepth || bytes.Count(data, []byte{'['})+bytes.Count(data, []byte{'{'}) <= MaxDepth {
		return 0
	}
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > MaxDepth {
					return deepest
				}
			}
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// parser holds what Parse reuses across entries: slabs that many small
// slices are cut from, and the previous entry's strings, which the next entry
// usually repeats (same model, same tensor names).
type parser struct {
	lim         Limits
	section     string      // "request" or "response", for descriptions
	typ         inferr.Type // the type of every error found
	minDim      int64       // 1 for requests; 0 for responses (runtimes may return empty outputs)
	shapeSlab   []int64
	tensorSlab  []tensor.Tensor
	stringSlab  []byte
	lastPath    string
	prevTensors []tensor.Tensor
}

// loc names the place of a fault for error descriptions.
type loc struct {
	section string
	typ     inferr.Type
	entry   int
	path    string // "" before model_path is known
	tensor  int    // -1 outside tensors
	name    string
	named   bool
}

func (l *loc) errorf(format string, args ...any) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s[%d]", l.section, l.entry)
	if l.path != "" {
		fmt.Fprintf(&b, " (model_path %q)", inferr.ClipN(l.path, 120))
	}
	if l.tensor >= 0 {
		fmt.Fprintf(&b, ": tensors[%d]", l.tensor)
		if l.named {
			fmt.Fprintf(&b, " (tensor_name %q)", inferr.ClipN(l.name, 120))
		}
	}
	b.WriteString(": ")
	fmt.Fprintf(&b, format, args...)
	return &inferr.Error{Type: l.typ, Msg: b.String()}
}

// The fields each object level reads, in pickFields' slot order.
var (
	entryFields  = []string{"model_path", "tensors"}
	tensorFields = []string{"tensor_name", "data_type", "tensor_shape", "tensor_content"}
	resultFields = []string{"model_path", "tensors", "error"}
)

// pickFields walks object v once, storing the value of keys[i] in slots[i]
// and ignoring other keys. It returns the first key given twice: parsers
// disagree on which copy wins, so a duplicate is an error to the caller.
func pickFields(v gjson.Result, keys []string, slots ...*gjson.Result) (dup string) {
	v.ForEach(func(k, val gjson.Result) bool {
		i := slices.Index(keys, k.Str)
		if i < 0 {
			return true
		}
		if slots[i].Exists() {
			dup = k.Str
			return false
		}
		*slots[i] = val
		return true
	})
	return dup
}

func (p *parser) entry(idx int, v gjson.Result) Entry {
	at := loc{section: p.section, typ: p.typ, entry: idx, tensor: -1}
	if !v.IsObject() {
		return Entry{Err: at.errorf("entry is %s, want an object with model_path and tensors", describe(v))}
	}
	var path, tensors gjson.Result
	dup := pickFields(v, entryFields, &path, &tensors)
	switch {
	case !path.Exists():
		return Entry{Err: at.errorf("missing model_path")}
	case path.Type != gjson.String:
		return Entry{Err: at.errorf("model_path is %s, want a string", describe(path))}
	case !utf8.ValidString(path.Str):
		mp := strings.ToValidUTF8(path.Str, "\uFFFD")
		at.path = mp
		return Entry{ModelPath: mp, Err: at.errorf("model_path is not valid UTF-8")}
	}
	e := Entry{ModelPath: p.keepPath(path)}
	at.path = e.ModelPath
	switch {
	case dup != "":
		e.Err = at.errorf("field %q appears more than once", dup)
	case !tensors.Exists():
		e.Err = at.errorf("missing tensors")
	case !tensors.IsArray():
		e.Err = at.errorf("tensors is %s, want an array", describe(tensors))
	}
	if e.Err != nil {
		return e
	}
	start := len(p.tensorSlab)
	tensors.ForEach(func(_, tv gjson.Result) bool {
		at.tensor = len(p.tensorSlab) - start
		if at.tensor >= p.lim.MaxTensors {
			e.Err = at.errorf("more than %d tensors", p.lim.MaxTensors)
			return false
		}
		var t tensor.Tensor
		t, e.Err = p.tensor(&at, tv)
		if e.Err != nil {
			return false
		}
		start = p.pushTensor(start, t)
		return true
	})
	if e.Err != nil {
		p.tensorSlab = p.tensorSlab[:start]
		return e
	}
	e.Tensors = p.entryTensors(start)
	p.prevTensors = e.Tensors
	return e
}

// pushTensor appends t to the tensor slab, where the current entry's
// tensors begin at start, and returns where they begin afterwards. Entries
// share slabs, so a batch costs few allocations for its tensor slices; a full
// slab is replaced, never grown, because earlier entries point into it.
func (p *parser) pushTensor(start int, t tensor.Tensor) int {
	if len(p.tensorSlab) == cap(p.tensorSlab) {
		partial := p.tensorSlab[start:]
		slab := make([]tensor.Tensor, 0, max(2*cap(p.tensorSlab), 2*len(partial), 2))
		p.tensorSlab = append(slab, partial...)
		start = 0
	}
	p.tensorSlab = append(p.tensorSlab, t)
	return start
}

// entryTensors returns the current entry's tensors, which begin at start in
// the slab; an entry without tensors gets an empty, non-nil slice.
func (p *parser) entryTensors(start int) []tensor.Tensor {
	end := len(p.tensorSlab)
	if start == end {
		return []tensor.Tensor{}
	}
	return p.tensorSlab[start:end:end]
}

// keepPath returns the model path as a string that does not alias the input,
// reusing the previous entry's string when it is the same path.
func (p *parser) keepPath(r gjson.Result) string {
	if r.Str == p.lastPath && p.lastPath != "" {
		return p.lastPath
	}
	p.lastPath = p.keep(r)
	return p.lastPath
}

// keep returns r.Str as a string that does not alias the input: the model
// paths and tensor names of a batch share one slab. gjson unescapes escaped
// strings into a fresh string already.
func (p *parser) keep(r gjson.Result) string {
	s := r.Str
	if strings.IndexByte(r.Raw, '\\') >= 0 || s == "" {
		return s
	}
	if cap(p.stringSlab)-len(p.stringSlab) < len(s) {
		// A new slab, never a grown one: strings already cut from the old
		// slab must keep their bytes.
		p.stringSlab = make([]byte, 0, max(len(s), 2*cap(p.stringSlab), 64))
	}
	start := len(p.stringSlab)
	p.stringSlab = append(p.stringSlab, s...)
	return unsafe.String(&p.stringSlab[start], len(s))
}

func (p *parser) tensor(at *loc, v gjson.Result) (tensor.Tensor, error) {
	if !v.IsObject() {
		return tensor.Tensor{}, at.errorf("tensor is %s, want an object", describe(v))
	}
	var name, dtype, shape, content gjson.Result
	dup := pickFields(v, tensorFields, &name, &dtype, &shape, &content)
	at.name, at.named = "", false
	var t tensor.Tensor
	if name.Exists() {
		if name.Type != gjson.String {
			return t, at.errorf("tensor_name is %s, want a string", describe(name))
		}
		at.name, at.named = name.Str, true
		if !utf8.ValidString(name.Str) {
			return t, at.errorf("tensor_name %q is not valid UTF-8", inferr.ClipN(name.Str, 120))
		}
	}
	if dup != "" {
		return t, at.errorf("field %q appears more than once", dup)
	}
	if !dtype.Exists() {
		return t, at.errorf("missing data_type")
	}
	if dtype.Type != gjson.String {
		return t, at.errorf("data_type is %s, want one of DOUBLE, FLOAT, INT8, INT16, INT32, INT64", describe(dtype))
	}
	dt, ok := tensor.ParseDType(dtype.Str)
	if !ok {
		return t, at.errorf("data_type %q is not one of DOUBLE, FLOAT, INT8, INT16, INT32, INT64", inferr.ClipN(dtype.Str, 40))
	}
	if !shape.Exists() {
		return t, at.errorf("missing tensor_shape")
	}
	if !shape.IsArray() {
		return t, at.errorf("tensor_shape is %s, want an array of integers >= 1", describe(shape))
	}
	var dims [MaxRank]int64
	rank, n, err := parseShape(at, shape.Raw, &dims, p.minDim, p.lim.MaxElements)
	if err != nil {
		return t, err
	}
	if !content.Exists() {
		return t, at.errorf("missing tensor_content")
	}
	if !content.IsArray() {
		return t, at.errorf("tensor_content is %s, want an array of numbers", describe(content))
	}
	// Every value takes at least two bytes ("1,"), so a shape larger than
	// the text could hold is a count mismatch, found without allocating.
	if n > int64(len(content.Raw)-1)/2 {
		return t, at.errorf("tensor_shape %s needs %d values, tensor_content has %d", tensor.FormatShape(dims[:rank]), n, content.Get("#").Int())
	}
	data, err := parseContent(at, dt, int(n), content.Raw)
	if err != nil {
		if err == errCount {
			return t, at.errorf("tensor_shape %s needs %d values, tensor_content has %d", tensor.FormatShape(dims[:rank]), n, content.Get("#").Int())
		}
		return t, err
	}
	t.Data = data
	t.Shape = p.keepShape(dims[:rank])
	if at.named {
		t.Name = p.keepName(at.tensor, name)
	}
	return t, nil
}

// keepName reuses the previous entry's name at the same position when equal.
func (p *parser) keepName(i int, r gjson.Result) string {
	if i < len(p.prevTensors) && p.prevTensors[i].Name == r.Str {
		return p.prevTensors[i].Name
	}
	return p.keep(r)
}

// keepShape copies dims into the shape slab.
func (p *parser) keepShape(dims []int64) []int64 {
	n := len(dims)
	if n == 0 {
		return []int64{}
	}
	if cap(p.shapeSlab)-len(p.shapeSlab) < n {
		p.shapeSlab = make([]int64, 0, max(n, 2*cap(p.shapeSlab), 8))
	}
	start := len(p.shapeSlab)
	p.shapeSlab = append(p.shapeSlab, dims...)
	return p.shapeSlab[start : start+n : start+n]
}

// parseShape reads the dimensions of a tensor_shape array into dims and
// returns the rank and the element count, checked against maxElements before
// anything is allocated.
func parseShape(at *loc, raw string, dims *[MaxRank]int64, minDim, maxElements int64) (int, int64, error) {
	sc := arrayScan{s: raw, i: 1}
	rank := 0
	n := int64(1)
	for {
		tok, kind, ok := sc.next()
		if !ok {
			return rank, n, nil
		}
		if rank == MaxRank {
			return 0, 0, at.errorf("tensor_shape has more than %d dimensions", MaxRank)
		}
		if kind != kindNumber {
			return 0, 0, at.errorf("tensor_shape[%d] is %s, want an integer >= %d", rank, describeToken(tok, kind), minDim)
		}
		d, err := strconv.ParseInt(tok, 10, 64)
		switch {
		case err != nil && isRangeErr(err):
			return 0, 0, at.errorf("tensor_shape[%d] is %s: out of range", rank, inferr.ClipN(tok, 40))
		case err != nil:
			return 0, 0, at.errorf("tensor_shape[%d] is %s, want an integer >= %d", rank, inferr.ClipN(tok, 40), minDim)
		case d < minDim:
			return 0, 0, at.errorf("tensor_shape[%d] is %d, want an integer >= %d", rank, d, minDim)
		}
		dims[rank] = d
		rank++
		if d == 0 {
			n = 0
			continue
		}
		if n > maxElements/d {
			return 0, 0, at.errorf("tensor_shape %s has more than %d elements (the per-tensor limit)", shapeText(raw), maxElements)
		}
		n *= d
	}
}

func shapeText(raw string) string {
	return inferr.ClipN(strings.Join(strings.Fields(raw), ""), 80)
}

// errCount reports a value count that differs from the shape's element
// count; the caller words the description.
var errCount = fmt.Errorf("count mismatch")

func parseContent(at *loc, dt tensor.DType, n int, raw string) (any, error) {
	return scanContent(at, dt, n, &arrayScan{s: raw, i: 1})
}

// scanContent reads n values of type dt from sc, which must then be at the
// end of its array.
func scanContent(at *loc, dt tensor.DType, n int, sc *arrayScan) (any, error) {
	switch dt {
	case tensor.Double:
		d := make([]float64, n)
		return d, fillFloat(at, d, sc, 64)
	case tensor.Float:
		d := make([]float32, n)
		return d, fillFloat(at, d, sc, 32)
	case tensor.Int8:
		d := make([]int8, n)
		return d, fillInt(at, d, sc, 8)
	case tensor.Int16:
		d := make([]int16, n)
		return d, fillInt(at, d, sc, 16)
	case tensor.Int32:
		d := make([]int32, n)
		return d, fillInt(at, d, sc, 32)
	case tensor.Int64:
		d := make([]int64, n)
		return d, fillInt(at, d, sc, 64)
	}
	return nil, at.errorf("data_type %v is not supported", dt)
}

func fillFloat[T float32 | float64](at *loc, dst []T, sc *arrayScan, bits int) error {
	for i := range dst {
		tok, kind, ok := sc.next()
		if !ok {
			return errCount
		}
		v, problem := parseFloat(tok, kind, bits)
		if problem != "" {
			return at.errorf("tensor_content[%d] is %s: %s %s", i, describeToken(tok, kind), problem, dtypeName(bits, true))
		}
		dst[i] = T(v)
	}
	if _, _, more := sc.next(); more {
		return errCount
	}
	return nil
}

func fillInt[T int8 | int16 | int32 | int64](at *loc, dst []T, sc *arrayScan, bits int) error {
	for i := range dst {
		tok, kind, ok := sc.next()
		if !ok {
			return errCount
		}
		v, problem := parseInt(tok, kind, bits)
		if problem != "" {
			return at.errorf("tensor_content[%d] is %s: %s %s", i, describeToken(tok, kind), problem, dtypeName(bits, false))
		}
		dst[i] = T(v)
	}
	if _, _, more := sc.next(); more {
		return errCount
	}
	return nil
}

func dtypeName(bits int, float bool) string {
	switch {
	case float && bits == 32:
		return "FLOAT"
	case float:
		return "DOUBLE"
	}
	return "INT" + strconv.Itoa(bits)
}

// Problems, worded to follow "is VALUE: " and precede the dtype name.
const (
	notANumber   = "not a valid"
	notAnInteger = "not an integer, as required for"
	outOfRange   = "out of range for"
	notFinite    = "NaN and Inf are not accepted for"
	notNumeric   = "want a number or a numeric string for"
)

// parseFloat parses one content value for a FLOAT (bits 32) or DOUBLE (64)
// tensor; problem is "" on success.
func parseFloat(tok string, kind tokenKind, bits int) (float64, string) {
	switch kind {
	case kindNumber:
		// JSON number syntax (validated) is a subset of ParseFloat's.
		if v, ok := fastFloat(tok, bits); ok {
			return v, ""
		}
	case kindString, kindEscapedString:
		tok = trimASCIISpace(stringBody(tok, kind))
		if v, ok := fastFloat(tok, bits); ok {
			return v, ""
		}
		if !isDecimalFloat(tok) {
			if isNonFiniteName(tok) {
				return 0, notFinite
			}
			return 0, notANumber
		}
	default:
		return 0, notNumeric
	}
	v, err := strconv.ParseFloat(tok, bits)
	if err != nil {
		if isRangeErr(err) {
			return 0, outOfRange
		}
		return 0, notANumber
	}
	return v, ""
}

// parseInt parses one content value for an INTn tensor exactly from its
// text; problem is "" on success.
func parseInt(tok string, kind tokenKind, bits int) (int64, string) {
	switch kind {
	case kindNumber:
	case kindString, kindEscapedString:
		tok = trimASCIISpace(stringBody(tok, kind))
	default:
		return 0, notNumeric
	}
	if v, ok := fastInt(tok, bits); ok {
		return v, ""
	}
	v, err := strconv.ParseInt(tok, 10, bits)
	if err != nil {
		switch {
		case isRangeErr(err):
			return 0, outOfRange
		case isDecimalFloat(tok):
			return 0, notAnInteger
		}
		return 0, notANumber
	}
	return v, ""
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isDecimalFloat reports whether s is [+-]digits[.digits][(e|E)[+-]digits]
// (either digit run may be empty, not both). It rules out what
// strconv.ParseFloat accepts beyond decimal numbers: hex floats, digit
// underscores, NaN and Inf.
func isDecimalFloat(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && isDigit(s[i]) {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

func isNonFiniteName(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	return strings.EqualFold(s, "nan") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity")
}

// trimASCIISpace strips what absl::StripAsciiWhitespace strips.
func trimASCIISpace(s string) string {
	for s != "" && isSpace(s[0]) {
		s = s[1:]
	}
	for s != "" && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

type tokenKind uint8

const (
	kindNumber        tokenKind = iota + 1
	kindString                  // tok is the body between the quotes
	kindEscapedString           // tok is the quoted JSON string, with escapes
	kindOther                   // tok is the raw value (object, array, literal)
)

// arrayScan walks the elements of the raw text of a JSON array that gjson
// has validated. It is the hot loop of Parse: no allocation, no float
// conversion of tokens it does not need (gjson's ForEach does both).
type arrayScan struct {
	s string
	i int
}

// next returns the next element, or ok false at the end of the array.
func (a *arrayScan) next() (tok string, kind tokenKind, ok bool) {
	s, i := a.s, a.i
	for i < len(s) && (s[i] == ',' || s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
		i++
	}
	if i >= len(s) || s[i] == ']' {
		a.i = i
		return "", 0, false
	}
	switch c := s[i]; {
	case c == '"':
		j := i + 1
		escaped := false
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				escaped = true
				j++
			}
			j++
		}
		j = min(j, len(s)-1)
		a.i = j + 1
		if escaped {
			return s[i : j+1], kindEscapedString, true
		}
		return s[i+1 : j], kindString, true
	case c == '-' || isDigit(c):
		j := i + 1
		for j < len(s) && s[j] != ',' && s[j] != ']' && s[j] != ' ' && s[j] != '\n' && s[j] != '\t' && s[j] != '\r' {
			j++
		}
		a.i = j
		return s[i:j], kindNumber, true
	default:
		// An object, array or literal: the caller rejects it, so the scan
		// ends here.
		a.i = len(s)
		return gjson.Parse(s[i:]).Raw, kindOther, true
	}
}

// stringBody returns the characters of a string token.
func stringBody(tok string, kind tokenKind) string {
	if kind == kindEscapedString {
		return gjson.Parse(tok).Str
	}
	return tok
}

// describeToken prints an offending content value for a description.
func describeToken(tok string, kind tokenKind) string {
	switch kind {
	case kindString, kindEscapedString:
		return strconv.Quote(inferr.ClipN(stringBody(tok, kind), 40))
	case kindOther:
		return describe(gjson.Parse(tok))
	}
	return inferr.ClipN(tok, 40)
}

// describe names the JSON kind of r and shows a short excerpt of it.
func describe(r gjson.Result) string {
	switch {
	case !r.Exists():
		return "missing"
	case r.Type == gjson.String:
		return "the string " + strconv.Quote(inferr.ClipN(r.Str, 40))
	case r.Type == gjson.Number:
		return "the number " + inferr.ClipN(r.Raw, 40)
	case r.Type == gjson.True || r.Type == gjson.False:
		return "the boolean " + r.Raw
	case r.Type == gjson.Null:
		return "null"
	case r.IsArray():
		return "an array " + inferr.ClipN(r.Raw, 40)
	}
	return "an object " + inferr.ClipN(r.Raw, 40)
}
