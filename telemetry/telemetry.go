package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of inferbid's spans.
const TracerName = "github.com/inferbid/inferbid"

// The OTLP protocols (OTEL_EXPORTER_OTLP_PROTOCOL's values).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Standard environment variables the binaries read as their flags'
// defaults.
const (
	EndpointEnv = "OTEL_EXPORTER_OTLP_ENDPOINT"
	ProtocolEnv = "OTEL_EXPORTER_OTLP_PROTOCOL"
)

// Options configure New; the zero value means tracing off.
type Options struct {
	// Endpoint is the OTLP collector's base URL, e.g.
	// http://127.0.0.1:4318 (HTTP: spans go to its /v1/traces, as with
	// OTEL_EXPORTER_OTLP_ENDPOINT) or http://127.0.0.1:4317 (gRPC); an
	// http:// URL is sent in the clear. "" = tracing off.
	Endpoint string
	// Protocol is ProtocolHTTP ("" means it) or ProtocolGRPC.
	Protocol string
	// ServiceName is the resource's service.name (bidding-server,
	// js-worker, inference-sidecar-onnx, ...).
	ServiceName string
	// Logger gets the exporter's errors (a collector that is down), at
	// WARN, at most once a minute; nil = slog.Default().
	Logger *slog.Logger
}

// CheckProtocol reports whether p names an OTLP protocol New supports.
func CheckProtocol(p string) error {
	switch p {
	case "", ProtocolHTTP, ProtocolGRPC:
		return nil
	}
	return fmt.Errorf("unknown OTLP protocol %q: want %s or %s", p, ProtocolHTTP, ProtocolGRPC)
}

// Provider is a process's tracer provider with its exporter. A nil
// *Provider is tracing off: its Tracer is nil and Shutdown does nothing.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// New returns the provider opts configure, or nil (and no error) when
// opts.Endpoint is "". It does no I/O: the exporter connects when it first
// exports, and a collector that is down costs dropped spans, never a
// failed request.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Endpoint == "" {
		return nil, nil
	}
	if err := CheckProtocol(opts.Protocol); err != nil {
		return nil, err
	}
	u, err := url.Parse(opts.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q: want a URL such as http://127.0.0.1:4318", opts.Endpoint)
	}
	var exp sdktrace.SpanExporter
	if opts.Protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(opts.Endpoint))
	} else {
		// The endpoint is the collector's base URL, as
		// OTEL_EXPORTER_OTLP_ENDPOINT is: traces go to its /v1/traces.
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter for %q: %w", opts.Endpoint, err)
	}
	name := opts.ServiceName
	if name == "" {
		name = "inferbid"
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		res = resource.NewSchemaless(attribute.String("service.name", name))
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	otel.SetErrorHandler(&errorLog{log: logger})
	return &Provider{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// errorLog is the otel error handler: a collector that is down fails every
// export (every 5 s by default); the log says so once a minute, with the
// number of errors since.
type errorLog struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (e *errorLog) Handle(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.last.IsZero() && time.Since(e.last) < time.Minute {
		e.suppressed++
		return
	}
	e.log.Warn("tracing: exporting spans failed; they are dropped", "err", err, "errors_since_last_report", e.suppressed)
	e.last, e.suppressed = time.Now(), 0
}

// Tracer returns the tracer for inferbid's spans; nil when p is nil.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tp.Tracer(TracerName)
}

// Shutdown exports the spans still buffered and stops the exporter,
// within ctx (5 s when ctx has no deadline).
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	return p.tp.Shutdown(ctx)
}

// Traceparent is the W3C traceparent of ctx's span, "" when ctx carries no
// valid span context.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c.Get("traceparent")
}

// WithTraceparent returns ctx with the remote span context traceparent
// names, the parent of the spans started from it; ctx itself when
// traceparent is "" or malformed (the spans then start a trace of their
// own).
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}
