package jsworker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TraceCalls returns a jsbridge.GroupOptions.Trace hook that gives each call
// of a group a span of tracer, named after the function (generateBid), a
// child of parent's span (the request's). The span names the call's index
// (first is the group's first call's: 0 in a JS worker, whose chunk does not
// know its place in the request) and the code version,
// never the interest group or its signals; a failed call gets the error's
// kind (deadline, script, ...), not its message. A nil tracer gives a nil
// hook: no spans.
func TraceCalls(tracer trace.Tracer, parent context.Context, fn, version string, first int) func(ctx context.Context, i int) (context.Context, func(error)) {
	if tracer == nil {
		return nil
	}
	return func(ctx context.Context, i int) (context.Context, func(error)) {
		// ctx is the group's (its deadline and cancel); the span's parent
		// is the request's span.
		_, span := tracer.Start(parent, fn, trace.WithAttributes(
			attribute.Int("inferbid.call_index", first+i),
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
