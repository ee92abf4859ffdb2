package jsbridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Defaults of the WebAssembly options.
const (
	// DefaultWasmMaxMemoryBytes bounds the linear memory of the Wasm
	// instances of one run (a call, or the module's top level).
	DefaultWasmMaxMemoryBytes = 1 << 30
	// DefaultWasmMaxTableElements bounds a table's elements (V8's limit).
	DefaultWasmMaxTableElements = 10_000_000
	// maxCachedWasmModules bounds the compiled modules a pool keeps for
	// its lifetime (see wasmEngine.compile), and maxCachedWasmBytes their
	// bytes together.
	maxCachedWasmModules = 256
	maxCachedWasmBytes   = 64 << 20
	// maxWasmHelperArgIndex bounds WasmHelperArg.Index: the call's
	// arguments are filled with undefined up to it.
	maxWasmHelperArgIndex = 64
	wasmPageSize          = 1 << 16
)

// WasmHelperArg says which argument of which function gets the pool's Wasm
// helper (Options.WasmHelper) as its wasmHelper property. The zero value is
// B&A's convention: generateBid's fifth argument, browserSignals.
type WasmHelperArg struct {
	// Func is the global function; "" = "generateBid".
	Func string
	// Index is the argument, counted from 0, at most 64; used only when
	// Func is set (the default is 4, browserSignals).
	Index int
}

func (a WasmHelperArg) withDefaults() WasmHelperArg {
	if a.Func == "" {
		return WasmHelperArg{Func: "generateBid", Index: 4}
	}
	return a
}

// wasmEngine is a pool's WebAssembly: one wazero.Runtime, the compiled
// modules (the helper and those scripts compiled, by content), and the
// limits. Instances are per run (wasmState).
type wasmEngine struct {
	rt       wazero.Runtime
	maxMem   uint64
	maxTable uint32
	// helper is Options.WasmHelper compiled; nil without one.
	helper    *wasmModule
	helperArg WasmHelperArg

	mu    sync.Mutex
	cache map[[32]byte]*wasmModule
	// cacheBytes are the cached modules' bytes, bounded by maxCacheBytes
	// (maxCachedWasmBytes).
	cacheBytes, maxCacheBytes int
	// mems are the compiled one-memory modules behind new
	// WebAssembly.Memory, by limits.
	mems map[[2]uint32]*wasmModule
}

// newWasmEngine makes a pool's engine and compiles the helper.
func newWasmEngine(opts Options) (*wasmEngine, error) {
	if a := opts.WasmHelperArg.withDefaults(); a.Index < 0 || a.Index > maxWasmHelperArgIndex {
		return nil, fmt.Errorf("jsbridge: WasmHelperArg.Index %d of %s: want 0 to %d", a.Index, a.Func, maxWasmHelperArgIndex)
	}
	maxMem := uint64(opts.WasmMaxMemoryBytes)
	if opts.WasmMaxMemoryBytes <= 0 {
		maxMem = DefaultWasmMaxMemoryBytes
	}
	maxMem = min(maxMem, 1<<32) // 65536 pages: wasm32's own limit
	maxMem = max(maxMem, wasmPageSize)
	cfg := wazero.NewRuntimeConfig(). // the compiler where wazero has one (amd64, arm64), else the interpreter
						WithCloseOnContextDone(true).
						WithMemoryLimitPages(uint32(maxMem / wasmPageSize)).
						WithCoreFeatures(api.CoreFeaturesV2)
	e := &wasmEngine{
		rt:            wazero.NewRuntimeWithConfig(context.Background(), cfg),
		maxMem:        maxMem,
		maxTable:      DefaultWasmMaxTableElements,
		helperArg:     opts.WasmHelperArg.withDefaults(),
		cache:         map[[32]byte]*wasmModule{},
		maxCacheBytes: maxCachedWasmBytes,
		mems:          map[[2]uint32]*wasmModule{},
	}
	// The wazero runtime (compiled code in executable memory) is closed
	// once nothing can run Wasm on it: when the pool and every runtime of
	// it, an abandoned one still running included, are gone. Pool.Close
	// cannot close it, since calls in flight finish after it. Nothing the
	// runtime holds refers to e (imports find their instance in the ctx).
	runtime.AddCleanup(e, func(rt wazero.Runtime) { _ = rt.Close(context.Background()) }, e.rt)
	if opts.WasmMaxTableElements > 0 {
		e.maxTable = uint32(min(opts.WasmMaxTableElements, 1<<31))
	}
	if len(opts.WasmHelper) > 0 {
		m, err := e.compile(opts.WasmHelper)
		if err != nil {
			e.rt.Close(context.Background())
			return nil, fmt.Errorf("jsbridge: the Wasm helper: %w", err)
		}
		e.helper = m
	}
	return e, nil
}

// wasmModule is one compiled module, shared by every runtime of the pool
// that compiles the same bytes: compiled code holds no script data.
type wasmModule struct {
	compiled wazero.CompiledModule
	info     *wasmInfo
	// owned: not in the cache; closed at the end of the run that made it.
	owned bool

	// hosts are the modules that serve its function imports, by import
	// module name, made on first instantiation (see hostModules), and
	// hostCompiled what they were compiled from: closed with an owned
	// module (close), kept with a cached one.
	hostOnce     sync.Once
	hosts        map[string]api.Module
	hostCompiled []wazero.CompiledModule
	hostErr      error
}

// close closes an owned module at the end of its run: its compiled code
// and the host modules made for its imports, which would otherwise stay
// in the pool's wazero runtime, one set per run.
func (m *wasmModule) close(ctx context.Context) {
	for _, h := range m.hosts {
		_ = h.Close(ctx)
	}
	for _, cm := range m.hostCompiled {
		_ = cm.Close(ctx)
	}
	_ = m.compiled.Close(ctx)
}

// wasmCompileError is a module that does not compile: CompileError in JS.
type wasmCompileError struct{ msg string }

func (e *wasmCompileError) Error() string { return e.msg }

// compile compiles bytes, or returns the module compiled from the same
// bytes before. Compiled modules stay for the pool's lifetime, up to
// maxCachedWasmModules and maxCacheBytes of their bytes; past that a
// module is compiled for its run only (owned), and closed when the run
// ends.
func (e *wasmEngine) compile(b []byte) (*wasmModule, error) {
	key := sha256.Sum256(b)
	e.mu.Lock()
	m, ok := e.cache[key]
	e.mu.Unlock()
	if ok {
		return m, nil
	}
	info, patched, err := parseWasm(b, e.maxTable)
	if err != nil {
		return nil, &wasmCompileError{msg: err.Error()}
	}
	cm, err := e.rt.CompileModule(context.Background(), patched)
	if err != nil {
		return nil, &wasmCompileError{msg: compileMessage(err)}
	}
	m = &wasmModule{compiled: cm, info: info}
	e.mu.Lock()
	defer e.mu.Unlock()
	if prev, ok := e.cache[key]; ok {
		cm.Close(context.Background())
		return prev, nil
	}
	if len(e.cache) >= maxCachedWasmModules || e.cacheBytes+len(b) > e.maxCacheBytes {
		m.owned = true
		return m, nil
	}
	e.cache[key] = m
	e.cacheBytes += len(b)
	return m, nil
}

// memoryModule is the compiled module behind new WebAssembly.Memory: one
// exported memory with these limits (max 0 = none).
func (e *wasmEngine) memoryModule(initial, maximum uint32, hasMax bool) (*wasmModule, error) {
	key := [2]uint32{initial, 0}
	if hasMax {
		key[1] = maximum + 1
	}
	e.mu.Lock()
	m, ok := e.mems[key]
	e.mu.Unlock()
	if ok {
		return m, nil
	}
	// (module (memory (export "m") initial maximum?))
	limits := append([]byte{0}, uleb(initial)...)
	if hasMax {
		limits = append(append([]byte{1}, uleb(initial)...), uleb(maximum)...)
	}
	b := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	b = append(b, section(5, append([]byte{1}, limits...))...)
	b = append(b, section(7, []byte{1, 1, 'm', 2, 0})...)
	info, _, err := parseWasm(b, e.maxTable)
	if err != nil {
		return nil, err
	}
	cm, err := e.rt.CompileModule(context.Background(), b)
	if err != nil {
		return nil, &wasmCompileError{msg: compileMessage(err)}
	}
	m = &wasmModule{compiled: cm, info: info}
	e.mu.Lock()
	defer e.mu.Unlock()
	if prev, ok := e.mems[key]; ok {
		cm.Close(context.Background())
		return prev, nil
	}
	if len(e.mems) >= maxCachedWasmModules {
		m.owned = true
		return m, nil
	}
	e.mems[key] = m
	return m, nil
}

func section(id byte, body []byte) []byte {
	return append(append([]byte{id}, uleb(uint32(len(body)))...), body...)
}

func uleb(v uint32) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
			continue
		}
		return append(out, b)
	}
}

// hostModules returns the modules serving m's function imports, by import
// module name. They are made once per compiled module, shared by every
// instance in every runtime, and hold no state: an import's function finds
// the JS function of the instance calling it in the ctx the instance was
// called with (wasmInstance.ctx).
func (e *wasmEngine) hostModules(m *wasmModule) (map[string]api.Module, error) {
	m.hostOnce.Do(func() {
		byModule := map[string][]int{}
		var order []string
		for i, imp := range m.info.imports {
			if imp.kind != externFunc {
				continue
			}
			if _, ok := byModule[imp.module]; !ok {
				order = append(order, imp.module)
			}
			byModule[imp.module] = append(byModule[imp.module], i)
		}
		defs := m.compiled.ImportedFunctions()
		m.hosts = map[string]api.Module{}
		fi := 0
		defByImport := map[int]api.FunctionDefinition{}
		for i, imp := range m.info.imports {
			if imp.kind == externFunc {
				if fi < len(defs) {
					defByImport[i] = defs[fi]
				}
				fi++
			}
		}
		for _, name := range order {
			b := e.rt.NewHostModuleBuilder(name)
			for _, i := range byModule[name] {
				def, ok := defByImport[i]
				if !ok {
					m.hostErr = errors.New("imported functions do not match the import section")
					return
				}
				b.NewFunctionBuilder().
					WithGoModuleFunction(importFunc(i, def.ParamTypes(), def.ResultTypes()), def.ParamTypes(), def.ResultTypes()).
					Export(m.info.imports[i].name)
			}
			cm, err := b.Compile(context.Background())
			if err != nil {
				m.hostErr = err
				return
			}
			m.hostCompiled = append(m.hostCompiled, cm)
			mod, err := e.rt.InstantiateModule(context.Background(), cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
			if err != nil {
				m.hostErr = err
				return
			}
			m.hosts[name] = mod
		}
	})
	return m.hosts, m.hostErr
}

// compileMessage is a wazero compile error as one line.
func compileMessage(err error) string {
	s := err.Error()
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// Extern kinds of the binary format.
const (
	externFunc   = 0
	externTable  = 1
	externMemory = 2
	externGlobal = 3
	externTag    = 4
)

var externKindNames = [...]string{"function", "table", "memory", "global", "tag"}

// wasmInfo is what the JS API shows of a module, read from its binary in
// section order (wazero's CompiledModule has maps, not the order).
type wasmInfo struct {
	imports []wasmImport
	exports []wasmExport
	custom  []wasmCustom
	// memMinPages is the initial size of its own memory (0: none).
	memMinPages uint32
	hasMemory   bool
	// tooBig, when set, is why the module cannot be instantiated (a table
	// over the limit).
	tooBig string
}

type wasmImport struct {
	module, name string
	kind         byte
}

type wasmExport struct {
	name  string
	kind  byte
	index uint32
}

type wasmCustom struct {
	name string
	data []byte
}

// wasmReader reads the binary format.
type wasmReader struct {
	b   []byte
	off int
	err error
}

func (r *wasmReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format+" @+%d", append(args, r.off)...)
	}
}

func (r *wasmReader) byte1() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("unexpected end of section or function")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *wasmReader) u32() uint32 {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte1()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if v > 0xffffffff {
				r.fail("LEB128 value out of range")
			}
			return uint32(v)
		}
	}
	r.fail("LEB128 too long")
	return 0
}

func (r *wasmReader) bytesN(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(r.off)+uint64(n) > uint64(len(r.b)) {
		r.fail("length out of bounds")
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *wasmReader) name() string { return string(r.bytesN(r.u32())) }

// limits reads limits: min, and max when present.
func (r *wasmReader) limits() (lo, hi uint32, hasMax bool) {
	flag := r.byte1()
	if flag&^0x3 != 0 {
		r.fail("unsupported limits flags 0x%x", flag)
		return
	}
	lo = r.u32()
	if flag&1 != 0 {
		return lo, r.u32(), true
	}
	return lo, 0, false
}

// parseWasm reads the imports, exports, custom sections and the memory's
// initial size of a module, and bounds its tables: a table declaring more
// than maxTable elements makes instantiation fail with a RangeError (as in
// V8, whose limit is 10 million), so do tables declaring more together
// (V8 bounds each; here a module's tables share the limit, so that one
// instantiation cannot allocate many times it), and every table's maximum is lowered to
// maxTable (so that
// table.grow past it returns -1, as in V8, instead of allocating without
// bound). It returns the bytes to compile: b, or b with the table section
// rewritten. It does not validate the rest: wazero does.
func parseWasm(b []byte, maxTable uint32) (*wasmInfo, []byte, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, nil, errors.New("expected magic word 00 61 73 6d, found " + hexPrefix(b, 4) + " @+0")
	}
	if string(b[4:8]) != "\x01\x00\x00\x00" {
		return nil, nil, errors.New("expected version 01 00 00 00, found " + hexPrefix(b[4:], 4) + " @+4")
	}
	info := &wasmInfo{}
	r := &wasmReader{b: b, off: 8}
	out := b
	var tableSec [2]int // start and end of the table section, to rewrite
	var newTables []byte
	for r.off < len(b) && r.err == nil {
		start := r.off
		id := r.byte1()
		size := r.u32()
		body := r.bytesN(size)
		if r.err != nil {
			break
		}
		sr := &wasmReader{b: body}
		switch id {
		case 0:
			// A copy: b may be the script's own ArrayBuffer, which it can
			// overwrite after compiling, and the compiled module is cached
			// for the pool, shared with other requests' runtimes.
			info.custom = append(info.custom, wasmCustom{name: sr.name(), data: bytes.Clone(body[sr.off:])})
		case 2:
			n := sr.u32()
			for range n {
				if sr.err != nil {
					break
				}
				imp := wasmImport{module: sr.name(), name: sr.name(), kind: sr.byte1()}
				switch imp.kind {
				case externFunc:
					sr.u32()
				case externTable:
					sr.byte1()
					sr.limits()
				case externMemory:
					sr.limits()
				case externGlobal:
					sr.byte1()
					sr.byte1()
				case externTag:
					sr.byte1()
					sr.u32()
				default:
					sr.fail("invalid import kind %d", imp.kind)
				}
				info.imports = append(info.imports, imp)
			}
		case 4:
			n := sr.u32()
			tables := uleb(n)
			var total uint64 // initial elements of all tables
			for range n {
				ref := sr.byte1()
				lo, hi, hasMax := sr.limits()
				if sr.err != nil {
					break
				}
				total += uint64(lo)
				if lo > maxTable {
					// As V8: the module compiles, an instance is a
					// RangeError. What is compiled has an empty table.
					if info.tooBig == "" {
						info.tooBig = fmt.Sprintf("initial table size (%d elements) is larger than implementation limit (%d elements)", lo, maxTable)
					}
					lo, hi, hasMax = 0, 0, true
				}
				if !hasMax || hi > maxTable {
					hi = maxTable
				}
				tables = append(append(append(tables, ref, 1), uleb(lo)...), uleb(hi)...)
			}
			if total > uint64(maxTable) && info.tooBig == "" {
				// The limit bounds the module's tables together: each
				// under it, many tables would allocate their sum in
				// one instantiation.
				info.tooBig = fmt.Sprintf("initial table sizes (%d elements in %d tables) are larger than implementation limit (%d elements)", total, n, maxTable)
			}
			tableSec = [2]int{start, r.off}
			newTables = section(4, tables)
		case 5:
			n := sr.u32()
			if n > 0 {
				lo, _, _ := sr.limits()
				info.memMinPages, info.hasMemory = lo, true
			}
		case 7:
			n := sr.u32()
			for range n {
				if sr.err != nil {
					break
				}
				ex := wasmExport{name: sr.name(), kind: sr.byte1()}
				ex.index = sr.u32()
				if ex.kind > externTag {
					sr.fail("invalid export kind %d", ex.kind)
				}
				info.exports = append(info.exports, ex)
			}
		}
		if sr.err != nil {
			return nil, nil, fmt.Errorf("section %d: %v", id, sr.err)
		}
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	if newTables != nil {
		out = make([]byte, 0, len(b)+len(newTables))
		out = append(append(append(out, b[:tableSec[0]]...), newTables...), b[tableSec[1]:]...)
	}
	return info, out, nil
}

func hexPrefix(b []byte, n int) string {
	s := ""
	for i := range min(n, len(b)) {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%02x", b[i])
	}
	return s
}
