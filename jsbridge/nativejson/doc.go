// Package nativejson replaces a goja runtime's JSON.parse and
// JSON.stringify with native Go ones (Install), for the JS pool of package
// jsbridge, which installs them in every runtime before the module runs.
//
// Why not goja's built-in JSON: measured speed. goja's own functions are a
// large part of a bidding call's budget (its parse goes through
// encoding/json's Decoder.Token, which allocates per token; its stringify
// reads every character through a UTF-16 reader). On the peer comparison's
// request (bench/peer/request.js) at batch 64 the native stringify and the
// native parse of the response take about a third of goja's time or less
// (BenchmarkJSON, impl=goja against impl=native, one run on the 2-core
// development machine: stringify 65 µs against 22 µs, parse of the response
// 27 µs against 8.5 µs, parse of the request 167 µs against 37 µs, the whole
// JSON work around one runInference call 156 µs against 91 µs; the
// stringify makes 73 allocations against 1791). They are built to be
// indistinguishable from goja's by any script, and differential tests and
// fuzz targets (FuzzNativeJSONParse, FuzzNativeJSONStringify) hold them to
// it:
//
//   - JSON.parse(string) is parsed natively into the same values goja makes:
//     plain objects and arrays, numbers through strconv.ParseFloat (so -0 is
//     -0, integers past 2^53 round as float64, and a number out of float64
//     range, 1e400, is a SyntaxError as in goja, not Infinity), strings
//     unescaped as encoding/json does (a lone surrogate escape becomes
//     U+FFFD, as in goja), objects with CreateDataProperty semantics (a
//     repeated key keeps its first position and takes the last value;
//     "__proto__" is an own property). Invalid JSON throws a SyntaxError that
//     says what and where (the position in UTF-16 units). A non-string
//     argument is converted as goja converts it first. With a reviver (any
//     defined second argument) the text goes to goja's parse, which has the
//     walk the reviver needs. Strings without escapes share the memory of
//     the text.
//   - JSON.stringify(value) with no replacer and no space argument is
//     written natively for primitives, ordinary objects, arrays and
//     functions, doing what goja's walk does in the same order (every
//     property read, so getters run once and in order, every toJSON lookup
//     and call, the same cycle and BigInt TypeErrors); numbers are formatted
//     by goja's own ftoa. Anything else met in the walk (a Proxy, a Date, a
//     boxed primitive, a BigInt, a host object, a property name with a lone
//     surrogate) is handed to goja's stringify at the point where goja's walk
//     would take it up, with a replacer that carries on the walk's cycle
//     check. The walk never gives up midway to start goja's over (goja's Go
//     API shows no property descriptors, so the walk cannot tell a getter
//     from a value in advance, and starting over would run getters and
//     toJSON twice). A value that is such a thing itself, a replacer
//     function or array, or a space argument sends the whole call to goja's.
//   - Nesting is bounded at MaxDepth (10000) levels: deeper text is a
//     SyntaxError (goja's parse recurses without a bound and, a few million levels down,
//     kills the process with a Go stack overflow; the bound also covers text
//     sent on to goja's parse with a reviver) and a deeper value a RangeError
//     from stringify (goja's takes time quadratic in the depth). With the
//     wording of parse errors, this is the one intended difference from
//     goja.
//
// Like goja's, the native functions cannot be interrupted mid-call. Scratch buffers are shared between
// runtimes through a sync.Pool (nothing a script can see is kept).
//
// The exported surface is Install, MaxDepth and Index (the property names of
// array indexes, shared with jsbridge's walk of runInference's object
// argument). Differential tests (nativejson_test.go) run every case through
// a runtime with goja's JSON and one with the native JSON and compare
// values, output and errors; the fuzz targets' seed corpora are in
// testdata/fuzz.
package nativejson
