package jsbridge

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// BenchmarkWasm: the example's feature hashing (examples/wasmhelper: 12
// features into 64 buckets) in JS and in the Wasm helper, called from Go
// into JS in one runtime (µs per hashing each way); a Wasm call's overhead
// from JS (a JS loop calling an export that does nothing, less the same
// loop calling a JS function that does nothing); new WebAssembly.Instance
// of the helper; and whole generateBid calls with and without the helper
// (each in a fresh runtime, as bidding-server runs them).
func BenchmarkWasm(b *testing.B) {
	src, helper := exampleHelper(b)
	src += `
const FEATURES = ["country=NO", "device=mobile", "hour=21", "topic=running", "topic=trail", "os=android",
  "lang=nb", "site=news.example", "slot=top", "freq=3", "recency=2d", "ig=shoes"];
let helperModule, helperExports;
function setup(s) {
  helperModule = s.wasmHelper;
  helperExports = new WebAssembly.Instance(helperModule).exports;
}
function hashJS() { return hashFeaturesJS(FEATURES, 64)[0]; }
function hashWasm() { return hashFeaturesWasm(helperExports, FEATURES, 64)[0]; }
let kernelLen = 0;
function prepareKernel() {
  const mem = new Uint8Array(helperExports.memory.buffer);
  let p = 0;
  for (const f of FEATURES) { for (let i = 0; i < f.length; i++) mem[p++] = f.charCodeAt(i) & 0xff; mem[p++] = 0; }
  kernelLen = p;
}
function hashKernel() { helperExports.hash_features(0, kernelLen, 1024, 64); }
function instantiate(n) { for (let i = 0; i < n; i++) new WebAssembly.Instance(helperModule); }
function noop() { return 0; }
function loopJS(n) { let s = 0; for (let i = 0; i < n; i++) s += noop(0, 0); return s; }
function loopWasm(n) { const f = helperExports.fnv1a; let s = 0; for (let i = 0; i < n; i++) s += f(0, 0); return s; }
`
	p, err := New("bench.js", src, Options{Size: 1, CallTimeout: 10 * time.Minute, WasmHelper: helper, WasmHelperArg: WasmHelperArg{Func: "setup", Index: 0}, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	// inRun runs body in one runtime and run, after setup made the
	// helper's instance, and adds the CPU time of body's thread to *cpu
	// (on a loaded machine, wall time says more about the neighbours).
	var cpu time.Duration
	inRun := func(b *testing.B, body func(rt *goja.Runtime)) {
		b.Helper()
		err := p.run(context.Background(), "setup", func(v *vm, f goja.Callable) error {
			args, err := v.injectWasmHelper(nil)
			if err != nil {
				return err
			}
			if _, err := f(goja.Undefined(), args...); err != nil {
				return err
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			t0 := cpuTime(rusageThread)
			body(v.rt)
			cpu += cpuTime(rusageThread) - t0
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	call := func(rt *goja.Runtime, fn string, args ...goja.Value) goja.Value {
		f, _ := goja.AssertFunction(rt.Get(fn))
		v, err := f(goja.Undefined(), args...)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	// perOp reports wall and CPU µs per op (the CPU of the runs' thread;
	// of the process for whole calls, the refillers' runtimes included),
	// and prints them.
	perOp := func(b *testing.B) {
		wall := float64(b.Elapsed().Nanoseconds()) / 1e3 / float64(b.N)
		c := float64(cpu.Nanoseconds()) / 1e3 / float64(b.N)
		b.ReportMetric(wall, "µs/op")
		b.ReportMetric(c, "cpu-µs/op")
		cpu = 0
	}
	b.Run("hash=js", func(b *testing.B) {
		cpu = 0
		inRun(b, func(rt *goja.Runtime) {
			for b.Loop() {
				call(rt, "hashJS")
			}
		})
		perOp(b)
	})
	b.Run("hash=wasm", func(b *testing.B) {
		cpu = 0
		inRun(b, func(rt *goja.Runtime) {
			if a, w := call(rt, "hashJS").ToFloat(), call(rt, "hashWasm").ToFloat(); a != w {
				b.Fatalf("js %v, wasm %v", a, w)
			}
			for b.Loop() {
				call(rt, "hashWasm")
			}
		})
		perOp(b)
	})
	// The helper's hash_features alone, on features already in its
	// memory: what the Wasm computes, without the JS that feeds it.
	b.Run("hash=wasm-kernel", func(b *testing.B) {
		cpu = 0
		inRun(b, func(rt *goja.Runtime) {
			call(rt, "prepareKernel")
			for b.Loop() {
				call(rt, "hashKernel")
			}
		})
		perOp(b)
	})
	// One JS loop of 100 calls per op: the overhead of a call from JS,
	// without a Go->JS call per iteration; reported per call.
	const callsPerOp = 100
	loop := func(fn string) func(b *testing.B) {
		return func(b *testing.B) {
			cpu = 0
			inRun(b, func(rt *goja.Runtime) {
				b.ResetTimer()
				call(rt, fn, rt.ToValue(b.N*callsPerOp))
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*callsPerOp), "µs/call")
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N*callsPerOp), "cpu-µs/call")
			cpu = 0
		}
	}
	b.Run("call=js-noop", loop("loopJS"))
	b.Run("call=wasm-export", loop("loopWasm"))
	// Instances of a run live until it ends: batches of 256 per run (16
	// MiB of linear memory), the run's end (closing them) included.
	b.Run("instantiate", func(b *testing.B) {
		cpu = 0
		const batch = 256
		for done := 0; done < b.N; done += batch {
			n := min(batch, b.N-done)
			inRun(b, func(rt *goja.Runtime) { call(rt, "instantiate", rt.ToValue(n)) })
		}
		perOp(b)
	})
	args := [][]byte{[]byte(helperIG), nil, []byte(`{"weights":[0.5,-0.25,0.125,1]}`), nil, []byte(`{"topWindowHostname":"news.example"}`)}
	bids := func(p *Pool) func(b *testing.B) {
		return func(b *testing.B) {
			cpu = 0
			t0 := cpuTime(rusageSelf)
			for b.Loop() {
				if _, err := p.CallJSON(context.Background(), "generateBid", args...); err != nil {
					b.Fatal(err)
				}
			}
			cpu = cpuTime(rusageSelf) - t0
			perOp(b)
		}
	}
	js, err := New("bench.js", src, Options{Size: 1, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer js.Close()
	wasm, err := New("bench.js", src, Options{Size: 1, WasmHelper: helper, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer wasm.Close()
	b.Run("generateBid=js", bids(js))
	b.Run("generateBid=wasm", bids(wasm))
}

const (
	rusageSelf   = 0 // RUSAGE_SELF
	rusageThread = 1 // RUSAGE_THREAD (Linux)
)

// cpuTime is the user+system CPU time of the process or the calling thread.
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
