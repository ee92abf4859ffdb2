package nativejson

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// jsonSeedTexts returns the JSON texts of the committed FuzzNativeJSONParse
// corpus (the bench request and response, unicode, surrogates, duplicate
// keys, __proto__, deep nesting, big numbers ...).
func jsonSeedTexts(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/fuzz/FuzzNativeJSONParse/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no seed corpus in testdata/fuzz/FuzzNativeJSONParse")
	}
	var texts []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		header, arg, ok := strings.Cut(strings.TrimSpace(string(data)), "\n")
		if !ok || header != "go test fuzz v1" || !strings.HasPrefix(arg, "string(") || !strings.HasSuffix(arg, ")") {
			t.Fatalf("%s: not a one-string fuzz corpus file", f)
		}
		s, err := strconv.Unquote(arg[len("string(") : len(arg)-1])
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		texts = append(texts, s)
	}
	return texts
}

// FuzzNativeJSONParse: on any text the native JSON.parse gives what goja's
// gives (compared by canon: types, -0, key order, attributes, prototypes),
// or both throw a SyntaxError. Text nested deeper than the bound must be a
// SyntaxError (goja's parse is not run on it: it may crash the process).
func FuzzNativeJSONParse(f *testing.F) {
	for _, s := range parseEdgeCases {
		f.Add(s)
	}
	p := newJSONPair(f)
	f.Fuzz(func(t *testing.T, text string) { checkParseText(t, p, text) })
}

// checkParseText is checkParse on text, or for text nested deeper than the
// bound a check that the native parse throws a SyntaxError (goja's parse is
// not run: it may crash the process).
func checkParseText(t testing.TB, p jsonPair, text string) {
	t.Helper()
	if _, deep := tooDeep(text); deep {
		_, err := callJSON(p.native, "parse", p.native.ToValue(text))
		if errorName(p.native, err) != "SyntaxError" {
			t.Fatalf("too deep: %v, want a SyntaxError", err)
		}
		return
	}
	checkParse(t, p, stringArg(text))
}

// stringifyMutator is run in both runtimes of a pair: it parses the fuzzed
// JSON with goja's own parse, wraps it as box.v and applies ops, each
// changing one of the containers (chosen by the high bits) in one of 16
// ways (the low bits): toJSON methods, getters with side effects, values
// JSON drops or nulls, Dates, boxed primitives, cycles and shared objects,
// BigInts, proxies, toJSON on Object.prototype or Array.prototype (plain or
// as a getter), strings and keys with lone surrogates and U+FFFD, special
// numbers, odd prototypes, non-enumerable properties and holes, getters that
// change the rest of the walk, and built-in objects. Everything it does is
// deterministic, and logged where a script could observe it.
const stringifyMutator = `
var log = [];
function L(s) { log.push(String(s)); }
function collect(v, out, depth) {
	if (v !== null && typeof v === "object" && depth < 64 && out.length < 256) {
		out.push(v);
		var ks = Object.keys(v);
		for (var i = 0; i < ks.length; i++) collect(v[ks[i]], out, depth + 1);
	}
	return out;
}
function mutate(text, ops) {
	var box = {v: __origParse(text)};
	var cs = collect(box, [], 0);
	Object.defineProperty(box, "shared", {value: 0, writable: true});
	for (var i = 0; i < ops.length; i++) {
		apply(box, cs, cs[(ops[i] >> 4) % cs.length], ops[i] & 15, i);
	}
	return box;
}
function apply(box, cs, t, kind, i) {
	var k = "m" + i;
	var isArr = Array.isArray(t);
	function put(v) { if (isArr) t.push(v); else t[k] = v; }
	function pick(list) { return list[i % list.length]; }
	switch (kind) {
	case 0:
		t.toJSON = function (key) { L("toJSON " + i + " " + key); return pick([{k: key, i: i}, "s" + key, undefined, box, new Date(0), [1, {z: this === t}], null]); };
		break;
	case 1:
		Object.defineProperty(t, isArr ? String(t.length) : k, {enumerable: true, configurable: true,
			get: function () { L("get " + i); return pick([{g: i}, i, "g", [i], undefined]); }});
		break;
	case 2:
		put(pick([undefined, function () {}, Symbol("s" + i)]));
		break;
	case 3:
		put(new Date(i * 1e11));
		break;
	case 4:
		put(pick([new Number(-0), new String("b\ud800" + i), new Boolean(false), Object(Symbol("b")), Object(BigInt(i)), new Number(1.5)]));
		break;
	case 5:
		// A cycle or a shared object (a few: each can double the output).
		if (++box.shared <= 4) put(cs[i % cs.length]);
		break;
	case 6:
		put(BigInt(i));
		break;
	case 7:
		put(new Proxy(pick([{a: i, b: [i]}, [i, {c: 1}]]), {
			get: function (o, p) { L("proxy get " + String(p)); return o[p]; },
			ownKeys: function (o) { L("proxy ownKeys"); return Reflect.ownKeys(o); },
			getOwnPropertyDescriptor: function (o, p) { L("proxy gopd " + String(p)); return Reflect.getOwnPropertyDescriptor(o, p); }
		}));
		break;
	case 8:
		if (i % 2) Object.prototype.toJSON = function (key) { L("OP.toJSON " + key); return key === "" ? {top: 1} : key.length; };
		else Array.prototype.toJSON = function (key) { L("AP.toJSON " + key); return this.length; };
		break;
	case 9:
		Object.defineProperty(i % 2 ? Object.prototype : Array.prototype, "toJSON", {configurable: true,
			get: function () { L("get proto toJSON"); return undefined; }});
		break;
	case 10:
		put(pick(["\ud800", "a\udc00b", "\ufffd", "\u2028\x00\x1f\"\\\x7f", "é😀", "\udbff\udfff\ud800"]));
		if (!isArr) { t[pick(["\ud800k", "\ufffd", "k\udc00", "é"])] = i; }
		break;
	case 11:
		put(pick([-0, NaN, Infinity, -Infinity, 1e21, 1e-7, 0.1 + 0.2, Math.pow(2, 53) + 2, -1e-300, 5e-324, 123.456]));
		break;
	case 12:
		var o = pick([Object.create(null), Object.create({inherited: 1}), Object.create({toJSON: function (key) { return "proto " + key; }})]);
		o.x = i;
		put(o);
		break;
	case 13:
		if (isArr) { if (i % 2) t.length += 2; else t.extra = i; }
		else Object.defineProperty(t, k, {value: i, enumerable: false, configurable: true});
		break;
	case 14:
		Object.defineProperty(t, isArr ? String(t.length) : k, {enumerable: true, configurable: true, get: function () {
			L("changing getter " + i);
			switch (i % 4) {
			case 0: var ks = Object.keys(t); if (ks.length) delete t[ks[ks.length - 1]]; t["late" + i] = i; return 1;
			case 1: Object.prototype.toJSON = function () { return "late"; }; return 2;
			case 2: if (isArr) t.length = 0; return 3;
			default: throw new Error("getter " + i);
			}
		}});
		break;
	case 15:
		put(pick([new Map([[1, 2]]), /re/g, new Error("e"), new Uint8Array([1, 2]), JSON.rawJSON("1.50"), (function () { return arguments; })(1, "a"), Math]));
		break;
	}
}
`

// FuzzNativeJSONStringify: for values made from fuzzed JSON and mutated by
// stringifyMutator, JSON.stringify gives the same text, or throws the same
// error, with the same log of side effects in both runtimes.
func FuzzNativeJSONStringify(f *testing.F) {
	for _, c := range []struct {
		text string
		ops  []byte
	}{
		{`{"a":[1,2,{"b":"c"}],"d":{"e":null}}`, nil},
		{`{"a":[1,2,{"b":"c"}],"d":{"e":null}}`, []byte{0x00, 0x11, 0x22, 0x33}},
		{`[{"x":1},[2,[3]],"s"]`, []byte{0x04, 0x15, 0x26, 0x37, 0x48}},
		{`{"a":{"b":{"c":[]}}}`, []byte{0x09, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f}},
		{`{"a":{"b":1},"c":[{}]}`, []byte{0x08, 0x17, 0x25, 0x2e}},
		{`[1]`, []byte{0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f}},
		{`{"k":"v"}`, []byte{0x0a, 0x0b, 0x0c, 0x0d, 0x0e}},
	} {
		f.Add(c.text, c.ops)
	}
	prog, err := goja.Compile("mutator.js", stringifyMutator, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string, ops []byte) {
		if len(ops) > 32 || len(text) > 4096 {
			return
		}
		if _, deep := tooDeep(text); deep {
			return
		}
		p := newJSONPair(t)
		var results [2]string
		for i, rt := range []*goja.Runtime{p.orig, p.native} {
			if _, err := rt.RunProgram(prog); err != nil {
				t.Fatal(err)
			}
			opsArr := make([]any, len(ops))
			for j, b := range ops {
				opsArr[j] = int64(b)
			}
			rt.Set("__text", text)
			rt.Set("__ops", rt.NewArray(opsArr...))
			v, err := rt.RunString(`(function () {
				var box;
				try { box = mutate(__text, __ops); } catch (e) { return "mutate: " + e.name; }
				var out;
				try { var r = JSON.stringify(box.v); out = typeof r === "string" ? "ok " + r : "ok(" + typeof r + ")"; }
				catch (e) { out = "throws " + (e && e.name) + ": " + (e && e.message); }
				return out + "\nlog: " + log.join(" | ");
			})()`)
			if err != nil {
				t.Fatal(err)
			}
			results[i] = v.String()
		}
		if results[0] != results[1] {
			t.Fatalf("text %q ops %x\ngoja:   %s\nnative: %s", text, ops, results[0], results[1])
		}
	})
}
