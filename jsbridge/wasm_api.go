package jsbridge

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unsafe"

	"github.com/dop251/goja"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
)

//go:embed wasm_prelude.js
var wasmPreludeSource string

// wasmPrelude is the namespace's JS half, compiled once per process.
var wasmPrelude = sync.OnceValues(func() (*goja.Program, error) {
	return goja.Compile("wasm_prelude.js", wasmPreludeSource, true)
})

// wasmModuleConfig instantiates anonymously (many instances of a module
// at once), with no start function but the module's own start section (V8
// calls no "_start"), and no WASI or other host module: an instance
// imports nothing but what the imports object gives it. The random source
// is only for WASI, which no instance can reach; set, it saves wazero
// seeding a math/rand source per instance (a third of an instantiation).
var wasmModuleConfig = wazero.NewModuleConfig().WithName("").WithStartFunctions().WithRandSource(zeroReader{})

// zeroReader reads zeros.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

var bigIntType = reflect.TypeFor[*big.Int]()

// wasmInstKey is the ctx key of the instance a Wasm call runs in.
type wasmInstKey struct{}

// wasmState is one runtime's WebAssembly: the namespace and the Go side of
// its objects. Instances and the memories they made belong to the run that
// made them (the module's top level, or one call) and are closed when it
// ends (endRun).
type wasmState struct {
	v  *vm
	e  *wasmEngine
	ns *goja.Object
	// prototypes and error classes from the prelude
	protoModule, protoMemory, protoGlobal, protoTable *goja.Object
	compileError, linkError, runtimeError             goja.Value

	modules  map[*goja.Object]*wasmModule
	memories map[*goja.Object]*wasmMemory
	globals  map[*goja.Object]*wasmGlobal
	tables   map[*goja.Object]*wasmTable

	// The run's: instances to close, memories whose buffers to detach,
	// modules compiled for the run only.
	instances []*wasmInstance
	liveMems  []*wasmMemory
	owned     []*wasmModule
	// kept are the modules that the module's top level compiled for this
	// runtime only (the pool's cache was full): its Modules stay usable
	// in every call, so they are closed with the runtime, not the run.
	kept *keptModules
	// runObjs are the JS objects of the run's Wasm objects, forgotten (in
	// the maps above) when it ends.
	runObjs []*goja.Object
	// used is the linear memory of the run's instances, in bytes.
	used atomic.Uint64
	// pending is what a JS import threw (a *goja.Exception, or goja's
	// interrupt or stack overflow), rethrown once the Wasm call unwound.
	pending error
}

// wasmInstance is one WebAssembly.Instance.
type wasmInstance struct {
	ws      *wasmState
	m       *wasmModule
	mod     api.Module
	imports []goja.Callable // by import index; nil for other kinds
	// ctx is the ctx of the run that made it (its deadline stops the
	// instance's code), carrying the instance for its imports.
	ctx context.Context
}

type wasmMemory struct {
	mem    api.Memory
	inst   api.Module // closed at the end of the run
	buf    goja.ArrayBuffer
	bufVal goja.Value
	data   []byte // what buf is over
	ended  bool
}

type wasmGlobal struct {
	g       api.Global // nil: made by new WebAssembly.Global
	typ     api.ValueType
	mutable bool
	val     uint64
}

type wasmTable struct {
	length int64 // -1: an exported table, whose length is not known
}

// wasm is the runtime's WebAssembly state, made on first use.
func (v *vm) wasm() (*wasmState, error) {
	if v.wasmState != nil {
		return v.wasmState, nil
	}
	prog, err := wasmPrelude()
	if err != nil {
		return nil, err
	}
	ws := &wasmState{
		v: v, e: v.wasmEng,
		modules:  map[*goja.Object]*wasmModule{},
		memories: map[*goja.Object]*wasmMemory{},
		globals:  map[*goja.Object]*wasmGlobal{},
		tables:   map[*goja.Object]*wasmTable{},
	}
	ws.kept = &keptModules{}
	// The cleanup's argument refers to neither v nor ws.
	runtime.AddCleanup(v, (*keptModules).close, ws.kept)
	rt := v.rt
	fnv, err := rt.RunProgram(prog)
	if err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(fnv)
	if !ok {
		return nil, errors.New("jsbridge: the WebAssembly prelude is not a function")
	}
	natives := rt.ToValue(ws.native)
	res, err := fn(goja.Undefined(), natives)
	if err != nil {
		return nil, err
	}
	o := res.ToObject(rt)
	ws.ns = rt.NewObject()
	for _, name := range []string{"Module", "Instance", "Memory", "Global", "Table", "CompileError", "LinkError", "RuntimeError",
		"validate", "compile", "instantiate"} {
		if err := ws.ns.DefineDataProperty(name, o.Get(name), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return nil, err
		}
	}
	if err := ws.ns.DefineDataPropertySymbol(goja.SymToStringTag, rt.ToValue("WebAssembly"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return nil, err
	}
	proto := func(class string) *goja.Object {
		p := o.Get(class).ToObject(rt).Get("prototype").ToObject(rt)
		_ = p.DefineDataPropertySymbol(goja.SymToStringTag, rt.ToValue("WebAssembly."+class), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
		return p
	}
	ws.protoModule = proto("Module")
	_ = proto("Instance")
	ws.protoMemory = proto("Memory")
	ws.protoGlobal = proto("Global")
	ws.protoTable = proto("Table")
	ws.compileError = o.Get("CompileError")
	ws.linkError = o.Get("LinkError")
	ws.runtimeError = o.Get("RuntimeError")
	v.wasmState = ws
	return ws, nil
}

// native is the prelude's N: N('op', args...) runs op with args.
func (ws *wasmState) native(c goja.FunctionCall) goja.Value {
	op := c.Argument(0).String()
	c.Arguments = c.Arguments[1:]
	switch op {
	case "compile":
		return ws.jsCompile(c)
	case "validate":
		return ws.jsValidate(c)
	case "moduleExports":
		return ws.jsModuleExports(c)
	case "moduleImports":
		return ws.jsModuleImports(c)
	case "customSections":
		return ws.jsCustomSections(c)
	case "instantiate":
		return ws.jsInstantiate(c)
	case "newMemory":
		return ws.jsNewMemory(c)
	case "memoryBuffer":
		return ws.jsMemoryBuffer(c)
	case "memoryGrow":
		return ws.jsMemoryGrow(c)
	case "newGlobal":
		return ws.jsNewGlobal(c)
	case "globalGet":
		return ws.jsGlobalGet(c)
	case "globalSet":
		return ws.jsGlobalSet(c)
	case "newTable":
		return ws.jsNewTable(c)
	case "tableLength":
		return ws.jsTableLength(c)
	}
	panic(ws.v.rt.NewTypeError("WebAssembly: no operation " + op))
}

// installWasm defines the global WebAssembly as an accessor that makes the
// namespace on first read and then becomes a plain data property: a
// runtime whose script never touches WebAssembly pays nothing for it (every
// call builds a fresh runtime). A script can tell only through
// Object.getOwnPropertyDescriptor(globalThis, "WebAssembly") before its
// first read.
func installWasm(v *vm) error {
	rt := v.rt
	g := rt.GlobalObject()
	define := func(val goja.Value) {
		if err := g.DefineDataProperty("WebAssembly", val, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			panic(rt.NewGoError(err))
		}
	}
	getter := rt.ToValue(func(goja.FunctionCall) goja.Value {
		ws, err := v.wasm()
		if err != nil {
			panic(rt.NewGoError(err))
		}
		define(ws.ns)
		return ws.ns
	})
	setter := rt.ToValue(func(c goja.FunctionCall) goja.Value {
		define(c.Argument(0))
		return goja.Undefined()
	})
	return g.DefineAccessorProperty("WebAssembly", getter, setter, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// injectWasmHelper gives the helper argument of a call (WasmHelperArg) a
// wasmHelper property: a WebAssembly.Module of the pool's helper, compiled
// once for the pool. A missing, undefined or null argument becomes an
// object holding only wasmHelper; another primitive is left alone.
func (v *vm) injectWasmHelper(args []goja.Value) ([]goja.Value, error) {
	e := v.wasmEng
	ws, err := v.wasm()
	if err != nil {
		return nil, err
	}
	idx := e.helperArg.Index
	for len(args) <= idx {
		args = append(args, goja.Undefined())
	}
	mod := ws.moduleObject(e.helper)
	switch a := args[idx].(type) {
	case *goja.Object:
		if err := a.Set("wasmHelper", mod); err != nil {
			return nil, err
		}
	default:
		if a == nil || goja.IsUndefined(a) || goja.IsNull(a) {
			o := v.rt.NewObject()
			_ = o.Set("wasmHelper", mod)
			args[idx] = o
		}
	}
	return args, nil
}

// endRun closes the run's instances (their memories and globals go with
// them) and modules compiled for it, and detaches the buffers the run
// handed out: no Wasm state outlives the run that made it.
func (ws *wasmState) endRun() {
	ctx := context.Background()
	for _, m := range ws.liveMems {
		m.detach()
		m.ended = true
		if m.inst != nil {
			_ = m.inst.Close(ctx)
		}
	}
	for _, inst := range ws.instances {
		_ = inst.mod.Close(ctx)
		inst.ctx = nil
	}
	for _, m := range ws.owned {
		m.close(ctx)
	}
	for _, obj := range ws.runObjs {
		delete(ws.modules, obj)
		delete(ws.memories, obj)
		delete(ws.globals, obj)
		delete(ws.tables, obj)
	}
	clear(ws.runObjs)
	ws.runObjs = ws.runObjs[:0]
	clear(ws.liveMems)
	clear(ws.instances)
	clear(ws.owned)
	ws.liveMems, ws.instances, ws.owned = ws.liveMems[:0], ws.instances[:0], ws.owned[:0]
	ws.pending = nil
}

// ownedByRun makes obj's Go side die with the run: the maps would grow
// without bound in a runtime that serves call after call. A Module made by
// the module's top level (the runtime's first run) is kept: compiling once
// and instantiating per call is the usual pattern, and compiled code holds
// no call's data.
func (ws *wasmState) ownedByRun(obj *goja.Object, isModule bool) {
	if isModule && ws.v.runs == 0 {
		return
	}
	ws.runObjs = append(ws.runObjs, obj)
}

// checkFreed throws a RuntimeError when val looks like one of ours (it has
// proto's prototype) made in an earlier run: its Go side is gone.
func (ws *wasmState) checkFreed(val goja.Value, proto *goja.Object, class string) {
	if obj, ok := val.(*goja.Object); ok && obj.Prototype() == proto {
		ws.throw(ws.runtimeError, "WebAssembly.%s: freed at the end of the call that made it (Wasm objects live for one call)", class)
	}
}

// --- errors ---

func (ws *wasmState) throw(class goja.Value, format string, args ...any) {
	ctor, ok := goja.AssertConstructor(class)
	if !ok {
		panic(ws.v.rt.NewTypeError(fmt.Sprintf(format, args...)))
	}
	obj, err := ctor(nil, ws.v.rt.ToValue(fmt.Sprintf(format, args...)))
	if err != nil {
		panic(err)
	}
	panic(obj)
}

func (ws *wasmState) typeError(format string, args ...any) {
	panic(ws.v.rt.NewTypeError(fmt.Sprintf(format, args...)))
}

func (ws *wasmState) rangeError(format string, args ...any) {
	rt := ws.v.rt
	ctor, _ := goja.AssertConstructor(rt.Get("RangeError"))
	if ctor != nil {
		if obj, err := ctor(nil, rt.ToValue(fmt.Sprintf(format, args...))); err == nil {
			panic(obj)
		}
	}
	ws.typeError(format, args...)
}

// callError throws what a failed Wasm call (or instantiation) calls for:
// what an import threw, the call's end at its deadline, or a trap as
// WebAssembly.RuntimeError with V8's wording.
func (ws *wasmState) callError(where string, err error) {
	if p := ws.pending; p != nil {
		ws.pending = nil
		panic(p)
	}
	if ctx := ws.v.ctx; ctx.Err() != nil {
		// The runtime is interrupted too (or about to be): the call ends
		// with the pool's error for it, whatever JS would catch.
		ws.v.interruptIfDone()
		ws.throw(ws.runtimeError, "%s: the call was stopped (%v)", where, context.Cause(ctx))
	}
	if _, ok := errors.AsType[*sys.ExitError](err); ok {
		ws.throw(ws.runtimeError, "%s: the instance was closed: an instance lives for the call that made it", where)
	}
	msg := compileMessage(err)
	msg = strings.TrimPrefix(msg, "wasm error: ")
	switch msg {
	case "stack overflow":
		ws.rangeError("Maximum call stack size exceeded")
	case "out of bounds memory access":
		msg = "memory access out of bounds"
	case "integer divide by zero":
		msg = "divide by zero"
	case "integer overflow":
		msg = "divide result unrepresentable"
	case "invalid conversion to integer":
		msg = "float unrepresentable in integer range"
	case "invalid table access":
		msg = "table index is out of bounds"
	case "indirect call type mismatch":
		msg = "null function or function signature mismatch"
	}
	ws.throw(ws.runtimeError, "%s", msg)
}

// --- values ---

// toWasm converts a JS value to a Wasm value of type t, as the JS API's
// ToWebAssemblyValue does.
func (ws *wasmState) toWasm(val goja.Value, t api.ValueType) uint64 {
	switch t {
	case api.ValueTypeI32:
		return api.EncodeI32(toInt32(ws.toNumber(val)))
	case api.ValueTypeI64:
		return uint64(ws.toBigInt64(val))
	case api.ValueTypeF32:
		return api.EncodeF32(float32(ws.toNumber(val)))
	case api.ValueTypeF64:
		return api.EncodeF64(ws.toNumber(val))
	}
	ws.typeError("type incompatibility when transforming from/to JS")
	return 0
}

func (ws *wasmState) toNumber(val goja.Value) float64 {
	if val != nil && val.ExportType() == bigIntType {
		ws.typeError("Cannot convert a BigInt value to a number")
	}
	if val == nil {
		return math.NaN()
	}
	return val.ToFloat()
}

// toBigInt64 is ToBigInt64: a BigInt (or a boolean or a string, as
// BigInt() takes them) modulo 2^64; a number is a TypeError, as in V8.
func (ws *wasmState) toBigInt64(val goja.Value) int64 {
	if val != nil {
		switch x := val.Export().(type) {
		case *big.Int:
			return bigToInt64(x)
		case bool:
			if x {
				return 1
			}
			return 0
		case string:
			if b, ok := stringToBigInt(x); ok {
				return bigToInt64(b)
			}
			ws.v.throwSyntax("Cannot convert " + x + " to a BigInt")
		}
	}
	s := "undefined"
	if val != nil {
		s = val.String()
	}
	ws.typeError("Cannot convert %s to a BigInt", s)
	return 0
}

// stringToBigInt is ECMAScript's StringToBigInt, as BigInt(string) reads
// a string: JS white space trimmed; empty is 0; 0x, 0o or 0b and digits
// of that base, or decimal digits with an optional sign; no separators.
// (big.Int.SetString with base 0 also takes 1_000 and -0x10, which JS
// refuses, and refuses the empty string, which JS reads as 0.)
func stringToBigInt(s string) (*big.Int, bool) {
	s = strings.TrimFunc(s, func(r rune) bool { return r == '\uFEFF' || (unicode.IsSpace(r) && r != '\u0085') })
	if s == "" {
		return new(big.Int), true
	}
	base, digits := 10, s
	if len(s) > 2 && s[0] == '0' {
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 10 {
			s, digits = s[2:], s[2:]
		}
	}
	if base == 10 && (s[0] == '+' || s[0] == '-') {
		digits = s[1:]
	}
	if digits == "" {
		return nil, false
	}
	for _, c := range digits {
		d := 99
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int(c-'A') + 10
		}
		if d >= base {
			return nil, false
		}
	}
	return new(big.Int).SetString(s, base)
}

func (v *vm) throwSyntax(msg string) {
	ctor, _ := goja.AssertConstructor(v.rt.Get("SyntaxError"))
	if ctor != nil {
		if obj, err := ctor(nil, v.rt.ToValue(msg)); err == nil {
			panic(obj)
		}
	}
	panic(v.rt.NewTypeError(msg))
}

var two64 = new(big.Int).Lsh(big.NewInt(1), 64)

func bigToInt64(b *big.Int) int64 {
	if b.IsInt64() {
		return b.Int64()
	}
	m := new(big.Int).Mod(b, two64)
	return int64(m.Uint64())
}

// toInt32 is ECMAScript's ToInt32.
func toInt32(f float64) int32 {
	if i := int32(f); float64(i) == f {
		return i
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	m := math.Mod(math.Trunc(f), 4294967296)
	if m < 0 {
		m += 4294967296
	}
	return int32(uint32(m))
}

// fromWasm converts a Wasm value to JS: i64 as a BigInt, as V8 does.
func (ws *wasmState) fromWasm(x uint64, t api.ValueType) goja.Value {
	rt := ws.v.rt
	switch t {
	case api.ValueTypeI32:
		return rt.ToValue(int64(int32(uint32(x))))
	case api.ValueTypeI64:
		return rt.ToValue(big.NewInt(int64(x)))
	case api.ValueTypeF32:
		return rt.ToValue(float64(api.DecodeF32(x)))
	case api.ValueTypeF64:
		return rt.ToValue(api.DecodeF64(x))
	}
	ws.typeError("type incompatibility when transforming from/to JS")
	return nil
}

// prop is obj[name], undefined when absent.
func prop(obj *goja.Object, name string) goja.Value {
	if v := obj.Get(name); v != nil {
		return v
	}
	return goja.Undefined()
}

func valueTypeOf(s string) (api.ValueType, bool) {
	switch s {
	case "i32":
		return api.ValueTypeI32, true
	case "i64":
		return api.ValueTypeI64, true
	case "f32":
		return api.ValueTypeF32, true
	case "f64":
		return api.ValueTypeF64, true
	}
	return 0, false
}

// bytesArg is the bytes of the ArrayBuffer the prelude made of a
// BufferSource.
func (ws *wasmState) bytesArg(val goja.Value, where string) []byte {
	if ab, ok := val.Export().(goja.ArrayBuffer); ok {
		return ab.Bytes()
	}
	ws.typeError("%s: Argument 0 must be a buffer source", where)
	return nil
}

// --- WebAssembly.Module ---

func (ws *wasmState) moduleObject(m *wasmModule) *goja.Object {
	obj := ws.v.rt.CreateObject(ws.protoModule)
	ws.modules[obj] = m
	ws.ownedByRun(obj, true)
	return obj
}

func (ws *wasmState) module(val goja.Value, where string) *wasmModule {
	if obj, ok := val.(*goja.Object); ok {
		if m, ok := ws.modules[obj]; ok {
			return m
		}
	}
	ws.checkFreed(val, ws.protoModule, "Module")
	ws.typeError("%s: Argument 0 must be a WebAssembly.Module", where)
	return nil
}

func (ws *wasmState) compile(b []byte, where string) *wasmModule {
	m, err := ws.e.compile(b)
	if err != nil {
		ws.throw(ws.compileError, "%s: %v", where, err)
	}
	if m.owned {
		if ws.v.runs == 0 {
			ws.kept.add(m) // a Module of the top level: kept (ownedByRun)
		} else {
			ws.owned = append(ws.owned, m)
		}
	}
	return m
}

// keptModules are a runtime's top-level modules compiled for it only,
// closed once the runtime is garbage.
type keptModules struct {
	mu   sync.Mutex
	mods []*wasmModule
}

func (k *keptModules) add(m *wasmModule) {
	k.mu.Lock()
	k.mods = append(k.mods, m)
	k.mu.Unlock()
}

func (k *keptModules) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range k.mods {
		m.close(context.Background())
	}
	k.mods = nil
}

func (ws *wasmState) jsCompile(c goja.FunctionCall) goja.Value {
	this := c.Argument(0).ToObject(ws.v.rt)
	ws.modules[this] = ws.compile(ws.bytesArg(c.Argument(1), "WebAssembly.Module()"), "WebAssembly.Module()")
	ws.ownedByRun(this, true)
	return goja.Undefined()
}

func (ws *wasmState) jsValidate(c goja.FunctionCall) goja.Value {
	m, err := ws.e.compile(ws.bytesArg(c.Argument(0), "WebAssembly.validate()"))
	if err != nil {
		return ws.v.rt.ToValue(false)
	}
	if m.owned {
		ws.owned = append(ws.owned, m)
	}
	return ws.v.rt.ToValue(true)
}

func (ws *wasmState) jsModuleExports(c goja.FunctionCall) goja.Value {
	m := ws.module(c.Argument(0), "WebAssembly.Module.exports()")
	rt := ws.v.rt
	out := make([]any, len(m.info.exports))
	for i, ex := range m.info.exports {
		o := rt.NewObject()
		_ = o.Set("name", ex.name)
		_ = o.Set("kind", externKindNames[ex.kind])
		out[i] = o
	}
	return rt.NewArray(out...)
}

func (ws *wasmState) jsModuleImports(c goja.FunctionCall) goja.Value {
	m := ws.module(c.Argument(0), "WebAssembly.Module.imports()")
	rt := ws.v.rt
	out := make([]any, len(m.info.imports))
	for i, imp := range m.info.imports {
		o := rt.NewObject()
		_ = o.Set("module", imp.module)
		_ = o.Set("name", imp.name)
		_ = o.Set("kind", externKindNames[imp.kind])
		out[i] = o
	}
	return rt.NewArray(out...)
}

func (ws *wasmState) jsCustomSections(c goja.FunctionCall) goja.Value {
	m := ws.module(c.Argument(0), "WebAssembly.Module.customSections()")
	name := c.Argument(1).String()
	rt := ws.v.rt
	var out []any
	for _, s := range m.info.custom {
		if s.name == name {
			out = append(out, rt.NewArrayBuffer(append([]byte(nil), s.data...)))
		}
	}
	return rt.NewArray(out...)
}

// --- WebAssembly.Instance ---

func (ws *wasmState) jsInstantiate(c goja.FunctionCall) goja.Value {
	const where = "WebAssembly.Instance()"
	rt := ws.v.rt
	m := ws.module(c.Argument(0), where)
	importsVal := c.Argument(1)
	importsObj, isObj := importsVal.(*goja.Object)
	if !goja.IsUndefined(importsVal) && !isObj {
		ws.typeError("%s: Argument 1 must be an object", where)
	}
	if len(m.info.imports) > 0 && !isObj {
		ws.typeError("%s: Imports argument must be present and must be an object", where)
	}
	if m.info.tooBig != "" {
		ws.rangeError("%s: %s", where, m.info.tooBig)
	}
	inst := &wasmInstance{ws: ws, m: m, imports: make([]goja.Callable, len(m.info.imports))}
	for i, imp := range m.info.imports {
		modVal := prop(importsObj, imp.module)
		modObj, ok := modVal.(*goja.Object)
		if !ok {
			ws.typeError("%s: Import #%d %q: module is not an object or function", where, i, imp.module)
		}
		val := prop(modObj, imp.name)
		if imp.kind != externFunc {
			ws.throw(ws.linkError, "%s: Import #%d %q %q: importing a %s is not supported by inferbid (only functions)",
				where, i, imp.module, imp.name, externKindNames[imp.kind])
		}
		f, ok := goja.AssertFunction(val)
		if !ok {
			ws.throw(ws.linkError, "%s: Import #%d %q %q: function import requires a callable", where, i, imp.module, imp.name)
		}
		inst.imports[i] = f
	}
	hosts, err := ws.e.hostModules(m)
	if err != nil {
		ws.throw(ws.linkError, "%s: %v", where, err)
	}
	if m.info.hasMemory {
		need := uint64(m.info.memMinPages) * wasmPageSize
		if ws.used.Load()+need > ws.e.maxMem {
			ws.rangeError("%s: Out of memory: Cannot allocate Wasm memory for new instance (the call's Wasm memory is bounded at %d bytes)", where, ws.e.maxMem)
		}
	}
	inst.ctx = context.WithValue(ws.v.ctx, wasmInstKey{}, inst)
	ictx := experimental.WithMemoryAllocator(inst.ctx, ws)
	if len(hosts) > 0 {
		ictx = experimental.WithImportResolver(ictx, func(name string) api.Module { return hosts[name] })
	}
	mod, err := ws.e.rt.InstantiateModule(ictx, m.compiled, wasmModuleConfig)
	if err != nil {
		if ws.pending != nil || ws.v.ctx.Err() != nil {
			ws.callError(where, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "wasm error:") || strings.Contains(msg, "out of bounds") {
			ws.callError(where, err)
		}
		ws.throw(ws.linkError, "%s: %s", where, compileMessage(err))
	}
	inst.mod = mod
	ws.instances = append(ws.instances, inst)

	exports := rt.CreateObject(nil)
	for _, ex := range m.info.exports {
		var val goja.Value
		switch ex.kind {
		case externFunc:
			val = ws.exportFunction(inst, ex)
		case externMemory:
			val = ws.memoryObject(mod.ExportedMemory(ex.name), nil)
		case externGlobal:
			g := mod.ExportedGlobal(ex.name)
			_, mutable := g.(api.MutableGlobal)
			obj := rt.CreateObject(ws.protoGlobal)
			ws.globals[obj] = &wasmGlobal{g: g, typ: g.Type(), mutable: mutable}
			ws.ownedByRun(obj, false)
			val = obj
		case externTable:
			obj := rt.CreateObject(ws.protoTable)
			ws.tables[obj] = &wasmTable{length: -1}
			ws.ownedByRun(obj, false)
			val = obj
		default:
			val = goja.Undefined()
		}
		if err := exports.DefineDataProperty(ex.name, val, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
			panic(err)
		}
	}
	return exports
}

// wasmExportFunc is an exported function as JS sees it.
type wasmExportFunc struct {
	inst    *wasmInstance
	name    string
	fn      api.Function
	params  []api.ValueType
	results []api.ValueType
	stack   []uint64
	busy    bool
}

func (ws *wasmState) exportFunction(inst *wasmInstance, ex wasmExport) goja.Value {
	fn := inst.mod.ExportedFunction(ex.name)
	def := fn.Definition()
	x := &wasmExportFunc{inst: inst, name: ex.name, fn: fn, params: def.ParamTypes(), results: def.ResultTypes()}
	x.stack = make([]uint64, max(len(x.params), len(x.results)))
	f := ws.v.rt.ToValue(x.call).(*goja.Object)
	// As V8: the name is the function's index, the length its arity.
	_ = f.DefineDataProperty("name", ws.v.rt.ToValue(strconv.FormatUint(uint64(ex.index), 10)), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = f.DefineDataProperty("length", ws.v.rt.ToValue(len(x.params)), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	return f
}

// call calls the exported function under the run's ctx: at its deadline
// wazero closes the instance (its code checks at function entries and loop
// back-edges) and the call returns.
func (x *wasmExportFunc) call(c goja.FunctionCall) goja.Value {
	ws := x.inst.ws
	if x.inst.ctx == nil {
		ws.throw(ws.runtimeError, "wasm function: the instance was closed: an instance lives for the call that made it")
	}
	fn, stack := x.fn, x.stack
	if x.busy {
		// Re-entered through an import: a wazero Function is not
		// re-entrant.
		fn, stack = x.inst.mod.ExportedFunction(x.name), make([]uint64, len(x.stack))
	} else {
		x.busy = true
		defer func() { x.busy = false }()
	}
	for i, t := range x.params {
		stack[i] = ws.toWasm(c.Argument(i), t)
	}
	err := fn.CallWithStack(x.inst.ctx, stack)
	ws.checkBuffers()
	if err != nil {
		ws.callError("wasm function", err)
	}
	switch len(x.results) {
	case 0:
		return goja.Undefined()
	case 1:
		return ws.fromWasm(stack[0], x.results[0])
	}
	out := make([]any, len(x.results))
	for i, t := range x.results {
		out[i] = ws.fromWasm(stack[i], t)
	}
	return ws.v.rt.NewArray(out...)
}

// errImportThrew unwinds a Wasm call whose JS import threw; the thrown
// value waits in wasmState.pending.
var errImportThrew = errors.New("jsbridge: a JS import threw")

// importFunc is the Go function behind function import i of a module. It
// holds nothing but its types: the instance comes from ctx.
func importFunc(i int, params, results []api.ValueType) api.GoModuleFunc {
	return func(ctx context.Context, _ api.Module, stack []uint64) {
		inst, _ := ctx.Value(wasmInstKey{}).(*wasmInstance)
		if inst == nil {
			panic(errors.New("jsbridge: a Wasm import called outside its instance's run"))
		}
		inst.ws.callImport(inst, i, params, results, stack)
	}
}

func (ws *wasmState) callImport(inst *wasmInstance, i int, params, results []api.ValueType, stack []uint64) {
	rt := ws.v.rt
	args := make([]goja.Value, len(params))
	for j, t := range params {
		args[j] = ws.fromWasm(stack[j], t)
	}
	ws.checkBuffers()
	res, err := inst.imports[i](goja.Undefined(), args...)
	if err == nil && len(results) > 0 {
		if ex := rt.Try(func() {
			if len(results) == 1 {
				stack[0] = ws.toWasm(res, results[0])
				return
			}
			obj, ok := res.(*goja.Object)
			if !ok {
				ws.typeError("multi-return value must be iterable")
			}
			for j, t := range results {
				stack[j] = ws.toWasm(prop(obj, strconv.Itoa(j)), t)
			}
		}); ex != nil {
			err = ex
		}
	}
	if err != nil {
		ws.pending = err
		panic(errImportThrew)
	}
}

// --- memories ---

// Allocate implements experimental.MemoryAllocator: the linear memories of
// a run's instances are Go slices (on the Go heap, so the heap watchdog
// counts them), bounded together by WasmMaxMemoryBytes: a memory.grow
// past the bound returns -1.
func (ws *wasmState) Allocate(_, _ uint64) experimental.LinearMemory {
	return &wasmLinear{ws: ws}
}

type wasmLinear struct {
	ws  *wasmState
	buf []byte
}

func (l *wasmLinear) Reallocate(size uint64) []byte {
	n := uint64(len(l.buf))
	if size <= n {
		l.buf = l.buf[:size]
		return l.buf
	}
	grow := size - n
	used := l.ws.used.Load()
	limit := l.ws.e.maxMem
	if used+grow > limit {
		return nil
	}
	switch {
	case size <= uint64(cap(l.buf)):
		l.buf = l.buf[:size]
	case n == 0 && size == wasmPageSize:
		// A fresh one-page memory, the common helper's: a recycled page
		// (zeroed) saves the collector 64 KiB per instance.
		l.buf = onePage()
	default:
		// Amortised growth (a page at a time must not copy the memory
		// each time), but within the bound.
		c := min(max(size, 2*uint64(cap(l.buf))), size+(limit-used-grow))
		nb := make([]byte, size, c)
		copy(nb, l.buf)
		l.buf = nb
	}
	l.ws.used.Add(grow)
	return l.buf
}

// Free is called when the instance is closed, at the end of its run, after
// the run's buffers were detached: nothing in JS refers to the bytes.
func (l *wasmLinear) Free() {
	l.ws.used.Add(^(uint64(len(l.buf)) - 1))
	if cap(l.buf) == wasmPageSize {
		pages.Put((*[wasmPageSize]byte)(l.buf[:wasmPageSize]))
	}
	l.buf = nil
}

// pages recycles one-page linear memories.
var pages sync.Pool

// onePage is a zeroed page of linear memory.
func onePage() []byte {
	if p, ok := pages.Get().(*[wasmPageSize]byte); ok {
		clear(p[:])
		return p[:]
	}
	return make([]byte, wasmPageSize)
}

// memoryObject is the WebAssembly.Memory of mem (inst: the module made
// for a new WebAssembly.Memory, closed with the run).
func (ws *wasmState) memoryObject(mem api.Memory, inst api.Module) *goja.Object {
	obj := ws.v.rt.CreateObject(ws.protoMemory)
	m := &wasmMemory{mem: mem, inst: inst}
	ws.memories[obj] = m
	ws.ownedByRun(obj, false)
	ws.liveMems = append(ws.liveMems, m)
	return obj
}

// receiver is the this of a Memory, Global or Table method: the object's
// entry in table, or the TypeError V8 throws (naming a freed one's end of
// life, checkFreed). typeError panics: nil is never returned.
func receiver[T any](ws *wasmState, val goja.Value, table map[*goja.Object]*T, proto *goja.Object, class string) *T {
	if obj, ok := val.(*goja.Object); ok {
		if x, ok := table[obj]; ok {
			return x
		}
	}
	ws.checkFreed(val, proto, class)
	ws.typeError("Receiver is not a WebAssembly.%s", class)
	return nil
}

func (ws *wasmState) memory(val goja.Value) *wasmMemory {
	return receiver(ws, val, ws.memories, ws.protoMemory, "Memory")
}

func (ws *wasmState) jsNewMemory(c goja.FunctionCall) goja.Value {
	const where = "WebAssembly.Memory()"
	rt := ws.v.rt
	this := c.Argument(0).ToObject(rt)
	desc, ok := c.Argument(1).(*goja.Object)
	if !ok {
		ws.typeError("%s: Argument 0 must be a memory descriptor", where)
	}
	limit := func(name string, required bool) (uint32, bool) {
		val := desc.Get(name)
		if val == nil || goja.IsUndefined(val) {
			if required {
				ws.typeError("%s: Property 'initial' is required", where)
			}
			return 0, false
		}
		f := ws.toNumber(val)
		if math.IsNaN(f) || f < 0 || f > 65536 || math.IsInf(f, 0) {
			ws.typeError("%s: Property '%s': value %v is above the upper bound 65536", where, name, val)
		}
		return uint32(f), true
	}
	initial, _ := limit("initial", true)
	maximum, hasMax := limit("maximum", false)
	if hasMax && maximum < initial {
		ws.rangeError("%s: Property 'maximum': value %d is below the lower bound %d", where, maximum, initial)
	}
	if uint64(initial)*wasmPageSize+ws.used.Load() > ws.e.maxMem {
		ws.rangeError("%s: could not allocate memory (the call's Wasm memory is bounded at %d bytes)", where, ws.e.maxMem)
	}
	if hasMax && uint64(maximum)*wasmPageSize > ws.e.maxMem {
		maximum = uint32(ws.e.maxMem / wasmPageSize)
	}
	m, err := ws.e.memoryModule(initial, maximum, hasMax)
	if err != nil {
		ws.rangeError("%s: %v", where, err)
	}
	if m.owned {
		ws.owned = append(ws.owned, m)
	}
	ctx := experimental.WithMemoryAllocator(ws.v.ctx, ws)
	mod, err := ws.e.rt.InstantiateModule(ctx, m.compiled, wasmModuleConfig)
	if err != nil {
		ws.rangeError("%s: %v", where, compileMessage(err))
	}
	wm := &wasmMemory{mem: mod.ExportedMemory("m"), inst: mod}
	ws.memories[this] = wm
	ws.ownedByRun(this, false)
	ws.liveMems = append(ws.liveMems, wm)
	return goja.Undefined()
}

// jsMemoryBuffer is memory.buffer: an ArrayBuffer over the linear memory
// itself (no copy), the same one until the memory grows.
func (ws *wasmState) jsMemoryBuffer(c goja.FunctionCall) goja.Value {
	m := ws.memory(c.Argument(0))
	if m.ended {
		ws.throw(ws.runtimeError, "WebAssembly.Memory: the memory was freed at the end of the call that made it")
	}
	data, _ := m.mem.Read(0, m.mem.Size())
	if m.bufVal != nil && sameBytes(data, m.data) {
		return m.bufVal
	}
	m.detach()
	m.data = data[:len(data):len(data)]
	m.buf = ws.v.rt.NewArrayBuffer(m.data)
	m.bufVal = ws.v.rt.ToValue(m.buf)
	return m.bufVal
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// detach detaches the buffer handed out, as V8 does when a memory grows:
// views over it read as empty from then on.
func (m *wasmMemory) detach() {
	if m.bufVal != nil {
		m.buf.Detach()
		m.bufVal, m.data = nil, nil
	}
}

// checkBuffers detaches the buffers of memories that grew (inside Wasm,
// memory.grow), when JS could next see them: after a Wasm call and on
// entry to a JS import.
func (ws *wasmState) checkBuffers() {
	for _, m := range ws.liveMems {
		if m.bufVal != nil && !m.ended {
			if data, _ := m.mem.Read(0, m.mem.Size()); !sameBytes(data, m.data) {
				m.detach()
			}
		}
	}
}

func (ws *wasmState) jsMemoryGrow(c goja.FunctionCall) goja.Value {
	m := ws.memory(c.Argument(0))
	if m.ended {
		ws.throw(ws.runtimeError, "WebAssembly.Memory.grow(): the memory was freed at the end of the call that made it")
	}
	f := ws.toNumber(c.Argument(1))
	if math.IsNaN(f) || f < 0 || f > 65536 {
		ws.typeError("WebAssembly.Memory.grow(): Argument 0 must be non-negative")
	}
	prev, ok := m.mem.Grow(uint32(f))
	if !ok {
		ws.rangeError("WebAssembly.Memory.grow(): Maximum memory size exceeded")
	}
	m.detach() // V8 detaches on every grow, grow(0) included
	return ws.v.rt.ToValue(prev)
}

// --- globals and tables ---

func (ws *wasmState) global(val goja.Value) *wasmGlobal {
	return receiver(ws, val, ws.globals, ws.protoGlobal, "Global")
}

func (ws *wasmState) jsNewGlobal(c goja.FunctionCall) goja.Value {
	const where = "WebAssembly.Global()"
	rt := ws.v.rt
	this := c.Argument(0).ToObject(rt)
	desc, ok := c.Argument(1).(*goja.Object)
	if !ok {
		ws.typeError("%s: Argument 0 must be a global descriptor", where)
	}
	typ, ok := valueTypeOf(prop(desc, "value").String())
	if !ok {
		ws.typeError("%s: Descriptor property 'value' must be a WebAssembly type", where)
	}
	g := &wasmGlobal{typ: typ, mutable: prop(desc, "mutable").ToBoolean()}
	if v := c.Argument(2); !goja.IsUndefined(v) {
		g.val = ws.toWasm(v, typ)
	}
	ws.globals[this] = g
	ws.ownedByRun(this, false)
	return goja.Undefined()
}

func (ws *wasmState) jsGlobalGet(c goja.FunctionCall) goja.Value {
	g := ws.global(c.Argument(0))
	if g.g != nil {
		return ws.fromWasm(g.g.Get(), g.typ)
	}
	return ws.fromWasm(g.val, g.typ)
}

func (ws *wasmState) jsGlobalSet(c goja.FunctionCall) goja.Value {
	g := ws.global(c.Argument(0))
	if !g.mutable {
		ws.typeError("set WebAssembly.Global.value: Can't set the value of an immutable global.")
	}
	x := ws.toWasm(c.Argument(1), g.typ)
	if mg, ok := g.g.(api.MutableGlobal); ok {
		mg.Set(x)
	} else {
		g.val = x
	}
	return goja.Undefined()
}

func (ws *wasmState) jsNewTable(c goja.FunctionCall) goja.Value {
	rt := ws.v.rt
	this := c.Argument(0).ToObject(rt)
	desc, ok := c.Argument(1).(*goja.Object)
	if !ok {
		ws.typeError("WebAssembly.Table(): Argument 0 must be a table descriptor")
	}
	f := ws.toNumber(prop(desc, "initial"))
	if math.IsNaN(f) || f < 0 || f > float64(ws.e.maxTable) {
		ws.rangeError("WebAssembly.Table(): Property 'initial': value %v is above the upper bound %d", desc.Get("initial"), ws.e.maxTable)
	}
	ws.tables[this] = &wasmTable{length: int64(f)}
	ws.ownedByRun(this, false)
	return goja.Undefined()
}

func (ws *wasmState) jsTableLength(c goja.FunctionCall) goja.Value {
	t := receiver(ws, c.Argument(0), ws.tables, ws.protoTable, "Table")
	if t.length < 0 {
		ws.typeError("WebAssembly.Table: the length of an exported table is not supported by inferbid")
	}
	return ws.v.rt.ToValue(t.length)
}
