package nativejson

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/dop251/goja"
)

// maxCallStackSize is jsbridge.DefaultMaxCallStackSize, the call stack the
// pool's runtimes get (this package cannot import jsbridge, which imports
// it).
const maxCallStackSize = 2048

// jsonPair is two runtimes built alike: orig with goja's JSON, native with
// install. In native, __origParse is goja's JSON.parse.
type jsonPair struct {
	orig, native           *goja.Runtime
	origCanon, nativeCanon *canon
}

func newJSONPair(t testing.TB) jsonPair {
	t.Helper()
	p := jsonPair{orig: goja.New(), native: goja.New()}
	p.orig.SetMaxCallStackSize(maxCallStackSize)
	p.native.SetMaxCallStackSize(maxCallStackSize)
	origParse := p.native.Get("JSON").ToObject(p.native).Get("parse")
	if _, err := install(p.native); err != nil {
		t.Fatal(err)
	}
	if err := p.native.Set("__origParse", origParse); err != nil {
		t.Fatal(err)
	}
	if err := p.orig.Set("__origParse", p.orig.Get("JSON").ToObject(p.orig).Get("parse")); err != nil {
		t.Fatal(err)
	}
	p.origCanon, p.nativeCanon = newCanon(t, p.orig), newCanon(t, p.native)
	return p
}

// callJSON calls JSON[method](args...) of rt, args made by mk.
func callJSON(rt *goja.Runtime, method string, args ...goja.Value) (goja.Value, error) {
	f, ok := goja.AssertFunction(rt.Get("JSON").ToObject(rt).Get(method))
	if !ok {
		return nil, fmt.Errorf("JSON.%s is not a function", method)
	}
	return f(goja.Undefined(), args...)
}

// errorName is "Name" of the error a call threw ("" when it threw something
// that is not an Error of rt), checked against rt's own constructor.
func errorName(rt *goja.Runtime, err error) string {
	ex, ok := err.(*goja.Exception)
	if !ok {
		return fmt.Sprintf("non-exception %T", err)
	}
	o, ok := ex.Value().(*goja.Object)
	if !ok {
		return ""
	}
	name := o.Get("name").String()
	ctor, ok := rt.Get(name).(*goja.Object)
	if !ok || !rt.InstanceOf(o, ctor) {
		return ""
	}
	return name
}

// canon describes a JS value completely and deterministically: types
// (goja's int and float numbers apart, -0), strings by UTF-16 unit, objects
// with class, prototype, extensibility and every own property with its
// attributes, in order.
type canon struct {
	rt                 *goja.Runtime
	objProto, arrProto *goja.Object
	desc               goja.Callable
	b                  strings.Builder
}

func newCanon(t testing.TB, rt *goja.Runtime) *canon {
	t.Helper()
	c := &canon{rt: rt}
	c.objProto = rt.Get("Object").ToObject(rt).Get("prototype").ToObject(rt)
	c.arrProto = rt.Get("Array").ToObject(rt).Get("prototype").ToObject(rt)
	d, err := rt.RunString(`(function (o, k) {
		if (k === undefined) return Object.isExtensible(o) ? "ext" : "sealed";
		var d = Object.getOwnPropertyDescriptor(o, k);
		return (d.writable ? "w" : "-") + (d.enumerable ? "e" : "-") + (d.configurable ? "c" : "-") + ("get" in d ? "a" : "d");
	})`)
	if err != nil {
		t.Fatal(err)
	}
	c.desc, _ = goja.AssertFunction(d)
	return c
}

func (c *canon) String(v goja.Value) string {
	c.b.Reset()
	c.value(v)
	return c.b.String()
}

func (c *canon) value(v goja.Value) {
	b := &c.b
	switch x := v.(type) {
	case nil:
		b.WriteString("<nil>")
		return
	case goja.String:
		b.WriteString(`s"`)
		for i := range x.Length() {
			ch := x.CharAt(i)
			if ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' {
				b.WriteByte(byte(ch))
			} else {
				fmt.Fprintf(b, `\u%04x`, ch)
			}
		}
		b.WriteByte('"')
		return
	case *goja.Object:
		c.object(x)
		return
	}
	switch {
	case goja.IsUndefined(v):
		b.WriteString("undefined")
	case goja.IsNull(v):
		b.WriteString("null")
	default:
		switch t := v.ExportType(); {
		case t == nil:
			fmt.Fprintf(b, "other(%T %s)", v, v.String())
		case t.Kind() == reflect.Int64:
			fmt.Fprintf(b, "int(%d)", v.ToInteger())
		case t.Kind() == reflect.Float64:
			fmt.Fprintf(b, "float(%v %#x)", v.ToFloat(), math.Float64bits(v.ToFloat()))
		case t.Kind() == reflect.Bool:
			fmt.Fprintf(b, "bool(%v)", v.ToBoolean())
		default:
			fmt.Fprintf(b, "other(%T %s)", v, v.String())
		}
	}
}

func (c *canon) object(o *goja.Object) {
	b := &c.b
	proto := "other"
	switch p := o.Prototype(); {
	case p == nil:
		proto = "null"
	case p == c.objProto:
		proto = "Object.prototype"
	case p == c.arrProto:
		proto = "Array.prototype"
	}
	ext, err := c.desc(goja.Undefined(), o)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(b, "%s(%s %s %v){", o.ClassName(), proto, ext, o.ExportType())
	for i, k := range o.GetOwnPropertyNames() {
		if i > 0 {
			b.WriteByte(',')
		}
		d, err := c.desc(goja.Undefined(), o, c.rt.ToValue(k))
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(b, "%q %s:", k, d)
		c.value(o.Get(k))
	}
	b.WriteByte('}')
}

// checkParse runs JSON.parse(arg) in both runtimes of p and fails t unless
// they agree: the same value (canon) or both a SyntaxError.
func checkParse(t testing.TB, p jsonPair, arg func(*goja.Runtime) goja.Value) {
	t.Helper()
	want, errWant := callJSON(p.orig, "parse", arg(p.orig))
	got, errGot := callJSON(p.native, "parse", arg(p.native))
	switch {
	case errWant != nil && errGot != nil:
		if w, g := errorName(p.orig, errWant), errorName(p.native, errGot); w != g || w == "" {
			t.Fatalf("goja throws %v (%s), native %v (%s)", errWant, w, errGot, g)
		}
	case errWant != nil:
		t.Fatalf("goja throws %v, native returns %s", errWant, p.nativeCanon.String(got))
	case errGot != nil:
		t.Fatalf("goja returns %s, native throws %v", p.origCanon.String(want), errGot)
	default:
		if w, g := p.origCanon.String(want), p.nativeCanon.String(got); w != g {
			t.Fatalf("goja:   %s\nnative: %s", w, g)
		}
	}
}

func stringArg(s string) func(*goja.Runtime) goja.Value {
	return func(rt *goja.Runtime) goja.Value { return rt.ToValue(s) }
}

// parseEdgeCases are JSON texts (valid and invalid) on which the native
// parse must agree with goja's.
var parseEdgeCases = []string{
	// Numbers: -0, exponents, integers around 2^53 and beyond int64,
	// overflow (goja throws, unlike the spec's Infinity), underflow.
	`0`, `-0`, `-0.0`, `-0e5`, `0e-400`, `1`, `-1`, `123456789012345`, `1234567890123456`,
	`9007199254740991`, `9007199254740992`, `9007199254740993`, `-9007199254740993`,
	`9223372036854775807`, `9223372036854775808`, `12345678901234567890`, `1e21`, `1E+2`, `1e-2`,
	`0.1`, `1.5e300`, `1e308`, `1.7976931348623157e308`, `1.7976931348623159e308`, `1e309`, `1e400`, `-1e400`,
	`1e-400`, `5e-324`, `2.4703282292062328e-324`, `0.30000000000000004`, `[1.0, 2.50, 100e0]`,
	`01`, `-`, `+1`, `.5`, `1.`, `1e`, `1e+`, `0x10`, `Infinity`, `NaN`, `-01`, `1.5.5`, `--1`,
	// Literals and whitespace.
	`true`, `false`, `null`, ` \t\n\r true \t\n\r `, `tru`, `True`, `nul`, `truex`, "\u00a01", "\ufeff1", "1\x00",
	// Strings: escapes, surrogate pairs, lone surrogates (U+FFFD in goja),
	// controls, invalid UTF-8, U+FFFD itself.
	`""`, `"a"`, `"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u007f"`, `"\u00e9\u20ac"`, `"\uD83D\uDE00"`, `"\ud83d\ude00"`,
	`"\ud800"`, `"\udc00"`, `"\ud800\ud800"`, `"\ud800\udbff\udc00"`, `"\udc00\ud800"`, `"\ud800x"`, `"\ud800\u0041"`,
	`"\ud800\"`, `"\ud800\u"`, `"\ud800\u12"`, `"\ud800\uzzzz"`, `"\ud800\n"`, `"x\ud800"`,
	"\"é€😀\u2028\u2029\"", "\"\x7f\"", "\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "\"\ufffd\"",
	`"\x"`, `"\'"`, `"\U0041"`, `"\u004"`, `"\u00G0"`, "\"\x01\"", "\"\n\"", "\"\t\"", `"abc`, `"\`, `"`,
	// Objects: duplicate keys (first position, last value), __proto__,
	// integer keys (goja enumerates them first), empty and odd keys.
	`{}`, `{"a":1}`, `{"a":1,"b":2,"a":3}`, `{"a":{"x":1},"a":[2]}`, `{"__proto__":1}`, `{"__proto__":{"polluted":1}}`,
	`{"__proto__":null,"a":1}`, `{"constructor":1,"toString":2,"hasOwnProperty":3,"toJSON":4}`,
	`{"b":1,"2":2,"a":3,"1":4,"0":5}`, `{"4294967295":1,"4294967294":2,"-1":3,"01":4}`, `{"":1}`,
	`{"\ud800":1,"\ufffd":2}`, `{"k\u0000":1}`, "{\"\xff\":1}", `{"length":3}`,
	`{"a" 1}`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{'a':1}`, `{"a":1 "b":2}`, `{"a":1}}`, `{"a":1`, `{`, `}`, `{1:1}`,
	// Arrays.
	`[]`, `[ ]`, `[1,"a",null,true,false,{},[]]`, `[[[[]]]]`, `[1,]`, `[,1]`, `[1 2]`, `[1:2]`, `[`, `]`, `[1`, `[1,`, `[][]`, `[] []`,
	// Top level.
	``, ` `, `1 2`, `"a" "b"`, `{} x`, `[]]`, `1,2`,
}

func TestNativeJSONParseMatchesGoja(t *testing.T) {
	p := newJSONPair(t)
	for _, text := range parseEdgeCases {
		t.Run(strconv.Quote(text), func(t *testing.T) { checkParse(t, p, stringArg(text)) })
	}
	for _, text := range jsonSeedTexts(t) {
		t.Run(strconv.Quote(text[:min(len(text), 40)]), func(t *testing.T) { checkParseText(t, p, text) })
	}
	// A JS string with raw lone surrogates (not escapes): goja reads its
	// UTF-8 form, U+FFFD.
	lone := func(rt *goja.Runtime) goja.Value {
		return goja.StringFromUTF16([]uint16{'"', 0xD800, 'a', 0xDC00, '"'})
	}
	checkParse(t, p, lone)
	checkParse(t, p, func(*goja.Runtime) goja.Value {
		return goja.StringFromUTF16(append(append([]uint16{'{', '"'}, utf16.Encode([]rune("é😀"))...), '"', ':', '1', '}'))
	})
}

// TestNativeJSONParseValues checks the values themselves, not only that
// goja agrees.
func TestNativeJSONParseValues(t *testing.T) {
	p := newJSONPair(t)
	for _, c := range []struct{ expr, want string }{
		{`1/JSON.parse("-0")`, "-Infinity"},
		{`1/JSON.parse("[-0.0]")[0]`, "-Infinity"},
		{`JSON.parse("9007199254740993")`, "9007199254740992"},
		{`JSON.parse("12345678901234567890")`, "12345678901234567000"},
		{`JSON.parse("1e21")`, "1e+21"},
		{`var o = JSON.parse('{"a":1,"b":2,"a":3}'); Object.keys(o).join() + " " + o.a`, "a,b 3"},
		{`var o = JSON.parse('{"__proto__":{"x":1}}'); [Object.getPrototypeOf(o) === Object.prototype, o.hasOwnProperty("__proto__"), o.x, o.__proto__.x].join()`, "true,true,,1"},
		{`Object.keys(JSON.parse('{"b":1,"1":1,"a":1,"0":1}')).join()`, "0,1,b,a"},
		{`var s = JSON.parse('"\\ud83d\\ude00"'); s.length + " " + s.codePointAt(0)`, "2 128512"},
		{`JSON.parse('"\\ud800x"').charCodeAt(0)`, "65533"},
		{`JSON.parse('"\\u0000"').length`, "1"},
		{`Array.isArray(JSON.parse("[]")) && Object.getPrototypeOf(JSON.parse("[1]")) === Array.prototype`, "true"},
		{`JSON.parse({toString: function () { return "[7]" }})[0]`, "7"},
		{`JSON.parse(123) + JSON.parse(true) + JSON.parse(null)`, "124"},
		{`JSON.parse('{"a":[1,{"b":2}]}', function (k, v) { return typeof v === "number" ? v * 10 : v }).a[1].b`, "20"},
		{`try { JSON.parse("1", null) } catch (e) { e.name }`, "TypeError"},
		{`JSON.parse("[1]", 5)[0]`, "1"},
		{`try { JSON.parse(Symbol("s")) } catch (e) { e.name }`, "TypeError"},
		{`try { JSON.parse({toString: function () { return Symbol("s") }}) } catch (e) { e.name }`, "TypeError"},
		{`try { JSON.parse("1e400") } catch (e) { e.name }`, "SyntaxError"},
		// Object.prototype setters are not called (CreateDataProperty).
		{`var hit = 0; Object.defineProperty(Object.prototype, "trap", {set: function () { hit++ }, configurable: true});
		  var o = JSON.parse('{"trap":1}'); delete Object.prototype.trap; hit + " " + o.trap`, "0 1"},
		{`Object.defineProperty(Object.prototype, "ro", {value: 0, writable: false, configurable: true});
		  var o = JSON.parse('{"ro":1}'); delete Object.prototype.ro; o.ro`, "1"},
		{`Object.defineProperty(Array.prototype, "0", {set: function () { throw new Error("set") }, configurable: true});
		  var a = JSON.parse('[5]'); delete Array.prototype[0]; a[0]`, "5"},
	} {
		for _, rt := range []*goja.Runtime{p.orig, p.native} {
			v, err := rt.RunString(c.expr)
			if err != nil {
				t.Fatalf("%s: %v", c.expr, err)
			}
			if v.String() != c.want {
				t.Errorf("%s = %s, want %s (native %v)", c.expr, v, c.want, rt == p.native)
			}
		}
	}
}

func TestNativeJSONParseErrors(t *testing.T) {
	p := newJSONPair(t)
	for _, c := range []struct{ text, msg string }{
		{`[1,]`, "Unexpected token ']' in JSON at position 3"},
		{`{"a" 1}`, "Unexpected token '1' in JSON at position 5"},
		{`"é\x"`, "Bad escaped character in JSON at position 2"},
		{`"😀\u12x4"`, "Bad Unicode escape in JSON at position 3"},
		{"\"a\x01\"", "Bad control character in string literal in JSON at position 2"},
		{`["abc`, "Unterminated string in JSON at position 5"},
		{`[1`, "Unexpected end of JSON input"},
		{``, "Unexpected end of JSON input"},
		{`{} x`, "Unexpected non-whitespace character after JSON at position 3"},
		{`[1e400]`, "Number 1e400 out of range in JSON at position 1"},
		{`éx`, "Unexpected token 'é' in JSON at position 0"},
	} {
		_, err := callJSON(p.native, "parse", p.native.ToValue(c.text))
		if err == nil {
			t.Errorf("%q: no error", c.text)
			continue
		}
		if name := errorName(p.native, err); name != "SyntaxError" {
			t.Errorf("%q: %v is a %q, not a SyntaxError", c.text, err, name)
		}
		if got := err.(*goja.Exception).Value().(*goja.Object).Get("message").String(); got != c.msg {
			t.Errorf("%q: message %q, want %q", c.text, got, c.msg)
		}
	}
}

// TestNativeJSONParseDepth: nesting is bounded (goja's own parse recurses
// without a bound and crashes the process a few million levels down), also
// when a reviver sends the text to goja's parse.
func TestNativeJSONParseDepth(t *testing.T) {
	p := newJSONPair(t)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, text := range []string{deep(MaxDepth), deepObj(MaxDepth)} {
		checkParse(t, p, stringArg(text))
	}
	for _, text := range []string{deep(MaxDepth + 1), deepObj(MaxDepth + 1), deep(3_000_000), "[" + deep(MaxDepth) + "]"} {
		for _, reviver := range []goja.Value{nil, p.native.ToValue(func(c goja.FunctionCall) goja.Value { return c.Argument(1) })} {
			args := []goja.Value{p.native.ToValue(text)}
			if reviver != nil {
				args = append(args, reviver)
			}
			_, err := callJSON(p.native, "parse", args...)
			if name := errorName(p.native, err); name != "SyntaxError" {
				t.Fatalf("depth %d (reviver %v): %v, want a SyntaxError", strings.Count(text, "[")+strings.Count(text, "{"), reviver != nil, err)
			}
		}
	}
	// Brackets inside strings do not count.
	checkParse(t, p, stringArg(`["`+strings.Repeat("[", MaxDepth+5)+`"]`))
}

// TestNativeJSONFunctions: the installed functions look like goja's.
func TestNativeJSONFunctions(t *testing.T) {
	p := newJSONPair(t)
	const expr = `[typeof JSON.parse, JSON.parse.name, JSON.parse.length, String(JSON.parse),
		Object.getOwnPropertyNames(JSON.parse).join(), JSON.parse.hasOwnProperty("prototype"),
		Object.getPrototypeOf(JSON.parse) === Function.prototype,
		(function () { try { new JSON.parse("1"); return "constructed" } catch (e) { return e.name } })(),
		typeof JSON.stringify, JSON.stringify.name, JSON.stringify.length, String(JSON.stringify),
		Object.getOwnPropertyNames(JSON.stringify).join(),
		(function () { try { new JSON.stringify(1); return "constructed" } catch (e) { return e.name } })(),
		["parse", "stringify"].map(function (k) { var d = Object.getOwnPropertyDescriptor(JSON, k); return [d.writable, d.enumerable, d.configurable].join() }).join(";"),
		["name", "length"].map(function (k) { var d = Object.getOwnPropertyDescriptor(JSON.parse, k); return [d.writable, d.enumerable, d.configurable].join() }).join(";"),
		Object.getOwnPropertyNames(JSON).join(), Object.keys(JSON).length, JSON.parse.call(null, "[3]")[0],
	].join("|")`
	want, err := p.orig.RunString(expr)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.native.RunString(expr)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("native: %s\ngoja:   %s", got, want)
	}
}

// stringifyCase is a script that defines value (and may log through L) in
// a fresh runtime; JSON.stringify(value) must give the same result, error
// and log in both.
func checkStringify(t testing.TB, setup, call string) {
	t.Helper()
	p := newJSONPair(t)
	const prelude = `var log = []; function L(s) { log.push(String(s)); }
`
	script := prelude + setup + `
;(function () {
	var out;
	try { var r = ` + call + `; out = typeof r === "string" ? "ok " + r : "ok(" + typeof r + ")"; }
	catch (e) { out = "throws " + (e && e.name) + ": " + (e && e.message); }
	return out + "\nlog: " + log.join(" | ");
})()`
	want, errWant := p.orig.RunString(script)
	got, errGot := p.native.RunString(script)
	if errWant != nil || errGot != nil {
		if fmt.Sprint(errWant) != fmt.Sprint(errGot) {
			t.Fatalf("setup: goja %v, native %v", errWant, errGot)
		}
		return
	}
	if want.String() != got.String() {
		t.Fatalf("%s\ngoja:   %s\nnative: %s", setup, want, got)
	}
}

// stringifyEdgeCases: each sets value; JSON.stringify(value) must match.
var stringifyEdgeCases = []string{
	// Primitives and numbers (Number.prototype.toString formatting).
	`var value = [0, -0, 1, -1, 1.5, 0.1 + 0.2, 1e21, 1e-7, 1.5e-7, 123456789012345680000, 2e53, Math.pow(2, 53) + 2, 5e-324, -1.7976931348623157e308, NaN, Infinity, -Infinity]`,
	`var value = "plain"`, `var value = 42`, `var value = -0`, `var value = NaN`, `var value = true`, `var value = null`,
	`var value = undefined`, `var value = function () {}`, `var value = Symbol("s")`, `var value = BigInt(7)`,
	// Strings: escapes, controls, non-ASCII, lone surrogates, U+FFFD.
	`var value = ["\"\\/\b\f\n\r\t", "\x00\x01\x1f\x7f", "é€😀", "\u2028\u2029", "\ud800", "a\udc00b", "\ud800\ud800", "\udbff\udfff", "\ufffd", "x\ufffd\ud800"]`,
	`var value = {}; value["\ud800"] = 1; value["\ufffd"] = 2; value["é"] = "\udc00"; value["a\"b"] = 3; value["\n"] = 4`,
	// undefined, functions and symbols: null in arrays, absent in objects.
	`var value = {a: undefined, b: function () {}, c: Symbol("x"), d: [undefined, function () {}, Symbol("y")], e: 1}`,
	`var value = {}`, `var value = []`, `var value = [[], {}, [{}], {a: []}]`,
	// Key order: integer keys first, then insertion order.
	`var value = {b: 1, 2: 2, a: 3, 1: 4, 0: 5}`,
	// toJSON: own, inherited, on Object.prototype and Array.prototype, with
	// the key it gets, returning other things.
	`var value = {a: {toJSON: function (k) { L("toJSON " + k); return [k, this.x]; }, x: 5}, b: [1, {toJSON: function (k) { L("toJSON " + k); return undefined; }}]}`,
	`Object.prototype.toJSON = function (k) { L("OP.toJSON " + k); return k === "" ? {n: 1, a: [1]} : k; }; var value = {x: {y: 1}, z: [2]}`,
	`Array.prototype.toJSON = function (k) { L("AP.toJSON " + k); return this.length; }; var value = {x: [1, 2, 3], y: [[]]}`,
	`Object.defineProperty(Object.prototype, "toJSON", {get: function () { L("get toJSON"); return undefined; }, configurable: true}); var value = {a: {b: [{}]}}`,
	`function P() {} P.prototype.toJSON = function (k) { return "P" + k; }; var value = {p: new P(), q: [new P()]}`,
	`var value = {a: {toJSON: function () { return function () {}; }}, b: {toJSON: function () { return Symbol(); }}, c: [{toJSON: function () { return undefined; }}]}`,
	`var value = {a: {toJSON: function () { return BigInt(1); }}}`,
	`var value = {a: {toJSON: function () { return new Date(0); }}, b: {toJSON: function () { return new Number(3); }}}`,
	`var value = {a: {toJSON: function () { return {toJSON: function () { return "inner"; }}; }}}`,
	`var value = {toJSON: function (k) { L("top " + k); return {x: 1}; }}`,
	`var value = {a: {toJSON: "not callable", b: 1}}`,
	`var f = function () {}; f.toJSON = function (k) { return "fn " + k; }; var value = {f: f, g: [f]}`,
	// Getters: called once, in order, with side effects; a getter that
	// throws; a getter that changes what comes next.
	`var value = {get a() { L("get a"); return {b: 1}; }, c: 2, get d() { L("get d"); return undefined; }}`,
	`var value = {a: 1, get b() { throw new Error("getter"); }, c: 3}`,
	`var value = {get a() { L("a"); delete this.b; this.z = 9; return 1; }, b: 2, c: 3}`,
	`var value = {get a() { L("a"); Object.prototype.toJSON = function () { return "late"; }; return 1; }, b: {c: 2}}; `,
	`var arr = [1, 2, 3]; Object.defineProperty(arr, "1", {get: function () { L("idx 1"); arr.length = 2; return "g"; }}); var value = arr`,
	`var arr = [1]; Object.defineProperty(arr, "1", {get: function () { L("idx 1"); arr.push(5); return "g"; }, enumerable: true, configurable: true}); var value = arr`,
	// Proxies: traps in goja's order.
	`var value = {p: new Proxy({a: 1, b: [2]}, {get: function (t, k) { L("get " + String(k)); return t[k]; }, ownKeys: function (t) { L("ownKeys"); return Reflect.ownKeys(t); }, getOwnPropertyDescriptor: function (t, k) { L("gopd " + String(k)); return Reflect.getOwnPropertyDescriptor(t, k); }})}`,
	`var value = [new Proxy([1, 2], {get: function (t, k) { L("get " + String(k)); return t[k]; }})]`,
	`var value = new Proxy({a: 1}, {get: function (t, k) { L("get " + String(k)); return t[k]; }})`,
	`var r = Proxy.revocable({}, {}); r.revoke(); var value = {a: r.proxy}`,
	// Cycles, also through exotic objects and toJSON.
	`var value = {a: {}}; value.a.b = value`,
	`var value = [1]; value.push([value])`,
	`var value = {a: {}}; value.a.b = {toJSON: function () { return value; }}`,
	`var value = {a: {}}; value.a.p = new Proxy({}, {get: function (t, k) { L("trap get " + String(k)); return k === "toJSON" ? undefined : value; }, ownKeys: function () { return ["x"]; }, getOwnPropertyDescriptor: function () { return {value: 1, enumerable: true, configurable: true}; }})`,
	`var shared = {s: 1}; var value = {a: shared, b: [shared, shared]}`,
	// Exotic objects inside plain data.
	`var value = {d: new Date(0), n: new Number(-0), s: new String("b\ud800"), b: new Boolean(false), sym: Object(Symbol("q")), re: /x/g, m: new Map([[1, 2]]), e: new Error("e"), u8: new Uint8Array([1, 2]), raw: JSON.rawJSON("12.50")}`,
	`var value = {big: Object(BigInt(1))}`,
	`var value = [new Date(NaN)]`,
	`var n = new Number(5); n.valueOf = function () { L("valueOf"); return 6; }; var s = new String("t"); s.toString = function () { L("toString"); return "u"; }; var value = [n, s]`,
	`var value = (function () { return arguments; })(1, "a")`,
	`var value = {args: (function () { return arguments; })(1, "a"), gen: (function* () {})()}`,
	// Objects that are not plain: null prototype, class instances,
	// non-enumerable and inherited properties, holes, extra array fields.
	`var o = Object.create(null); o.a = 1; var value = {o: o, c: Object.create({inherited: 1})}`,
	`class K { constructor() { this.x = 1; } get y() { return 2; } } var value = new K()`,
	`var o = {a: 1}; Object.defineProperty(o, "hidden", {value: 2, enumerable: false}); var value = o`,
	`var a = [1, 2]; a.length = 5; a.extra = 1; a[7] = 8; var value = a`,
	`var value = new Array(3)`,
	`var value = Object.prototype`, `var value = Math`, `var value = JSON`, `var value = globalThis.Reflect`,
	// Deep but within the bound.
	`var value = []; for (var i = 0, c = value; i < 500; i++) { var n = [i]; c.push(n); c = n; }`,
}

func TestNativeJSONStringifyMatchesGoja(t *testing.T) {
	for _, setup := range stringifyEdgeCases {
		t.Run(setup[:min(len(setup), 60)], func(t *testing.T) {
			checkStringify(t, setup, "JSON.stringify(value)")
			checkStringify(t, setup, "JSON.stringify([value])")
			checkStringify(t, setup, "JSON.stringify({k: value})")
		})
	}
	// Arguments that send the whole call to goja's stringify, or not.
	for _, call := range []string{
		`JSON.stringify(value, null)`, `JSON.stringify(value, undefined, undefined)`, `JSON.stringify(value, 5)`,
		`JSON.stringify(value, null, 2)`, `JSON.stringify(value, null, "--")`, `JSON.stringify(value, ["a", "c"])`,
		`JSON.stringify(value, function (k, v) { L("replacer " + k); return v; })`, `JSON.stringify()`,
		`JSON.stringify.call(null, value)`,
	} {
		checkStringify(t, `var value = {a: [1, {b: 2}], c: "x", get d() { L("get d"); return 4; }}`, call)
	}
	// Reentrancy: a toJSON that stringifies (delegated parts included).
	checkStringify(t, `var value = {a: {toJSON: function () { return JSON.stringify({d: new Date(0), x: [1]}); }}, b: new Date(0)}`, "JSON.stringify(value)")
	checkStringify(t, `var value = {a: new Date(0)}; Date.prototype.toJSON = function () { return JSON.stringify({x: [this.getTime(), new Number(1)]}); }`, "JSON.stringify(value)")
}

// TestNativeJSONStringifyDepth: the native walk bounds nesting.
func TestNativeJSONStringifyDepth(t *testing.T) {
	p := newJSONPair(t)
	v, err := p.native.RunString(fmt.Sprintf(`var value = []; for (var i = 0, c = value; i < %d; i++) { var n = []; c.push(n); c = n; }
		var ok = JSON.stringify(value).length; c.push([]);
		try { JSON.stringify(value); "no error" } catch (e) { ok + " " + e.name }`, MaxDepth-1))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d RangeError", 2*MaxDepth); v.String() != want {
		t.Errorf("got %s, want %s", v, want)
	}
}

// TestNativeJSONErrorsAreBuiltIn: the SyntaxError and RangeError the native
// functions throw are what the built-in constructors make (new C(msg): the
// same class, prototype, own properties and attributes, stack), also when
// the script replaced the globals SyntaxError and RangeError, whose
// replacements are not called.
func TestNativeJSONErrorsAreBuiltIn(t *testing.T) {
	p := newJSONPair(t)
	v, err := p.native.RunString(fmt.Sprintf(`
var S = SyntaxError, R = RangeError, called = 0;
function describe(e, C) {
  var d = Object.getOwnPropertyDescriptor(e, "message");
  return [e instanceof C, Object.getPrototypeOf(e) === C.prototype, Object.prototype.toString.call(e),
    Object.getOwnPropertyNames(e).join(), d.writable, d.enumerable, d.configurable,
    String(e.stack).split("\n")[0], e.constructor === C].join();
}
function thrown(f) { try { f(); } catch (e) { return e; } return null; }
var want = [describe(new S("Unexpected end of JSON input"), S),
            describe(new R("JSON.stringify: value nested deeper than %d levels"), R)].join(" ");
SyntaxError = function () { called++; };
RangeError = function () { called++; };
var deep = []; for (var i = 0, c = deep; i < %d; i++) { var n = []; c.push(n); c = n; }
var got = [describe(thrown(function () { JSON.parse(""); }), S),
           describe(thrown(function () { JSON.stringify(deep); }), R)].join(" ");
[got === want, called, got, want].join(" | ");`, MaxDepth, MaxDepth+1))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.String(); !strings.HasPrefix(got, "true | 0 | ") {
		t.Errorf("the native functions' errors differ from the built-in constructors' (same | replacements called | got | want):\n%s", got)
	}
}

// TestNativeJSONStringsBehaveAsGoja: strings made by the native functions
// (long ASCII and non-ASCII ones are goja's lazily scanned host strings)
// compare, hash and convert like the ones goja's functions make.
func TestNativeJSONStringsBehaveAsGoja(t *testing.T) {
	const script = `
var long = "abcdefghijklmnopqrstuvwxyz0123456789", uni = "é€😀 and more text", out = [];
var a = JSON.parse(JSON.stringify([long, uni, "short", "é"]));
var s = JSON.stringify({k: long});
var m = new Map([[a[0], 1], [a[1], 2], [s, 3]]);
out.push(a[0] === long, a[1] === uni, a[0] == long, a[1].length, a[1].charCodeAt(2), a[1].codePointAt(2), a[1].slice(1, 4),
	m.get(long), m.get(uni), m.get('{"k":"' + long + '"}'), s.length, s === '{"k":"' + long + '"}', typeof s, typeof a[0],
	Object.keys(JSON.parse('{"' + long + '":1}'))[0] === long, ({})[a[0]] === undefined, new Set([a[0], long]).size,
	a[0] < long, a[0] + a[1], a[1].toUpperCase(), a[1].indexOf("😀"), [a[0]].indexOf(long), a[0].split("m").length);
switch (a[0]) { case long: out.push("switch"); break; default: out.push("no switch"); }
out.join("|");
`
	p := newJSONPair(t)
	want, err := p.orig.RunString(script)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.native.RunString(script)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("native: %s\ngoja:   %s", got, want)
	}
	// Go side: the same Export.
	for _, expr := range []string{`JSON.parse('["abcdefghijklmnopqrstuvwxyz","é€😀"]')`, `JSON.stringify({a: "abcdefghijklmnopqrstuvwxyz"})`} {
		w, _ := p.orig.RunString(expr)
		g, _ := p.native.RunString(expr)
		if fmt.Sprint(w.Export()) != fmt.Sprint(g.Export()) {
			t.Errorf("%s: Export %v, goja %v", expr, g.Export(), w.Export())
		}
	}
}
