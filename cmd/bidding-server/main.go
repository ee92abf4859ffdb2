package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/inferbid/inferbid/codestore"
	"github.com/inferbid/inferbid/examples"
	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/jsbridge"
	"github.com/inferbid/inferbid/jsworker"
	"github.com/inferbid/inferbid/modelstore"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/telemetry"
)

func main() {
	// The same binary, started by a jsworker.Host, is a JS worker.
	if jsworker.IsWorker(os.Getenv) {
		os.Exit(jsworker.ExitCode(jsworker.Main(context.Background(), os.Getenv, os.Stderr), os.Stderr))
	}
	cli.Main("bidding-server", func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
		return run(ctx, args, stdin, stdout, stderr, os.Getenv)
	})
}

// modelSyncer is the bucket watcher as the server uses it.
type modelSyncer interface {
	SyncOnce(ctx context.Context) error
	Run(ctx context.Context) error
}

// run starts everything, serves until ctx ends, then shuts down gracefully.
// getenv reads the INFERENCE_* environment variables. A bad command line or
// environment is a *cli.UsageError (exit 2). stdin is unused; stdout gets
// only --version.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &cli.UsageError{Err: err}
	}
	if cfg.Version {
		cli.PrintVersion(stdout, "bidding-server")
		return nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("--log_level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)

	source, name := examples.GenerateBidJS, "examples/bidding/generate_bid.js (embedded)"
	if cfg.UDFCodePath != "" {
		b, err := os.ReadFile(cfg.UDFCodePath)
		if err != nil {
			return fmt.Errorf("--udf_code_path: %w", err)
		}
		source, name = string(b), cfg.UDFCodePath
	}
	var wasmHelper []byte
	if cfg.UDFWasmHelperPath != "" {
		b, err := os.ReadFile(cfg.UDFWasmHelperPath)
		if err != nil {
			return fmt.Errorf("--udf_wasm_helper_path: %w", err)
		}
		if len(b) == 0 {
			return fmt.Errorf("--udf_wasm_helper_path: %s is empty", cfg.UDFWasmHelperPath)
		}
		wasmHelper = b
	}
	startedAt := time.Now()
	traces, err := telemetry.New(ctx, telemetry.Options{Endpoint: cfg.OTLPEndpoint, Protocol: cfg.OTLPProtocol, ServiceName: "bidding-server", Logger: logger})
	if err != nil {
		return fmt.Errorf("--otel_exporter_endpoint: %w", err)
	}
	defer func() {
		if err := traces.Shutdown(context.Background()); err != nil {
			logger.Warn("exporting the last spans failed", "err", err)
		}
	}()
	if traces != nil {
		logger.Info("tracing on: spans are exported over OTLP", "endpoint", cfg.OTLPEndpoint, "protocol", cmp.Or(cfg.OTLPProtocol, telemetry.ProtocolHTTP))
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg)
	// /metrics: the server's collectors, and the sidecar's once it runs.
	gatherer := &hostGatherer{own: reg}

	sum := sha256.Sum256([]byte(source))
	srv := &server{module: codestore.VersionStatus{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(source)),
		State: codestore.StateDefault, LoadedAt: startedAt}, metrics: m, gatherer: gatherer, tracer: traces.Tracer(), logger: logger, maxBody: cfg.MaxRequestBytes, maxGroups: cfg.MaxGroups,
		maxBidBytes: cfg.MaxBidBytes, requestTimeout: cfg.RequestTimeout, requestConcurrency: cfg.JSRequestConcurrency,
		isolateCalls: cfg.JSIsolateEachCall, consentToken: cfg.ConsentedDebugToken,
		readinessPolicy: cfg.ReadinessPolicy, localModels: len(cfg.LocalModels)}
	popts := jsbridge.Options{
		Size:             cfg.JSPoolSize,
		CallTimeout:      cfg.JSCallTimeout,
		ShareRuntimes:    !cfg.JSIsolateCalls,
		MaxAbandoned:     cfg.JSMaxAbandoned,
		RequireFunctions: []string{"generateBid"},
		LogConsole:       cfg.JSLogConsoleUnsafe,
		WasmHelper:       wasmHelper,
		Logger:           logger,
		Hooks:            m.hooks(),
	}
	if cfg.JSLogConsoleUnsafe {
		logger.Warn("--js_log_console_unsafe: the console output of every request goes to the server log (one user's data in operator logs); for local development only")
	}
	if !cfg.JSIsolateCalls {
		logger.Warn("--js_isolate_calls=false: JS runtimes are shared between calls; what one call leaves in them (one user's data) reaches later calls")
	}
	// The supervisor keeps the models it replays on disk, not in the heap:
	// the JS budget is the heap's whole allowance.
	if cfg.JSHeapBudgetMB > 0 {
		budget := int64(cfg.JSHeapBudgetMB) << 20
		popts.HeapBudget = budget
		// With workers, the budget is each worker's (which sets its own
		// limit); the server holds no JS heap.
		if cfg.JSInProcess && getenv("GOMEMLIMIT") == "" {
			// A soft limit a little over the watchdog's, so that garbage
			// is collected before it counts and the collector does not
			// thrash before the watchdog acts.
			debug.SetMemoryLimit(softMemoryLimit(budget))
			if getenv("GOGC") == "" {
				// With the heap bounded, collect less often: every call's
				// fresh runtime is garbage (BenchmarkIsolation).
				debug.SetGCPercent(gcPercent)
			}
		}
	}

	// The port is bound before anything slow starts, so that /healthz
	// answers and /readyz says what is not ready yet while the sidecar
	// starts and the first model sync runs.
	srv.setStarting("the inference sidecar and the bidding module are not started yet")
	srv.v2 = newKServe(cfg, srv, m)
	httpSrv, ln, err := listen(cfg, srv, logger)
	if err != nil {
		return err
	}
	// Closes the listener and every connection when start-up fails; a
	// no-op after the Shutdown below.
	defer httpSrv.Close()
	serveErr := make(chan error, 3)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	logger.Info("bidding-server listening", "addr", ln.Addr().String(), "max_connections", cfg.MaxConnections)
	var kserveSrv *http.Server
	if cfg.KServeListen != "" {
		var kln net.Listener
		if kserveSrv, kln, err = listenKServe(cfg, srv, logger); err != nil {
			return fmt.Errorf("--kserve_listen: %w", err)
		}
		defer kserveSrv.Close()
		go func() { serveErr <- kserveSrv.Serve(kln) }()
		logger.Info("kserve v2 HTTP API listening", "addr", kln.Addr().String())
	}
	if cfg.KServeGRPCListen != "" {
		gln, err := net.Listen("tcp", cfg.KServeGRPCListen)
		if err != nil {
			return fmt.Errorf("--kserve_grpc_listen: %w", err)
		}
		gs := srv.v2.NewGRPCServer()
		defer stopGRPC(gs, cfg.ShutdownGrace)
		go func() { serveErr <- gs.Serve(gln) }()
		logger.Info("kserve v2 gRPC service listening", "addr", gln.Addr().String())
	}

	var sup *sidecar.Supervisor
	var models modelstore.Registrar // the supervisor
	if cfg.SidecarBinaryPath != "" {
		srv.setStarting("the inference sidecar is starting")
		sup, err = sidecar.StartSupervisor(ctx, sidecar.SupervisorOptions{
			BinaryPath:         cfg.SidecarBinaryPath,
			RuntimeConfig:      cfg.SidecarRuntimeConfig,
			RlimitMB:           cfg.SidecarRlimitMB,
			Transport:          cfg.SidecarTransport,
			FastLaneSpinWait:   cfg.SidecarSpinWait,
			Logger:             logger,
			OnRestart:          m.sidecarRestarts.Inc,
			LivenessTimeout:    cfg.SidecarLiveness,
			SequencesPerClient: cfg.SequencesPerClient,
			OnUnresponsive:     m.sidecarHung.Inc,
			ReplayDeadline:     cmp.Or(cfg.JSCallTimeout, jsbridge.DefaultCallTimeout),
			OnSlowReplay:       m.sidecarSlowReplays.Inc,
			OnReplay:           func(took time.Duration, _ int) { m.sidecarReplay.Observe(took.Seconds()) },
			OTLPEndpoint:       cfg.OTLPEndpoint,
			OTLPProtocol:       cfg.OTLPProtocol,
			Tracer:             traces.Tracer(),

			// The model config's external_variables (TensorFlow).
			ExternalVariablesCacheBytes: cfg.ExternalVariablesCacheBytes,
		})
		if err != nil {
			if ctx.Err() != nil {
				logger.Info("stopped while the sidecar was starting")
				return nil
			}
			// A sidecar that cannot start (bad binary, bad runtime config)
			// is an operator error: exit 1 with its stderr in the message
			// rather than serve unready forever.
			return fmt.Errorf("start sidecar %s: %w", cfg.SidecarBinaryPath, err)
		}
		defer sup.Close()
		models = sup
		client := sup.Client()
		popts.Inference = client
		// Ready only once a restarted sidecar has its models back.
		srv.models, srv.health, srv.predictor = client, sup, client
		gatherer.setSidecar(client.Gatherer(0))
		srv.v2.SetBackend(client)
		if srv.repo != nil {
			srv.repo.setRegistrar(sup)
		}
	} else {
		logger.Warn("no inference sidecar binary: inference is disabled (getModelPaths/runInference are not defined)")
	}

	srv.setStarting("the bidding module is loading")
	if cfg.JSInProcess {
		logger.Warn("--js_in_process: JS runs in the server process, without a hard memory bound or preemption: one script can crash or stall the server")
		pool, err := jsbridge.New(name, source, popts)
		if err != nil {
			return fmt.Errorf("load bidding module: %w", err)
		}
		defer pool.Close()
		srv.pool = pool
		m.registerPool(reg, pool)
		srv.started()
		logger.Info("bidding-server started", "inference", pool.InferenceEnabled(),
			"js_runtimes", pool.Size(), "js_isolated", pool.Isolated(), "js_heap_budget_mb", cfg.JSHeapBudgetMB, "module", name)
	} else {
		hopts := jsworker.Options{
			Modules:            []jsworker.Module{{Name: name, Source: source}},
			Workers:            cfg.JSWorkers,
			Spares:             cfg.JSWorkerSpares,
			RlimitMB:           cfg.JSWorkerRlimitMB,
			CallTimeout:        cfg.JSCallTimeout,
			HeapBudget:         popts.HeapBudget,
			RequireFunctions:   popts.RequireFunctions,
			LogConsole:         cfg.JSLogConsoleUnsafe,
			ShareRuntimes:      !cfg.JSIsolateCalls,
			WasmHelper:         wasmHelper,
			RequestConcurrency: cfg.JSRequestConcurrency,
			Slice:              cfg.JSRequestSlice,
			RequestBudget:      cfg.JSRequestBudget,
			SpinWait:           cfg.JSWorkerSpinWait,
			Logger:             logger,
			Hooks:              m.hooks(),
			OnRestart:          m.jsWorkerRestarts.Inc,
			OTLPEndpoint:       cfg.OTLPEndpoint,
			OTLPProtocol:       cfg.OTLPProtocol,
		}
		if cfg.JSWorkerSpares == 0 {
			hopts.Spares = -1
		}
		if sup != nil {
			client := sup.Client()
			hopts.SidecarSocket = client.SocketPath()
			hopts.SidecarTransport = cfg.SidecarTransport.String()
			hopts.SidecarSpinWait = cfg.SidecarSpinWait
			hopts.Inference = client
		}
		var store *codestore.Store
		if cfg.CodeFetch != nil {
			if store, err = fetchCode(ctx, cfg, hopts, srv, reg, logger); err != nil {
				if ctx.Err() != nil {
					logger.Info("stopped while the bidding code was being fetched")
					return nil
				}
				return err
			}
			mods, def, _ := store.Modules()
			hopts.Modules, hopts.DefaultModule = mods, def
			name = def
		}
		host, err := jsworker.Start(ctx, hopts)
		if err != nil {
			if store != nil {
				store.Close()
			}
			return fmt.Errorf("load bidding module: %w", err)
		}
		defer host.Close()
		if store != nil {
			// Polls until shutdown; the bucket closes once the last poll
			// has ended.
			store.Attach(host)
			srv.code.Store(store)
			codeCtx, cancelCode := context.WithCancel(ctx)
			codeDone := make(chan struct{})
			go func() {
				defer close(codeDone)
				_ = store.Run(codeCtx)
			}()
			defer func() {
				cancelCode()
				<-codeDone
				store.Close()
			}()
		}
		srv.workers = host
		m.registerWorkers(reg, host)
		srv.started()
		logger.Info("bidding-server started", "inference", sup != nil, "js_workers", host.Workers(),
			"js_isolated", cfg.JSIsolateCalls, "js_heap_budget_mb", cfg.JSHeapBudgetMB, "js_worker_rlimit_mb", cfg.JSWorkerRlimitMB, "module", name)
	}

	bgCtx, cancelBG := context.WithCancel(ctx)
	defer cancelBG()
	done := make(chan struct{})
	go func() {
		defer close(done)
		syncModels(bgCtx, cfg, models, srv, reg, logger)
	}()

	select {
	case err := <-serveErr:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	// Drain: /readyz turns 503 so that load balancers take this server out
	// of rotation, while requests (new ones too) are still served. Keep-
	// alives end, so that clients reconnect elsewhere.
	srv.draining.Store(true)
	httpSrv.SetKeepAlivesEnabled(false)
	if kserveSrv != nil {
		kserveSrv.SetKeepAlivesEnabled(false)
	}
	if cfg.DrainPeriod > 0 {
		logger.Info("draining: /readyz answers 503, requests are still served", "drain_period", cfg.DrainPeriod)
		select {
		case <-time.After(cfg.DrainPeriod):
		case err := <-serveErr:
			return fmt.Errorf("http: %w", err)
		}
	}
	// Then the listener closes and requests in flight finish.
	logger.Info("shutting down", "grace", cfg.ShutdownGrace)
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	err = httpSrv.Shutdown(shutCtx)
	if kserveSrv != nil {
		err = errors.Join(err, kserveSrv.Shutdown(shutCtx))
	}
	cancelBG()
	<-done
	// Deferred: pool.Close, then sup.Close (SIGTERM to the sidecar).
	if err != nil {
		return fmt.Errorf("http shutdown after --shutdown_grace %s: %w", cfg.ShutdownGrace, err)
	}
	logger.Info("stopped")
	return nil
}

// syncModels registers the local models, runs the first bucket sync until
// it has read the config (marking the server ready), then keeps the watcher
// polling. sup is nil when inference is off.
func syncModels(ctx context.Context, cfg config, sup modelstore.Registrar, srv *server, reg prometheus.Registerer, logger *slog.Logger) {
	if sup == nil {
		srv.setSyncResult(nil)
		return
	}
	for _, lm := range cfg.LocalModels {
		if err := registerLocal(ctx, sup, lm); err != nil {
			// A bad local model is an operator error that retrying will not
			// fix: log it and stay not ready.
			logger.Error("local model not registered", "model_path", lm.ModelPath, "local", lm.Local, "err", err)
			srv.setSyncResult(err)
			return
		}
		logger.Info("local model registered", "model_path", lm.ModelPath, "local", lm.Local)
	}
	if cfg.ModelBucketName == "" {
		srv.setSyncResult(nil)
		return
	}
	// The first sync is retried with back-off until it has read the config:
	// a bucket that cannot be opened (a missing directory, a scheme typo)
	// or a config that cannot be read may be fixed while the server runs.
	// Each failure is in /readyz; the log says it once, not every attempt.
	retry := newRetrier(logger, "model bucket", cfg.ModelFetchPeriod, "bucket", cfg.ModelBucketName)
	var w modelSyncer
	for w == nil {
		// A failed attempt must not leave the watcher's collectors
		// registered, or the next attempt could not register them.
		undo := &undoRegisterer{Registerer: reg}
		watcher, err := modelstore.NewWatcher(modelstore.WatcherOptions{
			BucketURL:     cfg.ModelBucketName,
			ConfigPath:    cfg.ModelConfigPath,
			Period:        cfg.ModelFetchPeriod,
			MaxEntries:    cfg.ModelMaxEntries,
			MaxModelBytes: cfg.MaxModelBytes,
			Registrar:     sup,
			Logger:        logger,
			Metrics:       undo,
		})
		if err == nil {
			w = watcher
			srv.watcher.Store(watcher)
			break
		}
		undo.undo()
		if !retry.failed(ctx, srv, "model bucket not opened", err) {
			return
		}
	}
	retry.reset()
	// The first sync ends once the config was read and every model it lists
	// was attempted: a model that failed (bad checksum, failed download or
	// warm-up) is logged, counted in /metrics and retried by the watcher.
	// Whether the server is then ready is --readiness_policy's call
	// (modelReadiness): by default one serving model is enough, so one bad
	// model does not hold the models that loaded out of service, but a
	// config whose every model fails does not take traffic.
	for {
		err := w.SyncOnce(ctx)
		if err == nil {
			srv.setSyncResult(nil)
			logger.Info("first model sync finished", "bucket", cfg.ModelBucketName)
			break
		}
		if !errors.Is(err, modelstore.ErrConfig) && ctx.Err() == nil {
			srv.setSyncResult(nil)
			logger.Warn("first model sync finished with failures; the watcher retries each when its config entry or objects change, or its back-off ends",
				"bucket", cfg.ModelBucketName, "err", err)
			break
		}
		if !retry.failed(ctx, srv, "model config not read", err) {
			return
		}
	}
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		logger.Error("model bucket watcher stopped", "err", err)
	}
}

// The watcher hands the supervisor its verified downloads with their
// digests: hard-linked into the replay store, never read again.
var _ modelstore.DigestRegistrar = (*sidecar.Supervisor)(nil)

func registerLocal(ctx context.Context, sup modelstore.Registrar, lm localModel) error {
	if dr, ok := sup.(modelstore.DiskRegistrar); ok {
		// Streamed from the files: the model never sits in memory here.
		files, err := modelfiles.LocalFiles(lm.Local)
		if err != nil {
			return err
		}
		return dr.RegisterModelFiles(ctx, lm.ModelPath, files, "", nil)
	}
	files, err := modelfiles.ReadLocal(lm.Local)
	if err != nil {
		return err
	}
	return sup.RegisterModel(ctx, lm.ModelPath, files, "")
}

// fetchCode opens the code source and syncs it until the default version
// loads, retrying with back-off (a bucket that cannot be opened, a default
// blob missing or broken may be fixed while the server starts); /readyz
// says what it waits for.
func fetchCode(ctx context.Context, cfg config, hopts jsworker.Options, srv *server, reg prometheus.Registerer, logger *slog.Logger) (*codestore.Store, error) {
	srv.setStarting("the bidding code is being fetched")
	report := func(err error) { srv.setStarting("the bidding code is not fetched yet: " + err.Error()) }
	fc := *cfg.CodeFetch
	where := fc.Bucket
	if fc.Mode == codestore.ModeURL {
		where = fc.JSURL
	}
	retry := newRetrier(logger, "bidding code", fc.Period, "mode", fc.Mode.String(), "source", where)
	var store *codestore.Store
	for store == nil {
		undo := &undoRegisterer{Registerer: reg}
		s, err := codestore.New(ctx, codestore.Options{
			Config:   fc,
			MaxBytes: cfg.CodeMaxBytes,
			Logger:   logger,
			Metrics:  undo,
			Validate: func(ctx context.Context, mods []jsworker.Module) map[string]error {
				return jsworker.Validate(ctx, hopts, mods)
			},
		})
		if err == nil {
			store = s
			break
		}
		undo.undo()
		if !retry.failedReport(ctx, report, "code bucket not opened", err) {
			return nil, ctx.Err()
		}
	}
	retry.reset()
	for {
		err := store.SyncOnce(ctx)
		if _, def, ok := store.Modules(); ok {
			if err != nil {
				logger.Warn("first code sync finished with failures; the default version loads, the rest is shown in /v1/code and retried when it changes",
					"default", def, "err", err)
			}
			return store, nil
		}
		if !retry.failedReport(ctx, report, "bidding code not fetched", err) {
			store.Close()
			return nil, ctx.Err()
		}
	}
}

// gcPercent is GOGC when a soft memory limit bounds the heap.
const gcPercent = 400

// runtimeSlack is what the Go runtime and the server hold besides the models
// and the JS heap, in the soft memory limit.
const runtimeSlack = 64 << 20

// softMemoryLimit is the Go soft memory limit for a JS heap budget: the
// budget, a quarter more for garbage, and the runtime's slack. Model files
// do not count: the supervisor keeps them on disk for replay, never in the
// heap.
func softMemoryLimit(budget int64) int64 { return budget + budget/4 + runtimeSlack }
