package jsworker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// traceCall returns the group's Trace hook: one span per call, named after
// the function (generateBid), a child of the host's span that parent
// carries. The span names the call's index in the request chunk and the
// code version, never the interest group or its signals; a failed call
// gets the error's kind (deadline, script, ...), not its message.
func (w *worker) traceCall(parent context.Context, fn, version string) func(ctx context.Context, i int) (context.Context, func(error)) {
	return func(ctx context.Context, i int) (context.Context, func(error)) {
		// ctx is the chunk's (its deadline and cancel); the span's parent
		// is the host's request span.
		_, span := w.tracer.Start(parent, fn, trace.WithAttributes(
			attribute.Int("inferbid.call_index", i),
			attribute.String("inferbid.code_version", version)))
		return trace.ContextWithSpan(ctx, span), func(err error) {
			if err != nil {
				kind := errorKind(err).String()
				span.SetAttributes(attribute.String("inferbid.error_kind", kind))
				span.SetStatus(codes.Error, kind)
			}
			span.End()
		}
	}
}
