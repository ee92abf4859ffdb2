// Package tensor is the leaf every layer of inferbid shares: the element
// types (DType: the six of the batch JSON contract, and BOOL, UINT8-64, FP16
// and BYTES, which only the v2 surfaces carry), a dense row-major Tensor, and the
// shape arithmetic (element counts with overflow and cap checks) that every
// decoder and runtime needs.
//
// It imports only the standard library, so the JSON codec (batch), the JS
// host (jsbridge), the sidecar and every runtime backend can use the same
// Tensor without linking each other. Errors here are plain errors; the
// layer that knows what went wrong (the codec, the portable runtime layer)
// gives them one of the six error types.
package tensor
