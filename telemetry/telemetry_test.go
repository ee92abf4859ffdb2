package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestOffWithoutEndpoint(t *testing.T) {
	p, err := New(context.Background(), Options{})
	if p != nil || err != nil || p.Tracer() != nil || p.Shutdown(context.Background()) != nil {
		t.Fatalf("New without an endpoint: %v, %v; want a nil provider (tracing off)", p, err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Endpoint: "127.0.0.1:4318"}, "want a URL"},
		{Options{Endpoint: "ftp://127.0.0.1"}, "want a URL"},
		{Options{Endpoint: "http://127.0.0.1:4318", Protocol: "thrift"}, `unknown OTLP protocol "thrift"`},
	} {
		if _, err := New(context.Background(), c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want an error mentioning %q", c.opts, err, c.want)
		}
	}
	p, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:1", Protocol: ProtocolGRPC, ServiceName: "x"})
	if err != nil || p.Tracer() == nil {
		t.Fatalf("New(grpc): %v", err)
	}
	p.Shutdown(context.Background())
}

// TestTraceparentRoundTrip: a span's context survives Traceparent and
// WithTraceparent as the remote parent of the next span; "" and garbage
// give no parent.
func TestTraceparentRoundTrip(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")
	if got := Traceparent(context.Background()); got != "" {
		t.Errorf("Traceparent without a span: %q", got)
	}
	ctx, parent := tr.Start(context.Background(), "parent")
	tpHeader := Traceparent(ctx)
	want := "00-" + parent.SpanContext().TraceID().String() + "-" + parent.SpanContext().SpanID().String() + "-01"
	if tpHeader != want {
		t.Fatalf("Traceparent = %q, want %q", tpHeader, want)
	}
	_, child := tr.Start(WithTraceparent(context.Background(), tpHeader), "child")
	child.End()
	parent.End()
	sc := child.SpanContext()
	if sc.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("child in trace %s, want %s", sc.TraceID(), parent.SpanContext().TraceID())
	}
	for _, bad := range []string{"", "00-zz-yy-01", "garbage"} {
		ctx := WithTraceparent(context.Background(), bad)
		if trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("WithTraceparent(%q) gave a parent", bad)
		}
	}
}

// TestExportErrorsLoggedOnceAMinute: a collector that is down fails every
// export; the log says so once, then counts.
func TestExportErrorsLoggedOnceAMinute(t *testing.T) {
	var buf bytes.Buffer
	e := &errorLog{log: slog.New(slog.NewTextHandler(&buf, nil))}
	for range 3 {
		e.Handle(errors.New("connection refused"))
	}
	if n := strings.Count(buf.String(), "exporting spans failed"); n != 1 || !strings.Contains(buf.String(), "connection refused") {
		t.Errorf("log after 3 errors: %q, want one line naming the error", buf.String())
	}
	if e.suppressed != 2 {
		t.Errorf("suppressed %d, want 2", e.suppressed)
	}
}
