package jsbridge

// The Wasm modules of the tests and of examples/wasmhelper are committed next
// to their .wat sources, built with Debian's wabt; TestWasmTestdataUpToDate
// checks that they match. make wasm runs this.
//go:generate ../scripts/gen-wasm.sh
