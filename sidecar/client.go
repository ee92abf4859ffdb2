package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar/fastlane"
	"github.com/inferbid/inferbid/telemetry"
)

// ClientOptions configure a Client; the zero value means defaults.
type ClientOptions struct {
	Logger *slog.Logger // nil = slog.Default()
	// Transport carries Predict: the fast lane (the zero value) or gRPC.
	Transport Transport
	// FastLaneConns bounds the fast lane's pooled connections; callers
	// beyond it wait. 0 = 4*GOMAXPROCS.
	FastLaneConns int
	// FastLaneSpinWait is how long a fast-lane call polls for its answer
	// before it parks; 0 = fastlane.DefaultSpinWait, < 0 = never poll.
	FastLaneSpinWait time.Duration
	// Fallback, when set, takes the requests the sidecar could not be
	// reached for (the fast lane's ErrNotSent), and the entries whose answer
	// names a model the sidecar does not have: a JS worker's client sends
	// them to the host, whose client waits out a replay (see Fallback).
	Fallback Fallback
	// Tracer, when set, traces each Predict ("runInference", a client
	// span) and sends its context to the sidecar; nil = no spans, at no
	// cost.
	Tracer trace.Tracer
}

// Client talks to one sidecar socket. It is safe for concurrent use. It
// connects lazily and reconnects by itself (quickly: the sidecar is local),
// so it keeps working across sidecar restarts on the same socket path;
// calls made while the sidecar is down fail at once with GRPC errors,
// unless the client is a Supervisor's: then a call for a model the
// supervisor is replaying waits for it (see Supervisor). Every error it
// returns is a typed inferr error.
type Client struct {
	socket string
	log    *slog.Logger
	conn   *grpc.ClientConn
	api    inferencepb.InferenceServiceClient
	health healthpb.HealthClient
	fast   *fastlane.Client // nil when Predict goes over gRPC
	// gate, set by a Supervisor before any call, makes calls for models
	// being replayed after a restart wait for them; nil otherwise.
	gate *replayGate
	// fallback is ClientOptions.Fallback.
	fallback Fallback
	// tracer is ClientOptions.Tracer.
	tracer trace.Tracer
}

// NewClient returns a client for socketPath. It does no I/O: the
// connection is made on the first call (like grpc.NewClient, which it
// wraps), so the sidecar need not be up yet.
func NewClient(socketPath string, opts ClientOptions) (*Client, error) {
	if socketPath == "" {
		return nil, inferr.Errorf(inferr.GRPC, "dial sidecar: socket path is empty")
	}
	abs, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, inferr.Errorf(inferr.GRPC, "dial sidecar %q: %w", socketPath, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// Dial the socket path directly rather than through a "unix://" URL,
	// which would misread paths holding '%', '?' or '#'.
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", abs)
	}
	conn, err := grpc.NewClient("passthrough:///inference-sidecar",
		grpc.WithContextDialer(dialer),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	)
	if err != nil {
		return nil, inferr.Errorf(inferr.GRPC, "dial sidecar %q: %w", socketPath, err)
	}
	c := &Client{
		socket:   abs,
		log:      opts.Logger,
		conn:     conn,
		api:      inferencepb.NewInferenceServiceClient(conn),
		health:   healthpb.NewHealthClient(conn),
		fallback: opts.Fallback,
		tracer:   opts.Tracer,
	}
	switch opts.Transport {
	case TransportFastLane:
		c.fast = newFastLaneClient(abs, opts)
	case TransportGRPC:
	default:
		conn.Close()
		return nil, inferr.Errorf(inferr.GRPC, "dial sidecar %q: unknown transport %d", socketPath, opts.Transport)
	}
	return c, nil
}

// SocketPath is the absolute path of the socket the client talks to.
func (c *Client) SocketPath() string { return c.socket }

// Wake tells the sidecar that a Predict is likely to follow soon (see
// fastlane.Client.Wake): its wake-up then overlaps the caller's own work.
// It does nothing on the gRPC transport, and never blocks.
func (c *Client) Wake() {
	if c.fast != nil {
		c.fast.Wake()
	}
}

// SetPolling turns the fast lane's polling on (the default) or off (see
// fastlane.Client.SetPolling). It does nothing on the gRPC transport.
func (c *Client) SetPolling(on bool) {
	if c.fast != nil {
		c.fast.SetPolling(on)
	}
}

// Predict runs a typed batch, over the fast lane unless the client was made
// with TransportGRPC. Entries whose Err is set are not sent; their result
// carries that error. The returned error is a whole-batch error
// (GRPC when the sidecar could not be reached); per-entry errors are in the
// results, one per entry, in order.
//
// When ctx carries a batch.DebugSink (batch.WithDebugLog), the request is
// sent consented and the sidecar's debug lines (one per entry sent, each
// naming its model path, numbered by the entry's index in entries) go to
// the sink, in order, before Predict returns. Without a sink none are
// asked for.
func (c *Client) Predict(ctx context.Context, entries []batch.Entry) ([]batch.Result, error) {
	if c.tracer != nil {
		return c.tracedPredict(ctx, entries)
	}
	return c.predictEntries(ctx, entries)
}

func (c *Client) predictEntries(ctx context.Context, entries []batch.Entry) ([]batch.Result, error) {
	results := make([]batch.Result, len(entries))
	for i, e := range entries {
		results[i] = batch.Result{ModelPath: e.ModelPath, Err: e.Err}
	}
	pb, idx := entriesToProto(entries)
	if len(idx) == 0 {
		return results, nil
	}
	paths := func(yield func(string) bool) {
		for _, m := range pb.GetRequests() {
			if !yield(m.GetModelPath()) {
				return
			}
		}
	}
	sink := batch.DebugLogFrom(ctx)
	req := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: pb}, IsConsented: sink != nil}
	if c.tracer != nil && c.fast != nil {
		req.Traceparent = telemetry.Traceparent(ctx) // gRPC: in metadata
	}
	resp, err := c.send(ctx, req, paths)
	if err != nil {
		return nil, err
	}
	if sink != nil {
		// Before the answer is checked: the lines may explain a bad one.
		renumber := len(idx) < len(entries)
		for _, l := range resp.GetDebugLogs() {
			if renumber {
				l = renumberDebugLine(l, idx)
			}
			sink(l)
		}
	}
	got := resp.GetResult().GetResponses()
	if resp.GetResult() == nil || len(got) != len(idx) {
		return nil, inferr.Errorf(inferr.OutputParsing, "sidecar answered %d results for %d entries", len(got), len(idx))
	}
	for j, r := range got {
		results[idx[j]] = resultFromProto(r)
	}
	return results, nil
}

// send sends a typed request: it waits for its models while a replay is
// under way, and resends once a request that never reached a sidecar that
// has just died. One that did reach it is not sent again: it may be what
// killed it. A client with a Fallback (a JS worker's) hands it the request
// the sidecar could not be reached for, or the entries whose model it
// lacked (withFallback).
func (c *Client) send(ctx context.Context, req *inferencepb.PredictRequest, paths func(func(string) bool)) (*inferencepb.PredictResponse, error) {
	if c.gate.engaged() { // only during an outage: the common call skips it
		if err := c.gate.wait(ctx, paths); err != nil {
			return nil, err
		}
	}
	resp, err := c.predict(ctx, req)
	if errors.Is(err, fastlane.ErrNotSent) && c.gate.outage(ctx) {
		if err := c.gate.wait(ctx, paths); err != nil {
			return nil, err
		}
		resp, err = c.predict(ctx, req)
	}
	return c.withFallback(ctx, req, resp, err)
}

func (c *Client) predict(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
	if c.fast != nil {
		return c.fast.Predict(ctx, req)
	}
	if c.tracer != nil {
		ctx = withTraceparentMetadata(ctx)
	}
	resp, err := c.api.Predict(ctx, req)
	return resp, fromStatus(err)
}

// PredictJSON runs a B&A batch JSON and returns the response JSON. Like
// Predict, it hands the sidecar's debug lines to ctx's batch.DebugSink, if
// it has one.
func (c *Client) PredictJSON(ctx context.Context, batchJSON []byte) ([]byte, error) {
	sink := batch.DebugLogFrom(ctx)
	resp, err := c.api.Predict(ctx, &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_BatchJson{BatchJson: batchJSON}, IsConsented: sink != nil})
	if err != nil {
		return nil, fromStatus(err)
	}
	if sink != nil {
		for _, l := range resp.GetDebugLogs() {
			sink(l)
		}
	}
	out, ok := resp.GetOutput().(*inferencepb.PredictResponse_OutputJson)
	if !ok {
		return nil, inferr.Errorf(inferr.OutputParsing, "sidecar answered a JSON batch without output_json")
	}
	return out.OutputJson, nil
}

// RegisterModel sends a model to the sidecar in chunks over the
// registration stream; it returns once the model is loaded, warmed and
// serving (or failed to).
func (c *Client) RegisterModel(ctx context.Context, modelPath string, files runtimes.Files, warmUpJSON string) error {
	return c.RegisterModelWithSequences(ctx, modelPath, files, warmUpJSON, nil)
}

// RegisterModelWithSequences is RegisterModel with the model's sequence
// settings (its model_metadata entry's); nil means none, and the runtime
// config's stateful_models apply. Set, they replace the runtime config's
// for this model.
func (c *Client) RegisterModelWithSequences(ctx context.Context, modelPath string, files runtimes.Files, warmUpJSON string, seq *runtimes.SequenceSettings) error {
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range files {
			if !yield(name) {
				return
			}
		}
	})
	headers := make([]*inferencepb.FileHeader, len(names))
	for i, name := range names {
		headers[i] = &inferencepb.FileHeader{Path: name, Size: int64(len(files[name]))}
	}
	return c.registerStream(ctx, modelPath, warmUpJSON, seq, headers, func(i int, send func([]byte) bool) error {
		data := files[names[i]]
		for off := 0; off < len(data); off += streamChunkBytes {
			if !send(data[off:min(off+streamChunkBytes, len(data))]) {
				return nil
			}
		}
		return nil
	})
}

// registerStream sends a registration whose file i (of the size its header
// declares) is produced by body in chunks of at most streamChunkBytes,
// each handed to send (false once the stream has ended: body then stops).
// An error from body abandons the registration (the sidecar registers
// nothing) and is returned as is.
func (c *Client) registerStream(ctx context.Context, modelPath, warmUpJSON string, seq *runtimes.SequenceSettings, files []*inferencepb.FileHeader, body func(i int, send func([]byte) bool) error) error {
	header := &inferencepb.RegisterModelHeader{ModelPath: modelPath, WarmUpBatchRequestJson: warmUpJSON, Files: files, SequenceSettings: sequenceSettingsToProto(seq),
		// The model's external variables travel in the registration's
		// context (runtimes.WithLoadOptions); the sidecar keys their rows
		// by the checksum of the files it receives.
		ExternalVariables: runtimes.LoadOptionsFrom(ctx).ExternalVariables}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.api.RegisterModelStream(ctx)
	if err != nil {
		return fromStatus(err)
	}
	ok := true
	send := func(m *inferencepb.RegisterModelChunk) bool {
		// io.EOF means the server ended the stream early: its status
		// comes from CloseAndRecv.
		ok = ok && stream.Send(m) == nil
		return ok
	}
	send(&inferencepb.RegisterModelChunk{Part: &inferencepb.RegisterModelChunk_Header{Header: header}})
	for i := range files {
		if !ok {
			break
		}
		err := body(i, func(b []byte) bool {
			return send(&inferencepb.RegisterModelChunk{Part: &inferencepb.RegisterModelChunk_Data{Data: b}})
		})
		if err != nil {
			cancel()
			return err
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return fromStatus(err)
	}
	return nil
}

// DeleteModel unpublishes a model; MODEL_NOT_FOUND if none is registered
// at modelPath.
func (c *Client) DeleteModel(ctx context.Context, modelPath string) error {
	_, err := c.api.DeleteModel(ctx, &inferencepb.DeleteModelRequest{ModelPath: modelPath})
	return fromStatus(err)
}

// ModelPaths lists the registered model paths, sorted. While a
// Supervisor replays its models after a restart, it lists the whole
// replay set (calls for those models wait for them), never the part
// already replayed: a script must not see an older version of a model
// without the newer one.
func (c *Client) ModelPaths(ctx context.Context) ([]string, error) {
	if paths, ok := c.gate.modelPaths(); ok {
		return paths, nil
	}
	resp, err := c.api.GetModelPaths(ctx, &inferencepb.GetModelPathsRequest{})
	if err != nil {
		// Listing is read-only: asked of a sidecar that has just died,
		// the replay set is the answer.
		if c.gate.outage(ctx) {
			if paths, ok := c.gate.modelPaths(); ok {
				return paths, nil
			}
		}
		return nil, fromStatus(err)
	}
	paths := resp.GetModelPaths()
	if paths == nil {
		paths = []string{}
	}
	return paths, nil
}

// Models describes the models the sidecar serves or is loading, sorted by
// path; with modelPath set, only that one (MODEL_NOT_FOUND when the
// sidecar has nothing there). While a Supervisor replays its models after
// a restart, every model of the replay set not back yet is listed as
// loading, as ModelPaths lists it.
func (c *Client) Models(ctx context.Context, modelPath string) ([]ModelInfo, error) {
	resp, err := c.api.GetModels(ctx, &inferencepb.GetModelsRequest{ModelPath: modelPath})
	if err != nil {
		err = fromStatus(err)
		// A model of the replay set is loading whether the sidecar
		// answers that it has not got it yet or has just died.
		if inferr.TypeOf(err) != inferr.ModelNotFound && !c.gate.outage(ctx) {
			return nil, err
		}
	}
	infos := make([]ModelInfo, 0, len(resp.GetModels()))
	for _, p := range resp.GetModels() {
		infos = append(infos, modelInfoFromProto(p))
	}
	replaySet, replaying := c.gate.modelPaths()
	if !replaying {
		if err != nil {
			return nil, err
		}
		return infos, nil
	}
	have := make(map[string]bool, len(infos))
	for _, in := range infos {
		have[in.Path] = true
	}
	for _, p := range replaySet {
		if !have[p] && (modelPath == "" || p == modelPath) {
			infos = append(infos, ModelInfo{Path: p, State: ModelLoading})
		}
	}
	if err != nil && modelPath != "" && len(infos) == 0 {
		return nil, err
	}
	slices.SortFunc(infos, func(a, b ModelInfo) int { return strings.Compare(a.Path, b.Path) })
	return infos, nil
}

// WaitHealthy waits until the sidecar's health service reports SERVING or
// ctx ends (then a GRPC error).
func (c *Client) WaitHealthy(ctx context.Context) error {
	c.conn.Connect()
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := c.health.Check(attempt, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("health status %s", resp.GetStatus())
		}
		select {
		case <-ctx.Done():
			return inferr.Errorf(inferr.GRPC, "sidecar at %q is not healthy: %w (last: %v)", c.socket, ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ping is the supervisor's liveness probe: a health check over gRPC and,
// on the fast lane, an empty batch, which the sidecar answers without
// running anything. It returns the transport that failed, if any. It
// bypasses the replay gate: it asks the sidecar itself.
func (c *Client) ping(ctx context.Context) (string, error) {
	resp, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return "grpc", fromStatus(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return "grpc", inferr.Errorf(inferr.GRPC, "sidecar at %q: health status %s", c.socket, resp.GetStatus())
	}
	if c.fast != nil {
		empty := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{}}}
		if _, err := c.fast.Predict(ctx, empty); err != nil {
			return "fastlane", err
		}
	}
	return "", nil
}

// resetBackoff makes the connection retry at once (after a restart).
func (c *Client) resetBackoff() { c.conn.ResetConnectBackoff() }

// Close closes the connections; calls in flight fail.
func (c *Client) Close() error {
	if c.fast != nil {
		c.fast.Close()
	}
	if err := c.conn.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return inferr.Wrap(inferr.GRPC, err, "close sidecar client")
	}
	return nil
}
