package sidecarmain

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/cli"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/telemetry"
)

// Run runs the sidecar for runtimeName with args (without the program
// name) until it fails or ctx ends; then calls in flight get --stop_grace
// to finish before the server stops hard, and Run returns nil. A bad
// command line or runtime config is a *cli.UsageError. A bad command line
// is for cli.Main to print as "inference-sidecar-<runtime>: err"; any later
// failure (the runtime config, the runtime, serving) is logged at ERROR
// with its cause ("sidecar failed", err=...) in the log's format and
// returned cli.Reported. stdin is unused; stdout gets only --version.
func Run(ctx context.Context, runtimeName string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	prog := "inference-sidecar-" + runtimeName
	o := options{}
	fs := newFlagSet(prog, &o, stderr)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if o.version {
		cli.PrintVersion(stdout, prog)
		return nil
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.socket == "" {
		return cli.Usagef("--socket is required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return cli.Usagef("--log_level: %w", err)
	}
	log, err := newLogger(o.logFormat, level, stderr)
	if err != nil {
		return err
	}
	// From here on a failure is logged at ERROR with its cause, in the
	// log's format (a supervisor parses it), rather than printed by
	// cli.Main as a plain line.
	if err := serve(ctx, runtimeName, o, log); err != nil {
		log.Error("sidecar failed", "err", err, "exit_code", cli.ExitCode(err))
		return cli.Reported(err)
	}
	return nil
}

// newLogger logs to w as logfmt ("text") or one JSON object per line
// ("json"). In JSON a duration is its text ("1.5ms"), as logfmt writes it,
// not a count of nanoseconds: the supervisor forwards the attribute as it
// finds it.
func newLogger(format string, level slog.Level, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}})), nil
	}
	return nil, cli.Usagef("--log_format %q: want text or json", format)
}

// Defaults of the memory-mapped variables flags.
const (
	// DefaultMapVariablesMinBytes keeps small models' checkpoints in the
	// heap, where nothing differs from before.
	DefaultMapVariablesMinBytes int64 = 64 << 20
	DefaultMaxMappedModelBytes  int64 = 64 << 30
)

// options are the sidecar's flags.
type options struct {
	socket, runtimeConfig, logLevel, logFormat string
	otlpEndpoint, otlpProtocol                 string
	maxModelBytes                              int64
	mapDir, localFilesDir                      string
	mapMinBytes, maxMappedBytes                int64
	mapVerifyCRC, mapGatherFromMapping         bool
	extCacheBytes                              int64
	maxEntries, seqPerClient                   int
	stopGrace, spinWait                        time.Duration
	version                                    bool
}

// newFlagSet defines the flags into o. Every flag's help states its
// default (TestFlagDefaultsStated).
func newFlagSet(prog string, o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.socket, "socket", "", "Unix socket path to serve on (required, no default); its directory is created 0700 if missing")
	fs.StringVar(&o.runtimeConfig, "runtime_config", os.Getenv("INFERENCE_SIDECAR_RUNTIME_CONFIG"), "runtime config JSON (num_interop_threads, num_intraop_threads, module_name, cpuset, ...); default $INFERENCE_SIDECAR_RUNTIME_CONFIG, else none: the runtime's defaults")
	fs.Int64Var(&o.maxModelBytes, "max_model_bytes", runtimes.DefaultMaxModelBytes, "largest model (total file bytes) accepted")
	fs.StringVar(&o.mapDir, "map_variables_dir", "", "directory (on disk, not tmpfs) where the TensorFlow runtime writes a copy of a large checkpoint data shard registered as bytes, maps it read-only and unlinks it at once (a streamed registration's shards are mapped where they were received); default \"\" = the socket's directory (the supervisor's private one)")
	fs.BoolVar(&o.mapGatherFromMapping, "map_variables_gather_from_mapping", false, "TensorFlow gathers over a memory-mapped table read rows through the mapping (a hot row costs less, but each fault maps the cached pages around the row: RSS grows to most of the table) instead of with pread from its file; default false")
	fs.BoolVar(&o.mapVerifyCRC, "map_variables_verify_crc", false, "check the CRC32C of the TensorFlow checkpoint tensors served from a streamed registration's mapped shard files, which reads every page of them at load; default false: they are trusted to the SHA-256 the host verified against the config's checksum (list it)")
	fs.Int64Var(&o.mapMinBytes, "map_variables_min_bytes", DefaultMapVariablesMinBytes, "TensorFlow checkpoint data shards of at least this many bytes are served from a read-only memory mapping instead of the heap; negative = never map")
	fs.Int64Var(&o.maxMappedBytes, "max_mapped_model_bytes", DefaultMaxMappedModelBytes, "largest total of a model's memory-mapped files (TensorFlow checkpoint data shards, see --map_variables_min_bytes); they do not count against --max_model_bytes")
	fs.Int64Var(&o.extCacheBytes, "external_variables_cache_bytes", 64<<20, "bytes of rows (and their keys) each store of external variables (a model_metadata entry's external_variables, TensorFlow only) keeps in a local LRU cache; negative = no cache, every row from the store")
	fs.StringVar(&o.localFilesDir, "local_files_dir", "", "directory whose files a registration may name instead of streaming them (the sidecar supervisor passes its replay store: the files are hard-linked, never read through the process); default \"\" = none, every file is streamed")
	fs.IntVar(&o.maxEntries, "max_batch_entries", 0, "most entries per Predict batch; default 0 = 4096")
	cli.DurationVar(fs, &o.stopGrace, "stop_grace", 10*time.Second, "how long a SIGTERM waits for calls in flight")
	fs.StringVar(&o.logLevel, "log_level", "info", "debug, info, warn or error")
	logFormat := os.Getenv(sidecar.LogFormatEnv)
	if logFormat == "" {
		logFormat = "text"
	}
	fs.StringVar(&o.logFormat, "log_format", logFormat, "text (logfmt) or json (one slog JSON object per line, what the supervisor asks for through $"+sidecar.LogFormatEnv+")")
	cli.DurationVar(fs, &o.spinWait, "fast_lane_spin_wait", 0, "how long a fast-lane connection polls for the next request before it parks; default 0 = 50µs, negative = never (no CPU spent polling)")
	fs.IntVar(&o.seqPerClient, "max_sequences_per_client", 0, "most live sequences of one stateful model one client of bidding-server's KServe front (its remote host) may hold; default 0 = a quarter of the model's max_sequence_number (at least 16, or all of them when fewer), negative = no cap")
	fs.StringVar(&o.otlpEndpoint, "otel_exporter_endpoint", os.Getenv(telemetry.EndpointEnv), "OpenTelemetry tracing: the OTLP collector's URL (e.g. http://127.0.0.1:4318) to which the sidecar exports its spans (sidecar.Predict, model.run: ids, model paths, sizes, timings, never request data); the only connection it makes; default $"+telemetry.EndpointEnv+", else none: tracing off")
	fs.StringVar(&o.otlpProtocol, "otel_exporter_protocol", os.Getenv(telemetry.ProtocolEnv), "the OTLP protocol: http/protobuf or grpc; default $"+telemetry.ProtocolEnv+", else http/protobuf")
	fs.BoolVar(&o.version, "version", false, "print the version (module version and VCS commit) and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s --socket PATH [--runtime_config JSON]\n       %s --version\n", prog, prog)
		fs.PrintDefaults()
	}
	return fs
}

// serve opens the runtime and serves until it fails or ctx ends.
func serve(ctx context.Context, runtimeName string, o options, log *slog.Logger) error {
	if err := applyRlimit(os.Getenv(sidecar.RlimitEnv)); err != nil {
		return &cli.UsageError{Err: err}
	}
	cfg, err := sidecar.ParseRuntimeConfig(o.runtimeConfig)
	if err != nil {
		return cli.Usagef("--runtime_config: %w", err)
	}
	if len(cfg.Cpuset) > 0 {
		if err := pinThreads(cfg.Cpuset); err != nil {
			return cli.Usagef("--runtime_config cpuset %v: %w", cfg.Cpuset, err)
		}
	}
	if err := telemetry.CheckProtocol(o.otlpProtocol); err != nil {
		return cli.Usagef("--otel_exporter_protocol: %w", err)
	}
	traces, err := telemetry.New(ctx, telemetry.Options{Endpoint: o.otlpEndpoint, Protocol: o.otlpProtocol, ServiceName: "inference-sidecar-" + runtimeName, Logger: log})
	if err != nil {
		return cli.Usagef("--otel_exporter_endpoint: %w", err)
	}
	defer func() {
		if err := traces.Shutdown(context.Background()); err != nil {
			log.Warn("exporting the last spans failed", "err", err)
		}
	}()
	abs, err := filepath.Abs(o.socket)
	if err != nil {
		return cli.Usagef("--socket: %w", err)
	}
	maxMapped := int64(0)
	if o.mapMinBytes >= 0 {
		cfg.MapVariablesDir, cfg.MapVariablesMinBytes, cfg.MapVariablesVerifyCRC = o.mapDir, o.mapMinBytes, o.mapVerifyCRC
		cfg.MapVariablesGatherFromMapping = o.mapGatherFromMapping
		if cfg.MapVariablesDir == "" {
			cfg.MapVariablesDir = filepath.Dir(abs)
		}
		maxMapped = o.maxMappedBytes
	}
	cfg.ExternalVariablesCacheBytes = o.extCacheBytes
	rt, err := runtimes.Open(runtimeName, cfg.Config)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	defer rt.Close()
	srv, err := sidecar.NewServer(sidecar.ServerOptions{
		Runtime:               rt,
		Settings:              cfg.Settings,
		Limits:                batch.Limits{MaxElements: cfg.MaxTensorElements, MaxEntries: o.maxEntries},
		MaxModelBytes:         o.maxModelBytes,
		MaxMappedModelBytes:   maxMapped,
		Logger:                log,
		FastLaneSpinWait:      o.spinWait,
		MaxSequencesPerClient: o.seqPerClient,
		Tracer:                traces.Tracer(),
		LocalFilesDir:         o.localFilesDir,
	})
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(abs) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		log.Info("stopping", "cause", context.Cause(ctx), "grace", o.stopGrace)
	}
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(o.stopGrace):
		log.Warn("calls still in flight after the grace period; stopping hard")
		srv.Stop()
		<-stopped
	}
	// ErrServerStopped: ctx ended before Serve got going (a signal during
	// start-up); the stop is as graceful as any.
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	log.Info("stopped")
	return nil
}

// applyRlimit caps the address space to mb MiB ("" = no cap).
func applyRlimit(mb string) error {
	if mb == "" {
		return nil
	}
	n, err := strconv.ParseUint(mb, 10, 32)
	if err != nil || n == 0 {
		return fmt.Errorf("%s=%q: want a positive number of MiB", sidecar.RlimitEnv, mb)
	}
	lim := n << 20
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
		return fmt.Errorf("%s=%d: setrlimit RLIMIT_AS: %w", sidecar.RlimitEnv, n, err)
	}
	return nil
}

// pinThreads restricts every thread of the process to cpus; threads
// created later inherit the mask of the thread that creates them. A thread
// that an unpinned thread creates while a pass runs can be missed, so passes
// repeat until one finds every thread already pinned.
func pinThreads(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	for range 100 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		changed := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			var cur unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &cur); err == nil && cur == set {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return errors.New("threads kept appearing unpinned")
}
