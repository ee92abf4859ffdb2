package nativejson

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// parse is JSON.parse. A primitive string without a reviver is parsed here;
// anything else is converted to a string exactly as goja's parse converts it
// and handed to goja's parse (a reviver needs its walk; a Symbol throws
// there), after a check of the nesting depth, so that no input can take
// goja's unbounded recursion down.
func (j *nativeJSON) parse(call goja.FunctionCall) goja.Value {
	arg := call.Argument(0)
	var text string
	switch a := arg.(type) {
	case goja.String:
		text = a.String()
	case *goja.Symbol:
		return j.origParse(call) // throws: a Symbol has no string
	case *goja.Object:
		// goja's parse: ToPrimitive (hint string), then ToString, which
		// throws for a Symbol.
		p := a.ToString()
		if _, isSym := p.(*goja.Symbol); isSym {
			panic(j.rt.NewTypeError("Cannot convert a Symbol value to a string"))
		}
		text = p.String()
	default:
		text = arg.String() // undefined, null, booleans, numbers, BigInts
	}
	if len(call.Arguments) > 1 && !goja.IsUndefined(call.Arguments[1]) {
		// goja's parse takes any defined second argument through
		// ToObject (so null throws) and calls it when callable.
		if pos, deep := tooDeep(text); deep {
			j.tooDeepError(text, pos)
		}
		args := make([]goja.Value, len(call.Arguments))
		copy(args, call.Arguments)
		if _, isStr := arg.(goja.String); !isStr {
			args[0] = j.rt.ToValue(text)
		}
		return j.origParse(goja.FunctionCall{This: call.This, Arguments: args})
	}
	return j.parseText(text)
}

// parseText parses JSON text into JS values as goja's JSON.parse does.
func (j *nativeJSON) parseText(text string) goja.Value {
	// Scratch memory shared with other runtimes (no JS runs during a
	// parse, and a nested parse would take its own).
	sc := getScratch()
	p := jsonParser{j: j, s: text, items: sc.items[:0]}
	defer func() {
		sc.items = p.items
		putScratch(sc)
	}()
	v := p.value()
	p.ws()
	if p.pos < len(p.s) {
		p.fail("Unexpected non-whitespace character after JSON")
	}
	return v
}

// jsonParser reads JSON exactly as goja's JSON.parse (encoding/json's
// Decoder.Token) does, the standard grammar (RFC 8259):
//   - numbers through strconv.ParseFloat into the same JS values (an integer
//     of up to 15 digits is made directly); a number ParseFloat reports out
//     of range (1e400) is a SyntaxError, as in goja;
//   - strings unescaped as encoding/json does: a \u escape of a lone
//     surrogate becomes U+FFFD, as does each byte of invalid UTF-8;
//   - objects built with CreateDataProperty semantics (a repeated key keeps
//     its first position and takes the last value; "__proto__" is an own
//     property).
type jsonParser struct {
	j     *nativeJSON
	s     string
	pos   int
	depth int
	items []any // elements of the arrays being read, innermost last
}

func (p *jsonParser) ws() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() goja.Value {
	p.ws()
	if p.pos >= len(p.s) {
		p.fail("")
	}
	switch c := p.s[p.pos]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		return p.j.rt.ToValue(p.str())
	case 't':
		p.literal("true")
		return p.j.valTrue
	case 'f':
		p.literal("false")
		return p.j.valFalse
	case 'n':
		p.literal("null")
		return goja.Null()
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return p.number()
		}
		p.fail("")
	}
	panic("unreachable")
}

func (p *jsonParser) literal(word string) {
	for i := 0; i < len(word); i++ {
		if p.pos >= len(p.s) || p.s[p.pos] != word[i] {
			p.fail("")
		}
		p.pos++
	}
}

func (p *jsonParser) enter() {
	p.depth++
	if p.depth > MaxDepth {
		p.j.tooDeepError(p.s, p.pos)
	}
}

func (p *jsonParser) object() goja.Value {
	p.enter()
	p.pos++ // {
	obj := p.j.rt.NewObject()
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] == '}' {
		p.pos++
		p.depth--
		return obj
	}
	for {
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != '"' {
			p.fail("")
		}
		key := p.str()
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			p.fail("")
		}
		p.pos++
		v := p.value()
		// CreateDataProperty: never a setter, never the prototype.
		if err := obj.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			panic(err)
		}
		p.ws()
		if p.pos < len(p.s) {
			switch p.s[p.pos] {
			case ',':
				p.pos++
				continue
			case '}':
				p.pos++
				p.depth--
				return obj
			}
		}
		p.fail("")
	}
}

func (p *jsonParser) array() goja.Value {
	p.enter()
	p.pos++ // [
	base := len(p.items)
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] == ']' {
		p.pos++
		p.depth--
		return p.j.rt.NewArray()
	}
	for {
		p.items = append(p.items, p.value())
		p.ws()
		if p.pos < len(p.s) {
			switch p.s[p.pos] {
			case ',':
				p.pos++
				continue
			case ']':
				p.pos++
				p.depth--
				arr := p.j.rt.NewArray(p.items[base:]...)
				clear(p.items[base:])
				p.items = p.items[:base]
				return arr
			}
		}
		p.fail("")
	}
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? .
func (p *jsonParser) number() goja.Value {
	s := p.s
	start := p.pos
	i := start
	neg := s[i] == '-'
	if neg {
		i++
	}
	digitsStart := i
	var mant int64
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			mant = mant*10 + int64(s[i]-'0') // wraps past 18 digits: unused then
			i++
		}
	default:
		p.pos = i
		p.fail("")
	}
	intDigits := i - digitsStart
	simple := true
	if i < len(s) && s[i] == '.' {
		simple = false
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			p.pos = i
			p.fail("")
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		simple = false
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			p.pos = i
			p.fail("")
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	p.pos = i
	// Up to 15 digits an integer is exact as a float64 and below 2^53, so
	// it is the valueInt that goja makes from ParseFloat's result; -0 is
	// a float.
	if simple && intDigits <= 15 && !(neg && mant == 0) {
		if neg {
			mant = -mant
		}
		return p.j.rt.ToValue(mant)
	}
	f, err := strconv.ParseFloat(s[start:i], 64)
	if err != nil {
		// goja's parse: encoding/json refuses the number (1e400).
		p.pos = start
		p.failf("Number %s out of range in JSON at position %d", s[start:i], p.position())
	}
	return p.j.rt.ToValue(f)
}

// str reads a string at p.pos (a '"'). Without escapes or invalid UTF-8
// the result is a substring of the text, no copy.
func (p *jsonParser) str() string {
	s := p.s
	start := p.pos + 1
	for i := start; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return s[start:i]
		case c == '\\' || c < 0x20:
			return p.strSlow(start, i)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return p.strSlow(start, i)
			}
			i += size
		}
	}
	p.pos = len(s)
	p.fail("Unterminated string in JSON")
	return ""
}

// jsonEscapes maps the character after a backslash to what it stands for
// (0: not a one-character escape).
var jsonEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// strSlow unescapes the string that starts at start, from i on, exactly as
// encoding/json's unquote.
func (p *jsonParser) strSlow(start, i int) string {
	s := p.s
	b := make([]byte, 0, len(s[start:i])+16)
	b = append(b, s[start:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return string(b)
		case c == '\\':
			if i+1 >= len(s) {
				p.pos = len(s)
				p.fail("Unterminated string in JSON")
			}
			switch e := s[i+1]; {
			case jsonEscapes[e] != 0:
				b = append(b, jsonEscapes[e])
				i += 2
			case e == 'u':
				r := hex4(s, i+2)
				if r < 0 {
					p.pos = i
					p.fail("Bad Unicode escape in JSON")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A pair when a low surrogate escape follows;
					// otherwise U+FFFD for this one alone.
					r2 := rune(-1)
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2 = hex4(s, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				p.pos = i
				p.fail("Bad escaped character in JSON")
			}
		case c < 0x20:
			p.pos = i
			p.fail("Bad control character in string literal in JSON")
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			// Invalid UTF-8: U+FFFD for each bad byte.
			r, size := utf8.DecodeRuneInString(s[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	p.pos = len(s)
	p.fail("Unterminated string in JSON")
	return ""
}

// hex4 reads 4 hex digits at s[i:], or returns -1.
func hex4(s string, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// position is p.pos counted in UTF-16 units, as JS counts string indexes.
func (p *jsonParser) position() int { return utf16Offset(p.s, p.pos) }

func utf16Offset(s string, byteOff int) int {
	n := 0
	for _, r := range s[:byteOff] {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// fail throws a SyntaxError at p.pos: msg, or by default the unexpected
// character (or the end of the input).
func (p *jsonParser) fail(msg string) {
	switch {
	case msg != "":
		p.failf("%s at position %d", msg, p.position())
	case p.pos >= len(p.s):
		p.failf("Unexpected end of JSON input")
	default:
		r, _ := utf8.DecodeRuneInString(p.s[p.pos:])
		p.failf("Unexpected token %s in JSON at position %d", strconv.QuoteRune(r), p.position())
	}
}

func (p *jsonParser) failf(format string, args ...any) {
	p.j.syntaxError(fmt.Sprintf(format, args...))
}

func (j *nativeJSON) tooDeepError(s string, pos int) {
	j.syntaxError(fmt.Sprintf("JSON nested deeper than %d levels at position %d", MaxDepth, utf16Offset(s, pos)))
}

// tooDeep reports whether the arrays and objects of JSON text s nest deeper
// than MaxDepth, and where, without parsing it (strings are skipped).
func tooDeep(s string) (int, bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '{':
			if depth++; depth > MaxDepth {
				return i, true
			}
		case ']', '}':
			depth--
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
	}
	return 0, false
}
