// Package inferr is inferbid's single error vocabulary: the six error types of
// the batch JSON contract (INPUT_PARSING, MODEL_NOT_FOUND, MODEL_EXECUTION,
// OUTPUT_PARSING, GRPC, UNKNOWN).
//
// Every layer wraps its errors with an error type once, at the place where the
// fault is understood, and every edge translates it: to a gRPC status inside
// the sidecar, back from a status in the client, and to the batch error JSON
// towards JavaScript. Errors wrap with %w, so the model path and the field at
// fault travel with the error.
package inferr
