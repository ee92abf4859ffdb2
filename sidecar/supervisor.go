package sidecar

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
)

// RlimitEnv is the environment variable through which the supervisor hands
// the address-space limit (in MiB) to the sidecar, which applies it to
// itself before it opens its runtime.
const RlimitEnv = "INFERENCE_SIDECAR_RLIMIT_MB"

// SupervisorOptions configure a Supervisor; the zero value of each field
// means its default.
type SupervisorOptions struct {
	BinaryPath    string // the sidecar binary; required
	RuntimeConfig string // JSON passed as --runtime_config
	SocketPath    string // "" = a socket in a private temp dir
	// RlimitMB caps the sidecar's address space (RLIMIT_AS) in MiB; 0 =
	// none. The limit is passed to the child in RlimitEnv (our sidecars
	// apply it at start) and also set on the child's pid with prlimit(2).
	RlimitMB               int
	MinBackoff, MaxBackoff time.Duration // 0 = 100ms, 10s
	Logger                 *slog.Logger  // nil = slog.Default()
	// OnRestart is called after each restart once the sidecar is healthy
	// and the models are replayed (for metrics).
	OnRestart func()
	// StartTimeout bounds the wait for a started sidecar to report
	// SERVING; 0 = 30s.
	StartTimeout time.Duration
	// StopGrace is how long Close waits after SIGTERM before SIGKILL;
	// 0 = 10s.
	StopGrace time.Duration
	// HealthyPeriod is how long a sidecar must have run for the back-off
	// to start again from MinBackoff; 0 = 30s.
	HealthyPeriod time.Duration
	// Transport carries the Client's Predict (ClientOptions.Transport):
	// the zero value is the fast lane.
	Transport Transport
	// FastLaneSpinWait is how long both ends of the fast lane poll before
	// they park (ClientOptions/ServerOptions.FastLaneSpinWait; the sidecar
	// gets it as --fast_lane_spin_wait): 0 = the default, < 0 = never.
	FastLaneSpinWait time.Duration
	// TempDir is where the supervisor's private directory (the copies of
	// the registered models kept for replay, the sidecar's $TMPDIR, and
	// the socket unless SocketPath is set) is made; "" = os.TempDir(). It
	// should be on disk, not tmpfs: files on tmpfs are held in memory.
	TempDir string
	// ReplayParallelism bounds the models replayed at once after a
	// restart; 0 = min(4, GOMAXPROCS).
	ReplayParallelism int
	// LivenessTimeout bounds the answer to the liveness probe (a health
	// check over gRPC and, on the fast lane, an empty batch) sent every
	// LivenessInterval to a running sidecar: one that has not answered
	// within it is killed and restarted. From half of it on, calls fail at
	// once (GRPC) instead of waiting their deadlines. 0 = 5s; < 0 = no
	// probe.
	LivenessTimeout time.Duration
	// LivenessInterval is the time between two probes; 0 = 1s (at most
	// LivenessTimeout).
	LivenessInterval time.Duration
	// OnUnresponsive is called when a sidecar that did not answer its
	// probe is killed (for metrics).
	OnUnresponsive func()
	// ReplayDeadline is the time a replay should end within (the JS call
	// deadline: calls waiting for a model longer fail); 0 = none.
	// OnSlowReplay is called once for each replay still running then.
	ReplayDeadline time.Duration
	OnSlowReplay   func()
	// SequencesPerClient is passed to the sidecar as
	// --max_sequences_per_client (ServerOptions.MaxSequencesPerClient)
	// when it is not 0.
	SequencesPerClient int
	// ExternalVariablesCacheBytes is passed to the sidecar as
	// --external_variables_cache_bytes when it is not 0.
	ExternalVariablesCacheBytes int64
	// OnReplay is called at the end of each replay with its duration
	// and the models it had to replay (for metrics).
	OnReplay func(took time.Duration, models int)
	// OTLPEndpoint, when set, reaches the sidecar as the standard
	// OTEL_EXPORTER_OTLP_ENDPOINT (and OTLPProtocol, when set, as
	// OTEL_EXPORTER_OTLP_PROTOCOL): it then exports its spans there. ""
	// leaves the sidecar's environment as the host's.
	OTLPEndpoint, OTLPProtocol string
	// Tracer traces the Client's Predict (ClientOptions.Tracer); nil =
	// none.
	Tracer trace.Tracer
}

// Supervisor starts the sidecar binary, waits for its health, restarts it
// with exponential back-off when it dies, and replays every model
// registered through it after a restart, newest first and several at once,
// from verified copies of their files in its private directory (it keeps
// no model bytes in memory). Its Client is stable across restarts (same
// socket path; gRPC reconnects), and from the sidecar's death until the
// end of the replay, a call of that Client for a model still to be
// replayed waits for it (until the call's ctx ends), ModelPaths answers the
// whole replay set, and WaitHealthy reports not ready.
type Supervisor struct {
	opts   SupervisorOptions
	log    *slog.Logger
	client *Client
	tmpDir string // private: the owner record, the replay store, maybe the socket
	store  *replayStore
	gate   *replayGate

	mu     sync.Mutex // guards child and closed
	child  *child
	closed bool
	stop   chan struct{}
	done   chan struct{} // the watcher has returned

	// replayMu is held shared by registrations and deletions and
	// exclusively by a replay, so a replay never overwrites a newer
	// registration with an older one.
	replayMu sync.RWMutex
	modelsMu sync.Mutex
	models   map[string]modelRecord
	seq      uint64

	restarts     atomic.Int64
	unresponsive atomic.Int64
	proberDone   chan struct{}
}

type modelRecord struct {
	seq       uint64
	stored    *storedModel
	warmUp    string
	sequences *runtimes.SequenceSettings // replayed with the model
	// load are the registration's load options (its context's: external
	// variables), replayed with the model.
	load runtimes.LoadOptions
	// adopted is set for a registration the sidecar died during: its
	// caller waits for the replay to register it.
	adopted *adoption
}

// adoption is the outcome of a registration the replay took over.
type adoption struct {
	once sync.Once
	done chan struct{}
	err  error
}

func (a *adoption) finish(err error) {
	a.once.Do(func() {
		a.err = err
		close(a.done)
	})
}

type child struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // valid once exited is closed
	started time.Time
	stderr  *lineLogger // its last lines go into start-up errors
	gone    bool        // guarded by Supervisor.mu: the exit was seen (the gate is active)
	// live is set once it is healthy: the prober probes it from then on.
	live atomic.Bool
	// readyAt is when it began to serve (healthy, its replay over); zero
	// if it never did. Written and read by the watcher only.
	readyAt time.Time
}

// StartSupervisor starts the sidecar and returns once it is healthy. The
// sidecar keeps running (and restarting) until Close; ctx bounds only the
// start.
func StartSupervisor(ctx context.Context, opts SupervisorOptions) (*Supervisor, error) {
	if opts.BinaryPath == "" {
		return nil, errors.New("sidecar supervisor: BinaryPath is empty")
	}
	if fi, err := os.Stat(opts.BinaryPath); err != nil {
		return nil, fmt.Errorf("sidecar supervisor: binary: %w", err)
	} else if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("sidecar supervisor: binary %q is not an executable file", opts.BinaryPath)
	}
	if opts.RlimitMB < 0 {
		return nil, fmt.Errorf("sidecar supervisor: RlimitMB is %d, want >= 0", opts.RlimitMB)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	if opts.HealthyPeriod <= 0 {
		opts.HealthyPeriod = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReplayParallelism <= 0 {
		opts.ReplayParallelism = min(4, runtime.GOMAXPROCS(0))
	}
	if opts.LivenessTimeout == 0 {
		opts.LivenessTimeout = DefaultLivenessTimeout
	}
	if opts.LivenessInterval <= 0 {
		opts.LivenessInterval = time.Second
	}
	if opts.LivenessTimeout > 0 {
		opts.LivenessInterval = min(opts.LivenessInterval, opts.LivenessTimeout)
	}
	s := &Supervisor{
		opts:       opts,
		log:        opts.Logger.With("component", "sidecar-supervisor"),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		proberDone: make(chan struct{}),
		models:     map[string]modelRecord{},
		gate:       newReplayGate(),
	}
	s.gate.confirmOutage = s.confirmOutage
	// A host killed with -9 could not remove its directory: do it for it.
	removeStalePrivateDirs(opts.TempDir, s.log)
	dir, err := makePrivateDir(opts.TempDir)
	if err != nil {
		return nil, fmt.Errorf("sidecar supervisor: private dir: %w", err)
	}
	s.tmpDir = dir
	if s.store, err = newReplayStore(filepath.Join(dir, "models")); err != nil {
		s.cleanup()
		return nil, err
	}
	if s.opts.SocketPath == "" {
		s.opts.SocketPath = filepath.Join(dir, "sidecar.sock")
	}
	client, err := NewClient(s.opts.SocketPath, ClientOptions{Logger: opts.Logger, Transport: opts.Transport, FastLaneSpinWait: opts.FastLaneSpinWait, Tracer: opts.Tracer})
	if err != nil {
		s.cleanup()
		return nil, err
	}
	client.gate = s.gate
	s.client = client
	c, err := s.startChild(ctx)
	if err != nil {
		client.Close()
		s.cleanup()
		return nil, err
	}
	c.readyAt = time.Now()
	go s.watch(c)
	if opts.LivenessTimeout > 0 {
		go s.probe()
	} else {
		close(s.proberDone)
	}
	return s, nil
}

// DefaultLivenessTimeout is SupervisorOptions.LivenessTimeout's default.
const DefaultLivenessTimeout = 5 * time.Second

// Unresponsive counts the sidecars killed for not answering their probe.
func (s *Supervisor) Unresponsive() int64 { return s.unresponsive.Load() }

// SocketPath is the socket the sidecar serves on.
func (s *Supervisor) SocketPath() string { return s.opts.SocketPath }

// Client is stable across restarts.
func (s *Supervisor) Client() *Client { return s.client }

// Restarts counts the restarts so far.
func (s *Supervisor) Restarts() int64 { return s.restarts.Load() }

// Pid is the process id of the current sidecar (0 when none runs).
func (s *Supervisor) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.child == nil || s.child.cmd.Process == nil {
		return 0
	}
	return s.child.cmd.Process.Pid
}

// RegisterModel registers a model and, once it serves, records it for
// replay after a restart (the latest files per path). The files are first
// written to the replay store and verified; a model whose copy cannot be
// written is not registered (a GRPC error, naming the cause: the caller
// retries it as any failed registration), so that what serves is what a
// restart brings back. Once it returns, the supervisor holds none of the
// files' bytes.
func (s *Supervisor) RegisterModel(ctx context.Context, modelPath string, files runtimes.Files, warmUpJSON string) error {
	return s.RegisterModelWithSequences(ctx, modelPath, files, warmUpJSON, nil)
}

// RegisterModelWithSequences is RegisterModel with the model's sequence
// settings (Client.RegisterModelWithSequences); a replay carries them too.
func (s *Supervisor) RegisterModelWithSequences(ctx context.Context, modelPath string, files runtimes.Files, warmUpJSON string, seq *runtimes.SequenceSettings) error {
	s.replayMu.RLock()
	stored, err := s.store.put(modelPath, files)
	if err != nil {
		s.replayMu.RUnlock()
		return inferr.Errorf(inferr.GRPC, "sidecar supervisor: %w", err)
	}
	err = s.client.RegisterModelWithSequences(ctx, modelPath, files, warmUpJSON, seq)
	return s.registered(ctx, modelPath, stored, warmUpJSON, seq, err)
}

// registered records a registration whose files are in the replay store
// (stored) once the sidecar answered it (err), and releases replayMu,
// which the caller holds for reading. A sidecar that died during the
// registration (or was down when it started) has the replay after its
// restart bring the model in, and the caller wait for it, rather than
// fail: readiness follows a first load the sidecar died during as it
// follows a replay.
func (s *Supervisor) registered(ctx context.Context, modelPath string, stored *storedModel, warmUpJSON string, seq *runtimes.SequenceSettings, err error) error {
	var adopted *adoption
	if err != nil {
		if inferr.TypeOf(err) != inferr.GRPC || !s.gate.outage(ctx) || !s.gate.isActive() {
			s.store.remove(stored)
			s.replayMu.RUnlock()
			return err
		}
		adopted = &adoption{done: make(chan struct{})}
		s.log.Warn("the sidecar died during a registration; the replay after its restart registers the model", "model_path", modelPath, "err", formatErrType(err))
	}
	s.modelsMu.Lock()
	s.seq++
	old := s.models[modelPath]
	s.models[modelPath] = modelRecord{seq: s.seq, stored: stored, warmUp: warmUpJSON, sequences: seq, load: runtimes.LoadOptionsFrom(ctx), adopted: adopted}
	s.modelsMu.Unlock()
	if adopted != nil {
		s.gate.add(modelPath)
	}
	s.replayMu.RUnlock()
	s.store.remove(old.stored)
	if adopted == nil {
		return nil
	}
	select {
	case <-adopted.done:
		return adopted.err
	case <-ctx.Done():
		return inferr.Errorf(inferr.GRPC, "model %q: the sidecar died during its registration, and the replay had not registered it when the call was abandoned (it goes on): %w", modelPath, context.Cause(ctx))
	case <-s.stop:
		return inferr.Errorf(inferr.GRPC, "model %q: the sidecar supervisor closed while the model waited for the replay", modelPath)
	}
}

// RegisterModelFiles is RegisterModelWithSequences for a model whose files
// are on local disk (modelstore.DiskRegistrar), the operator's (a local
// model): each file is copied into the replay store in chunks, hashed on
// the way, and the sidecar takes the stored copy by path (it links it).
// No file is ever held in memory whole, so the host's memory does not grow
// with the model's size. The files at the given paths are left as they
// are.
func (s *Supervisor) RegisterModelFiles(ctx context.Context, modelPath string, files runtimes.DiskFiles, warmUpJSON string, seq *runtimes.SequenceSettings) error {
	return s.RegisterDownloadedFiles(ctx, modelPath, files, nil, warmUpJSON, seq)
}

// RegisterDownloadedFiles is RegisterModelFiles for files the caller
// downloaded and verified (modelstore.DigestRegistrar): sums holds the
// SHA-256 of each file it covers, which the caller computed as it wrote the
// file, and the caller gives those files up (it only removes its names for
// them once this returns). Each is hard-linked into the replay store (copied
// in the kernel across filesystems), and the sidecar links it in turn: the
// model's bytes are neither read, written nor hashed again on the way to
// the runtime. Files sums lacks are copied and hashed as RegisterModelFiles
// does.
func (s *Supervisor) RegisterDownloadedFiles(ctx context.Context, modelPath string, files runtimes.DiskFiles, sums map[string][sha256.Size]byte, warmUpJSON string, seq *runtimes.SequenceSettings) error {
	if len(files) == 0 {
		return inferr.Errorf(inferr.InputParsing, "register model %s: no files", inferr.Quote(modelPath))
	}
	s.replayMu.RLock()
	stored, err := s.store.putFiles(modelPath, files, sums)
	if err != nil {
		s.replayMu.RUnlock()
		return inferr.Errorf(inferr.GRPC, "sidecar supervisor: %w", err)
	}
	err = s.registerStored(ctx, modelPath, stored, warmUpJSON, seq)
	return s.registered(ctx, modelPath, stored, warmUpJSON, seq, err)
}

// registerStored registers a model from its files in the replay store,
// which the sidecar takes by path (its --local_files_dir is the store).
func (s *Supervisor) registerStored(ctx context.Context, modelPath string, stored *storedModel, warmUpJSON string, seq *runtimes.SequenceSettings) error {
	headers, err := stored.headers(s.store.dir)
	if err != nil {
		return inferr.Errorf(inferr.InputParsing, "sidecar supervisor: model %s: %w", inferr.Quote(modelPath), err)
	}
	return s.client.registerStream(ctx, modelPath, warmUpJSON, seq, headers, func(int, func([]byte) bool) error { return nil })
}

// DeleteModel forgets a model for replay and deletes it from the sidecar.
func (s *Supervisor) DeleteModel(ctx context.Context, modelPath string) error {
	s.replayMu.RLock()
	defer s.replayMu.RUnlock()
	s.modelsMu.Lock()
	old := s.models[modelPath]
	delete(s.models, modelPath)
	s.modelsMu.Unlock()
	s.store.remove(old.stored)
	s.gate.forget(modelPath)
	return s.client.DeleteModel(ctx, modelPath)
}

// WaitHealthy waits until the sidecar runs, every model is replayed after
// a restart, and the sidecar answers its health check, or until ctx ends:
// then the error says what is missing ("replaying 2 of 3 models after a
// sidecar restart (1 done)"). bidding-server's /readyz uses it.
func (s *Supervisor) WaitHealthy(ctx context.Context) error {
	if reason := s.gate.unavailableReason(); reason != "" {
		return inferr.Errorf(inferr.GRPC, "%s", reason)
	}
	if msg, idle := s.gate.state(); msg != "" {
		select {
		case <-idle:
		case <-ctx.Done():
			if now, _ := s.gate.state(); now != "" {
				msg = now
			}
			return inferr.Errorf(inferr.GRPC, "%s", msg)
		}
	}
	return s.client.WaitHealthy(ctx)
}

// confirmOutage reports whether the sidecar is down or being restarted or
// replayed; when it looks alive, it waits a little (less than ctx allows)
// for an exit not reaped yet.
func (s *Supervisor) confirmOutage(ctx context.Context) bool {
	if msg, _ := s.gate.state(); msg != "" {
		return true
	}
	s.mu.Lock()
	c, closed := s.child, s.closed
	s.mu.Unlock()
	if closed || c == nil {
		return false
	}
	t := time.NewTimer(outageConfirmWait)
	defer t.Stop()
	select {
	case <-c.exited:
		msg, _ := s.gate.state()
		return msg != ""
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// outageConfirmWait bounds how long a call whose connection was refused
// waits to see the sidecar's exit before it fails.
const outageConfirmWait = time.Second

// Close stops the sidecar: SIGTERM, then SIGKILL after StopGrace. It also
// stops restarting it and closes the client.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	c := s.child
	s.mu.Unlock()
	if c != nil {
		s.terminate(c)
	}
	<-s.done
	<-s.proberDone
	s.gate.end() // release the calls waiting for a replay
	err := s.client.Close()
	s.cleanup()
	return err
}

func (s *Supervisor) cleanup() {
	if s.tmpDir != "" {
		os.RemoveAll(s.tmpDir)
	}
}

func (s *Supervisor) terminate(c *child) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(s.opts.StopGrace):
		s.log.Warn("sidecar did not stop after SIGTERM; killing it", "pid", c.cmd.Process.Pid, "grace", s.opts.StopGrace)
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// startChild starts the binary and waits until it is healthy; a child that
// exits or does not become healthy in time is killed and reported.
func (s *Supervisor) startChild(ctx context.Context) (*child, error) {
	c, err := s.spawn()
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.exited:
			cancel()
		case <-s.stop:
			cancel()
		case <-hctx.Done():
		}
	}()
	s.client.resetBackoff()
	if err := s.client.WaitHealthy(hctx); err != nil {
		_ = c.cmd.Process.Kill()
		<-c.exited
		select {
		case <-s.stop:
			return nil, inferr.Errorf(inferr.GRPC, "sidecar supervisor closed while starting %q", s.opts.BinaryPath)
		default:
		}
		if c.waitErr != nil && !isKilled(c.waitErr) {
			return nil, inferr.Errorf(inferr.GRPC, "sidecar %q exited before it was healthy: %v%s", s.opts.BinaryPath, c.waitErr, c.stderr.tailNote())
		}
		return nil, fmt.Errorf("sidecar %q: %w%s", s.opts.BinaryPath, err, c.stderr.tailNote())
	}
	s.log.Info("sidecar healthy", "pid", c.cmd.Process.Pid, "socket", s.opts.SocketPath, "start", time.Since(c.started))
	c.live.Store(true)
	return c, nil
}

func isKilled(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}

func (s *Supervisor) spawn() (*child, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("sidecar supervisor is closed")
	}
	args := []string{"--socket", s.opts.SocketPath, "--local_files_dir", s.store.dir}
	if s.opts.RuntimeConfig != "" {
		args = append(args, "--runtime_config", s.opts.RuntimeConfig)
	}
	if s.opts.FastLaneSpinWait != 0 {
		args = append(args, "--fast_lane_spin_wait", s.opts.FastLaneSpinWait.String())
	}
	if s.opts.SequencesPerClient != 0 {
		args = append(args, "--max_sequences_per_client", strconv.Itoa(s.opts.SequencesPerClient))
	}
	if s.opts.ExternalVariablesCacheBytes != 0 {
		args = append(args, "--external_variables_cache_bytes", strconv.FormatInt(s.opts.ExternalVariablesCacheBytes, 10))
	}
	cmd := exec.Command(s.opts.BinaryPath, args...)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, RlimitEnv+"=") || strings.HasPrefix(kv, LogFormatEnv+"=")
	})
	if s.opts.RlimitMB > 0 {
		env = append(env, RlimitEnv+"="+strconv.Itoa(s.opts.RlimitMB))
	}
	// The sidecar's temporary files (its registrations' directories,
	// which hold links to the replay store's files) go under the private
	// directory: what a sidecar killed with -9 left there is removed
	// here, before the next one starts (the last has exited), or with the
	// private directory, rather than pinning deleted models' bytes in
	// $TMPDIR.
	tmp := filepath.Join(s.tmpDir, "sidecar-tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("sidecar supervisor: the sidecar's temp dir: %w", err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("sidecar supervisor: the sidecar's temp dir: %w", err)
	}
	env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") }), "TMPDIR="+tmp)
	if s.opts.OTLPEndpoint != "" {
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+s.opts.OTLPEndpoint)
		if s.opts.OTLPProtocol != "" {
			env = append(env, "OTEL_EXPORTER_OTLP_PROTOCOL="+s.opts.OTLPProtocol)
		}
	}
	// JSON log lines, which the lineLogger forwards as structured records.
	cmd.Env = append(env, LogFormatEnv+"=json")
	out := &lineLogger{log: s.log, stream: "stderr"}
	stdout := &lineLogger{log: s.log, stream: "stdout"}
	cmd.Stderr, cmd.Stdout = out, stdout
	// The sidecar must not outlive the host.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Lines the child writes before its pid is known wait for it.
	out.mu.Lock()
	stdout.mu.Lock()
	err := cmd.Start()
	if err == nil {
		out.pid, stdout.pid = cmd.Process.Pid, cmd.Process.Pid
	}
	stdout.mu.Unlock()
	out.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("sidecar supervisor: start %q: %w", s.opts.BinaryPath, err)
	}
	if s.opts.RlimitMB > 0 {
		lim := uint64(s.opts.RlimitMB) << 20
		if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: lim, Max: lim}, nil); err != nil {
			s.log.Warn("prlimit on the sidecar failed; relying on the sidecar to apply "+RlimitEnv, "pid", cmd.Process.Pid, "err", err)
		}
	}
	c := &child{cmd: cmd, exited: make(chan struct{}), started: time.Now(), stderr: out}
	go func() {
		c.waitErr = cmd.Wait()
		out.flush()
		s.childExited(c)
		close(c.exited)
	}()
	s.child = c
	s.log.Info("sidecar started", "pid", cmd.Process.Pid, "binary", s.opts.BinaryPath, "socket", s.opts.SocketPath)
	return c, nil
}

// watch restarts the sidecar whenever it exits, until Close, after a
// back-off that doubles from MinBackoff to MaxBackoff while the sidecar
// keeps dying. A sidecar that served (after its replay) for HealthyPeriod,
// or for four times the back-off it was started after, resets it: a
// sidecar killed now and then is restarted at once, one that dies as it
// starts or replays backs off. While it backs off (a crash loop), and
// while a sidecar killed for not answering is replaced, calls fail at once
// with a GRPC error saying so instead of waiting their deadlines; once the
// new sidecar is healthy, calls for models it is replaying wait for them.
func (s *Supervisor) watch(c *child) {
	defer close(s.done)
	backoff := s.opts.MinBackoff
	lastWait := s.opts.MinBackoff
	deaths := 0 // in a row, each before it served long enough
	for {
		select {
		case <-c.exited:
		case <-s.stop:
			return
		}
		select {
		case <-s.stop:
			return
		default:
		}
		uptime := time.Since(c.started)
		var served time.Duration
		if !c.readyAt.IsZero() {
			served = time.Since(c.readyAt)
		}
		if served >= min(s.opts.HealthyPeriod, 4*lastWait) {
			backoff, deaths = s.opts.MinBackoff, 0
		} else {
			deaths++
		}
		s.log.Error("sidecar exited; restarting", "pid", c.cmd.Process.Pid, "err", c.waitErr, "uptime", uptime, "served", served, "next_backoff", backoff)
		if deaths > 0 {
			s.gate.setUnavailable(fmt.Sprintf("sidecar crash loop: it exited %d times in a row, each before it served %s; next start in %s (last exit: %v)",
				deaths, min(s.opts.HealthyPeriod, 4*lastWait), backoff, c.waitErr))
		}
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(backoff):
			}
			lastWait = backoff
			backoff = min(2*backoff, s.opts.MaxBackoff)
			stopCtx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-s.stop:
					cancel()
				case <-stopCtx.Done():
				}
			}()
			next, err := s.startChild(stopCtx)
			if err != nil {
				cancel()
				select {
				case <-s.stop:
					return
				default:
				}
				deaths++
				s.gate.setUnavailable(fmt.Sprintf("sidecar crash loop: %d failed starts or early exits in a row; next start in %s (last: %v)", deaths, backoff, err))
				s.log.Error("sidecar restart failed", "err", err, "next_backoff", backoff)
				continue
			}
			// Healthy: calls wait for their models' replay again.
			s.gate.clearUnavailable()
			s.replay(stopCtx)
			cancel()
			s.mu.Lock()
			if !next.gone { // else the gate stays up for the next restart
				s.gate.end()
				next.readyAt = time.Now()
			}
			s.mu.Unlock()
			c = next
			s.restarts.Add(1)
			if s.opts.OnRestart != nil {
				s.opts.OnRestart()
			}
			break
		}
	}
}

// probe sends the liveness probe to the running sidecar every
// LivenessInterval, until Close.
func (s *Supervisor) probe() {
	defer close(s.proberDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(s.opts.LivenessInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		c := s.child
		gone := c == nil || c.gone
		s.mu.Unlock()
		if !gone && c.live.Load() {
			s.probeOnce(ctx, c)
		}
	}
}

// probeOnce probes c: when it has not answered within half the bound,
// calls fail at once; when it has not answered within the bound, it is
// killed (the watcher restarts it).
func (s *Supervisor) probeOnce(ctx context.Context, c *child) {
	bound := s.opts.LivenessTimeout
	pid := c.cmd.Process.Pid
	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	// mu orders the suspicion against the probe's end: once the probe
	// has answered, a late timer sets nothing.
	var mu sync.Mutex
	answered, suspected := false, false
	suspect := time.AfterFunc(bound/2, func() {
		mu.Lock()
		defer mu.Unlock()
		if answered {
			return
		}
		suspected = true
		s.log.Warn("sidecar has not answered its liveness probe; failing calls until it does", "pid", pid, "after", bound/2, "bound", bound)
		s.gate.setUnavailable(fmt.Sprintf("sidecar pid %d has not answered its liveness probe for %s (it is replaced at %s)", pid, bound/2, bound))
	})
	start := time.Now()
	transport, err := s.client.ping(pctx)
	suspect.Stop()
	mu.Lock()
	answered = true
	mu.Unlock()
	if err == nil {
		if suspected {
			s.log.Info("sidecar answered its liveness probe again", "pid", pid, "took", time.Since(start))
			s.gate.clearUnavailable()
		}
		return
	}
	if ctx.Err() != nil {
		return // closing
	}
	select {
	case <-c.exited:
		return // dead: the watcher restarts it
	default:
	}
	if pctx.Err() == nil {
		// An error, not silence (a refused connection of a sidecar that
		// is exiting, say): the watcher sees the exit.
		if suspected {
			s.gate.clearUnavailable()
		}
		s.log.Debug("sidecar liveness probe failed", "pid", pid, "transport", transport, "err", err)
		return
	}
	s.log.Error("sidecar did not answer its liveness probe in time; killing it to restart it", "pid", pid, "transport", transport, "bound", bound)
	s.gate.setUnavailable(fmt.Sprintf("sidecar pid %d did not answer its liveness probe (%s) within %s; it is being replaced", pid, transport, bound))
	s.unresponsive.Add(1)
	if s.opts.OnUnresponsive != nil {
		s.opts.OnUnresponsive()
	}
	_ = c.cmd.Process.Kill() // a stopped process dies of SIGKILL too
}

// childExited, before anyone sees c.exited closed, activates the gate for
// the models to replay (unless the supervisor is closing).
func (s *Supervisor) childExited(c *child) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.gone = true
	if s.closed || s.child != c {
		return
	}
	s.gate.begin(s.modelPaths(), false)
}

func (s *Supervisor) modelPaths() []string {
	s.modelsMu.Lock()
	defer s.modelsMu.Unlock()
	paths := make([]string, 0, len(s.models))
	for p := range s.models {
		paths = append(paths, p)
	}
	return paths
}

// replay registers every recorded model again from the replay store,
// newest registration first, ReplayParallelism at a time. Each model's
// waiters go on as soon as it is back.
func (s *Supervisor) replay(ctx context.Context) {
	s.replayMu.Lock()
	defer s.replayMu.Unlock()
	s.modelsMu.Lock()
	type item struct {
		path string
		modelRecord
	}
	items := make([]item, 0, len(s.models))
	paths := make([]string, 0, len(s.models))
	for p, r := range s.models {
		items = append(items, item{p, r})
		paths = append(paths, p)
	}
	s.modelsMu.Unlock()
	gen := s.gate.begin(paths, true)
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(b.seq, a.seq) })
	start := time.Now()
	if s.opts.ReplayDeadline > 0 && s.opts.OnSlowReplay != nil && len(items) > 0 {
		slow := time.AfterFunc(s.opts.ReplayDeadline, func() {
			s.log.Warn("replay still running at the call deadline: calls waiting for its models fail", "models", len(items), "deadline", s.opts.ReplayDeadline)
			s.opts.OnSlowReplay()
		})
		defer slow.Stop()
	}
	work := make(chan item)
	var wg sync.WaitGroup
	for range min(s.opts.ReplayParallelism, len(items)) {
		wg.Go(func() {
			for it := range work {
				t := time.Now()
				err := it.stored.verify()
				if err != nil {
					err = inferr.Errorf(inferr.GRPC, "sidecar supervisor: model %s: %w", inferr.Quote(it.path), err)
				} else {
					err = s.registerStored(runtimes.WithLoadOptions(ctx, it.load), it.path, it.stored, it.warmUp, it.sequences)
				}
				if s.gate.finish(gen, it.path, err == nil) && it.adopted != nil {
					s.settleAdoption(it.path, it.seq, err)
				}
				if err != nil {
					s.log.Error("replaying model after restart failed", "model_path", it.path, "err", formatErrType(err))
					continue
				}
				s.log.Info("model replayed after restart", "model_path", it.path, "bytes", it.stored.bytes(), "took", time.Since(t))
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	took := time.Since(start)
	s.log.Info("replay finished", "models", len(items), "took", took)
	if s.opts.OnReplay != nil {
		s.opts.OnReplay(took, len(items))
	}
}

// settleAdoption hands the outcome of an adopted registration's replay to
// its caller; a failed one is forgotten, as a failed registration is.
func (s *Supervisor) settleAdoption(path string, seq uint64, err error) {
	s.modelsMu.Lock()
	r, ok := s.models[path]
	if !ok || r.seq != seq || r.adopted == nil {
		s.modelsMu.Unlock()
		return
	}
	a := r.adopted
	if err != nil {
		delete(s.models, path)
	} else {
		r.adopted = nil
		s.models[path] = r
	}
	s.modelsMu.Unlock()
	if err != nil {
		s.store.remove(r.stored)
	}
	a.finish(err)
}
