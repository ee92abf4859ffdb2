package sidecar

import (
	"cmp"
	"context"
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
	// the registered models kept for replay, and the socket unless
	// SocketPath is set) is made; "" = os.TempDir(). It should be on disk,
	// not tmpfs: files on tmpfs are held in memory.
	TempDir string
	// ReplayParallelism bounds the models replayed at once after a
	// restart; 0 = min(4, GOMAXPROCS).
	ReplayParallelism int
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

	restarts atomic.Int64
}

type modelRecord struct {
	seq       uint64
	stored    *storedModel
	warmUp    string
	sequences *runtimes.SequenceSettings // replayed with the model
}

type child struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // valid once exited is closed
	started time.Time
	stderr  *lineLogger // its last lines go into start-up errors
	gone    bool        // guarded by Supervisor.mu: the exit was seen (the gate is active)
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
	s := &Supervisor{
		opts:   opts,
		log:    opts.Logger.With("component", "sidecar-supervisor"),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		models: map[string]modelRecord{},
		gate:   newReplayGate(),
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
	client, err := NewClient(s.opts.SocketPath, ClientOptions{Logger: opts.Logger, Transport: opts.Transport, FastLaneSpinWait: opts.FastLaneSpinWait})
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
	go s.watch(c)
	return s, nil
}

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
	defer s.replayMu.RUnlock()
	stored, err := s.store.put(modelPath, files)
	if err != nil {
		return inferr.Errorf(inferr.GRPC, "sidecar supervisor: %w", err)
	}
	if err := s.client.RegisterModelWithSequences(ctx, modelPath, files, warmUpJSON, seq); err != nil {
		s.store.remove(stored)
		return err
	}
	s.modelsMu.Lock()
	s.seq++
	old := s.models[modelPath]
	s.models[modelPath] = modelRecord{seq: s.seq, stored: stored, warmUp: warmUpJSON, sequences: seq}
	s.modelsMu.Unlock()
	s.store.remove(old.stored)
	return nil
}

// RegisterModelFiles is RegisterModelWithSequences for a model whose files
// are on local disk (modelstore.DiskRegistrar): each file is copied into the
// replay store in chunks, hashed on the way and verified, and the sidecar
// gets the stored copy streamed in chunks, checked again as it goes. No
// file is ever held in memory whole, so the host's memory does not grow
// with the model's size. The files at the given paths can be removed once
// it returns.
func (s *Supervisor) RegisterModelFiles(ctx context.Context, modelPath string, files runtimes.DiskFiles, warmUpJSON string, seq *runtimes.SequenceSettings) error {
	if len(files) == 0 {
		return inferr.Errorf(inferr.InputParsing, "register model %s: no files", inferr.Quote(modelPath))
	}
	s.replayMu.RLock()
	defer s.replayMu.RUnlock()
	stored, err := s.store.putFiles(modelPath, files)
	if err != nil {
		return inferr.Errorf(inferr.GRPC, "sidecar supervisor: %w", err)
	}
	if err := s.client.registerStream(ctx, modelPath, warmUpJSON, seq, stored.headers(), stored.stream); err != nil {
		s.store.remove(stored)
		return err
	}
	s.modelsMu.Lock()
	s.seq++
	old := s.models[modelPath]
	s.models[modelPath] = modelRecord{seq: s.seq, stored: stored, warmUp: warmUpJSON, sequences: seq}
	s.modelsMu.Unlock()
	s.store.remove(old.stored)
	return nil
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
	args := []string{"--socket", s.opts.SocketPath}
	if s.opts.RuntimeConfig != "" {
		args = append(args, "--runtime_config", s.opts.RuntimeConfig)
	}
	if s.opts.FastLaneSpinWait != 0 {
		args = append(args, "--fast_lane_spin_wait", s.opts.FastLaneSpinWait.String())
	}
	cmd := exec.Command(s.opts.BinaryPath, args...)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, RlimitEnv+"=") || strings.HasPrefix(kv, LogFormatEnv+"=")
	})
	if s.opts.RlimitMB > 0 {
		env = append(env, RlimitEnv+"="+strconv.Itoa(s.opts.RlimitMB))
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

// watch restarts the sidecar whenever it exits, until Close.
func (s *Supervisor) watch(c *child) {
	defer close(s.done)
	backoff := s.opts.MinBackoff
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
		s.log.Error("sidecar exited; restarting", "pid", c.cmd.Process.Pid, "err", c.waitErr, "uptime", uptime)
		if uptime >= s.opts.HealthyPeriod {
			backoff = s.opts.MinBackoff
		}
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(backoff):
			}
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
				s.log.Error("sidecar restart failed", "err", err, "next_backoff", backoff)
				continue
			}
			s.replay(stopCtx)
			cancel()
			s.mu.Lock()
			if !next.gone { // else the gate stays up for the next restart
				s.gate.end()
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
	work := make(chan item)
	var wg sync.WaitGroup
	for range min(s.opts.ReplayParallelism, len(items)) {
		wg.Go(func() {
			for it := range work {
				t := time.Now()
				err := s.client.registerStream(ctx, it.path, it.warmUp, it.sequences, it.stored.headers(), it.stored.stream)
				s.gate.finish(gen, it.path, err == nil)
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
	s.log.Info("replay finished", "models", len(items), "took", time.Since(start))
}
