// Package telemetry sets up OpenTelemetry tracing for inferbid's processes
// and carries a span's context between them as a W3C traceparent.
//
// Tracing is off unless an OTLP endpoint is configured (Options.Endpoint,
// which the binaries take from --otel_exporter_endpoint or the standard
// OTEL_EXPORTER_OTLP_ENDPOINT): New then returns a nil *Provider, whose
// Tracer is nil, and every library that takes a trace.Tracer in its options
// skips its spans on nil without reading a clock or allocating. With an
// endpoint, spans are batched (the SDK's BatchSpanProcessor, whose
// OTEL_BSP_* variables apply) and exported with the official OTLP exporter
// over HTTP/protobuf (the default) or gRPC. Export errors (a collector that
// is down: the spans are dropped) go to the process's log at WARN, at most
// once a minute.
//
// The spans of one generateBids request: "generateBids" (bidding-server's
// HTTP handler), "generateBid" (each call, in a JS worker process),
// "runInference" (each hop to the sidecar, client side), "sidecar.Predict"
// (its server side) and "model.run" (each entry's model call in the
// sidecar). The context crosses processes as a traceparent: in
// jsworker.proto's BidsRequest to the worker, and to the sidecar as the
// "traceparent" gRPC metadata or the fast lane's PredictRequest.traceparent.
// Tracestate and baggage are not carried.
//
// Privacy: spans carry model paths, counts and sizes, error types and
// timings, never request data (features, bids, interest groups, signals,
// error descriptions, which may quote inputs).
//
// Propagation is written here with the otel propagation package's
// TraceContext rather than otelgrpc: the fast lane is not gRPC, and
// otelgrpc's stats handler would cost every RPC something with tracing off.
package telemetry
