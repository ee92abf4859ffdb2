package jsbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The example module with a Wasm helper (examples/wasmhelper): the tests
// and benchmarks run the example's own code.
func exampleHelper(t testing.TB) (src string, helper []byte) {
	t.Helper()
	dir := filepath.Join("..", "examples", "wasmhelper")
	js, err := os.ReadFile(filepath.Join(dir, "generate_bid.js"))
	if err != nil {
		t.Fatal(err)
	}
	helper, err = os.ReadFile(filepath.Join(dir, "feature_hash.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return string(js), helper
}

const helperIG = `{"name":"shoes","userBiddingSignals":{"features":["country=NO","device=mobile","hour=21","topic=running"]},
  "ads":[{"renderUrl":"https://ads.example/shoes"}]}`

// TestWasmHelper: Options.WasmHelper reaches generateBid as
// browserSignals.wasmHelper, a WebAssembly.Module (into an object made for
// it when browserSignals is absent), in single calls and in groups; the
// example's bid is the same through the helper as through its JS fallback.
func TestWasmHelper(t *testing.T) {
	src, helper := exampleHelper(t)
	src += `
function probe(a, b) { return [typeof a, b === undefined ? "undefined" : typeof b.wasmHelper]; }
function helperInfo(ig, a, p, t, bs) {
  return [bs.wasmHelper instanceof WebAssembly.Module, bs.other, WebAssembly.Module.exports(bs.wasmHelper).map((e) => e.kind + " " + e.name)];
}
`
	with := newWasmPool(t, src, Options{Size: 1, WasmHelper: helper, WasmHelperArg: WasmHelperArg{Func: "generateBid", Index: 4}})
	without := newWasmPool(t, src, Options{Size: 1})
	args := [][]byte{[]byte(helperIG), nil, []byte(`{"weights":[0.5,-0.25,0.125,1]}`), nil, []byte(`{"topWindowHostname":"news.example"}`)}
	type bid struct {
		Ad     struct{ HashedBy string }
		Bid    float64
		Render string
	}
	call := func(p *Pool, args [][]byte) bid {
		t.Helper()
		out, err := p.CallJSON(context.Background(), "generateBid", args...)
		if err != nil {
			t.Fatal(err)
		}
		var b bid
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	w, j := call(with, args), call(without, args)
	if w.Ad.HashedBy != "wasm" || j.Ad.HashedBy != "js" || w.Bid != j.Bid || w.Bid == 1 {
		t.Fatalf("with the helper %+v, without %+v", w, j)
	}
	t.Logf("bid %v (wasm), %v (js)", w.Bid, j.Bid)
	// No browserSignals: one is made for the helper.
	if b := call(with, args[:4]); b.Ad.HashedBy != "wasm" || b.Bid != w.Bid {
		t.Fatalf("without browserSignals: %+v", b)
	}
	// In a group, every call gets it.
	for i, r := range with.CallJSONGroup(context.Background(), "generateBid", [][][]byte{args, args, args[:2]}, GroupOptions{}) {
		if r.Err != nil || !strings.Contains(string(r.Out), `"hashedBy":"wasm"`) {
			t.Fatalf("group call %d: %s, %v", i, r.Out, r.Err)
		}
	}
	// Only WasmHelperArg's argument gets it; the rest is left alone.
	info := newWasmPool(t, src, Options{Size: 1, WasmHelper: helper, WasmHelperArg: WasmHelperArg{Func: "helperInfo", Index: 4}})
	out, err := info.CallJSON(context.Background(), "helperInfo", nil, nil, nil, nil, []byte(`{"other":7}`))
	if want := `[true,7,["memory memory","function fnv1a","function hash_features"]]`; err != nil || string(out) != want {
		t.Fatalf("helperInfo: %s, %v; want %s", out, err, want)
	}
	if out, err := with.CallJSON(context.Background(), "probe", []byte(`{}`)); err != nil || string(out) != `["object","undefined"]` {
		t.Fatalf("probe: %s, %v", out, err)
	}
}

// TestWasmHelperArg: WasmHelperArg names another function and argument;
// the example's two hashings agree on many inputs, one of them longer than
// the helper's first memory page (the module grows it).
func TestWasmHelperArg(t *testing.T) {
	src, helper := exampleHelper(t)
	src += `
function vectors(f, s) {
  const e = new WebAssembly.Instance(s.wasmHelper).exports;
  return [Array.from(hashFeaturesWasm(e, f, 64)), Array.from(hashFeaturesJS(f, 64)), Array.from(hashFeaturesJS(f, 7)),
    Array.from(hashFeaturesWasm(e, f, 7))];
}
`
	// A long time: the long input is 70 KB of bytes written from goja (slow under -race).
	p := newWasmPool(t, src, Options{Size: 1, CallTimeout: time.Minute, WasmHelper: helper, WasmHelperArg: WasmHelperArg{Func: "vectors", Index: 1}})
	inputs := [][]string{{}, {"a"}, {"country=NO", "device=mobile"}}
	var long []string
	for i := range 280 {
		long = append(long, fmt.Sprintf("kw%d-%s", i*7919, strings.Repeat("x", 240)))
	}
	inputs = append(inputs, long)
	for _, in := range inputs {
		arg, _ := json.Marshal(in)
		out, err := p.CallJSON(context.Background(), "vectors", arg)
		if err != nil {
			t.Fatal(err)
		}
		var v [4][]float64
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v[0], v[1]) || !reflect.DeepEqual(v[2], v[3]) {
			t.Fatalf("%d features: wasm %v, js %v", len(in), v[0], v[1])
		}
	}
	if _, err := New("bad.js", src, Options{WasmHelper: []byte("not wasm"), Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "Wasm helper") {
		t.Fatalf("a helper that does not compile: %v", err)
	}
}

// TestWasmHostileHelper: hostile helpers, handed in as Options.WasmHelper,
// meet the same bounds: an endless loop ends at the call's deadline, a
// memory.grow bomb at the memory bound, a huge table is a RangeError.
func TestWasmHostileHelper(t *testing.T) {
	src := `
function generateBid(ig, a, p, t, bs) {
  const e = new WebAssembly.Instance(bs.wasmHelper).exports;
  return e.bomb ? e.bomb() : e.spin();
}`
	const timeout = 200 * time.Millisecond
	spin := newWasmPool(t, src, Options{Size: 1, CallTimeout: timeout, InterruptGrace: 100 * time.Millisecond, WasmHelper: wasmFile(t, "spin")})
	best := time.Hour
	for range 3 {
		start := time.Now()
		_, err := spin.CallJSON(context.Background(), "generateBid", []byte(`{}`))
		if !errors.Is(err, ErrDeadline) || errors.Is(err, ErrAbandoned) {
			t.Fatalf("spin: %v; want ErrDeadline", err)
		}
		if best = min(best, time.Since(start)); best <= timeout+timeout/10 {
			break
		}
	}
	if best > timeout+timeout/10 {
		t.Errorf("spin: the error came after %v at best; the deadline is %v (+10%%)", best, timeout)
	}
	bomb := newWasmPool(t, src, Options{Size: 1, WasmMaxMemoryBytes: 8 << 20, WasmHelper: wasmFile(t, "growbomb")})
	if out, err := bomb.CallJSON(context.Background(), "generateBid", []byte(`{}`)); err != nil || string(out) != "128" {
		t.Fatalf("bomb: %s, %v; want 128 pages", out, err)
	}
	huge := newWasmPool(t, src, Options{Size: 1, WasmHelper: wasmFile(t, "hugetable")})
	if _, err := huge.CallJSON(context.Background(), "generateBid", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "RangeError") {
		t.Fatalf("huge table: %v; want a RangeError", err)
	}
}

// TestWasmHelperArgOutOfRange: an argument index that no call can have is
// refused by New, naming it, rather than failing every call of the
// function (a negative index panicked in the call; a huge one made
// arguments up to it, on every call).
func TestWasmHelperArgOutOfRange(t *testing.T) {
	src, helper := exampleHelper(t)
	for _, idx := range []int{-1, maxWasmHelperArgIndex + 1, 1 << 30} {
		p, err := New("arg.js", src+"\nfunction f() { return 1; }\n", Options{Size: 1, WasmHelper: helper,
			WasmHelperArg: WasmHelperArg{Func: "f", Index: idx}, Logger: quietLogger()})
		if err == nil {
			p.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "WasmHelperArg.Index") {
			t.Errorf("Index %d: %v; want New to refuse it", idx, err)
		}
	}
}
