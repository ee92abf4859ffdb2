package main

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/kserve"
)

// metrics are the server's Prometheus collectors: B&A's inference metrics
// (request count, duration, sizes, errors by type, per-model request,
// failure and batch-size counts, sidecar restarts) plus the JS and HTTP
// layers.
type metrics struct {
	inferenceRequests  prometheus.Counter
	inferenceDuration  prometheus.Histogram
	inferenceReqBytes  prometheus.Histogram
	inferenceRespBytes prometheus.Histogram
	inferenceErrors    *prometheus.CounterVec // error_type: whole-batch and per-entry errors
	modelRequests      *prometheus.CounterVec // model_path
	modelFailures      *prometheus.CounterVec // model_path, error_type
	modelBatchSize     *prometheus.HistogramVec
	modelDuration      *prometheus.HistogramVec // model_path: runInference end to end
	modelPathsErrors   prometheus.Counter
	sidecarRestarts    prometheus.Counter
	sidecarHung        prometheus.Counter   // killed for not answering the liveness probe
	sidecarReplay      prometheus.Histogram // replay duration after a restart
	sidecarSlowReplays prometheus.Counter   // replays still running at the JS call deadline
	jsWorkerRestarts   prometheus.Counter
	jsCalls            *prometheus.CounterVec // func, outcome
	jsCallDuration     *prometheus.HistogramVec
	httpRequests       *prometheus.CounterVec // handler, code
	httpConnections    prometheus.Gauge       // open now, against --max_connections
	v2Requests         *prometheus.CounterVec // protocol, endpoint, code
	v2ModelRequests    *prometheus.CounterVec // protocol, model_path, code: inferences
	v2Duration         *prometheus.HistogramVec
}

// unknownModelLabel replaces model paths that name no registered model, so
// a script's typos cannot grow label cardinality without bound.
const unknownModelLabel = "_unregistered"

func newMetrics(reg prometheus.Registerer) *metrics {
	latency := []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	sizes := prometheus.ExponentialBuckets(64, 4, 10)
	m := &metrics{
		inferenceRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_inference_requests_total", Help: "runInference calls."}),
		inferenceDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "inferbid_inference_request_duration_seconds", Help: "runInference duration on the host (parse, sidecar call, render).", Buckets: latency}),
		inferenceReqBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "inferbid_inference_request_size_bytes", Help: "runInference batch JSON size (object arguments are not counted).", Buckets: sizes}),
		inferenceRespBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "inferbid_inference_response_size_bytes", Help: "runInference response JSON size.", Buckets: sizes}),
		inferenceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_inference_errors_total", Help: "runInference errors by error_type (whole-batch and per-entry)."}, []string{"error_type"}),
		modelRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_inference_model_requests_total", Help: "Batch entries by model."}, []string{"model_path"}),
		modelFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_inference_model_failures_total", Help: "Failed batch entries by model and error_type."}, []string{"model_path", "error_type"}),
		modelBatchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inferbid_inference_model_batch_size", Help: "Batch size (first dimension) of batch entries by model.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}, []string{"model_path"}),
		modelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inferbid_inference_model_duration_seconds", Help: "runInference end to end (parse, sidecar round trip, render) as the JS sees it, once per batch entry, by the entry's model; the sidecar's inferbid_sidecar_model_duration_seconds splits its part into queue and compute.", Buckets: latency}, []string{"model_path"}),
		modelPathsErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_get_model_paths_errors_total", Help: "getModelPaths calls that could not ask the sidecar."}),
		sidecarRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_sidecar_restarts_total", Help: "Restarts of the inference sidecar."}),
		sidecarHung: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_sidecar_unresponsive_total", Help: "Inference sidecars killed (and restarted) for not answering the liveness probe within --inference_sidecar_liveness_timeout."}),
		sidecarReplay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "inferbid_sidecar_replay_duration_seconds", Help: "Time to register every model again after a sidecar restart.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120}}),
		sidecarSlowReplays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_sidecar_slow_replays_total", Help: "Replays after a sidecar restart still running at --js_call_timeout: calls waiting for their models failed."}),
		jsWorkerRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_js_worker_restarts_total", Help: "JS worker processes replaced (killed at a deadline, or died: out of memory, a crash)."}),
		jsCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_js_calls_total", Help: "Calls into the JS module by function and outcome (ok, exception, deadline, heap_budget, overloaded, error)."}, []string{"func", "outcome"}),
		jsCallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inferbid_js_call_duration_seconds", Help: "Duration of calls into the JS module.", Buckets: latency}, []string{"func"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_http_requests_total", Help: "HTTP requests by handler and status code."}, []string{"handler", "code"}),
		httpConnections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inferbid_http_connections_open", Help: "HTTP connections open (idle keep-alive ones included), against --max_connections."}),
		v2Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_v2_requests_total", Help: "Open Inference Protocol (KServe v2) requests by protocol (http, grpc), endpoint and status code (HTTP's, for gRPC too)."}, []string{"protocol", "endpoint", "code"}),
		v2ModelRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_v2_model_requests_total", Help: "Open Inference Protocol (KServe v2) inferences, and TF Serving REST predictions (protocol tfserving), by protocol, model path (" + unknownModelLabel + " for a name or version that resolved to none) and status code."}, []string{"protocol", "model_path", "code"}),
		v2Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "inferbid_v2_request_duration_seconds", Help: "Open Inference Protocol (KServe v2) request duration by protocol and endpoint.", Buckets: latency}, []string{"protocol", "endpoint"}),
	}
	reg.MustRegister(m.inferenceRequests, m.inferenceDuration, m.inferenceReqBytes, m.inferenceRespBytes,
		m.inferenceErrors, m.modelRequests, m.modelFailures, m.modelBatchSize, m.modelDuration, m.modelPathsErrors,
		m.sidecarRestarts, m.sidecarHung, m.sidecarReplay, m.sidecarSlowReplays, m.jsWorkerRestarts, m.jsCalls, m.jsCallDuration, m.httpRequests, m.httpConnections,
		m.v2Requests, m.v2ModelRequests, m.v2Duration)
	return m
}

// observeV2 counts one Open Inference Protocol request.
func (m *metrics) observeV2(o kserve.Observation) {
	m.v2Requests.WithLabelValues(o.Protocol, o.Endpoint, strconv.Itoa(o.Status)).Inc()
	m.v2Duration.WithLabelValues(o.Protocol, o.Endpoint).Observe(o.Duration.Seconds())
	if o.Endpoint == "infer" || o.Endpoint == "tfserving_predict" {
		// Only paths the sidecar lists: a client's typos cannot grow the
		// label set.
		label := o.ModelPath
		if label == "" {
			label = unknownModelLabel
		}
		proto := o.Protocol
		if o.Endpoint == "tfserving_predict" {
			proto = "tfserving" // TF Serving's REST predict, apart from v2's HTTP
		}
		m.v2ModelRequests.WithLabelValues(proto, label, strconv.Itoa(o.Status)).Inc()
	}
}

// connState is the http.Server's ConnState hook: it counts open
// connections.
func (m *metrics) connState(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		m.httpConnections.Inc()
	case http.StateClosed, http.StateHijacked:
		m.httpConnections.Dec()
	}
}

// hooks connects the pool's events to the collectors.
func (m *metrics) hooks() jsbridge.Hooks {
	return jsbridge.Hooks{
		OnCall: func(ev jsbridge.CallEvent) {
			m.jsCalls.WithLabelValues(ev.Func, callOutcome(ev.Err)).Inc()
			m.jsCallDuration.WithLabelValues(ev.Func).Observe(ev.Duration.Seconds())
		},
		OnInference: func(ev *jsbridge.InferenceEvent) {
			m.inferenceRequests.Inc()
			m.inferenceDuration.Observe(ev.Duration.Seconds())
			if !ev.ObjectArg && ev.RequestBytes > 0 {
				m.inferenceReqBytes.Observe(float64(ev.RequestBytes))
			}
			m.inferenceRespBytes.Observe(float64(ev.ResponseBytes))
			if ev.Err != nil {
				m.inferenceErrors.WithLabelValues(inferr.TypeOf(ev.Err).String()).Inc()
			}
			for _, e := range ev.Entries {
				label := e.ModelPath
				t := inferr.TypeOf(e.Err)
				if e.Err != nil && (t == inferr.ModelNotFound || t == inferr.InputParsing) {
					label = unknownModelLabel
				}
				m.modelRequests.WithLabelValues(label).Inc()
				m.modelDuration.WithLabelValues(label).Observe(ev.Duration.Seconds())
				if e.BatchSize > 0 {
					m.modelBatchSize.WithLabelValues(label).Observe(float64(e.BatchSize))
				}
				if e.Err != nil {
					m.inferenceErrors.WithLabelValues(t.String()).Inc()
					m.modelFailures.WithLabelValues(label, t.String()).Inc()
				}
			}
		},
		OnModelPaths: func(err error) {
			if err != nil {
				m.modelPathsErrors.Inc()
			}
		},
	}
}

// registerPool exports the pool's counters: abandoned runtimes (running
// and in total), calls refused while too many run, calls the heap watchdog
// stopped, and calls that found no ready runtime.
func (m *metrics) registerPool(reg prometheus.Registerer, pool *jsbridge.Pool) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inferbid_js_abandoned_running", Help: "JS runtimes abandoned at a deadline (stuck in a built-in call) that are still running."},
			func() float64 { return float64(pool.Stats().AbandonedRunning) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "inferbid_js_abandoned_total", Help: "JS runtimes abandoned because they did not stop after their interrupt."},
			func() float64 { return float64(pool.Stats().AbandonedTotal) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "inferbid_js_overload_refusals_total", Help: "Calls into JS refused because too many abandoned runtimes were still running."},
			func() float64 { return float64(pool.Stats().Refused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "inferbid_js_heap_stops_total", Help: "Calls into JS stopped because the heap passed the JS heap budget."},
			func() float64 { return float64(pool.Stats().HeapStops) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "inferbid_js_inline_builds_total", Help: "Calls into JS that found no ready runtime and ran the module first."},
			func() float64 { return float64(pool.Stats().InlineBuilds) }),
	)
}

// registerWorkers exports the JS workers' counters.
func (m *metrics) registerWorkers(reg prometheus.Registerer, h *jsworker.Host) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "inferbid_js_worker_kills_total", Help: "JS workers killed because a call did not stop at its deadline."},
			func() float64 { return float64(h.Stats().Kills) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "inferbid_js_worker_deaths_total", Help: "JS workers that died while running a call (out of memory, their address-space limit, a crash)."},
			func() float64 { return float64(h.Stats().Deaths) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "inferbid_js_worker_bursts_total", Help: "Extra JS workers started while calls running to their deadline held every worker."},
			func() float64 { return float64(h.Stats().Bursts) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inferbid_js_workers_busy", Help: "JS workers running a request's calls now."},
			func() float64 { return float64(h.Stats().Busy) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inferbid_js_requests_queued", Help: "Requests waiting for a JS worker."},
			func() float64 { return float64(h.Stats().Queued) }),
	)
}

func callOutcome(err error) string {
	var se *jsbridge.ScriptError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, jsbridge.ErrDeadline):
		return "deadline"
	case errors.Is(err, jsbridge.ErrHeapBudget):
		return "heap_budget"
	case errors.Is(err, jsbridge.ErrOverloaded):
		return "overloaded"
	case errors.As(err, &se):
		return "exception"
	}
	return "error"
}

// hostGatherer is /metrics' gatherer: the server's own collectors, and the
// sidecar's (its per-model histograms, asked at each scrape) once set.
type hostGatherer struct {
	own     prometheus.Gatherer
	sidecar atomic.Pointer[prometheus.Gatherer]
}

func (g *hostGatherer) setSidecar(sg prometheus.Gatherer) { g.sidecar.Store(&sg) }

func (g *hostGatherer) Gather() ([]*dto.MetricFamily, error) {
	if sg := g.sidecar.Load(); sg != nil {
		return prometheus.Gatherers{g.own, *sg}.Gather()
	}
	return g.own.Gather()
}
