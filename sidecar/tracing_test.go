package sidecar

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/tensor"
)

// tracedSidecar serves an affine-model sidecar traced into exp, with a
// client over transport traced into the same exporter (an in-memory one:
// both ends are in this process, but the context crosses a real socket).
func tracedSidecar(t *testing.T, transport Transport, exp *tracetest.InMemoryExporter, traceClient bool) (*Server, *Client, trace.Tracer) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")
	rt, _ := newAffineRuntime()
	srv, err := NewServer(ServerOptions{Runtime: rt, Logger: quietLog, Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	socket := testhelp.SocketPath(t, "s.sock")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(socket) }()
	t.Cleanup(func() { srv.GracefulStop(); <-served })
	opts := ClientOptions{Logger: quietLog, Transport: transport}
	if traceClient {
		opts.Tracer = tracer
	}
	c, err := NewClient(socket, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterModel(ctx, "a/", affineFiles("2 1"), ""); err != nil {
		t.Fatal(err)
	}
	return srv, c, tracer
}

// TestTraceContextCrossesBothTransports: a runInference hop's span and the
// sidecar's spans (its Predict, each entry's model run) are one trace, the
// sidecar's a child of the client's, over the fast lane (the request's
// traceparent field) and over gRPC (the traceparent metadata). No span
// carries request data.
func TestTraceContextCrossesBothTransports(t *testing.T) {
	for _, transport := range []Transport{TransportFastLane, TransportGRPC} {
		t.Run(transport.String(), func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			_, c, tracer := tracedSidecar(t, transport, exp, true)
			exp.Reset() // the registration's warm-up is not the test's
			ctx, root := tracer.Start(context.Background(), "generateBid")
			entries := []batch.Entry{
				{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{2, 3}, []float32{7.25, 913.5, 1, 2, 3, 4})}},
				{ModelPath: "missing/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{7.25, 0, 0})}},
			}
			res, err := c.Predict(ctx, entries)
			root.End()
			if err != nil || res[0].Err != nil || res[1].Err == nil {
				t.Fatalf("Predict: %v %+v", err, res)
			}
			spans := exp.GetSpans()
			byName := map[string][]tracetest.SpanStub{}
			for _, s := range spans {
				byName[s.Name] = append(byName[s.Name], s)
				if s.SpanContext.TraceID() != root.SpanContext().TraceID() {
					t.Errorf("span %s is in trace %s, want %s", s.Name, s.SpanContext.TraceID(), root.SpanContext().TraceID())
				}
				for _, a := range s.Attributes {
					if v := a.Value.String(); strings.Contains(v, "7.25") || strings.Contains(v, "913.5") {
						t.Errorf("span %s attribute %s=%q carries request data", s.Name, a.Key, v)
					}
				}
			}
			if len(byName["runInference"]) != 1 || len(byName["sidecar.Predict"]) != 1 || len(byName["model.run"]) != 2 {
				t.Fatalf("spans: %v", names(spans))
			}
			hop, pred := byName["runInference"][0], byName["sidecar.Predict"][0]
			if hop.Parent.SpanID() != root.SpanContext().SpanID() || hop.SpanKind != trace.SpanKindClient {
				t.Errorf("runInference: parent %s kind %v, want %s, client", hop.Parent.SpanID(), hop.SpanKind, root.SpanContext().SpanID())
			}
			if pred.Parent.SpanID() != hop.SpanContext.SpanID() || !pred.Parent.IsRemote() || pred.SpanKind != trace.SpanKindServer {
				t.Errorf("sidecar.Predict: parent %s (remote %v) kind %v, want the runInference span %s, remote, server", pred.Parent.SpanID(), pred.Parent.IsRemote(), pred.SpanKind, hop.SpanContext.SpanID())
			}
			runs := map[string]string{}
			for _, r := range byName["model.run"] {
				if r.Parent.SpanID() != pred.SpanContext.SpanID() {
					t.Errorf("model.run parent %s, want sidecar.Predict %s", r.Parent.SpanID(), pred.SpanContext.SpanID())
				}
				attrs := map[string]string{}
				for _, a := range r.Attributes {
					attrs[string(a.Key)] = a.Value.String()
				}
				runs[attrs["inferbid.model_path"]] = fmt.Sprintf("rows=%s error_type=%s", attrs["inferbid.rows"], attrs["inferbid.error_type"])
			}
			if runs["a/"] != "rows=2 error_type=" || runs["missing/"] != "rows=1 error_type=MODEL_NOT_FOUND" {
				t.Errorf("model.run spans: %v", runs)
			}
		})
	}
}

// TestNoTraceWithoutTracer: a client without a tracer sends no trace
// context, even from inside a span: the sidecar's spans start traces of
// their own.
func TestNoTraceWithoutTracer(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	_, c, tracer := tracedSidecar(t, TransportFastLane, exp, false)
	exp.Reset()
	ctx, root := tracer.Start(context.Background(), "generateBid")
	entries := []batch.Entry{{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{1, 3}, []float32{1, 2, 3})}}}
	if _, err := c.Predict(ctx, entries); err != nil {
		t.Fatal(err)
	}
	root.End()
	for _, s := range exp.GetSpans() {
		if s.Name == "runInference" || (s.Name != "generateBid" && s.SpanContext.TraceID() == root.SpanContext().TraceID()) {
			t.Errorf("span %s in the caller's trace, or a client span, without a client tracer", s.Name)
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestModelMetrics: the sidecar's per-model histograms, as GetMetrics
// gives them to the host: end to end and queue once per entry, compute
// and batch size once per runtime call; a deleted model's series go.
func TestModelMetrics(t *testing.T) {
	_, c, _ := tracedSidecar(t, TransportFastLane, tracetest.NewInMemoryExporter(), false)
	ctx := context.Background()
	for _, rows := range []int64{1, 3, 3} {
		x := make([]float32, 3*rows)
		entries := []batch.Entry{{ModelPath: "a/", Tensors: []tensor.Tensor{tensor.New("x", []int64{rows, 3}, x)}}}
		if res, err := c.Predict(ctx, entries); err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	mfs, err := c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := histograms(mfs)
	for _, stage := range []string{"end_to_end", "queue", "compute"} {
		h := got[ModelDurationMetric+`{model_path="a/",stage="`+stage+`"}`]
		if h == nil || h.GetSampleCount() != 3 {
			t.Errorf("%s stage %s: %v, want 3 samples (the warm-up is not counted)", ModelDurationMetric, stage, h)
		}
	}
	e2e := got[ModelDurationMetric+`{model_path="a/",stage="end_to_end"}`]
	comp := got[ModelDurationMetric+`{model_path="a/",stage="compute"}`]
	if e2e != nil && comp != nil && e2e.GetSampleSum() < comp.GetSampleSum() {
		t.Errorf("end to end %v s < compute %v s", e2e.GetSampleSum(), comp.GetSampleSum())
	}
	if h := got[ModelBatchSizeMetric+`{model_path="a/"}`]; h == nil || h.GetSampleCount() != 3 || h.GetSampleSum() != 7 {
		t.Errorf("%s: %v, want 3 calls, 7 rows", ModelBatchSizeMetric, h)
	}
	if err := c.DeleteModel(ctx, "a/"); err != nil {
		t.Fatal(err)
	}
	if mfs, err = c.Metrics(ctx); err != nil {
		t.Fatal(err)
	}
	if got := histograms(mfs); len(got) != 0 {
		t.Errorf("after delete: %v", got)
	}
}

// histograms indexes the histograms of mfs as name{labels}.
func histograms(mfs []*dto.MetricFamily) map[string]*dto.Histogram {
	out := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetHistogram()
		}
	}
	return out
}
