package batch

import "context"

// DebugSink receives the sidecar's debug lines for one consented request's
// inference calls. Each line names the model path it is about. Inference
// calls made concurrently with one ctx call the sink concurrently: it must
// be safe for that.
type DebugSink func(line string)

// debugLogKey is the context key of a DebugSink; a zero-size key, so that
// looking it up allocates nothing.
type debugLogKey struct{}

// WithDebugLog marks ctx as consented for debugging: inference calls made
// with it ask the sidecar for debug lines (is_consented) and hand them to
// sink, in order. A nil sink withdraws the consent an outer ctx gave.
//
// Without it nothing is asked for or collected: consent is per request, so
// it travels with the request's ctx rather than in the client's options.
func WithDebugLog(ctx context.Context, sink DebugSink) context.Context {
	return context.WithValue(ctx, debugLogKey{}, sink)
}

// DebugLogFrom returns ctx's sink, or nil.
func DebugLogFrom(ctx context.Context) DebugSink {
	sink, _ := ctx.Value(debugLogKey{}).(DebugSink)
	return sink
}
