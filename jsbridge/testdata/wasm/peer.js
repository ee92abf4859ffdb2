// peer.js: the WebAssembly JS API cases that wasm_test.go runs in goja (a
// jsbridge pool) and in Node.js, comparing the outputs. The test defines
// the module bytes before this (KITCHEN, SPIN, ...). main() returns a
// promise of a JSON-able value.
function attempt(f) {
  try {
    const v = f();
    return typeof v === 'bigint' ? v.toString() + 'n' : v;
  } catch (e) {
    return { threw: e.constructor.name, isError: e instanceof Error,
      isWasmError: e instanceof WebAssembly.CompileError || e instanceof WebAssembly.LinkError || e instanceof WebAssembly.RuntimeError,
      message: e instanceof WebAssembly.RuntimeError || e instanceof RangeError ? e.message : undefined };
  }
}

async function main() {
  const out = {};
  const logged = [];
  const env = {
    log: (x) => { logged.push(x); },
    twice: (x) => 2 * x,
    big: (x) => x * 3n,
  };
  out.validate = [WebAssembly.validate(KITCHEN), WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 2, 0, 0, 0]))];
  const mod = new WebAssembly.Module(KITCHEN);
  out.moduleTag = Object.prototype.toString.call(mod);
  out.exports = WebAssembly.Module.exports(mod);
  out.imports = WebAssembly.Module.imports(mod);
  const inst = new WebAssembly.Instance(mod, { env });
  const e = inst.exports;
  out.exportKeys = Object.keys(e);
  out.frozen = Object.isFrozen(e);
  out.protoNull = Object.getPrototypeOf(e) === null;
  out.instanceOf = [inst instanceof WebAssembly.Instance, e.memory instanceof WebAssembly.Memory,
    e.count instanceof WebAssembly.Global];
  out.fnLength = [e.add.length, e.add64.length, e.trap.length];
  out.add = [e.add(2, 3), e.add(0x7fffffff, 1), e.add(1.9, '2'), e.add(), e.add(NaN, Infinity), e.add(2 ** 32 + 5, -1)];
  out.add64 = [attempt(() => e.add64(1n, 2n)), attempt(() => e.add64(0x7fffffffffffffffn, 1n)), attempt(() => e.add64(1, 2)),
    attempt(() => e.add64(true, '5'))];
  // Strings as BigInt() takes them (StringToBigInt): no separators, no sign before a prefix.
  out.add64Strings = ['1_000', '', '  ', '-0x10', '+0b1', ' 12 ', '\n-12\t', '+7', '0x10', '0X1f', '0o17', '0b11', '0xg', '1e3', '1.0', '--1', '0x', 'Infinity']
    .map((s) => attempt(() => e.add64(s, 0n)));
  out.mulf32 = [e.mulf32(0.1, 3), e.mulf32(1e30, 1e30)];
  out.divf64 = [e.divf64(1, 3), String(e.divf64(1, 0)), String(e.divf64(0, 0))];
  out.bigintToI32 = attempt(() => e.add(1n, 2));
  out.globals = [e.count.value, e.inc(), e.inc(), e.count.value, e.pi.value];
  e.count.value = 41;
  out.globalSet = [e.inc(), attempt(() => { e.pi.value = 1; })];
  out.imported = [e.callLog(7), e.callTwice(1.25), attempt(() => e.callBig(5n))];
  out.logged = logged;
  const thrower = new WebAssembly.Instance(mod, { env: { ...env, log: () => { throw new TypeError('from JS'); } } });
  out.importThrows = attempt(() => thrower.exports.callLog(1));
  out.linkMissing = attempt(() => new WebAssembly.Instance(mod, {}));
  out.linkNotCallable = attempt(() => new WebAssembly.Instance(mod, { env: { ...env, log: 5 } }));
  out.noImports = attempt(() => new WebAssembly.Instance(mod));
  // memory: the buffer is the linear memory, both ways
  const buf = e.memory.buffer;
  out.bufferType = [buf instanceof ArrayBuffer, buf.byteLength];
  out.hello = String.fromCharCode(...new Uint8Array(buf, 16, 5));
  new Uint8Array(buf).set([1, 2, 3, 250], 100);
  out.sum = e.sum(100, 4);
  out.sameBuffer = e.memory.buffer === buf;
  out.grow = [e.grow(1), e.memory.buffer.byteLength, buf.byteLength, e.memory.buffer === buf];
  out.growJS = [e.memory.grow(1), e.memory.buffer.byteLength, attempt(() => e.memory.grow(10)), e.grow(10)];
  out.keptBytes = e.sum(100, 4);
  out.traps = [attempt(() => e.trap()), attempt(() => e.div(1, 0)), attempt(() => e.div(-2147483648, -1)),
    attempt(() => e.load(1 << 30)), attempt(() => e.recurse(0))];
  out.pair = e.pair(21);
  const gi = new WebAssembly.Instance(mod, { env: { ...env, log: (x) => { gi.exports.memory.grow(x); } } });
  out.growInImport = [attempt(() => gi.exports.storeAfterLog(0)), gi.exports.storeAfterLog(1),
    new Int32Array(gi.exports.memory.buffer)[70000 / 4], gi.exports.memory.buffer.byteLength];
  out.compileError = attempt(() => new WebAssembly.Module(new Uint8Array([1, 2, 3, 4])));
  out.compileNotBuffer = attempt(() => new WebAssembly.Module('nope'));
  out.callWithoutNew = attempt(() => WebAssembly.Module(KITCHEN));
  const mem = new WebAssembly.Memory({ initial: 1, maximum: 2 });
  out.memory = [mem.buffer.byteLength, mem.grow(1), mem.buffer.byteLength, attempt(() => mem.grow(1))];
  const g = new WebAssembly.Global({ value: 'i64', mutable: true }, 5n);
  g.value = 7n;
  out.global = [String(g.value), attempt(() => new WebAssembly.Global({ value: 'i32' }, 3).value)];
  out.errorClasses = ['CompileError', 'LinkError', 'RuntimeError'].map((n) => {
    const err = new WebAssembly[n]('m');
    return [err instanceof Error, err.name, err.message, Object.getPrototypeOf(WebAssembly[n]) === Error];
  });
  out.tag = Object.prototype.toString.call(WebAssembly);
  const r = await WebAssembly.instantiate(KITCHEN, { env });
  out.instantiate = [r.module instanceof WebAssembly.Module, r.instance.exports.add(40, 2)];
  const i2 = await WebAssembly.instantiate(mod, { env });
  out.instantiateModule = i2 instanceof WebAssembly.Instance;
  out.instantiateRejects = await WebAssembly.instantiate(new Uint8Array([0, 1])).then(() => 'resolved', (err) => err.constructor.name);
  const c = await WebAssembly.compile(KITCHEN);
  out.compile = c instanceof WebAssembly.Module;
  out.hugeTable = attempt(() => new WebAssembly.Instance(new WebAssembly.Module(HUGETABLE)));
  const tg = new WebAssembly.Instance(new WebAssembly.Module(TABLEGROW));
  out.tableGrow = [tg.exports.grow(10), tg.exports.grow(100000000)];
  return out;
}
