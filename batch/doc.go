// Package batch is the batch JSON codec of the JavaScript API (the JSON
// contract of docs/architecture.md): Parse reads the B&A request
// {"request":[{"model_path":..,"tensors":[..]}]} into typed tensors,
// AppendResponse/Render write {"response":[...]}, and ParseResponse reads a
// response back (inferctl, tests, benchmarks).
//
// Both the sidecar (JSON Predict path) and the JS host use it, so it sits on
// the hot path. Parse validates the whole document with gjson.ValidBytes
// (after a cheap nesting-depth check), then walks the validated text once,
// without copying it, and reads each tensor_content array where it stands.
// Entries that are not well-formed in the documented field order are parsed
// again through gjson's ForEach, which is the reference behaviour and words
// every error; FuzzParse checks that both paths agree. Numbers are parsed
// straight from their token text (short decimals by an exact fast path,
// everything else by strconv), and shapes are checked for overflow and the
// element cap before anything is allocated. A batch costs a
// handful of allocations: the entry slice, one slab each for tensor headers,
// shapes and strings, and one data slice per tensor. AppendResponse appends
// to the caller's buffer and allocates nothing when it is large enough.
//
// Errors are inferr errors. A document that is not JSON, has no "request"
// array, nests deeper than MaxDepth or has more than Limits.MaxEntries
// entries is a whole-batch INPUT_PARSING error; anything wrong inside an
// entry is that entry's INPUT_PARSING error and the other entries still run.
// Descriptions name the entry index, the model path, the tensor, the field
// and the value at fault (long values are clipped).
//
// Decisions where the reference (B&A, absl::SimpleAtof/SimpleAtoi) is loose
// or silent:
//   - tensor_content values may be quoted strings or JSON numbers. Strings
//     may have surrounding ASCII whitespace and a leading '+', as absl
//     allows; hex floats and digit underscores (which strconv would take)
//     are rejected.
//   - NaN, Inf and values that overflow the dtype ("1e39" for FLOAT) are
//     rejected, although absl accepts "nan"/"inf": JSON cannot carry them
//     back, and a non-finite output turns the whole batch into an
//     OUTPUT_PARSING error, so one bad entry would fail every other entry.
//     Underflow rounds to zero or a subnormal, as in absl.
//   - Integers must be written as integers: "7.5", "1e3" and "1.0" are
//     errors for INT dtypes; INT8/16/32 are range-checked.
//   - tensor_shape dims are JSON integers >= 1 (not strings, not 1.0), at
//     most MaxRank of them; [] is a scalar of one value.
//   - A field given twice in one object is an error (parsers disagree on
//     which copy wins); unknown fields are ignored; tensor_name may be
//     absent (""); model_path and tensor_name must be valid UTF-8.
//
// Rendering follows encoding/json: floats as the shortest text that
// round-trips the float64 (FLOAT widened first: 3.14f prints as
// 3.140000104904175), exponent form below 1e-6 and from 1e21; strings
// escaped as encoding/json does with HTML escaping off. NaN/Inf outputs fail
// AppendResponse with OUTPUT_PARSING naming the model and tensor, and Render
// answers with a whole-batch error.
//
// WithDebugLog carries a request's consent to debug logging in its ctx,
// from the host that knows the request (jsbridge) to the client that talks
// to the sidecar (sidecar.Client): inference calls made with such a ctx ask
// the sidecar for its debug lines and hand them to the DebugSink.
package batch
