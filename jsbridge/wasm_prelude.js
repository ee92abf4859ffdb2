// The WebAssembly namespace of a jsbridge runtime (wasm.go, wasm_api.go).
// It is run once per runtime, the first time a script reads the global
// WebAssembly, with N: the runtime's native function (N('op', args...)),
// which holds the Go side (wazero modules, instances, memories) of every
// object made here. One function, not an object of them: each native
// function costs goja a few microseconds to make, per runtime.
// It returns the namespace's members.
(function (N) {
  'use strict';
  const defineProperty = Object.defineProperty;
  const freeze = Object.freeze;

  function errorClass(name) {
    const C = ({ [name]: class extends Error {
      constructor(message) { super(message); }
    } })[name];
    defineProperty(C.prototype, 'name', { value: name, writable: true, configurable: true });
    return C;
  }
  const CompileError = errorClass('CompileError');
  const LinkError = errorClass('LinkError');
  const RuntimeError = errorClass('RuntimeError');

  // bytes is a BufferSource's bytes as an ArrayBuffer: a view's window of
  // its buffer is copied, an ArrayBuffer is passed as it is (the Go side
  // copies what a module keeps of it: the script may overwrite it).
  function bytes(src, where) {
    if (src instanceof ArrayBuffer) return src;
    if (ArrayBuffer.isView(src)) return src.buffer.slice(src.byteOffset, src.byteOffset + src.byteLength);
    throw new TypeError(where + ': Argument 0 must be a buffer source');
  }

  const exportsOf = new WeakMap();

  class Module {
    constructor(src) {
      N('compile', this, bytes(src, 'WebAssembly.Module()'));
    }
    static exports(module) { return N('moduleExports', module); }
    static imports(module) { return N('moduleImports', module); }
    static customSections(module, name) {
      if (name === undefined) throw new TypeError('WebAssembly.Module.customSections(): Argument 1 is required');
      return N('customSections', module, String(name));
    }
  }

  class Instance {
    constructor(module, imports) {
      const e = N('instantiate', module, imports);
      freeze(e);
      exportsOf.set(this, e);
    }
    get exports() {
      const e = exportsOf.get(this);
      if (e === undefined) throw new TypeError('Receiver is not a WebAssembly.Instance');
      return e;
    }
  }

  class Memory {
    constructor(descriptor) { N('newMemory', this, descriptor); }
    get buffer() { return N('memoryBuffer', this); }
    grow(delta) { return N('memoryGrow', this, delta); }
  }

  class Global {
    constructor(descriptor, value) { N('newGlobal', this, descriptor, value); }
    get value() { return N('globalGet', this); }
    set value(v) { N('globalSet', this, v); }
    valueOf() { return N('globalGet', this); }
  }

  class Table {
    constructor(descriptor) { N('newTable', this, descriptor); }
    get length() { return N('tableLength', this); }
  }

  // Go makes the namespace of these (non-enumerable, as V8's) and sets
  // the Symbol.toStringTag of it and of the prototypes: for...of, object
  // spreading and the Symbol constructor cost goja tens of microseconds per
  // runtime the first time.
  return {
    Module, Instance, Memory, Global, Table, CompileError, LinkError, RuntimeError,
    validate(src) { return N('validate', bytes(src, 'WebAssembly.validate()')); },
    compile(src) {
      return new Promise((resolve) => resolve(new Module(src)));
    },
    instantiate(src, imports) {
      return new Promise((resolve) => {
        if (src instanceof Module) {
          resolve(new Instance(src, imports));
          return;
        }
        const module = new Module(src);
        resolve({ module, instance: new Instance(module, imports) });
      });
    },
  };
})
