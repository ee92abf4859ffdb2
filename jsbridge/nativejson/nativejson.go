package nativejson

import (
	"fmt"
	"sync"

	"github.com/dop251/goja"
)

// MaxDepth bounds the nesting of arrays and objects that the native
// JSON.parse reads and the native JSON.stringify writes. goja's own
// JSON.parse recurses without a bound and, a few million levels deep, kills
// the process with a Go stack overflow (not recoverable); its stringify
// takes time quadratic in the depth. Deeper input is a SyntaxError (parse)
// or a RangeError (stringify) here.
const MaxDepth = 10000

// nativeJSON holds one runtime's native JSON.parse and JSON.stringify (see
// doc.go) and what they fall back on: goja's own functions, captured before
// they are replaced.
type nativeJSON struct {
	rt            *goja.Runtime
	origParse     func(goja.FunctionCall) goja.Value
	origStringify func(goja.FunctionCall) goja.Value

	// parse: constants.
	valTrue, valFalse goja.Value

	// stringify: the replacer function that delegations pass to goja's
	// stringify (made on the first delegation) and the delegations in
	// progress (innermost last).
	replacer    goja.Value
	delegations []delegation

	// parseFn and stringifyFn are the installed function objects.
	parseFn, stringifyFn *goja.Object
}

// jsonScratch is the scratch memory of one parse or stringify: the stack of
// array elements being read, the output buffer and the stack of objects
// being written. It holds nothing between calls that a script could see
// (the output is copied out, the stacks are cleared), so runtimes share it
// through scratchPool: a fresh runtime (one per call, by default) then does
// not grow its own buffers on every call.
type jsonScratch struct {
	items []any          // parse
	buf   []byte         // stringify
	stack []*goja.Object // stringify
}

// maxKeptScratch bounds the buffer kept for reuse, in bytes.
const maxKeptScratch = 1 << 20

var scratchPool = sync.Pool{New: func() any { return new(jsonScratch) }}

func getScratch() *jsonScratch { return scratchPool.Get().(*jsonScratch) }

// putScratch returns sc, cleared, for reuse; an oversized one is dropped.
func putScratch(sc *jsonScratch) {
	if cap(sc.buf) > maxKeptScratch || cap(sc.items) > maxKeptScratch/16 || cap(sc.stack) > maxKeptScratch/8 {
		return
	}
	clear(sc.items[:cap(sc.items)])
	clear(sc.stack[:cap(sc.stack)])
	sc.items, sc.buf, sc.stack = sc.items[:0], sc.buf[:0], sc.stack[:0]
	scratchPool.Put(sc)
}

// Install replaces JSON.parse and JSON.stringify of rt, a fresh runtime
// (before any script ran), with the native ones (see the package doc). The
// new functions look like goja's (name, length, property attributes, not
// constructors). It fails only when rt's JSON object is not goja's
// built-in one.
func Install(rt *goja.Runtime) error {
	_, err := install(rt)
	return err
}

// install is Install, returning the installed functions' state.
func install(rt *goja.Runtime) (*nativeJSON, error) {
	jsonObj, ok := rt.Get("JSON").(*goja.Object)
	if !ok {
		return nil, fmt.Errorf("nativejson: no JSON object")
	}
	j := &nativeJSON{
		rt:       rt,
		valTrue:  rt.ToValue(true),
		valFalse: rt.ToValue(false),
	}
	var err error
	if j.origParse, err = nativeFunc(jsonObj, "parse"); err != nil {
		return nil, err
	}
	if j.origStringify, err = nativeFunc(jsonObj, "stringify"); err != nil {
		return nil, err
	}
	if j.parseFn, err = j.newFunction("parse", 2, j.parse); err != nil {
		return nil, err
	}
	if j.stringifyFn, err = j.newFunction("stringify", 3, j.stringify); err != nil {
		return nil, err
	}
	// The attributes of goja's (and the spec's) JSON methods.
	if err := jsonObj.DefineDataProperty("parse", j.parseFn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return nil, err
	}
	if err := jsonObj.DefineDataProperty("stringify", j.stringifyFn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return nil, err
	}
	return j, nil
}

// nativeFunc returns the Go function behind the built-in obj[name].
func nativeFunc(obj *goja.Object, name string) (func(goja.FunctionCall) goja.Value, error) {
	if fo, ok := obj.Get(name).(*goja.Object); ok {
		if f, ok := fo.Export().(func(goja.FunctionCall) goja.Value); ok {
			return f, nil
		}
	}
	return nil, fmt.Errorf("nativejson: JSON.%s is not a native function", name)
}

// newFunction makes a native function object with the name and length of
// a built-in (ToValue names it after the Go function and gives length 0).
func (j *nativeJSON) newFunction(name string, length int, f func(goja.FunctionCall) goja.Value) (*goja.Object, error) {
	fo, ok := j.rt.ToValue(f).(*goja.Object)
	if !ok {
		return nil, fmt.Errorf("nativejson: cannot make %s", name)
	}
	if err := fo.DefineDataProperty("name", j.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return nil, err
	}
	if err := fo.DefineDataProperty("length", j.rt.ToValue(length), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return nil, err
	}
	return fo, nil
}

// syntaxError throws a SyntaxError of this runtime with message msg.
func (j *nativeJSON) syntaxError(msg string) {
	// goja's parse throws one for empty text.
	panic(j.intrinsicError(j.rt.Try(func() {
		j.origParse(goja.FunctionCall{This: goja.Undefined(), Arguments: []goja.Value{j.rt.ToValue("")}})
	}), msg))
}

// rangeError throws a RangeError of this runtime with message msg.
func (j *nativeJSON) rangeError(msg string) {
	// goja throws one for an array length that is not a uint32.
	ex, _ := j.rt.NewArray().Set("length", -1).(*goja.Exception)
	panic(j.intrinsicError(ex, msg))
}

// intrinsicError is the error object goja threw (ex) with its message
// replaced by msg. goja makes its errors with the runtime's built-in
// constructors, so this is exactly what new C(msg) makes with the built-in
// C (the same class, prototype, own properties and stack), whatever the
// script did to the global C since. Taking the constructors from the global
// object before the module runs would do too, but would build the Error
// classes in every runtime; a runtime serves one call, which rarely throws.
func (j *nativeJSON) intrinsicError(ex *goja.Exception, msg string) *goja.Object {
	if ex != nil {
		if e, ok := ex.Value().(*goja.Object); ok {
			// The attributes the constructor gives the message.
			if err := e.DefineDataProperty("message", j.rt.ToValue(msg), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err == nil {
				return e
			}
		}
	}
	panic(fmt.Errorf("nativejson: cannot make the error %q", msg))
}
