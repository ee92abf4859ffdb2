package sidecar

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/telemetry"
	"github.com/inferbid/inferbid/tensor"
)

// traceparentKey is the W3C trace context's gRPC metadata key.
const traceparentKey = "traceparent"

// Spans carry model paths, counts, rows, error types and timings: never
// tensors, sequence ids or error descriptions (which may quote inputs).

// endSpan ends span, marking it failed with err's type (not its message).
func endSpan(span trace.Span, err error) {
	if err != nil {
		t := inferr.TypeOf(err).String()
		span.SetAttributes(attribute.String("inferbid.error_type", t))
		span.SetStatus(codes.Error, t)
	}
	span.End()
}

// tracedPredict is Predict inside a "runInference" client span, whose
// context goes to the sidecar.
func (c *Client) tracedPredict(ctx context.Context, entries []batch.Entry) ([]batch.Result, error) {
	transport := "fastlane"
	if c.fast == nil {
		transport = "grpc"
	}
	paths := make([]string, 0, len(entries))
	for _, e := range entries {
		paths = append(paths, e.ModelPath)
	}
	ctx, span := c.tracer.Start(ctx, "runInference", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("inferbid.transport", transport),
			attribute.Int("inferbid.entries", len(entries)),
			attribute.StringSlice("inferbid.model_paths", paths)))
	results, err := c.predictEntries(ctx, entries)
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
		}
	}
	span.SetAttributes(attribute.Int("inferbid.entries_failed", failed))
	endSpan(span, err)
	return results, err
}

// withTraceparentMetadata adds ctx's span as the traceparent metadata of an
// outgoing gRPC call.
func withTraceparentMetadata(ctx context.Context) context.Context {
	if tp := telemetry.Traceparent(ctx); tp != "" {
		return metadata.AppendToOutgoingContext(ctx, traceparentKey, tp)
	}
	return ctx
}

// contextFromMetadata gives ctx the caller's span from an incoming gRPC
// call's traceparent metadata, if it has one.
func contextFromMetadata(ctx context.Context) context.Context {
	if v := metadata.ValueFromIncomingContext(ctx, traceparentKey); len(v) > 0 {
		return telemetry.WithTraceparent(ctx, v[0])
	}
	return ctx
}

// startPredictSpan starts the sidecar's span of one Predict, a child of
// the caller's span (from gRPC metadata, already in ctx, or the fast
// lane's request field).
func (s *Server) startPredictSpan(ctx context.Context, req *inferencepb.PredictRequest) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = telemetry.WithTraceparent(ctx, req.GetTraceparent())
	}
	entries := len(req.GetBatch().GetRequests())
	return s.opts.Tracer.Start(ctx, "sidecar.Predict", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.Int("inferbid.entries", entries),
			attribute.Bool("inferbid.batch_json", req.GetBatchJson() != nil)))
}

// tracedPredict runs one entry inside a "model.run" span.
func (s *Server) tracedPredict(ctx context.Context, e batch.Entry, arrived time.Time) ([]tensor.Tensor, error) {
	rows := 0
	if len(e.Tensors) > 0 && len(e.Tensors[0].Shape) > 0 {
		rows = int(e.Tensors[0].Shape[0])
	}
	ctx, span := s.opts.Tracer.Start(ctx, "model.run", trace.WithAttributes(
		attribute.String("inferbid.model_path", e.ModelPath),
		attribute.Int("inferbid.rows", rows),
		attribute.Int("inferbid.tensors", len(e.Tensors))))
	out, err := s.reg.Predict(ctx, e.ModelPath, e.Tensors, arrived)
	endSpan(span, err)
	return out, err
}
