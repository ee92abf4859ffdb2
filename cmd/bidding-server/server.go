package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/inferbid/inferbid/codestore"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/httpjson"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/modelstore"
	"github.com/inferbid/inferbid/sidecar"
)

// modelLister answers /v1/models (the sidecar client).
type modelLister interface {
	ModelPaths(ctx context.Context) ([]string, error)
	Models(ctx context.Context, modelPath string) ([]sidecar.ModelInfo, error)
}

// healthChecker probes the sidecar for /readyz.
type healthChecker interface {
	WaitHealthy(ctx context.Context) error
}

// server is the HTTP API over the JS workers (or, with --js_in_process, a
// JS pool in the server itself).
type server struct {
	// workers run the JS; nil with --js_in_process, where pool does.
	workers *jsworker.Host
	pool    *jsbridge.Pool
	models  modelLister // nil when inference is disabled
	// predictor runs POST /v1/predict's batches; nil when inference is
	// disabled.
	predictor batchPredictor
	health    healthChecker // nil when inference is disabled
	metrics   *metrics
	gatherer  prometheus.Gatherer
	// tracer traces generateBids requests; nil = tracing off.
	tracer trace.Tracer
	// v2 is the Open Inference Protocol (KServe v2) API, served under
	// /v2; nil serves no /v2.
	v2 *kserve.Server
	// repo is the v2 model repository extension; nil unless
	// --kserve_model_repository.
	repo   *modelRepo
	logger *slog.Logger

	maxBody        int64
	maxGroups      int
	maxBidBytes    int           // 0 = no bound
	requestTimeout time.Duration // 0 = none
	// requestConcurrency bounds the generateBid calls of one request that
	// run at once; 0 = half the pool, at least 1.
	requestConcurrency int
	// isolateCalls gives every generateBid call a fresh runtime of its own
	// rather than one per request chunk.
	isolateCalls bool
	// consentToken is --consented_debug_token: a request whose
	// consented_debug_config carries it gets its console and inference
	// debug lines back in debug_info; "" = no request is consented.
	consentToken string

	// synced is set once the first model sync (bucket and local models)
	// finished; syncErr holds the last failure before that.
	synced  atomic.Bool
	syncMu  sync.Mutex
	syncErr error
	// readinessPolicy is --readiness_policy ("" = any); localModels counts
	// the --inference_model_local_paths models (serving once synced).
	readinessPolicy readinessPolicy
	localModels     int

	// starting says what start-up is doing while the port already serves;
	// nil once pool, models and health are set (the Store that clears it
	// publishes them to the handlers).
	starting atomic.Pointer[string]
	// draining is set at SIGTERM: /readyz answers 503 while requests are
	// still served.
	draining atomic.Bool
	// watcher is the model bucket's watcher once it is made (nil without
	// a bucket): /v1/models reports its failed and draining models.
	watcher atomic.Pointer[modelstore.Watcher]
	// code is the bidding code's store with --buyer_code_fetch_config
	// BUCKET or URL; nil: the one module (module) serves.
	code atomic.Pointer[codestore.Store]
	// module is the one module's status (--udf_code_path or the embedded
	// example), made once at start.
	module codestore.VersionStatus
	// scriptErrors rate-limits the log lines of script errors.
	scriptErrors scriptErrorLog
}

// codeVersion is the code version a request ran: the one it named, or the
// default.
func (s *server) codeVersion(named string) string {
	if named != "" {
		return named
	}
	if st := s.code.Load(); st != nil {
		return st.Default()
	}
	return s.module.Name
}

// setStarting records the start-up step under way, for /readyz.
func (s *server) setStarting(step string) { s.starting.Store(&step) }

// started marks start-up done: call it after pool, models and health are
// set.
func (s *server) started() { s.starting.Store(nil) }

// notStarted answers 503 while start-up is under way; it reports whether it
// did.
func (s *server) notStarted(w http.ResponseWriter) (int, bool) {
	if step := s.starting.Load(); step != nil {
		return httpjson.Error(w, http.StatusServiceUnavailable, "the server is starting: "+*step), true
	}
	return 0, false
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/generateBids", s.count("generateBids", s.traced("generateBids", s.generateBids)))
	mux.HandleFunc("POST /v1/predict", s.count("predict", s.predict))
	mux.HandleFunc("GET /v1/models", s.count("models", s.listModels))
	mux.HandleFunc("GET /v1/models/{model_path...}", s.count("model", s.getModel))
	mux.HandleFunc("GET /healthz", s.count("healthz", func(w http.ResponseWriter, r *http.Request) int {
		httpjson.Write(w, http.StatusOK, map[string]string{"status": "ok"})
		return http.StatusOK
	}))
	mux.HandleFunc("GET /readyz", s.count("readyz", s.ready))
	mux.HandleFunc("GET /v1/code", s.count("code", s.listCode))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	if s.v2 != nil {
		mux.Handle("/v2", s.v2.Handler())
		mux.Handle("/v2/", s.v2.Handler())
		// TF Serving's REST predict, as OpenVINO Model Server's stateful
		// models are driven (POST /v1/models/NAME:predict).
		mux.Handle("POST /v1/models/", s.v2.TFServingPredictHandler())
	}
	return mux
}

// traced wraps a handler in a server span named name, a child of the
// caller's W3C traceparent header if it sent one; without a tracer it is
// the handler itself. The span carries the status code and the number of
// interest groups is added by the handler; nothing of the request's
// content.
func (s *server) traced(name string, h func(http.ResponseWriter, *http.Request) int) func(http.ResponseWriter, *http.Request) int {
	if s.tracer == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) int {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		code := h(w, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
		return code
	}
}

// count wraps a handler that returns its status code, for the metrics.
func (s *server) count(name string, h func(http.ResponseWriter, *http.Request) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		code := h(w, r)
		s.metrics.httpRequests.WithLabelValues(name, fmt.Sprint(code)).Inc()
	}
}

// generateBidsRequest is the body of POST /v1/generateBids. Signals are kept
// as raw JSON and handed to JS as they came.
type generateBidsRequest struct {
	InterestGroups        []json.RawMessage     `json:"interest_groups"`
	AuctionSignals        json.RawMessage       `json:"auction_signals"`
	PerBuyerSignals       json.RawMessage       `json:"per_buyer_signals"`
	TrustedBiddingSignals json.RawMessage       `json:"trusted_bidding_signals"`
	BrowserSignals        json.RawMessage       `json:"browser_signals"`
	ConsentedDebugConfig  *consentedDebugConfig `json:"consented_debug_config"`
	// CodeVersion names the code version to run (a blob of the code
	// bucket); "" = the default. An unknown one is the request's error
	// (400), never a fallback.
	CodeVersion string `json:"code_version"`
}

// consentedDebugConfig is B&A's ConsentedDebugConfiguration: a request
// that is consented and carries the server's token gets its debug lines.
type consentedDebugConfig struct {
	IsConsented bool   `json:"is_consented"`
	Token       string `json:"token"`
}

// consented reports whether the request's debug config matches the
// server's token (compared in constant time).
func (s *server) consented(c *consentedDebugConfig) bool {
	return c != nil && c.IsConsented && s.consentToken != "" &&
		subtle.ConstantTimeCompare([]byte(c.Token), []byte(s.consentToken)) == 1
}

// bidResult is one entry of the answer: the bid or the error, never both.
type bidResult struct {
	InterestGroup string          `json:"interest_group"`
	Bid           json.RawMessage `json:"bid,omitempty"`
	Error         string          `json:"error,omitempty"`
}

func (s *server) generateBids(w http.ResponseWriter, r *http.Request) int {
	if code, ok := s.notStarted(w); ok {
		return code
	}
	body, err := readBody(w, r, s.maxBody)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return httpjson.Error(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", s.maxBody))
		}
		return httpjson.Error(w, http.StatusBadRequest, "cannot read request body: "+err.Error())
	}
	var req generateBidsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return httpjson.Error(w, http.StatusBadRequest, "request body is not a generateBids JSON object: "+err.Error())
	}
	if len(req.InterestGroups) == 0 {
		return httpjson.Error(w, http.StatusBadRequest, `request has no "interest_groups" (an array of interest group objects with a "name")`)
	}
	if len(req.InterestGroups) > s.maxGroups {
		return httpjson.Error(w, http.StatusBadRequest, fmt.Sprintf("request has %d interest groups, the limit is %d", len(req.InterestGroups), s.maxGroups))
	}
	trace.SpanFromContext(r.Context()).SetAttributes(attribute.Int("inferbid.interest_groups", len(req.InterestGroups)))
	names := make([]string, len(req.InterestGroups))
	for i, ig := range req.InterestGroups {
		var head struct {
			Name *string `json:"name"`
		}
		if err := json.Unmarshal(ig, &head); err != nil || bytes.HasPrefix(bytes.TrimSpace(ig), []byte("null")) {
			return httpjson.Error(w, http.StatusBadRequest, fmt.Sprintf("interest_groups[%d] is not an object", i))
		}
		if head.Name == nil {
			return httpjson.Error(w, http.StatusBadRequest, fmt.Sprintf(`interest_groups[%d] has no string "name"`, i))
		}
		names[i] = *head.Name
	}
	signals := [][]byte{req.AuctionSignals, req.PerBuyerSignals, req.TrustedBiddingSignals, req.BrowserSignals}
	for i := range signals {
		if len(signals[i]) == 0 {
			signals[i] = nil // absent: undefined in JS
		}
	}

	ctx := r.Context()
	if s.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.requestTimeout)
		defer cancel()
	}
	jreq := jsworker.Request{
		InterestGroups: make([][]byte, len(req.InterestGroups)),
		Signals:        signals,
		IsolateCalls:   s.isolateCalls,
		Consented:      s.consented(req.ConsentedDebugConfig),
		CodeVersion:    req.CodeVersion,
	}
	if s.workers == nil && req.CodeVersion != "" && req.CodeVersion != s.module.Name {
		return httpjson.Error(w, http.StatusBadRequest, fmt.Sprintf("code_version %q is not served: only %q (--js_in_process serves one module)", req.CodeVersion, s.module.Name))
	}
	for i, ig := range req.InterestGroups {
		jreq.InterestGroups[i] = ig
	}
	var resp jsworker.Response
	if s.workers != nil {
		resp = s.workers.GenerateBids(ctx, jreq)
	} else {
		resp = s.runInProcess(ctx, jreq)
	}
	if len(resp.Results) > 0 && errors.Is(resp.Results[0].Err, jsworker.ErrUnknownVersion) {
		return httpjson.Error(w, http.StatusBadRequest, resp.Results[0].Err.Error())
	}
	bids := make([]bidResult, len(names))
	for i, res := range resp.Results {
		bids[i].InterestGroup = names[i]
		err := res.Err
		if err == nil && s.maxBidBytes > 0 && len(res.Bid) > s.maxBidBytes {
			err = fmt.Errorf("generateBid returned %d bytes of JSON, the limit is %d", len(res.Bid), s.maxBidBytes)
		}
		if err != nil {
			bids[i].Error = bidError(err)
			s.logger.Debug("generateBid failed", "interest_group", names[i], "err", err)
			s.logScriptError(s.codeVersion(req.CodeVersion), err)
			continue
		}
		bids[i].Bid = res.Bid
	}
	out := map[string]any{"bids": bids}
	if jreq.Consented {
		lines := make([]string, len(resp.Logs))
		for i, l := range resp.Logs {
			lines[i] = formatLogLine(l)
		}
		out["debug_info"] = map[string]any{"logs": lines}
	}
	httpjson.Write(w, http.StatusOK, out)
	return http.StatusOK
}

// listCode answers GET /v1/code: every code version, its SHA-256, size,
// state (default, serving, failed), when it loaded and its last error.
func (s *server) listCode(w http.ResponseWriter, r *http.Request) int {
	if code, ok := s.notStarted(w); ok {
		return code
	}
	if st := s.code.Load(); st != nil {
		httpjson.Write(w, http.StatusOK, map[string]any{"default": st.Default(), "versions": st.Status()})
		return http.StatusOK
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"default": s.module.Name, "versions": []codestore.VersionStatus{s.module}})
	return http.StatusOK
}

// formatLogLine is one debug_info line: "[console.warn] text" or
// "[inference] text".
func formatLogLine(l jsworker.LogLine) string {
	if l.Source == "console" {
		return "[console." + l.Level + "] " + l.Text
	}
	return "[" + l.Source + "] " + l.Text
}

// runInProcess runs a request's groups in the server's own JS pool
// (--js_in_process): in chunks of concurrent groups, at most concurrency()
// at once, each chunk in one fresh runtime (never another request's).
func (s *server) runInProcess(ctx context.Context, req jsworker.Request) jsworker.Response {
	n := len(req.InterestGroups)
	resp := jsworker.Response{Results: make([]jsworker.Result, n)}
	parts := min(s.concurrency(), n)
	size := (n + parts - 1) / parts
	logs := make([]func() []jsworker.LogLine, parts)
	var wg sync.WaitGroup
	for part := range parts {
		lo, hi := part*size, min((part+1)*size, n)
		if lo >= hi {
			break
		}
		wg.Go(func() {
			cctx := ctx
			if req.Consented {
				cctx, logs[part] = jsworker.CollectLogs(ctx)
			}
			calls := make([][][]byte, hi-lo)
			for i := range calls {
				calls[i] = append([][]byte{req.InterestGroups[lo+i]}, req.Signals...)
			}
			gopts := jsbridge.GroupOptions{IsolateCalls: req.IsolateCalls, Trace: jsworker.TraceCalls(s.tracer, ctx, "generateBid", s.module.Name, lo)}
			for i, r := range s.pool.CallJSONGroup(cctx, "generateBid", calls, gopts) {
				resp.Results[lo+i] = jsworker.Result{Bid: r.Out, Err: r.Err}
			}
		})
	}
	wg.Wait()
	for _, l := range logs {
		if l != nil {
			resp.Logs = append(resp.Logs, l()...)
		}
	}
	return resp
}

// concurrency is the most generateBid calls of one request that run at
// once.
func (s *server) concurrency() int {
	if s.requestConcurrency > 0 {
		return s.requestConcurrency
	}
	if s.pool == nil {
		return 1
	}
	return max(1, s.pool.Size()/2)
}

// bidError is the message a client sees for a failed group.
func bidError(err error) string {
	var se *jsbridge.ScriptError
	switch {
	case errors.Is(err, jsbridge.ErrDeadline):
		return "generateBid exceeded its deadline"
	case errors.Is(err, jsbridge.ErrHeapBudget):
		return "generateBid exceeded the JS heap budget"
	case errors.Is(err, jsbridge.ErrOverloaded):
		return "not run: the server is overloaded (too many JS runtimes stuck past their deadlines)"
	case errors.Is(err, jsbridge.ErrCutOff), errors.Is(err, jsworker.ErrRequestBudget):
		return err.Error()
	case errors.Is(err, jsworker.ErrWorkerDied):
		return "generateBid's JS worker died (out of memory, or a crash) and was replaced"
	case errors.As(err, &se):
		// The first line: the exception, without goja's stack dump, and
		// where it was thrown (script:line:column).
		msg, _, _ := strings.Cut(se.Message, "\n")
		if pos := scriptPosition(se.Message); pos != "" {
			msg += " (at " + pos + ")"
		}
		return "generateBid threw: " + msg
	case errors.Is(err, jsbridge.ErrNotFunction):
		return "the bidding module defines no generateBid function"
	case errors.Is(err, jsbridge.ErrUnsettled):
		return "generateBid returned a promise that never settled"
	}
	return err.Error()
}

func (s *server) listModels(w http.ResponseWriter, r *http.Request) int {
	if code, ok := s.notStarted(w); ok {
		return code
	}
	if s.models == nil {
		httpjson.Write(w, http.StatusOK, map[string]any{"model_paths": []string{}, "models": []modelStatus{}, "inference_enabled": false})
		return http.StatusOK
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	paths, err := s.models.ModelPaths(ctx)
	if err != nil {
		return httpjson.Error(w, http.StatusServiceUnavailable, "cannot list models: "+err.Error())
	}
	if paths == nil {
		paths = []string{}
	}
	models, err := s.modelStatuses(ctx, "")
	if err != nil {
		return httpjson.Error(w, http.StatusServiceUnavailable, "cannot list models: "+err.Error())
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"model_paths": paths, "models": models, "inference_enabled": true})
	return http.StatusOK
}

// getModel answers GET /v1/models/{model_path...}: one model's status, or
// 404 when neither the sidecar nor the model sync knows the path.
func (s *server) getModel(w http.ResponseWriter, r *http.Request) int {
	if code, ok := s.notStarted(w); ok {
		return code
	}
	path := r.PathValue("model_path")
	if path == "" {
		return httpjson.Error(w, http.StatusNotFound, "no model path: GET /v1/models/MODEL_PATH, e.g. /v1/models/pctr/v1/")
	}
	if s.models == nil {
		return httpjson.Error(w, http.StatusNotFound, fmt.Sprintf("model %q is not known: inference is disabled", path))
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	models, err := s.modelStatuses(ctx, path)
	if err != nil {
		return httpjson.Error(w, http.StatusServiceUnavailable, fmt.Sprintf("cannot describe model %q: %v", path, err))
	}
	for _, m := range models {
		if m.ModelPath == path {
			httpjson.Write(w, http.StatusOK, m)
			return http.StatusOK
		}
	}
	if !strings.HasSuffix(path, "/") {
		// A directory model's path ends in "/": pctr/v1/, not pctr/v1.
		if dir, err := s.modelStatuses(ctx, path+"/"); err == nil && slices.ContainsFunc(dir, func(m modelStatus) bool { return m.ModelPath == path+"/" }) {
			return httpjson.Error(w, http.StatusNotFound, fmt.Sprintf("model %q is not known; %q is (a directory model's path ends in \"/\"): GET /v1/models/%s/", path, path+"/", path))
		}
	}
	return httpjson.Error(w, http.StatusNotFound, fmt.Sprintf("model %q is not known: the sidecar has no model at this path and the model config does not list it", path))
}

// modelStatuses merges what the sidecar holds with what the model sync
// knows (failed loads, draining models), sorted by path: every model, or
// only path's when path is not "" (the sidecar then describes that one
// alone, not every signature it holds).
func (s *server) modelStatuses(ctx context.Context, path string) ([]modelStatus, error) {
	infos, err := s.models.Models(ctx, path)
	if path != "" && inferr.TypeOf(err) == inferr.ModelNotFound {
		infos, err = nil, nil // the model sync may still know it (failed)
	}
	if err != nil {
		return nil, err
	}
	var synced []modelstore.ModelStatus
	if wt := s.watcher.Load(); wt != nil {
		for _, st := range wt.Status() {
			if path == "" || st.Path == path {
				synced = append(synced, st)
			}
		}
	}
	return mergeModelStatus(infos, synced), nil
}

// ready: not draining, start-up finished (the sidecar is healthy and the
// module compiled), the sidecar answers its health check, and the first
// model sync finished.
func (s *server) ready(w http.ResponseWriter, r *http.Request) int {
	status, problems, failed := s.readiness(r.Context())
	if len(problems) > 0 {
		httpjson.Write(w, http.StatusServiceUnavailable, map[string]any{"status": status, "problems": problems})
		return http.StatusServiceUnavailable
	}
	if len(failed) > 0 {
		// Ready by --readiness_policy, with models that failed: by name.
		httpjson.Write(w, http.StatusOK, map[string]any{"status": "ready", "failed_models": failed})
		return http.StatusOK
	}
	httpjson.Write(w, http.StatusOK, map[string]string{"status": "ready"})
	return http.StatusOK
}

// readyErr is /readyz's verdict as an error (nil when ready), for the v2
// API's server-ready endpoint.
func (s *server) readyErr(ctx context.Context) error {
	if _, problems, _ := s.readiness(ctx); len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// readiness is "ready" with no problems, or the status and what is not
// ready; failed names the configured models that failed to load (also
// when the readiness policy lets the server be ready).
func (s *server) readiness(ctx context.Context) (status string, problems, failed []string) {
	if s.draining.Load() {
		return "draining", []string{"draining: the server got SIGTERM and stops soon; requests are still served"}, nil
	}
	// pool and health are read only once start-up is over (they are set
	// while the port already serves).
	step := s.starting.Load()
	if step != nil {
		problems = append(problems, "starting: "+*step)
	} else if s.pool == nil && s.workers == nil {
		problems = append(problems, "bidding module not loaded")
	}
	if step == nil {
		if p := s.sidecarProblem(ctx); p != "" {
			problems = append(problems, p)
		}
	}
	if !s.synced.Load() {
		s.syncMu.Lock()
		err := s.syncErr
		s.syncMu.Unlock()
		msg := "first model sync not finished"
		if err != nil {
			msg += ": last attempt: " + err.Error()
		}
		problems = append(problems, msg)
	} else {
		// Every configured model was tried once: the policy decides.
		var models []modelstore.ModelStatus
		var unnamed []string
		if wt := s.watcher.Load(); wt != nil {
			models, unnamed = wt.Status(), wt.UnnamedRejections()
		}
		var modelProblems []string
		modelProblems, failed = modelReadiness(s.readinessPolicy, s.localModels, models, unnamed)
		problems = append(problems, modelProblems...)
	}
	if len(problems) > 0 {
		return "not ready", problems, failed
	}
	return "ready", nil, failed
}

// sidecarProblem is why the sidecar is not ready ("" when it is): down
// or restarting, replaying (every model that served before a restart, and
// every registration it died during, must serve again or have failed),
// not answering its liveness probe, crash-looping, or not answering its
// health check.
func (s *server) sidecarProblem(ctx context.Context) string {
	if s.health == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := s.health.WaitHealthy(ctx); err != nil {
		return "sidecar not healthy: " + err.Error()
	}
	return ""
}

func (s *server) setSyncResult(err error) {
	if err == nil {
		s.synced.Store(true)
		return
	}
	s.syncMu.Lock()
	s.syncErr = err
	s.syncMu.Unlock()
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}
