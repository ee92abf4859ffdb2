package sidecar

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar/fastlane"
	"github.com/inferbid/inferbid/sidecar/registry"
	"github.com/inferbid/inferbid/tensor"
)

// MaxMessageBytes bounds one gRPC message in either direction. Predict
// batches are far smaller; registrations of large models use the stream.
const MaxMessageBytes = 512 << 20

// streamChunkBytes is the chunk size of a streamed registration.
const streamChunkBytes = 1 << 20

// maxSocketPathLen is the longest Unix socket path Linux binds (sun_path).
const maxSocketPathLen = 107

// ServerOptions configure a Server; the zero value of each field means its
// default.
type ServerOptions struct {
	Runtime *runtimes.Runtime // required
	// Settings are the sidecar's own runtime settings (the rest of the
	// runtime config: RuntimeConfig.Settings): dynamic batching,
	// sequences, shared state.
	Settings      registry.Settings
	Limits        batch.Limits
	MaxModelBytes int64 // 0 = runtimes.DefaultMaxModelBytes (2 GiB)
	// MaxMappedModelBytes, when > 0, caps a model's files the runtime
	// serves from a memory mapping (runtimes.Runtime.MapsFile: the
	// TensorFlow runtime's checkpoint data shards with MapVariablesDir
	// set) instead of MaxModelBytes, which then bounds the other files;
	// 0 counts every file against MaxModelBytes.
	MaxMappedModelBytes int64
	Logger              *slog.Logger // nil = slog.Default()
	// FastLaneSpinWait is how long a fast-lane connection polls for the
	// client's next request before it parks; 0 =
	// fastlane.DefaultSpinWait, < 0 = never poll (a sidecar that must
	// not spend CPU while idle).
	FastLaneSpinWait time.Duration
	// SequenceCleanerInterval is the time between two sweeps of idle
	// sequences of stateful models; 0 = Settings'
	// sequence_cleaner_poll_wait_minutes (default 5 minutes), < 0 = off.
	// Tests set it short.
	SequenceCleanerInterval time.Duration
	// MaxSequencesPerClient bounds the live sequences of one model that
	// one client of bidding-server's KServe front (its remote host) may
	// hold: sequence.Options.MaxPerClient (0 =
	// sequence.DefaultMaxPerClient, < 0 = none).
	MaxSequencesPerClient int
	// Tracer, when set, traces each Predict ("sidecar.Predict", a child of
	// the caller's span from the "traceparent" gRPC metadata or the fast
	// lane's PredictRequest.traceparent) and each entry's model call
	// ("model.run"); nil = no spans, at no cost (see package telemetry).
	Tracer trace.Tracer
	// TempDir is where streamed registrations are received, each into a
	// directory of its own (0700) removed once it is loaded; "" =
	// os.TempDir() ($TMPDIR). It should be on disk, not tmpfs.
	TempDir string
	// LocalFilesDir is the directory a streamed registration may name
	// files in instead of streaming them (FileHeader.local_path, relative
	// to it; the supervisor's replay store): each is linked into the
	// registration's own directory (copied where it cannot be), never
	// read through this process. "" = registrations by path are refused.
	LocalFilesDir string
}

// Server is the sidecar's gRPC InferenceService with the standard health
// service, and the fast lane for Predict, served on one Unix socket.
type Server struct {
	inferencepb.UnimplementedInferenceServiceServer

	opts   ServerOptions
	log    *slog.Logger
	reg    *registry.Registry
	stores *prometheus.Registry // the external variables' stores (storeCollector)
	grpc   *grpc.Server
	health *health.Server
	fast   *fastlane.Server

	stopOnce sync.Once

	// releasing is set while a release of memory after a large request
	// is scheduled (see releaseMemorySoon).
	releasing atomic.Bool
}

// NewServer returns a server over opts.Runtime. It serves nothing until
// Serve.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Runtime == nil {
		return nil, errors.New("sidecar: ServerOptions.Runtime is nil")
	}
	if opts.MaxModelBytes <= 0 {
		opts.MaxModelBytes = runtimes.DefaultMaxModelBytes
	}
	if opts.Limits.MaxElements <= 0 {
		// One element cap: the runtime's, which every input meets in
		// runtimes.Model whatever the wire; JSON parsing stops at it too.
		opts.Limits.MaxElements = opts.Runtime.Config().MaxTensorElements
	}
	opts.Limits = opts.Limits.WithDefaults()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, log: opts.Logger}
	s.stores = prometheus.NewRegistry()
	s.stores.MustRegister(storeCollector{opts.Runtime})
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.ForceServerCodecV2(serverCodec{}),
	)
	inferencepb.RegisterInferenceServiceServer(s.grpc, s)
	s.health = health.NewServer()
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.health.SetServingStatus(inferencepb.InferenceService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	var err error
	if s.fast, err = newFastLaneServer(s); err != nil {
		return nil, err
	}
	// Last: the registry starts the sequence cleaner.
	if s.reg, err = registry.New(registry.Options{Runtime: opts.Runtime, Settings: opts.Settings, Limits: opts.Limits,
		MaxModelBytes: opts.MaxModelBytes, MaxMappedModelBytes: opts.MaxMappedModelBytes, Logger: opts.Logger,
		SequenceCleanerInterval: opts.SequenceCleanerInterval, MaxSequencesPerClient: opts.MaxSequencesPerClient}); err != nil {
		return nil, err
	}
	return s, nil
}

// Serve listens on socketPath and serves gRPC and the fast lane on it
// until GracefulStop or Stop. The socket's directory is created with mode
// 0700 when missing; Serve refuses one that another user owns or that is
// writable by group or others (they could replace the socket). A stale
// socket file is removed, but Serve refuses when a live server answers on
// it; the socket gets mode 0600. Serve returns nil after a stop.
func (s *Server) Serve(socketPath string) error {
	lis, err := Listen(socketPath)
	if err != nil {
		return err
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(inferencepb.InferenceService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.log.Info("sidecar serving", "socket", socketPath, "runtime", s.opts.Runtime.Name())
	return s.serve(lis)
}

// Listen prepares socketPath (see Serve) and listens on it.
func Listen(socketPath string) (net.Listener, error) {
	if socketPath == "" {
		return nil, errors.New("sidecar: socket path is empty")
	}
	if len(socketPath) > maxSocketPathLen {
		return nil, fmt.Errorf("sidecar: socket path %q is %d bytes, longer than the %d a Unix socket allows", socketPath, len(socketPath), maxSocketPathLen)
	}
	dir := filepath.Dir(socketPath)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("sidecar: create socket directory: %w", err)
		}
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(socketPath); err != nil {
		return nil, err
	}
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("sidecar: listen on %q: %w", socketPath, err)
	}
	if err := os.Chmod(socketPath, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("sidecar: chmod socket %q: %w", socketPath, err)
	}
	return lis, nil
}

// removeStaleSocket removes a socket file nobody answers on. It refuses to
// remove anything that is not a socket, or a socket a live server owns.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sidecar: stat socket %q: %w", path, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("sidecar: %q exists and is not a socket; refusing to replace it", path)
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("sidecar: a live server is listening on %q; refusing to replace it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sidecar: remove stale socket %q: %w", path, err)
	}
	return nil
}

// GracefulStop reports NOT_SERVING, stops accepting calls, waits for calls
// in flight (gRPC and fast lane), then closes every model.
func (s *Server) GracefulStop() {
	s.health.Shutdown()
	var fast sync.WaitGroup
	fast.Go(s.fast.GracefulStop)
	s.grpc.GracefulStop()
	fast.Wait()
	s.closeModels()
}

// Stop closes every connection at once (calls in flight fail), then closes
// every model.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.fast.Stop()
	s.grpc.Stop()
	s.closeModels()
}

func (s *Server) closeModels() {
	s.stopOnce.Do(s.reg.Close)
}

// SweepSequences removes the idle sequences of every stateful model now, as
// the cleaner does every sequence_cleaner_poll_wait_minutes, and returns
// how many it removed.
func (s *Server) SweepSequences() int { return s.reg.SweepSequences() }

// ModelPaths lists the registered model paths, sorted.
func (s *Server) ModelPaths() []string { return s.reg.Paths() }

// BatchingStats returns the dynamic batching counters of every registered
// model that batches, by model path.
func (s *Server) BatchingStats() map[string]BatchingStats { return s.reg.BatchingStats() }

// Predict runs a batch given as B&A JSON or as a typed batch.
func (s *Server) Predict(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
	if s.opts.Tracer != nil {
		ctx = contextFromMetadata(ctx)
	}
	resp, err := s.predict(ctx, req, true)
	return resp, toStatus(err)
}

// predict is Predict for both transports; a whole-call error is typed.
// With withMetrics false (the fast lane, for requests that are not
// consented) the response carries no Metrics: nothing on the host reads
// them there, and the map cost more CPU on both ends than the rest of the
// answer (see fastPredict).
func (s *Server) predict(ctx context.Context, req *inferencepb.PredictRequest, withMetrics bool) (*inferencepb.PredictResponse, error) {
	arrived := time.Now()
	if s.opts.Tracer != nil {
		var span trace.Span
		ctx, span = s.startPredictSpan(ctx, req)
		defer span.End()
	}
	resp := &inferencepb.PredictResponse{}
	var start time.Time
	var m metrics
	if withMetrics {
		start = time.Now()
		resp.Metrics = map[string]float64{}
		m = resp.Metrics
	}
	consented := req.GetIsConsented()
	switch in := req.GetInput().(type) {
	case *inferencepb.PredictRequest_BatchJson:
		if len(in.BatchJson) >= releaseAfterBytes {
			defer s.releaseMemorySoon()
		}
		entries, err := batch.Parse(in.BatchJson, s.opts.Limits)
		m.since("parse_duration_ms", start)
		if err != nil {
			err = inferr.Wrap(inferr.InputParsing, err, "")
			if consented {
				// No entry was read, so there is no model path to name.
				resp.DebugLogs = []string{"batch rejected, no model run: " + formatErrType(err)}
			}
			resp.Output = &inferencepb.PredictResponse_OutputJson{OutputJson: batch.AppendBatchError(nil, err)}
			break
		}
		runStart := m.now()
		resp.DebugLogs = debugLines(consented, len(entries))
		results := s.runEntries(ctx, entries, resp.DebugLogs, arrived)
		m.since("inference_duration_ms", runStart)
		m.set("entries", float64(len(entries)))
		resp.Output = &inferencepb.PredictResponse_OutputJson{OutputJson: batch.Render(results)}
	case *inferencepb.PredictRequest_Batch:
		reqs := in.Batch.GetRequests()
		if max := s.opts.Limits.MaxEntries; len(reqs) > max {
			return nil, inferr.Errorf(inferr.InputParsing, "batch has %d entries, more than the limit of %d", len(reqs), max)
		}
		entries := make([]batch.Entry, len(reqs))
		for i, r := range reqs {
			entries[i] = s.entryFromProto(r)
		}
		runStart := m.now()
		resp.DebugLogs = debugLines(consented, len(entries))
		results := s.runEntries(ctx, entries, resp.DebugLogs, arrived)
		m.since("inference_duration_ms", runStart)
		m.set("entries", float64(len(entries)))
		out := &inferencepb.BatchResult{Responses: make([]*inferencepb.ModelResponse, len(results))}
		for i, r := range results {
			out.Responses[i] = resultToProto(r)
		}
		resp.Output = &inferencepb.PredictResponse_Result{Result: out}
	default:
		return nil, inferr.Errorf(inferr.InputParsing, "predict request has neither batch_json nor batch")
	}
	m.since("predict_duration_ms", start)
	for _, l := range resp.DebugLogs {
		s.log.Debug(l, "consented", true)
	}
	return resp, nil
}

// releaseAfterBytes is the JSON Predict or registration size from which the
// sidecar hands the request's memory back to the OS once it is answered. Go returns
// freed memory lazily: an idle sidecar ran no garbage collection for
// minutes after a 400 MB request and kept 2.8 GB.
const releaseAfterBytes = 4 << 20

// releaseDelay leaves the answer of a large request time to be written
// before its memory is released.
const releaseDelay = time.Second

// releaseMemorySoon runs two garbage collections (sync.Pools, gRPC's
// included, drop their contents on the second) and returns free memory to
// the OS, releaseDelay from now; calls while one is scheduled share it.
// Two collections of a sidecar's small live heap cost a few milliseconds,
// paid only after requests of releaseAfterBytes or more.
func (s *Server) releaseMemorySoon() {
	if !s.releasing.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(releaseDelay, func() {
		s.releasing.Store(false)
		runtime.GC()
		debug.FreeOSMemory()
	})
}

// metrics fills a response's Metrics; a nil metrics records nothing and
// reads no clock.
type metrics map[string]float64

func (m metrics) now() time.Time {
	if m == nil {
		return time.Time{}
	}
	return time.Now()
}

func (m metrics) since(name string, t time.Time) {
	if m != nil {
		m[name] = ms(time.Since(t))
	}
}

func (m metrics) set(name string, v float64) {
	if m != nil {
		m[name] = v
	}
}

func (s *Server) entryFromProto(r *inferencepb.ModelRequest) batch.Entry {
	e := batch.Entry{ModelPath: r.GetModelPath()}
	if e.ModelPath == "" {
		e.Err = inferr.Errorf(inferr.InputParsing, "model_path is empty")
		return e
	}
	if max := s.opts.Limits.MaxTensors; len(r.GetTensors()) > max {
		e.Err = inferr.Errorf(inferr.InputParsing, "model %s: %d tensors, more than the limit of %d", inferr.Quote(e.ModelPath), len(r.GetTensors()), max)
		return e
	}
	e.Tensors = make([]tensor.Tensor, len(r.GetTensors()))
	for i, p := range r.GetTensors() {
		t, err := tensorFromProto(p)
		if err != nil {
			e.Err = inferr.Errorf(inferr.InputParsing, "model %s: tensors[%d]: %w", inferr.Quote(e.ModelPath), i, err)
			e.Tensors = nil
			return e
		}
		e.Tensors[i] = t
	}
	return e
}

// runEntries runs the entries of one batch, concurrently up to GOMAXPROCS
// at a time; each entry's error stays its own. With lines (a consented
// request's, one slot per entry: entries running concurrently need no lock,
// and the lines come in entry order), every entry gets its debug line.
// arrived is when the request reached the sidecar (the entries' metrics
// start there).
func (s *Server) runEntries(ctx context.Context, entries []batch.Entry, lines []string, arrived time.Time) []batch.Result {
	results := make([]batch.Result, len(entries))
	logs := lines != nil
	run := func(i int) {
		e := entries[i]
		results[i].ModelPath = e.ModelPath
		if e.Err != nil {
			results[i].Err = e.Err
			if logs {
				lines[i] = debugEntryLine(i, e.ModelPath, "not run: "+formatErrType(e.Err))
			}
			return
		}
		var start time.Time
		if logs {
			start = time.Now()
		}
		if s.opts.Tracer != nil {
			results[i].Tensors, results[i].Err = s.tracedPredict(ctx, e, arrived)
		} else {
			results[i].Tensors, results[i].Err = s.reg.Predict(ctx, e.ModelPath, e.Tensors, arrived)
		}
		if logs {
			if err := results[i].Err; err != nil {
				lines[i] = debugEntryLine(i, e.ModelPath, fmt.Sprintf("%s after %s", formatErrType(err), time.Since(start)))
			} else {
				lines[i] = debugEntryLine(i, e.ModelPath, fmt.Sprintf("ok in %s", time.Since(start)))
			}
		}
	}
	workers := min(len(entries), runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range entries {
			run(i)
		}
		return results
	}
	var next sync.WaitGroup
	jobs := make(chan int)
	for range workers - 1 {
		next.Go(func() {
			for i := range jobs {
				run(i)
			}
		})
	}
	for i := range entries {
		select {
		case jobs <- i:
		default:
			run(i) // every worker is busy: the caller works too
		}
	}
	close(jobs)
	next.Wait()
	return results
}

// debugLines is the slots of a consented request's debug lines, one per
// entry; nil when it is not consented.
func debugLines(consented bool, entries int) []string {
	if !consented {
		return nil
	}
	return make([]string, entries)
}

// debugEntryLine is the debug line of entry i of the batch the sidecar
// received: it names the entry's model path. Client.Predict renumbers it
// (renumberDebugLine) when the host kept entries out of that batch.
func debugEntryLine(i int, modelPath, what string) string {
	return "entry " + strconv.Itoa(i) + " model " + inferr.Quote(modelPath) + ": " + what
}

// renumberDebugLine gives a line of debugEntryLine the caller's entry
// index: sent[j] is the caller's index of entry j of the batch sent. Any
// other line is returned as it is.
func renumberDebugLine(line string, sent []int) string {
	rest, ok := strings.CutPrefix(line, "entry ")
	if !ok {
		return line
	}
	num, tail, ok := strings.Cut(rest, " ")
	if !ok {
		return line
	}
	j, err := strconv.Atoi(num)
	if err != nil || j < 0 || j >= len(sent) {
		return line
	}
	return "entry " + strconv.Itoa(sent[j]) + " " + tail
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// RegisterModel registers a model sent in one message.
func (s *Server) RegisterModel(ctx context.Context, req *inferencepb.RegisterModelRequest) (*inferencepb.RegisterModelResponse, error) {
	files := make(runtimes.Files, len(req.GetFiles()))
	for i, f := range req.GetFiles() {
		if _, dup := files[f.GetPath()]; dup {
			return nil, toStatus(inferr.Errorf(inferr.InputParsing, "register model %s: files[%d]: path %s given twice", inferr.Quote(req.GetModelPath()), i, inferr.Quote(f.GetPath())))
		}
		files[f.GetPath()] = f.GetContent()
	}
	seq, err := sequenceSettingsFromProto(req.GetModelPath(), req.GetSequenceSettings())
	if err != nil {
		return nil, toStatus(err)
	}
	ctx, err = withExternalVariables(ctx, req.GetModelPath(), req.GetExternalVariables(), func() string { return modelfiles.Checksum(files) })
	if err != nil {
		return nil, toStatus(err)
	}
	return s.register(ctx, req.GetModelPath(), files, req.GetWarmUpBatchRequestJson(), seq)
}

func (s *Server) register(ctx context.Context, path string, files runtimes.Files, warmUp string, seq *runtimes.SequenceSettings) (*inferencepb.RegisterModelResponse, error) {
	if files.Size() >= releaseAfterBytes {
		// The files and what the runtime decoded them through are
		// garbage once the model is loaded.
		defer s.releaseMemorySoon()
	}
	res, err := s.reg.Register(ctx, path, files, warmUp, seq)
	return s.registered(path, len(files), files.Size(), res, err)
}

func (s *Server) registered(path string, files int, size int64, res registry.Result, err error) (*inferencepb.RegisterModelResponse, error) {
	if err != nil {
		s.log.Warn("model registration failed", "model_path", inferr.Clip(path), "err", formatErrType(err))
		return nil, toStatus(err)
	}
	s.log.Info("model registered", "model_path", inferr.Clip(path), "files", files, "bytes", size,
		"replaced", res.Replaced, "load", res.Load, "warm_up", res.WarmUp)
	return &inferencepb.RegisterModelResponse{Replaced: res.Replaced, LoadMs: ms(res.Load), WarmUpMs: ms(res.WarmUp)}, nil
}

// RegisterModelStream registers a model whose files arrive in chunks after
// a header that declares every file and its size. The cap applies to the
// declared sizes before anything is written. The files are received into
// a private temporary directory (ServerOptions.TempDir), never into
// memory, hashed as they arrive, and loaded from there (the runtime reads
// them from disk where it can: runtimes.Runtime.LoadDisk); the directory
// is removed once the registration ends.
func (s *Server) RegisterModelStream(stream inferencepb.InferenceService_RegisterModelStreamServer) error {
	rm, err := receiveModel(stream, s.reg.NewTally(), s.opts.TempDir, s.opts.LocalFilesDir)
	if rm != nil {
		defer rm.remove()
	}
	if err != nil {
		path := ""
		if rm != nil {
			path = rm.path
		}
		s.log.Warn("streamed model registration failed", "model_path", inferr.Clip(path), "err", formatErrType(err))
		return toStatus(err)
	}
	if rm.bytes >= releaseAfterBytes {
		// A runtime that reads the files into Go memory leaves them
		// garbage once the model is loaded.
		defer s.releaseMemorySoon()
	}
	ctx := stream.Context()
	if len(rm.ext) > 0 { // checked by receiveModel
		ctx = runtimes.WithLoadOptions(ctx, runtimes.LoadOptions{Checksum: rm.checksum, ExternalVariables: rm.ext})
	}
	res, err := s.reg.RegisterDisk(ctx, rm.path, rm.files, rm.bytes, rm.checksum, rm.warmUp, rm.seq)
	resp, err := s.registered(rm.path, len(rm.files), rm.bytes, res, err)
	if err != nil {
		return err
	}
	return stream.SendAndClose(resp)
}

// receivedModel is a streamed registration received into files on disk.
type receivedModel struct {
	path     string
	warmUp   string
	seq      *runtimes.SequenceSettings
	ext      map[string]string // external_variables
	dir      string            // "" until the header is checked
	files    runtimes.DiskFiles
	bytes    int64
	checksum string // modelfiles.Checksum of the files
}

// remove deletes the received files.
func (rm *receivedModel) remove() {
	if rm.dir != "" {
		os.RemoveAll(rm.dir)
	}
}

// receiveModel reads a streamed registration into files in a new directory
// under tempDir ("" = os.TempDir()), which the caller removes (when the
// returned model is not nil, failures included). Files the header gives by
// local_path are taken from localDir instead (takeLocalFile). Errors are
// INPUT_PARSING, or GRPC when the stream itself fails or a file cannot be
// written.
func receiveModel(stream inferencepb.InferenceService_RegisterModelStreamServer, total *registry.Tally, tempDir, localDir string) (*receivedModel, error) {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, inferr.Errorf(inferr.InputParsing, "register model stream: ended before the header")
	}
	if err != nil {
		return nil, inferr.Wrap(inferr.GRPC, err, "register model stream: no header")
	}
	h := first.GetHeader()
	if h == nil {
		return nil, inferr.Errorf(inferr.InputParsing, "register model stream: the first message must be the header")
	}
	path := h.GetModelPath()
	if path == "" {
		return nil, inferr.Errorf(inferr.InputParsing, "register model stream: model_path is empty")
	}
	rm := &receivedModel{path: path, warmUp: h.GetWarmUpBatchRequestJson(), ext: h.GetExternalVariables()}
	decl := h.GetFiles()
	if len(decl) == 0 {
		return rm, inferr.Errorf(inferr.InputParsing, "register model %q: the header declares no files", path)
	}
	seen := make(map[string]bool, len(decl))
	for i, f := range decl {
		if err := registry.ValidateFilePath(f.GetPath()); err != nil {
			return rm, inferr.Errorf(inferr.InputParsing, "register model %q: files[%d]: %w", path, i, err)
		}
		if seen[f.GetPath()] {
			return rm, inferr.Errorf(inferr.InputParsing, "register model %q: files[%d]: path %q declared twice", path, i, f.GetPath())
		}
		seen[f.GetPath()] = true
		if err := total.Add(path, f.GetPath(), f.GetSize()); err != nil {
			return rm, err
		}
		if f.GetLocalPath() == "" {
			if len(f.GetSha256()) != 0 {
				return rm, inferr.Errorf(inferr.InputParsing, "register model %q: files[%d] (%q): sha256 is set without local_path", path, i, f.GetPath())
			}
			continue
		}
		if localDir == "" {
			return rm, inferr.Errorf(inferr.InputParsing, "register model %q: files[%d] (%q): given by local_path, but this sidecar takes no files from local disk (no --local_files_dir)", path, i, f.GetPath())
		}
		if len(f.GetSha256()) != sha256.Size {
			return rm, inferr.Errorf(inferr.InputParsing, "register model %q: files[%d] (%q): a file given by local_path needs its %d-byte sha256, got %d bytes", path, i, f.GetPath(), sha256.Size, len(f.GetSha256()))
		}
	}
	if rm.seq, err = sequenceSettingsFromProto(path, h.GetSequenceSettings()); err != nil {
		return rm, err
	}
	if err := checkExternalVariables(path, rm.ext); err != nil { // before the files arrive
		return rm, err
	}
	if rm.dir, err = os.MkdirTemp(tempDir, "inferbid-register-*"); err != nil { // mode 0700
		return rm, inferr.Errorf(inferr.GRPC, "register model %q: no directory to receive the files in: %w", path, err)
	}
	rm.bytes = total.Bytes()
	rm.files = make(runtimes.DiskFiles, len(decl))
	digests := make(map[string]string, len(decl))
	// file i is written to dir/i: model file names are never local paths.
	var (
		cur     = -1
		out     *os.File
		written int64
		sum     hash.Hash
	)
	closeCur := func() error {
		if out == nil {
			return nil
		}
		err := out.Close()
		out = nil
		if err != nil {
			return inferr.Errorf(inferr.GRPC, "register model %q: file %q: %w", path, decl[cur].GetPath(), err)
		}
		digests[decl[cur].GetPath()] = hex.EncodeToString(sum.Sum(nil))
		return nil
	}
	defer func() {
		if out != nil {
			out.Close()
		}
	}()
	// next moves to the next file that still expects bytes, completing
	// the empty ones on the way.
	next := func() error {
		for written == decl0(decl, cur) {
			if err := closeCur(); err != nil {
				return err
			}
			if cur+1 == len(decl) {
				cur = len(decl)
				return nil
			}
			cur++
			local := filepath.Join(rm.dir, strconv.Itoa(cur))
			if fh := decl[cur]; fh.GetLocalPath() != "" {
				// No chunks: the file is taken whole from local disk.
				if err := takeLocalFile(localDir, fh, local); err != nil {
					return inferr.Wrap(inferr.GRPC, err, fmt.Sprintf("register model %q: file %q", path, fh.GetPath()))
				}
				rm.files[fh.GetPath()] = local
				digests[fh.GetPath()] = hex.EncodeToString(fh.GetSha256())
				written = fh.GetSize()
				continue
			}
			f, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return inferr.Errorf(inferr.GRPC, "register model %q: file %q: %w", path, decl[cur].GetPath(), err)
			}
			out, written, sum = f, 0, sha256.New()
			rm.files[decl[cur].GetPath()] = local
		}
		return nil
	}
	if err := next(); err != nil {
		return rm, err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return rm, inferr.Wrap(inferr.GRPC, err, fmt.Sprintf("register model %q: stream failed", path))
		}
		if msg.GetHeader() != nil {
			return rm, inferr.Errorf(inferr.InputParsing, "register model %q: a second header arrived", path)
		}
		data := msg.GetData()
		if cur == len(decl) {
			if len(data) == 0 {
				continue
			}
			return rm, inferr.Errorf(inferr.InputParsing, "register model %q: %d bytes of data after the last declared file", path, len(data))
		}
		if room := decl[cur].GetSize() - written; int64(len(data)) > room {
			return rm, inferr.Errorf(inferr.InputParsing, "register model %q: file %q: a chunk of %d bytes overruns its declared size of %d bytes (%d bytes left)", path, decl[cur].GetPath(), len(data), decl[cur].GetSize(), room)
		}
		if _, err := out.Write(data); err != nil {
			return rm, inferr.Errorf(inferr.GRPC, "register model %q: file %q: %w", path, decl[cur].GetPath(), err)
		}
		sum.Write(data)
		written += int64(len(data))
		if err := next(); err != nil {
			return rm, err
		}
	}
	if cur < len(decl) {
		return rm, inferr.Errorf(inferr.InputParsing, "register model %q: file %q is short: %d of its declared %d bytes arrived", path, decl[cur].GetPath(), written, decl[cur].GetSize())
	}
	hexes := make([]string, 0, len(digests))
	for _, p := range slices.Sorted(maps.Keys(digests)) {
		hexes = append(hexes, digests[p])
	}
	rm.checksum = modelfiles.ChecksumOfHexDigests(hexes)
	return rm, nil
}

// decl0 is the declared size of file cur, 0 before the first (cur -1).
func decl0(decl []*inferencepb.FileHeader, cur int) int64 {
	if cur < 0 {
		return 0
	}
	return decl[cur].GetSize()
}

// DeleteModel unpublishes a model; calls in flight finish on it.
func (s *Server) DeleteModel(ctx context.Context, req *inferencepb.DeleteModelRequest) (*inferencepb.DeleteModelResponse, error) {
	if err := s.reg.Delete(req.GetModelPath()); err != nil {
		return nil, toStatus(err)
	}
	s.log.Info("model deleted", "model_path", inferr.Clip(req.GetModelPath()))
	return &inferencepb.DeleteModelResponse{}, nil
}

// GetModelPaths lists the registered model paths, sorted.
func (s *Server) GetModelPaths(ctx context.Context, req *inferencepb.GetModelPathsRequest) (*inferencepb.GetModelPathsResponse, error) {
	return &inferencepb.GetModelPathsResponse{ModelPaths: s.reg.Paths()}, nil
}

// Models describes the models serving or loading, sorted by path.
func (s *Server) Models() []ModelInfo {
	infos, _ := s.reg.Models("")
	out := make([]ModelInfo, len(infos))
	for i, in := range infos {
		out[i] = ModelInfo(in)
	}
	return out
}

// GetModels describes the registered models, or the one at model_path
// (MODEL_NOT_FOUND when nothing is there).
func (s *Server) GetModels(ctx context.Context, req *inferencepb.GetModelsRequest) (*inferencepb.GetModelsResponse, error) {
	infos, ok := s.reg.Models(req.GetModelPath())
	if !ok {
		return nil, toStatus(inferr.Errorf(inferr.ModelNotFound, "model %s is not registered", inferr.Quote(req.GetModelPath())))
	}
	resp := &inferencepb.GetModelsResponse{Models: make([]*inferencepb.ModelStatus, len(infos))}
	for i, in := range infos {
		resp.Models[i] = modelInfoToProto(ModelInfo(in))
	}
	return resp, nil
}
