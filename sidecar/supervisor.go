package sidecar

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
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
}

// Supervisor starts the sidecar binary, waits for its health, restarts it
// with exponential back-off when it dies, and replays every model
// registered through it after a restart. Its Client is stable across
// restarts (same socket path; gRPC reconnects).
type Supervisor struct {
	opts   SupervisorOptions
	log    *slog.Logger
	client *Client
	tmpDir string

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
	seq    uint64
	files  runtimes.Files
	warmUp string
}

type child struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // valid once exited is closed
	started time.Time
	stderr  *lineLogger // its last lines go into start-up errors
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
	s := &Supervisor{
		opts:   opts,
		log:    opts.Logger.With("component", "sidecar-supervisor"),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		models: map[string]modelRecord{},
	}
	if s.opts.SocketPath == "" {
		dir, err := os.MkdirTemp("", "inferbid-sidecar-")
		if err != nil {
			return nil, fmt.Errorf("sidecar supervisor: socket dir: %w", err)
		}
		s.tmpDir = dir
		s.opts.SocketPath = filepath.Join(dir, "sidecar.sock")
	}
	client, err := NewClient(s.opts.SocketPath, ClientOptions{Logger: opts.Logger, Transport: opts.Transport, FastLaneSpinWait: opts.FastLaneSpinWait})
	if err != nil {
		s.cleanup()
		return nil, err
	}
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
// replay after a restart (the latest files per path).
func (s *Supervisor) RegisterModel(ctx context.Context, modelPath string, files runtimes.Files, warmUpJSON string) error {
	s.replayMu.RLock()
	defer s.replayMu.RUnlock()
	if err := s.client.RegisterModel(ctx, modelPath, files, warmUpJSON); err != nil {
		return err
	}
	s.modelsMu.Lock()
	s.seq++
	s.models[modelPath] = modelRecord{seq: s.seq, files: files, warmUp: warmUpJSON}
	s.modelsMu.Unlock()
	return nil
}

// DeleteModel forgets a model for replay and deletes it from the sidecar.
func (s *Supervisor) DeleteModel(ctx context.Context, modelPath string) error {
	s.replayMu.RLock()
	defer s.replayMu.RUnlock()
	s.modelsMu.Lock()
	delete(s.models, modelPath)
	s.modelsMu.Unlock()
	return s.client.DeleteModel(ctx, modelPath)
}

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
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, RlimitEnv+"=") })
	if s.opts.RlimitMB > 0 {
		env = append(env, RlimitEnv+"="+strconv.Itoa(s.opts.RlimitMB))
	}
	cmd.Env = env
	out := &lineLogger{log: s.log, stream: "stderr"}
	cmd.Stderr = out
	cmd.Stdout = &lineLogger{log: s.log, stream: "stdout"}
	// The sidecar must not outlive the host.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
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
			c = next
			s.restarts.Add(1)
			if s.opts.OnRestart != nil {
				s.opts.OnRestart()
			}
			break
		}
	}
}

// replay registers every recorded model again, in registration order.
func (s *Supervisor) replay(ctx context.Context) {
	s.replayMu.Lock()
	defer s.replayMu.Unlock()
	s.modelsMu.Lock()
	type item struct {
		path string
		modelRecord
	}
	items := make([]item, 0, len(s.models))
	for p, r := range s.models {
		items = append(items, item{p, r})
	}
	s.modelsMu.Unlock()
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.seq, b.seq) })
	for _, it := range items {
		if err := s.client.RegisterModel(ctx, it.path, it.files, it.warmUp); err != nil {
			s.log.Error("replaying model after restart failed", "model_path", it.path, "err", formatErrType(err))
			continue
		}
		s.log.Info("model replayed after restart", "model_path", it.path)
	}
}

// lineLogger logs what a child writes, one record per line, and keeps the
// last lines for start-up errors.
type lineLogger struct {
	log    *slog.Logger
	stream string
	mu     sync.Mutex
	buf    []byte
	tail   []string // the last tailLines lines
}

// A start-up error carries at most the last tailLines lines, tailBytes
// bytes, of the child's stderr.
const (
	tailLines = 20
	tailBytes = 4 << 10
)

// tailNote is "; stderr: ..." with the last lines written (flushed once
// the child has exited), or "" when there are none.
func (l *lineLogger) tailNote() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tail) == 0 {
		return ""
	}
	t := strings.Join(l.tail, "\n")
	if len(t) > tailBytes {
		t = "..." + t[len(t)-tailBytes:]
	}
	return "; " + l.stream + ":\n" + strings.ToValidUTF8(t, "\uFFFD")
}

const maxLogLine = 64 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLogLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLogger) emit(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if len(l.tail) == tailLines {
		l.tail = slices.Delete(l.tail, 0, 1)
	}
	l.tail = append(l.tail, string(line[max(0, len(line)-tailBytes):]))
	l.log.Info("sidecar output", "stream", l.stream, "line", string(line))
}
