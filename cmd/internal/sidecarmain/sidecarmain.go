package sidecarmain

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
)

// Main runs the sidecar for runtimeName and exits.
func Main(runtimeName string) {
	os.Exit(Run(runtimeName, os.Args[1:], os.Stderr))
}

// Run runs the sidecar with args (without the program name) and returns
// the exit code.
func Run(runtimeName string, args []string, stderr io.Writer) int {
	prog := "inference-sidecar-" + runtimeName
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "Unix socket path to serve on (required); its directory is created 0700 if missing")
	runtimeConfig := fs.String("runtime_config", os.Getenv("INFERENCE_SIDECAR_RUNTIME_CONFIG"), "runtime config JSON (num_interop_threads, num_intraop_threads, module_name, cpuset, ...)")
	maxModelBytes := fs.Int64("max_model_bytes", runtimes.DefaultMaxModelBytes, "largest model (total file bytes) accepted")
	maxEntries := fs.Int("max_batch_entries", 0, "most entries per Predict batch (0 = default 4096)")
	stopGrace := fs.Duration("stop_grace", 10*time.Second, "how long a SIGTERM waits for calls in flight")
	logLevel := fs.String("log_level", "info", "debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s --socket PATH [--runtime_config JSON]\n", prog)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: %s\n", prog, fmt.Sprintf(format, a...))
		return code
	}
	if fs.NArg() > 0 {
		return fail(2, "unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *socket == "" {
		return fail(2, "--socket is required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail(2, "--log_level: %v", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if err := applyRlimit(os.Getenv(sidecar.RlimitEnv)); err != nil {
		return fail(2, "%v", err)
	}
	cfg, err := sidecar.ParseRuntimeConfig(*runtimeConfig)
	if err != nil {
		return fail(2, "--runtime_config: %v", err)
	}
	if len(cfg.Cpuset) > 0 {
		if err := pinThreads(cfg.Cpuset); err != nil {
			return fail(2, "--runtime_config cpuset %v: %v", cfg.Cpuset, err)
		}
	}
	rt, err := runtimes.Open(runtimeName, cfg)
	if err != nil {
		return fail(2, "%v", err)
	}
	defer rt.Close()
	srv, err := sidecar.NewServer(sidecar.ServerOptions{
		Runtime:       rt,
		Limits:        batch.Limits{MaxElements: cfg.MaxTensorElements, MaxEntries: *maxEntries},
		MaxModelBytes: *maxModelBytes,
		Logger:        log,
	})
	if err != nil {
		return fail(1, "%v", err)
	}
	abs, err := filepath.Abs(*socket)
	if err != nil {
		return fail(2, "--socket: %v", err)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(abs) }()
	select {
	case err := <-served:
		if err != nil {
			return fail(1, "%v", err)
		}
		return 0
	case sig := <-sigs:
		log.Info("stopping", "signal", sig.String(), "grace", *stopGrace)
	}
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(*stopGrace):
		log.Warn("calls still in flight after the grace period; stopping hard")
		srv.Stop()
		<-stopped
	}
	if err := <-served; err != nil {
		return fail(1, "%v", err)
	}
	log.Info("stopped")
	return 0
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
// created later inherit the mask of the thread that creates them.
func pinThreads(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}
