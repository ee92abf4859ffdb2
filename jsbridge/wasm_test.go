package jsbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// wasmFile reads testdata/wasm/name.wasm (built from name.wat; see
// TestWasmTestdataUpToDate).
func wasmFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wasm", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsBytes is a JS statement defining name as a Uint8Array of b.
func jsBytes(name string, b []byte) string {
	var s strings.Builder
	fmt.Fprintf(&s, "const %s = new Uint8Array([", name)
	for i, c := range b {
		if i > 0 {
			s.WriteByte(',')
		}
		fmt.Fprint(&s, c)
	}
	s.WriteString("]);\n")
	return s.String()
}

// peerSource is testdata/wasm/peer.js with the modules it uses defined.
func peerSource(t testing.TB) string {
	t.Helper()
	js, err := os.ReadFile(filepath.Join("testdata", "wasm", "peer.js"))
	if err != nil {
		t.Fatal(err)
	}
	return jsBytes("KITCHEN", wasmFile(t, "kitchen")) + jsBytes("HUGETABLE", wasmFile(t, "hugetable")) +
		jsBytes("TABLEGROW", wasmFile(t, "tablegrow")) + string(js)
}

// nodePath is Node.js for the peer comparisons, or "" (the test skips,
// unless INFERBID_REQUIRE_PEER=1).
func nodePath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("INFERBID_NODE"), "/usr/bin/node"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if lp, err := exec.LookPath("node"); err == nil {
		return lp
	}
	if os.Getenv("INFERBID_REQUIRE_PEER") == "1" {
		t.Fatal("Node.js not found (INFERBID_REQUIRE_PEER=1): install nodejs or set INFERBID_NODE")
	}
	t.Skip("Node.js not found (/usr/bin/node, $INFERBID_NODE, PATH): the peer comparison is skipped")
	return ""
}

// runNode runs src in Node.js and returns what main() resolved to, as JSON.
func runNode(t testing.TB, node, src string) []byte {
	t.Helper()
	f := filepath.Join(t.TempDir(), "peer.js")
	src += "\nmain().then((r) => process.stdout.write(JSON.stringify(r)), (e) => { console.error(e); process.exit(1); });\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(node, f)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	return out
}

// TestWasmPeer runs the same JS (testdata/wasm/peer.js: modules, instances,
// every value type both ways, imports, memory both ways and its growth,
// globals, traps, errors and their classes, the promise API, hostile
// tables) in goja and in Node.js, and compares every output.
func TestWasmPeer(t *testing.T) {
	node := nodePath(t)
	src := peerSource(t)
	// A long deadline: the recursion case grows wazero's stack to its
	// 400 MB ceiling, which takes about 100 ms, a second under -race.
	p, err := New("peer.js", src, Options{Size: 1, CallTimeout: time.Minute, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.CallJSON(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	want := runNode(t, node, src)
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("goja: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("node: %v: %s", err, want)
	}
	keys := map[string]bool{}
	for k := range g {
		keys[k] = true
	}
	for k := range w {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !reflect.DeepEqual(g[k], w[k]) {
			gj, _ := json.Marshal(g[k])
			wj, _ := json.Marshal(w[k])
			t.Errorf("%s:\n  goja: %s\n  node: %s", k, gj, wj)
		}
	}
}

// TestWasmTestdataUpToDate rebuilds every committed .wasm from its .wat with
// wabt's wat2wasm and compares. The .wasm files are committed so that tests
// and the example run without wabt; go generate (make wasm) rebuilds them.
func TestWasmTestdataUpToDate(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		if os.Getenv("INFERBID_REQUIRE_PEER") == "1" {
			t.Fatal("wat2wasm not found (INFERBID_REQUIRE_PEER=1): scripts/apt-install.sh wabt")
		}
		t.Skip("wat2wasm not found: the committed .wasm files are not checked (scripts/apt-install.sh wabt)")
	}
	wats, _ := filepath.Glob(filepath.Join("testdata", "wasm", "*.wat"))
	more, _ := filepath.Glob(filepath.Join("..", "examples", "wasmhelper", "*.wat"))
	wats = append(wats, more...)
	if len(wats) < 5 {
		t.Fatalf("found only %v", wats)
	}
	for _, wat := range wats {
		out := filepath.Join(t.TempDir(), "out.wasm")
		if b, err := exec.Command(wat2wasm, wat, "-o", out).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", wat, err, b)
			continue
		}
		got, _ := os.ReadFile(out)
		committed, err := os.ReadFile(strings.TrimSuffix(wat, ".wat") + ".wasm")
		if err != nil || !bytes.Equal(got, committed) {
			t.Errorf("%s: the committed .wasm is not what wat2wasm builds from it (%v): run go generate ./jsbridge/ ./examples/...", wat, err)
		}
	}
}

func newWasmPool(t *testing.T, src string, opts Options) *Pool {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	p, err := New("wasm.js", src, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestWasmDeadline: a Wasm loop, and a JS import looping inside a Wasm
// call, end with the call's ErrDeadline within its deadline + 10%, and the
// runtime stops (no abandon): wazero checks for the closed instance at loop
// back-edges.
func TestWasmDeadline(t *testing.T) {
	src := jsBytes("SPIN", wasmFile(t, "spin")) + jsBytes("KITCHEN", wasmFile(t, "kitchen")) + `
function spin() {
  const i = new WebAssembly.Instance(new WebAssembly.Module(SPIN));
  try { i.exports.spin(); } catch (e) { return "caught " + e; }
  return "returned";
}
function spinImport() {
  const env = { log: () => { for (;;) {} }, twice: (x) => x, big: (x) => x };
  new WebAssembly.Instance(new WebAssembly.Module(KITCHEN), { env }).exports.callLog(1);
}
function ok() { return new WebAssembly.Instance(new WebAssembly.Module(SPIN)) instanceof WebAssembly.Instance; }
`
	const timeout = 300 * time.Millisecond
	p := newWasmPool(t, src, Options{Size: 1, CallTimeout: timeout, InterruptGrace: 100 * time.Millisecond})
	if _, err := p.CallJSON(context.Background(), "ok"); err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"spin", "spinImport"} {
		// Best of three: on a loaded machine a timer or a goroutine can
		// wait for a core for tens of milliseconds.
		var best time.Duration
		for attempt := range 3 {
			start := time.Now()
			out, err := p.CallJSON(context.Background(), fn)
			took := time.Since(start)
			if !errors.Is(err, ErrDeadline) || errors.Is(err, ErrAbandoned) {
				t.Fatalf("%s: %s, %v; want ErrDeadline (not abandoned)", fn, out, err)
			}
			t.Logf("%s: %v after %v", fn, err, took)
			if attempt == 0 || took < best {
				best = took
			}
			if best <= timeout+timeout/10 {
				break
			}
		}
		if best > timeout+timeout/10 {
			t.Errorf("%s: the error came after %v at best; the deadline is %v (+10%%)", fn, best, timeout)
		}
	}
	if st := p.Stats(); st.AbandonedTotal != 0 {
		t.Errorf("abandoned %d runtimes", st.AbandonedTotal)
	}
	// The pool serves on.
	if out, err := p.CallJSON(context.Background(), "ok"); err != nil || string(out) != "true" {
		t.Fatalf("after: %s, %v", out, err)
	}
}

// TestWasmMemoryBound: memory.grow stops at WasmMaxMemoryBytes (-1), for
// the instances of one call together, and the next call has the whole
// bound again.
func TestWasmMemoryBound(t *testing.T) {
	src := jsBytes("BOMB", wasmFile(t, "growbomb")) + `
function bomb(n) {
  const m = new WebAssembly.Module(BOMB);
  const pages = [];
  for (let i = 0; i < n; i++) pages.push(new WebAssembly.Instance(m).exports.bomb());
  let more;
  try { new WebAssembly.Instance(m); more = "instantiated"; } catch (e) { more = e.constructor.name; }
  let mem;
  try { new WebAssembly.Memory({ initial: 1 }); mem = "made"; } catch (e) { mem = e.constructor.name; }
  return { pages, more, mem };
}
`
	p := newWasmPool(t, src, Options{Size: 1, WasmMaxMemoryBytes: 16 << 20, ShareRuntimes: true})
	for range 2 { // the same runtime: the second call has the whole bound again
		out, err := p.CallJSON(context.Background(), "bomb", []byte("1"))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"pages":[256],"more":"RangeError","mem":"RangeError"}`; string(out) != want {
			t.Fatalf("got %s, want %s", out, want)
		}
	}
	// The default bound: 1 GiB (not grown to here: 1.5 GB of RSS while
	// the memory is copied into its doubled slice).
	if p = newWasmPool(t, src, Options{Size: 1}); p.wasm.maxMem != 1<<30 {
		t.Fatalf("default bound %d", p.wasm.maxMem)
	}
}

// TestWasmHostileModules: bytes that are not Wasm, a table over the limit
// and a table grown past it.
func TestWasmHostileModules(t *testing.T) {
	src := jsBytes("HUGE", wasmFile(t, "hugetable")) + jsBytes("TG", wasmFile(t, "tablegrow")) + `
function name(f) { try { f(); return "ok"; } catch (e) { return e.constructor.name + ": " + e.message; } }
function run() {
  return [
    name(() => new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 255, 255]))),
    name(() => new WebAssembly.Module(new ArrayBuffer(0))),
    WebAssembly.validate(new Uint8Array([1, 2, 3])),
    name(() => new WebAssembly.Instance(new WebAssembly.Module(HUGE))),
    new WebAssembly.Instance(new WebAssembly.Module(TG)).exports.grow(20),
    new WebAssembly.Instance(new WebAssembly.Module(TG)).exports.grow(2000000000),
  ];
}
`
	p := newWasmPool(t, src, Options{Size: 1, WasmMaxTableElements: 1000})
	out, err := p.CallJSON(context.Background(), "run")
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for i, prefix := range []string{"CompileError: WebAssembly.Module()", "CompileError: WebAssembly.Module()"} {
		if s, _ := got[i].(string); !strings.HasPrefix(s, prefix) {
			t.Errorf("%d: %v, want %s...", i, got[i], prefix)
		}
	}
	if got[2] != false {
		t.Errorf("validate: %v", got[2])
	}
	if s, _ := got[3].(string); !strings.HasPrefix(s, "RangeError: WebAssembly.Instance(): initial table size (100000000 elements) is larger than implementation limit (1000 elements)") {
		t.Errorf("huge table: %v", got[3])
	}
	if got[4] != 1.0 || got[5] != -1.0 {
		t.Errorf("table.grow: %v, %v; want 1, -1", got[4], got[5])
	}
}

// TestWasmFreshEveryCall: an instance lives for the run that made it. In a
// runtime that serves call after call (ShareRuntimes, or a group's calls),
// an instance kept from an earlier call (or from the module's top level)
// is closed and its memory detached: no Wasm global or memory of one call
// is seen by the next, and each call's new instance starts from scratch.
func TestWasmFreshEveryCall(t *testing.T) {
	src := jsBytes("KITCHEN", wasmFile(t, "kitchen")) + `
const env = { log() {}, twice: (x) => x, big: (x) => x };
const mod = new WebAssembly.Module(KITCHEN);
const top = new WebAssembly.Instance(mod, { env });
let kept, keptBuf, keptView, keptCount, keptModule;
function step() {
  const out = {};
  try { out.top = top.exports.inc(); } catch (e) { out.top = e.constructor.name; }
  if (kept) {
    try { out.kept = kept.exports.inc(); } catch (e) { out.kept = e.constructor.name; }
    try { out.keptMem = kept.exports.memory.buffer.byteLength; } catch (e) { out.keptMem = e.constructor.name; }
    out.keptBuf = keptBuf.byteLength;
    out.keptView = keptView[0];
    try { out.keptCount = keptCount.value; } catch (e) { out.keptCount = e.constructor.name; }
    try { new WebAssembly.Instance(keptModule, { env }); out.keptModule = "instantiated"; } catch (e) { out.keptModule = e.constructor.name; }
  }
  keptCount = undefined;
  kept = new WebAssembly.Instance(mod, { env });
  out.fresh = [kept.exports.inc(), kept.exports.inc(), new Uint8Array(kept.exports.memory.buffer)[0]];
  keptBuf = kept.exports.memory.buffer;
  keptView = new Uint8Array(keptBuf);
  keptView[0] = 99;
  keptCount = kept.exports.count;
  keptModule = new WebAssembly.Module(KITCHEN);
  return out;
}
`
	first := `{"top":"RuntimeError","fresh":[1,2,0]}`
	later := `{"top":"RuntimeError","kept":"RuntimeError","keptMem":"RuntimeError","keptBuf":0,"keptCount":"RuntimeError","keptModule":"RuntimeError","fresh":[1,2,0]}`
	p := newWasmPool(t, src, Options{Size: 1, ShareRuntimes: true})
	for i := range 3 {
		out, err := p.CallJSON(context.Background(), "step")
		if err != nil {
			t.Fatal(err)
		}
		want := later
		if i == 0 {
			want = first
		}
		if string(out) != want {
			t.Fatalf("call %d: %s, want %s", i, out, want)
		}
	}
	// A group's calls share a runtime, not Wasm instances.
	p = newWasmPool(t, src, Options{Size: 1})
	res := p.CallJSONGroup(context.Background(), "step", [][][]byte{nil, nil, nil}, GroupOptions{})
	for i, r := range res {
		want := later
		if i == 0 {
			want = first
		}
		if r.Err != nil || string(r.Out) != want {
			t.Fatalf("group call %d: %s, %v; want %s", i, r.Out, r.Err, want)
		}
	}
}

// TestWasmEngineCollected: a pool's wazero runtime (its compiled code) is
// closed once the pool and its runtimes are garbage.
func TestWasmEngineCollected(t *testing.T) {
	closed := make(chan struct{})
	func() {
		p, err := New("f.js", jsBytes("SPIN", wasmFile(t, "spin"))+`
function f() { return new WebAssembly.Module(SPIN) instanceof WebAssembly.Module; }`, Options{Size: 1, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := p.CallJSON(context.Background(), "f"); err != nil || string(out) != "true" {
			t.Fatalf("%s, %v", out, err)
		}
		runtime.AddCleanup(p.wasm, func(struct{}) { close(closed) }, struct{}{})
		p.Close()
	}()
	for range 100 {
		runtime.GC()
		select {
		case <-closed:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the pool's Wasm engine was not collected")
}

// TestWasmHeapWatchdog: linear memory is Go heap, so the heap watchdog
// counts it: a call whose Wasm memory takes the heap over the budget and
// keeps running is stopped with ErrHeapBudget, its Wasm loop included.
func TestWasmHeapWatchdog(t *testing.T) {
	src := jsBytes("HOG", wasmFile(t, "hog")) + `
function hog(pages) { new WebAssembly.Instance(new WebAssembly.Module(HOG)).exports.hog(pages); }
`
	p := newWasmPool(t, src, Options{Size: 1, CallTimeout: 20 * time.Second, HeapBudget: 64 << 20})
	start := time.Now()
	_, err := p.CallJSON(context.Background(), "hog", []byte("2048")) // 128 MiB
	if !errors.Is(err, ErrHeapBudget) || errors.Is(err, ErrAbandoned) {
		t.Fatalf("hog: %v after %v; want ErrHeapBudget (not abandoned)", err, time.Since(start))
	}
	t.Logf("%v after %v", err, time.Since(start))
	if st := p.Stats(); st.HeapStops != 1 {
		t.Fatalf("heap stops: %d", st.HeapStops)
	}
}

// TestWasmWrongReceiver: Memory, Global and Table methods called on
// anything else throw V8's TypeError naming the class.
func TestWasmWrongReceiver(t *testing.T) {
	p := newWasmPool(t, `
function probe() {
  var out = [];
  var calls = [
    function () { return WebAssembly.Memory.prototype.grow.call({}, 1); },
    function () { return Object.getOwnPropertyDescriptor(WebAssembly.Global.prototype, "value").get.call({}); },
    function () { return Object.getOwnPropertyDescriptor(WebAssembly.Table.prototype, "length").get.call({}); },
  ];
  for (var i = 0; i < calls.length; i++) {
    try { calls[i](); out.push("no error"); } catch (e) { out.push(e.name + ": " + e.message); }
  }
  return out;
}`, Options{Size: 1})
	out, err := p.CallJSON(context.Background(), "probe")
	want := `["TypeError: Receiver is not a WebAssembly.Memory","TypeError: Receiver is not a WebAssembly.Global","TypeError: Receiver is not a WebAssembly.Table"]`
	if err != nil || string(out) != want {
		t.Fatalf("probe() = %s, %v; want %s", out, err, want)
	}
}

// TestWasmCustomSectionsCopied: a Module keeps its own copy of its custom
// sections, as the JS API copies a module's bytes. Compiled modules are
// cached per pool by content: a module compiled from a plain ArrayBuffer
// that the script then overwrites must not change what
// Module.customSections shows, neither in that call nor in another
// request's call compiling the same bytes.
func TestWasmCustomSectionsCopied(t *testing.T) {
	// A module with one custom section "n" holding "public" (data at +12).
	src := `
const BYTES = [0, 97, 115, 109, 1, 0, 0, 0, 0, 8, 1, 110, 112, 117, 98, 108, 105, 99];
function text(m) { return String.fromCharCode.apply(null, new Uint8Array(WebAssembly.Module.customSections(m, "n")[0])); }
function write() {
  const ab = new Uint8Array(BYTES).buffer;
  const m = new WebAssembly.Module(ab);
  new Uint8Array(ab).set([115, 101, 99, 114, 101, 116], 12); // "secret", one user's data
  return text(m);
}
function read() { return text(new WebAssembly.Module(new Uint8Array(BYTES))); }
`
	p := newWasmPool(t, src, Options{Size: 2})
	for _, fn := range []string{"write", "read"} {
		out, err := p.CallJSON(context.Background(), fn)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != `"public"` {
			t.Errorf("%s: the custom section reads %s, want \"public\" (the module's bytes as compiled)", fn, out)
		}
	}
}

// TestWasmTablesBoundTogether: the table limit bounds the initial elements
// of a module's tables together, not each table: a module of many tables,
// each just under the limit, would otherwise allocate their sum (8 bytes an
// element, all in one instantiation, before the heap watchdog can look)
// and could take the process past its memory.
func TestWasmTablesBoundTogether(t *testing.T) {
	src := `
function tables(n, size) {
  const lo = [size & 0x7f | 0x80, size >> 7]; // two-byte LEB128
  let body = [n];
  for (let i = 0; i < n; i++) body = body.concat([0x70, 0], lo);
  const m = new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 4, body.length].concat(body)));
  try { new WebAssembly.Instance(m); return "instantiated"; } catch (e) { return e.name + ": " + e.message; }
}
function run() { return [tables(1, 1000), tables(2, 500), tables(3, 600)]; }
`
	p := newWasmPool(t, src, Options{Size: 1, WasmMaxTableElements: 1000})
	out, err := p.CallJSON(context.Background(), "run")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got[0] != "instantiated" || got[1] != "instantiated" {
		t.Errorf("tables within the limit: %q", got[:2])
	}
	if want := "RangeError: WebAssembly.Instance(): initial table sizes (1800 elements in 3 tables) are larger than implementation limit (1000 elements)"; got[2] != want {
		t.Errorf("3 tables of 600: %q, want %q", got[2], want)
	}
}

// TestWasmOwnedModuleHostsClosed: past the cache's maxCachedWasmModules a
// module is compiled for its run only and closed when the run ends; so
// are the host modules serving its imports (made per compiled module),
// which would otherwise stay in the pool's wazero runtime, compiled and
// instantiated, one set per run, for the pool's lifetime.
func TestWasmOwnedModuleHostsClosed(t *testing.T) {
	src := `
// A distinct module per i (its custom section holds i) importing env.f.
function mod(i) {
  return new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 0, 5, 1, 110, i & 255, (i >> 8) & 255, 7,
    1, 4, 1, 0x60, 0, 0, 2, 9, 1, 3, 101, 110, 118, 1, 102, 0, 0]);
}
function fill() { for (let i = 0; i < 256; i++) new WebAssembly.Module(mod(i)); return true; }
function owned(i) { new WebAssembly.Instance(new WebAssembly.Module(mod(i)), { env: { f() {} } }); return true; }
`
	p := newWasmPool(t, src, Options{Size: 1})
	if out, err := p.CallJSON(context.Background(), "fill"); err != nil || string(out) != "true" {
		t.Fatalf("fill: %s, %v", out, err)
	}
	for i := range 3 {
		var owned []*wasmModule
		err := p.run(context.Background(), "owned", func(v *vm, f goja.Callable) error {
			_, err := f(goja.Undefined(), v.rt.ToValue(1000+i))
			owned = append(owned, v.wasmState.owned...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(owned) != 1 || len(owned[0].hosts) != 1 {
			t.Fatalf("run %d: %d modules compiled for the run; want 1 with 1 host module", i, len(owned))
		}
		for name, h := range owned[0].hosts {
			if !h.IsClosed() {
				t.Errorf("run %d: the host module %q of a module compiled for the run outlived the run", i, name)
			}
		}
	}
}

// TestWasmTopLevelModulePastCache: a Module made by the module's top level
// stays usable in every call (the runtime's Modules are kept), also when
// the pool's cache was full and it was compiled for its runtime only; its
// compiled code (and host modules) are closed once the runtime is garbage.
func TestWasmTopLevelModulePastCache(t *testing.T) {
	src := `
function mod(i) {
  return new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 0, 5, 1, 110, i & 255, (i >> 8) & 255, 7,
    1, 4, 1, 0x60, 0, 0, 2, 9, 1, 3, 101, 110, 118, 1, 102, 0, 0]);
}
for (let i = 0; i < 256; i++) new WebAssembly.Module(mod(i)); // the cache is full
const TOP = new WebAssembly.Module(mod(5000));
function use() {
  try { new WebAssembly.Instance(TOP, { env: { f() {} } }); return "ok"; } catch (e) { return e.name + ": " + e.message; }
}
`
	p := newWasmPool(t, src, Options{Size: 1})
	var kept []*wasmModule
	for i := range 2 {
		err := p.run(context.Background(), "use", func(v *vm, f goja.Callable) error {
			out, err := f(goja.Undefined())
			if err == nil && out.String() != "ok" {
				err = fmt.Errorf("call %d: %s", i, out)
			}
			if v.wasmState != nil && v.wasmState.kept != nil {
				kept = append(kept, v.wasmState.kept.mods...)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(kept) == 0 {
		t.Fatal("no top-level module was compiled past the cache")
	}
	// Fresh runtimes: those of the calls are garbage now.
	for range 100 {
		runtime.GC()
		closed := true
		for _, m := range kept {
			for _, h := range m.hosts {
				closed = closed && h.IsClosed()
			}
		}
		if closed {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the top-level modules compiled past the cache were not closed with their runtimes")
}

// TestWasmStringToBigInt: strings passed for i64 read as BigInt() reads
// them in V8 (TestWasmPeer compares more with Node.js, when it is there).
func TestWasmStringToBigInt(t *testing.T) {
	for s, want := range map[string]string{
		"": "0", " \n": "0", "12": "12", " -12\t": "-12", "+7": "7", "0x1F": "31", "0o17": "15", "0B11": "3",
		"\uFEFF5": "5", "\u20285\u2029": "5", "\u00a0-3": "-3",
		"1_000": "", "-0x10": "", "+0b1": "", "0x": "", "0xg": "", "1e3": "", "1.0": "", "--1": "", "\u00855": "", "Infinity": "",
	} {
		b, ok := stringToBigInt(s)
		got := ""
		if ok {
			got = b.String()
		}
		if got != want {
			t.Errorf("%q: %q (ok %v), want %q (\"\": a SyntaxError)", s, got, ok, want)
		}
	}
}

// TestWasmCacheBoundedByBytes: the pool's cache of compiled modules, kept
// for the pool's lifetime, is bounded by the modules' bytes as well as by
// their number: a script compiling large modules of varying content (a
// custom section or data segment made per call) would otherwise keep 256
// of them, and their compiled code, whatever their size. Past the bound a
// module is compiled for its run only.
func TestWasmCacheBoundedByBytes(t *testing.T) {
	src := `
function leb(n) { const out = []; do { let b = n & 127; n >>>= 7; out.push(n ? b | 128 : b); } while (n); return out; }
// A module of about n bytes: a custom section "n" of n bytes, the first i.
function mod(i, n) {
  const data = new Array(n).fill(0); data[0] = i;
  return new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 0].concat(leb(n + 2), [1, 110], data));
}
function f() { new WebAssembly.Module(mod(1, 600)); new WebAssembly.Module(mod(2, 600)); return true; }
`
	p := newWasmPool(t, src, Options{Size: 1})
	e := p.wasm
	e.mu.Lock()
	e.maxCacheBytes = 1000
	before := len(e.cache)
	e.mu.Unlock()
	if out, err := p.CallJSON(context.Background(), "f"); err != nil || string(out) != "true" {
		t.Fatalf("%s, %v", out, err)
	}
	e.mu.Lock()
	cached, bytes := len(e.cache)-before, e.cacheBytes
	e.mu.Unlock()
	if cached != 1 || bytes > 1000 {
		t.Errorf("%d modules of 600 bytes cached (%d bytes); want 1 within the 1000-byte bound", cached, bytes)
	}
}
