package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/inferbid/inferbid/codestore"
	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/modelstore"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/telemetry"
)

// config is everything the server is started with. Every INFERENCE_* setting
// is a flag and an environment variable of the same name (lower case for the
// flag); a flag given on the command line wins over the variable.
type config struct {
	SidecarBinaryPath    string
	SidecarRuntimeConfig string
	SidecarRlimitMB      int
	SidecarTransport     sidecar.Transport
	SidecarSpinWait      time.Duration
	// SidecarLiveness bounds the sidecar's answer to the liveness probe
	// (sidecar.SupervisorOptions.LivenessTimeout); negative = no probe.
	SidecarLiveness time.Duration
	// SequencesPerClient is the sidecar's --max_sequences_per_client.
	SequencesPerClient int
	ModelBucketName    string
	ModelConfigPath    string
	ModelFetchPeriod   time.Duration
	ModelMaxEntries    int
	MaxModelBytes      int64
	LocalModels        []localModel
	// ExternalVariablesCacheBytes is the sidecar's
	// --external_variables_cache_bytes (0: its default).
	ExternalVariablesCacheBytes int64
	// ReadinessPolicy is --readiness_policy: what the configured models
	// must do before the server is ready.
	ReadinessPolicy readinessPolicy

	UDFCodePath string
	// UDFWasmHelperPath is a WebAssembly module handed to every generateBid
	// call as browserSignals.wasmHelper ("" = none).
	UDFWasmHelperPath string
	// CodeFetch is --buyer_code_fetch_config; nil = none (--udf_code_path
	// or the embedded example). LOCAL is turned into UDFCodePath.
	CodeFetch    *codestore.FetchConfig
	CodeMaxBytes int64
	Listen       string
	// KServeListen serves the Open Inference Protocol's HTTP API on an
	// address of its own too ("" = only on Listen).
	KServeListen string
	// KServeGRPCListen serves the protocol's gRPC service ("" = off).
	KServeGRPCListen string
	// KServeModelRepository turns on the v2 model repository extension.
	KServeModelRepository bool

	JSPoolSize           int
	JSCallTimeout        time.Duration
	JSIsolateCalls       bool
	JSIsolateEachCall    bool
	JSRequestConcurrency int
	JSMaxAbandoned       int
	JSHeapBudgetMB       int
	JSWorkers            int
	JSInProcess          bool
	JSWorkerRlimitMB     int
	JSWorkerSpares       int
	JSWorkerSpinWait     time.Duration
	JSRequestBudget      time.Duration
	JSRequestSlice       time.Duration
	JSLogConsoleUnsafe   bool
	ConsentedDebugToken  string
	MaxRequestBytes      int64
	MaxGroups            int
	MaxBidBytes          int
	RequestTimeout       time.Duration
	ShutdownGrace        time.Duration
	LogLevel             string
	Version              bool // --version: print it and exit
	// OTLPEndpoint turns tracing on: spans go there over OTLPProtocol
	// (package telemetry); "" = off.
	OTLPEndpoint, OTLPProtocol string

	// The HTTP listener: the drain after SIGTERM, the connection cap and
	// the per-connection timeouts (http.Server's fields of the same names).
	DrainPeriod       time.Duration
	MaxConnections    int
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
}

// minWorkerAddressSpaceMB is the address space a JS worker needs besides its
// heap budget: a Go binary of this size under RLIMIT_AS failed to start now
// and then at 1.0-1.5 GiB and never at 2 GiB (measured on linux/amd64).
const minWorkerAddressSpaceMB = 2048

// localModel is one --inference_model_local_paths item.
type localModel struct {
	ModelPath string // the path JS sees
	Local     string // the file or directory on disk
}

// envFlags are the flags that also read an environment variable.
var envFlags = []string{
	"inference_sidecar_binary_path",
	"inference_sidecar_runtime_config",
	"inference_sidecar_rlimit_mb",
	"inference_sidecar_transport",
	"inference_sidecar_spin_wait",
	"inference_sidecar_liveness_timeout",
	"inference_model_bucket_name",
	"inference_model_config_path",
	"inference_model_fetch_period_ms",
	"inference_model_max_entries",
	"inference_model_local_paths",
	"inference_max_model_bytes",
	"inference_external_variables_cache_bytes",
	"consented_debug_token",
	"buyer_code_fetch_config",
}

const usageHeader = `bidding-server runs an ad tech's generateBid JavaScript with ML inference.

Every INFERENCE_* setting can be given as a flag or as the environment
variable of the same name in upper case (e.g. --inference_model_bucket_name or
INFERENCE_MODEL_BUCKET_NAME); a flag on the command line wins over the
environment. Durations are Go durations (5s, 1m30s, 250ms) or plain
milliseconds (5000). Without a sidecar binary, inference is disabled: the module runs
without getModelPaths/runInference, as in B&A.

Flags:
`

// flagText is what the flags that need conversion after parsing hold.
type flagText struct {
	local, transport, codeFetch, readiness string
}

// newFlagSet defines every flag on a new flag set, storing into c and raw.
// Every flag's help states its default: PrintDefaults shows non-zero ones,
// the text says what "" or 0 means (TestFlagDefaultsStated).
func newFlagSet(c *config, raw *flagText, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("bidding-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.SidecarBinaryPath, "inference_sidecar_binary_path", "", "the inference sidecar binary (e.g. bin/inference-sidecar-tensorflow); default none: inference disabled")
	fs.StringVar(&c.SidecarRuntimeConfig, "inference_sidecar_runtime_config", "", `the sidecar's runtime config JSON ({"num_interop_threads":..,"num_intraop_threads":..,"module_name":..,"cpuset":[..]}); default none: the runtime's defaults`)
	fs.IntVar(&c.SidecarRlimitMB, "inference_sidecar_rlimit_mb", 0, "address-space limit of the sidecar in MiB; default 0 = none")
	fs.StringVar(&raw.transport, "inference_sidecar_transport", "fastlane", "how runInference batches reach the sidecar: fastlane (length-prefixed frames on pooled connections) or grpc; everything else is gRPC")
	cli.DurationVar(fs, &c.SidecarSpinWait, "inference_sidecar_spin_wait", 0, "how long each end of the fast lane polls its socket before it parks (a wake-up costs tens of µs; polling costs CPU, bounded, and a JS worker polls only while the server runs no more requests at once than half its CPUs); default 0 = 50µs, negative = never")
	cli.DurationVar(fs, &c.SidecarLiveness, "inference_sidecar_liveness_timeout", sidecar.DefaultLivenessTimeout, "the sidecar is probed every second (a gRPC health check and an empty fast-lane batch); one that does not answer within this is killed and restarted, and from half of it on calls fail at once instead of waiting their deadlines; 0 = the default, negative = no probe")
	fs.IntVar(&c.SequencesPerClient, "sequence_max_per_client", 0, "most live sequences of one stateful model that one client of the KServe v2 / TF Serving API (its remote host) may hold, so that one client cannot take every slot; default 0 = a quarter of the model's max_sequence_number (at least 16, or all of them when fewer), negative = no cap")
	fs.Int64Var(&c.ExternalVariablesCacheBytes, "inference_external_variables_cache_bytes", 0, "bytes of rows the sidecar caches per store of external variables (model_metadata external_variables, TensorFlow only); default 0 = the sidecar's 64 MiB, negative = no cache")
	fs.StringVar(&c.ModelBucketName, "inference_model_bucket_name", "", "the model bucket as a gocloud URL: file:///dir, s3://bucket?..., gs://bucket; default none: no bucket sync")
	fs.StringVar(&c.ModelConfigPath, "inference_model_config_path", "", "the model_metadata config object in the bucket (e.g. model_config.json); no default, required with a bucket")
	cli.DurationVar(fs, &c.ModelFetchPeriod, "inference_model_fetch_period_ms", modelstore.DefaultPeriod, "bucket poll period; 0 = the default")
	fs.IntVar(&c.ModelMaxEntries, "inference_model_max_entries", modelstore.DefaultMaxEntries, "most model_metadata entries in the bucket's config; a config with more is rejected whole (nothing it says takes effect) with an error naming the cap; 0 = the default")
	fs.Int64Var(&c.MaxModelBytes, "inference_max_model_bytes", runtimes.DefaultMaxModelBytes, "largest model (total file bytes) the model sync fetches; raise it for TensorFlow models whose checkpoint the sidecar memory-maps (its --max_mapped_model_bytes)")
	fs.StringVar(&raw.local, "inference_model_local_paths", "", "comma-separated local models registered at start: LOCAL or MODEL_PATH=LOCAL; without MODEL_PATH the path is LOCAL's base name, plus a trailing / for a directory; default none")
	fs.StringVar(&raw.readiness, "readiness_policy", string(policyAny), "when /readyz (and the v2 API's server ready, the gRPC health service) says ready, once every configured model was tried once: any = at least one model serves, all = every model serves, none = whatever the models do; failed models are named in /readyz either way")
	fs.StringVar(&c.UDFCodePath, "udf_code_path", "", "the JavaScript bidding module defining generateBid; default: the embedded example (examples/bidding/generate_bid.js)")
	fs.StringVar(&c.UDFWasmHelperPath, "udf_wasm_helper_path", "", "a WebAssembly module (.wasm) compiled once and handed to every generateBid call as browserSignals.wasmHelper, a WebAssembly.Module (B&A's Wasm helper); default none")
	fs.StringVar(&raw.codeFetch, "buyer_code_fetch_config", "", `where the bidding code comes from (env BUYER_CODE_FETCH_CONFIG), B&A's JSON: {"fetchMode":"BUCKET","protectedAuctionBiddingJsBucket":"s3://...","protectedAuctionBiddingJsBucketDefaultBlob":"bid.js","urlFetchPeriodMs":60000}, or "URL" with "biddingJsUrl" (and "biddingWasmHelperUrl", "urlFetchTimeoutMs"), or "LOCAL" with "biddingJsPath"; in BUCKET mode every blob is a code version a request may name (code_version), swapped in live as it changes; default none: --udf_code_path`)
	fs.Int64Var(&c.CodeMaxBytes, "code_max_bytes", codestore.DefaultMaxBytes, "largest bidding module (with its Wasm helper) fetched from a bucket or URL; larger ones are refused")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&c.KServeGRPCListen, "kserve_grpc_listen", "", "serve the Open Inference Protocol (KServe v2) gRPC service inference.GRPCInferenceService on this TCP address; default none: off")
	fs.BoolVar(&c.KServeModelRepository, "kserve_model_repository", false, "serve the v2 model repository extension (POST /v2/repository/index, /v2/repository/models/NAME/load and /unload) over the models of --inference_model_local_paths and the bucket config; default false: off")
	fs.StringVar(&c.KServeListen, "kserve_listen", "", "also serve the Open Inference Protocol (KServe v2) HTTP API, which --listen always serves under /v2, on this address of its own; default none")
	fs.IntVar(&c.JSWorkers, "js_workers", 0, "number of JS worker processes (each runs one generateBid at a time, under its own memory limit, killed and replaced when a call does not stop); default 0 = twice GOMAXPROCS, at least 3: a call holds its worker until its deadline, so workers outnumber cores and the kernel shares the cores")
	fs.BoolVar(&c.JSInProcess, "js_in_process", false, "run JS in the server process instead of worker processes: no hard memory bound or preemption, so one script can crash or stall the server; for debugging")
	fs.IntVar(&c.JSWorkerRlimitMB, "js_worker_rlimit_mb", 0, "address-space limit (RLIMIT_AS) of each JS worker process in MiB: the hard bound of a worker's memory; a script that allocates past it ends its own worker only; default 0 = twice --js_heap_budget_mb plus 2048 (4096 with the default budget; Go itself reserves 1-2 GiB of address space), 4096 without a budget")
	fs.IntVar(&c.JSWorkerSpares, "js_worker_spares", 1, "warm spare JS workers (started, module loaded) that replace a failed worker at once; 0 = none: a replacement starts on demand")
	cli.DurationVar(fs, &c.JSRequestBudget, "js_request_budget", 0, "JS time one generateBids request may use over all its workers; its calls not started by then fail; default 0 = twice --js_call_timeout, negative = none")
	cli.DurationVar(fs, &c.JSWorkerSpinWait, "js_worker_spin_wait", 0, "how long a JS worker polls for its next request after answering one, while requests come back to back and the server runs no more requests at once than half its CPUs, before it parks (a wake-up costs about 10µs on a virtual CPU and more under load; polling costs CPU); default 0 = 200µs, negative = never")
	cli.DurationVar(fs, &c.JSRequestSlice, "js_request_slice", 0, "how long a worker keeps starting calls of one request before the calls of other requests take their turn; default 0 = 10ms")
	fs.BoolVar(&c.JSLogConsoleUnsafe, "js_log_console_unsafe", false, "UNSAFE, local development only: write the console output of requests without consented debugging to the server log (one user's data in operator logs); by default it goes nowhere")
	fs.IntVar(&c.JSPoolSize, "js_pool_size", 0, "with --js_in_process: number of JS runtimes; default 0 = GOMAXPROCS")
	cli.DurationVar(fs, &c.JSCallTimeout, "js_call_timeout", 0, "deadline of one generateBid call, inference included; default 0 = 2s")
	fs.BoolVar(&c.JSIsolateCalls, "js_isolate_calls", true, "run the generateBid calls of each request (one user) in fresh JS runtimes, so that nothing one request leaves (globals, prototypes, replaced functions: one user's data) reaches another; false shares runtimes between requests and is UNSAFE")
	fs.BoolVar(&c.JSIsolateEachCall, "js_isolate_each_call", false, "stricter: a fresh JS runtime for every generateBid call, even between the interest groups of one request; default false: the calls of one request chunk share one")
	fs.IntVar(&c.JSRequestConcurrency, "js_request_concurrency", 0, "most chunks of one request's generateBid calls running at once, each in a worker of its own; default 0 = a quarter of the JS workers (with --js_in_process, half the runtimes), at least 1")
	fs.IntVar(&c.JSMaxAbandoned, "js_max_abandoned", 0, "with --js_in_process: most JS runtimes abandoned at a deadline (stuck in a built-in call) still running; beyond it calls fail at once; default 0 = the JS pool size (workers need no such bound: a stuck worker is killed)")
	fs.IntVar(&c.JSHeapBudgetMB, "js_heap_budget_mb", 1024, "heap in MiB the JS runtimes of each JS worker (or, with --js_in_process, of the server) may use; past it the running call is stopped; 0 = no bound")
	fs.Int64Var(&c.MaxRequestBytes, "max_request_bytes", 4<<20, "largest accepted generateBids body")
	fs.IntVar(&c.MaxGroups, "max_interest_groups", 1000, "most interest groups in one generateBids request")
	fs.IntVar(&c.MaxBidBytes, "max_bid_bytes", 1<<20, "largest JSON a generateBid call may return; larger is that group's error")
	cli.DurationVar(fs, &c.RequestTimeout, "request_timeout", 10*time.Second, "bound on one generateBids request, waiting for a free JS runtime included")
	cli.DurationVar(fs, &c.DrainPeriod, "drain_period", 5*time.Second, "after SIGTERM, how long /readyz answers 503 (draining) while requests are still served, so that load balancers stop routing here before the port closes; 0 = none")
	cli.DurationVar(fs, &c.ShutdownGrace, "shutdown_grace", 10*time.Second, "after the drain period, how long requests in flight may take to finish before the server exits anyway (exit status 1)")
	fs.IntVar(&c.MaxConnections, "max_connections", 10000, "most HTTP connections open at once (idle keep-alive ones included); further ones wait in the kernel's accept queue; 0 = no cap")
	cli.DurationVar(fs, &c.ReadHeaderTimeout, "read_header_timeout", 10*time.Second, "time a connection has to send a request's headers (slow clients are closed)")
	cli.DurationVar(fs, &c.ReadTimeout, "read_timeout", 30*time.Second, "time a connection has to send a whole request, body included")
	cli.DurationVar(fs, &c.WriteTimeout, "write_timeout", 0, "time from the end of a request's headers to the end of its response; default 0 = --read_timeout + --request_timeout + 10s")
	cli.DurationVar(fs, &c.IdleTimeout, "idle_timeout", 2*time.Minute, "how long an idle keep-alive connection stays open")
	fs.StringVar(&c.ConsentedDebugToken, "consented_debug_token", "", "consented debugging (env CONSENTED_DEBUG_TOKEN): a generateBids request whose consented_debug_config is {\"is_consented\": true, \"token\": THIS} gets its console lines and inference debug lines back in debug_info; default none: no request is consented")
	fs.StringVar(&c.OTLPEndpoint, "otel_exporter_endpoint", "", "OpenTelemetry tracing: the OTLP collector's URL (e.g. http://127.0.0.1:4318; env OTEL_EXPORTER_OTLP_ENDPOINT) to which bidding-server, its JS workers and the sidecar export spans (generateBids, generateBid, runInference, the model run; ids, model paths, sizes and timings only, never request data); default none: tracing off")
	fs.StringVar(&c.OTLPProtocol, "otel_exporter_protocol", "", "the OTLP protocol of --otel_exporter_endpoint: http/protobuf or grpc (env OTEL_EXPORTER_OTLP_PROTOCOL); default http/protobuf")
	fs.StringVar(&c.LogLevel, "log_level", "info", "debug, info, warn or error")
	fs.BoolVar(&c.Version, "version", false, "print the version (module version and VCS commit) and exit")
	return fs
}

// parseConfig reads flags from args and the environment through getenv.
// With --version it returns at once, with only Version set.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	var raw flagText
	fs := newFlagSet(&c, &raw, stderr)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Version {
		return config{Version: true}, nil
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range envFlags {
		if set[name] {
			continue
		}
		env := strings.ToUpper(name)
		if v := getenv(env); v != "" {
			if err := fs.Set(name, v); err != nil {
				return c, fmt.Errorf("environment variable %s=%q: %w", env, v, err)
			}
		}
	}
	// The OpenTelemetry variables keep their standard names.
	if !set["otel_exporter_endpoint"] {
		c.OTLPEndpoint = getenv(telemetry.EndpointEnv)
	}
	if !set["otel_exporter_protocol"] {
		c.OTLPProtocol = getenv(telemetry.ProtocolEnv)
	}
	if err := telemetry.CheckProtocol(c.OTLPProtocol); err != nil {
		return c, fmt.Errorf("--otel_exporter_protocol: %w", err)
	}
	if c.MaxModelBytes <= 0 {
		return c, fmt.Errorf("--inference_max_model_bytes must be > 0, got %d", c.MaxModelBytes)
	}
	if c.ModelFetchPeriod < 0 {
		return c, fmt.Errorf("--inference_model_fetch_period_ms must be >= 0, got %s", c.ModelFetchPeriod)
	}
	if c.ModelMaxEntries < 0 {
		return c, fmt.Errorf("--inference_model_max_entries must be >= 0, got %d", c.ModelMaxEntries)
	}
	if c.SidecarRlimitMB < 0 {
		return c, fmt.Errorf("--inference_sidecar_rlimit_mb must be >= 0, got %d", c.SidecarRlimitMB)
	}
	if c.MaxRequestBytes <= 0 || c.MaxGroups <= 0 || c.MaxBidBytes <= 0 || c.RequestTimeout <= 0 {
		return c, errors.New("--max_request_bytes, --max_interest_groups, --max_bid_bytes and --request_timeout must be > 0")
	}
	if c.JSPoolSize < 0 || c.JSCallTimeout < 0 || c.JSRequestConcurrency < 0 || c.JSMaxAbandoned < 0 || c.JSHeapBudgetMB < 0 {
		return c, errors.New("--js_pool_size, --js_call_timeout, --js_request_concurrency, --js_max_abandoned and --js_heap_budget_mb must be >= 0")
	}
	if c.JSWorkers < 0 || c.JSWorkerRlimitMB < 0 || c.JSWorkerSpares < 0 || c.JSRequestSlice < 0 {
		return c, errors.New("--js_workers, --js_worker_rlimit_mb, --js_worker_spares and --js_request_slice must be >= 0")
	}
	if c.JSWorkerRlimitMB == 0 {
		c.JSWorkerRlimitMB = 4096
		if c.JSHeapBudgetMB > 0 {
			c.JSWorkerRlimitMB = 2*c.JSHeapBudgetMB + 2048
		}
	}
	if c.JSWorkerRlimitMB < c.JSHeapBudgetMB+minWorkerAddressSpaceMB {
		return c, fmt.Errorf("--js_worker_rlimit_mb %d leaves no room above --js_heap_budget_mb %d: give each worker at least the budget plus %d MiB (the address space Go reserves for itself: a worker started with less fails at random with \"runtime: cannot allocate memory\")", c.JSWorkerRlimitMB, c.JSHeapBudgetMB, minWorkerAddressSpaceMB)
	}
	if c.DrainPeriod < 0 || c.ShutdownGrace <= 0 || c.MaxConnections < 0 {
		return c, errors.New("--drain_period and --max_connections must be >= 0, --shutdown_grace > 0")
	}
	if c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout < 0 || c.IdleTimeout <= 0 {
		return c, errors.New("--read_header_timeout, --read_timeout and --idle_timeout must be > 0, --write_timeout >= 0")
	}
	if c.WriteTimeout == 0 {
		// Go's WriteTimeout runs from the end of the headers: it covers
		// reading the body, the request's own bound, and writing the answer.
		c.WriteTimeout = c.ReadTimeout + c.RequestTimeout + 10*time.Second
	}
	if c.WriteTimeout <= c.RequestTimeout {
		return c, fmt.Errorf("--write_timeout %s must be longer than --request_timeout %s, or a request that uses its time gets no answer", c.WriteTimeout, c.RequestTimeout)
	}
	var err error
	if c.SidecarTransport, err = sidecar.ParseTransport(raw.transport); err != nil {
		return c, fmt.Errorf("--inference_sidecar_transport: %w", err)
	}
	if c.ReadinessPolicy, err = parseReadinessPolicy(raw.readiness); err != nil {
		return c, err
	}
	if c.LocalModels, err = parseLocalModels(raw.local); err != nil {
		return c, err
	}
	if c.SidecarBinaryPath == "" && (c.ModelBucketName != "" || len(c.LocalModels) > 0) {
		return c, errors.New("models are configured (bucket or local paths) but no --inference_sidecar_binary_path / INFERENCE_SIDECAR_BINARY_PATH")
	}
	if c.ModelBucketName != "" && c.ModelConfigPath == "" {
		return c, errors.New("--inference_model_bucket_name needs --inference_model_config_path")
	}
	if c.ModelBucketName != "" {
		// A bare path or file://dir/x is a mistake no retry fixes.
		if err := modelstore.CheckBucketURL(c.ModelBucketName); err != nil {
			return c, fmt.Errorf("--inference_model_bucket_name: %w", err)
		}
	}
	if c.CodeMaxBytes <= 0 {
		return c, errors.New("--code_max_bytes must be > 0")
	}
	if raw.codeFetch != "" {
		fc, err := codestore.ParseFetchConfig([]byte(raw.codeFetch))
		if err != nil {
			return c, fmt.Errorf("--buyer_code_fetch_config: %w", err)
		}
		if c.UDFCodePath != "" {
			return c, errors.New("--udf_code_path and --buyer_code_fetch_config both say where the bidding code is: give one (--udf_code_path is the LOCAL shorthand)")
		}
		if fc.Mode == codestore.ModeLocal {
			c.UDFCodePath = fc.LocalPath
		} else {
			if c.JSInProcess {
				return c, fmt.Errorf("--buyer_code_fetch_config fetchMode %s swaps code live in JS worker processes; --js_in_process has none", fc.Mode)
			}
			c.CodeFetch = &fc
		}
	}
	return c, nil
}

// parseLocalModels parses "LOCAL" and "MODEL_PATH=LOCAL" items.
func parseLocalModels(s string) ([]localModel, error) {
	var out []localModel
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		var m localModel
		if mp, local, ok := strings.Cut(item, "="); ok {
			m = localModel{ModelPath: mp, Local: local}
		} else {
			m = localModel{Local: item}
		}
		st, err := os.Stat(m.Local)
		if err != nil {
			return nil, fmt.Errorf("--inference_model_local_paths: %w", err)
		}
		if m.ModelPath == "" {
			m.ModelPath = filepath.Base(filepath.Clean(m.Local))
			if st.IsDir() {
				m.ModelPath += "/"
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func (c config) String() string {
	return "sidecar=" + strconv.Quote(c.SidecarBinaryPath) + " bucket=" + strconv.Quote(c.ModelBucketName) +
		" config=" + strconv.Quote(c.ModelConfigPath) + " udf=" + strconv.Quote(c.UDFCodePath) + " listen=" + c.Listen
}
