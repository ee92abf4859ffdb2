package kserve

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// Backend is the sidecar as the protocol uses it: *sidecar.Client (or a
// Supervisor's client) satisfies it.
type Backend interface {
	Predict(ctx context.Context, entries []batch.Entry) ([]batch.Result, error)
	ModelPaths(ctx context.Context) ([]string, error)
	Models(ctx context.Context, modelPath string) ([]sidecar.ModelInfo, error)
}

// Platform names per runtime, as Triton and KServe name them.
const (
	PlatformTensorFlow = "tensorflow_savedmodel"
	PlatformPyTorch    = "pytorch_libtorch"
	PlatformONNX       = "onnxruntime_onnx"
)

// platforms maps the runtime a sidecar reports for a model (its registered
// name) to the protocol's platform name.
var platforms = map[string]string{
	"tensorflow": PlatformTensorFlow,
	"pytorch":    PlatformPyTorch,
	"onnx":       PlatformONNX,
}

// Defaults where Options fields are zero.
const (
	DefaultServerName      = "inferbid"
	DefaultMaxRequestBytes = 8 << 20 // runInference's argument limit
	DefaultTimeout         = 10 * time.Second
	// pathsTTL is how long the sidecar's model paths are reused, as
	// getModelPaths caches them for runInference.
	pathsTTL = 100 * time.Millisecond
)

// Options configure a Server; the zero value means defaults.
type Options struct {
	// ServerName and ServerVersion answer server metadata;
	// "" = DefaultServerName and "unknown".
	ServerName, ServerVersion string
	// MaxRequestBytes bounds an HTTP inference body; 0 = 8 MiB.
	MaxRequestBytes int64
	// Limits bound a request's tensors as they bound a runInference batch
	// (elements per tensor, tensors per request).
	Limits batch.Limits
	// Timeout bounds one inference, sidecar call included; 0 = 10s.
	Timeout time.Duration
	// Ready says whether the server is ready (nil error) or why not; nil =
	// ready once a backend is set.
	Ready func(ctx context.Context) error
	// Observe, when set, is called once per request with its outcome (for
	// metrics).
	Observe func(Observation)
	// Repository, when set, turns on the model repository extension
	// (POST /v2/repository/index, /v2/repository/models/NAME/load and
	// /unload); nil = off, those paths 404.
	Repository Repository
	// LoadErrors, when set, gives the models that are configured but do
	// not serve because their load failed: model path -> the load error. A
	// request for such a model answers 503 with that error (model ready:
	// not ready, with it) rather than "not known".
	LoadErrors func() map[string]string
}

// Observation is one request's outcome.
type Observation struct {
	Protocol string // "http" or "grpc"
	// Endpoint is "live", "ready", "model_ready", "server_metadata",
	// "model_metadata", "infer", "repository_index", "repository_load",
	// "repository_unload", "tfserving_predict", "tfserving_model_metadata",
	// "tfserving_model_status" or "unknown".
	Endpoint string
	Status   int // the HTTP status (the gRPC code's HTTP equivalent)
	// ModelPath is the model path an inference or model request resolved
	// to; "" when it resolved to none.
	ModelPath string
	Duration  time.Duration
}

// Server is the protocol's core over one backend.
type Server struct {
	opts    Options
	backend atomic.Pointer[Backend]

	pathsMu   sync.Mutex
	paths     []string
	pathsTime time.Time
	sigs      map[string]cachedSignature // by model path

	// seqKey keys the map from string sequence ids to the manager's
	// uint64 ones (stringSequenceID).
	seqKey [32]byte
}

// cachedSignature is a model's signature as the sidecar described it.
type cachedSignature struct {
	sig  runtimes.Signature
	when time.Time
}

// New returns a server; it answers "not ready" and 404s until SetBackend.
func New(opts Options) *Server {
	if opts.ServerName == "" {
		opts.ServerName = DefaultServerName
	}
	if opts.ServerVersion == "" {
		opts.ServerVersion = "unknown"
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	opts.Limits = opts.Limits.WithDefaults()
	s := &Server{opts: opts}
	rand.Read(s.seqKey[:]) // never fails: crypto/rand crashes the program instead
	return s
}

// SetBackend sets the sidecar the server asks (once it has started).
func (s *Server) SetBackend(b Backend) { s.backend.Store(&b) }

// wake tells the sidecar an inference is coming (*sidecar.Client wakes
// its fast-lane reader), so that its wake-up overlaps decoding the
// request, as runInference does.
func (s *Server) wake() {
	if w, ok := s.getBackend().(interface{ Wake() }); ok {
		w.Wake()
	}
}

func (s *Server) getBackend() Backend {
	if b := s.backend.Load(); b != nil {
		return *b
	}
	return nil
}

// Error is a failed request: the HTTP status the protocol gives it and the
// message.
type Error struct {
	Status int
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func errorf(status int, format string, args ...any) error {
	return &Error{Status: status, Err: fmt.Errorf(format, args...)}
}

// StatusOf is the HTTP status of err: an *Error's own, else by the
// inferr type: INPUT_PARSING 400, MODEL_NOT_FOUND 404, the others 500;
// a sequence error takes its class's status (400, 404, 409, 503, 412).
func StatusOf(err error) int {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Status
	}
	if code, ok := sequenceStatus(err); ok {
		return code
	}
	switch inferr.TypeOf(err) {
	case inferr.InputParsing:
		return http.StatusBadRequest
	case inferr.ModelNotFound:
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// Live is always true while the process answers.
func (s *Server) Live() bool { return true }

// ServerReady reports whether the server is ready, or why not.
func (s *Server) ServerReady(ctx context.Context) error {
	if s.getBackend() == nil {
		return errors.New("inference is not available: no sidecar (disabled, or still starting)")
	}
	if s.opts.Ready != nil {
		return s.opts.Ready(ctx)
	}
	return nil
}

// ServerMetadata is the server metadata answer.
type ServerMetadata struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

// Extension names of server metadata.
const (
	// ExtBinaryTensorData: tensor data after the JSON header of an HTTP
	// body (Inference-Header-Content-Length, binary_data_size,
	// binary_data, binary_data_output).
	ExtBinaryTensorData = "binary_tensor_data"
	// ExtSequence: Triton's sequence parameters (sequence_id,
	// sequence_start, sequence_end).
	ExtSequence = "sequence"
	// ExtModelRepository: POST /v2/repository/index, load and unload
	// (Options.Repository).
	ExtModelRepository = "model_repository"
)

// Metadata describes the server and the extensions it serves.
func (s *Server) Metadata() ServerMetadata {
	ext := []string{ExtBinaryTensorData, ExtSequence}
	if s.opts.Repository != nil {
		ext = append(ext, ExtModelRepository)
	}
	return ServerMetadata{Name: s.opts.ServerName, Version: s.opts.ServerVersion, Extensions: ext}
}

// modelPaths are the sidecar's model paths, reused for pathsTTL unless
// fresh is set.
func (s *Server) modelPaths(ctx context.Context, b Backend, fresh bool) ([]string, error) {
	s.pathsMu.Lock()
	defer s.pathsMu.Unlock()
	if !fresh && s.paths != nil && time.Since(s.pathsTime) < pathsTTL {
		return s.paths, nil
	}
	paths, err := b.ModelPaths(ctx)
	if err != nil {
		return nil, err
	}
	s.paths, s.pathsTime = paths, time.Now()
	return paths, nil
}

// outputNames maps a model's output tensor names to the names its
// metadata shows (TensorFlow's signature key "y" for the graph tensor
// "StatefulPartitionedCall:0"), from a signature reused for pathsTTL. A
// signature that is stale after a swap renames nothing wrongly: only names
// it lists are renamed.
func (s *Server) outputNames(ctx context.Context, b Backend, path string) map[string]string {
	sig, err := s.signature(ctx, b, path)
	if err != nil {
		return nil
	}
	var names map[string]string
	for _, o := range sig.Outputs {
		if len(o.Aliases) > 0 {
			if names == nil {
				names = map[string]string{}
			}
			names[o.Name] = o.Aliases[0]
		}
	}
	return names
}

// signature is the model path's signature as the sidecar described it,
// asked again once pathsTTL old: the request paths that need only the
// signature (TF Serving REST's decoding, output aliases) share one
// GetModels a TTL, not one a request.
func (s *Server) signature(ctx context.Context, b Backend, path string) (runtimes.Signature, error) {
	s.pathsMu.Lock()
	c, ok := s.sigs[path]
	s.pathsMu.Unlock()
	if ok && time.Since(c.when) < pathsTTL {
		return c.sig, nil
	}
	infos, err := b.Models(ctx, path)
	if err != nil {
		return runtimes.Signature{}, fmt.Errorf("describe model %q: %w", path, err)
	}
	i := slices.IndexFunc(infos, func(in sidecar.ModelInfo) bool { return in.Path == path })
	if i < 0 {
		return runtimes.Signature{}, errorf(http.StatusNotFound, "model path %q is not known", path)
	}
	c = cachedSignature{sig: infos[i].Signature, when: time.Now()}
	s.pathsMu.Lock()
	if s.sigs == nil || len(s.sigs) > 4096 {
		s.sigs = map[string]cachedSignature{}
	}
	s.sigs[path] = c
	s.pathsMu.Unlock()
	return c.sig, nil
}

// Resolve finds the model path of name and version (the newest version
// when version is ""); a 404 *Error when there is none.
func (s *Server) Resolve(ctx context.Context, name, version string) (Resolution, error) {
	b := s.getBackend()
	if b == nil {
		return Resolution{}, errorf(http.StatusNotFound, "model %q is not known: inference is not available (no sidecar, or it is still starting)", name)
	}
	if name == "" {
		return Resolution{}, errorf(http.StatusBadRequest, "no model name")
	}
	paths, err := s.modelPaths(ctx, b, false)
	if err != nil {
		return Resolution{}, fmt.Errorf("list models: %w", err)
	}
	r, ok := Resolve(paths, name, version)
	if !ok {
		// A model registered since the paths were listed must not be a
		// 404: a miss asks the sidecar again.
		if paths, err = s.modelPaths(ctx, b, true); err != nil {
			return Resolution{}, fmt.Errorf("list models: %w", err)
		}
		r, ok = Resolve(paths, name, version)
	}
	if !ok && s.opts.LoadErrors != nil {
		if errs := s.opts.LoadErrors(); len(errs) > 0 {
			failed := make([]string, 0, len(errs))
			for p := range errs {
				failed = append(failed, p)
			}
			if f, fok := Resolve(append(failed, paths...), name, version); fok {
				if msg, isFailed := errs[f.Path]; isFailed {
					return f, errorf(http.StatusServiceUnavailable, "model %q version %q (model path %q) failed to load: %s", name, f.Version, f.Path, msg)
				}
			}
		}
	}
	if !ok {
		if version != "" && len(r.Versions) > 0 {
			return r, errorf(http.StatusNotFound, "model %q has no version %q (versions: %s)", name, version, strings.Join(r.Versions, ", "))
		}
		return r, errorf(http.StatusNotFound, "model %q is not known (model paths map to NAME/VERSION/, e.g. pctr/v2/ is model pctr version v2)", name)
	}
	return r, nil
}

// ModelReady reports whether the model serves: nil when it does, a 404
// *Error when it is not known, a 400 one while it loads.
func (s *Server) ModelReady(ctx context.Context, name, version string) (Resolution, error) {
	r, info, err := s.model(ctx, name, version)
	if err != nil {
		return r, err
	}
	if info.State != sidecar.ModelServing {
		return r, errorf(http.StatusBadRequest, "model %q version %q (model path %q) is %s", name, r.Version, r.Path, info.State)
	}
	return r, nil
}

func (s *Server) model(ctx context.Context, name, version string) (Resolution, sidecar.ModelInfo, error) {
	r, err := s.Resolve(ctx, name, version)
	if err != nil {
		return r, sidecar.ModelInfo{}, err
	}
	infos, err := s.getBackend().Models(ctx, r.Path)
	if err != nil {
		return r, sidecar.ModelInfo{}, fmt.Errorf("describe model %q: %w", r.Path, err)
	}
	for _, in := range infos {
		if in.Path == r.Path {
			return r, in, nil
		}
	}
	return r, sidecar.ModelInfo{}, errorf(http.StatusNotFound, "model %q (model path %q) is not known", name, r.Path)
}

// TensorMetadata is one input or output in model metadata.
type TensorMetadata struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// ModelMetadata is the model metadata answer.
type ModelMetadata struct {
	Name     string           `json:"name"`
	Versions []string         `json:"versions,omitempty"`
	Platform string           `json:"platform"`
	Inputs   []TensorMetadata `json:"inputs"`
	Outputs  []TensorMetadata `json:"outputs"`

	// ModelPath is the path the name and version resolved to (not in the
	// protocol's answer).
	ModelPath string `json:"-"`
}

// ModelMetadata describes a model from the sidecar's signature: variable
// dimensions are -1; a tensor of unknown rank has an empty shape and one
// the runtime accepts of any type an empty datatype.
func (s *Server) ModelMetadata(ctx context.Context, name, version string) (ModelMetadata, error) {
	r, info, err := s.model(ctx, name, version)
	if err != nil {
		return ModelMetadata{}, err
	}
	return ModelMetadata{
		Name:      name,
		Versions:  r.Versions,
		Platform:  platforms[info.Runtime],
		Inputs:    tensorMetadata(info.Signature.Inputs),
		Outputs:   tensorMetadata(info.Signature.Outputs),
		ModelPath: r.Path,
	}, nil
}

func tensorMetadata(specs []runtimes.TensorSpec) []TensorMetadata {
	out := make([]TensorMetadata, len(specs))
	for i, sp := range specs {
		name := sp.Name
		// TensorFlow's signature key ("x") rather than the graph tensor
		// name ("serving_default_x:0"): the name clients know.
		if len(sp.Aliases) > 0 {
			name = sp.Aliases[0]
		}
		shape := sp.Shape
		if shape == nil {
			shape = []int64{}
		}
		out[i] = TensorMetadata{Name: name, Datatype: DatatypeOf(sp.DType), Shape: shape}
	}
	return out
}

// InferRequest is a decoded inference request.
type InferRequest struct {
	ID           string
	ModelName    string
	ModelVersion string
	Inputs       []tensor.Tensor
	Outputs      []string // requested outputs; none = every output
	// Sequence holds the sequence fields given as request parameters.
	Sequence SequenceParams
	// Client names the caller (its remote host) for the per-client cap
	// on sequences; "" = none.
	Client string

	// binary is what an HTTP request asks of the binary tensor data
	// extension for its outputs.
	binary binaryOutputs
}

// InferResponse is an inference answer.
type InferResponse struct {
	ModelName    string
	ModelVersion string
	ID           string
	Outputs      []tensor.Tensor
	ModelPath    string // the resolved model path (not in the protocol's answer)
	// SequenceID is the sequence's id when the request gave the sequence
	// fields as parameters (the answer's parameters then carry it).
	SequenceID *uint64
	// SequenceIDUnsigned: the gRPC answer gives SequenceID as uint64_param
	// (the request gave it so).
	SequenceIDUnsigned bool
	// SequenceIDString is the request's string sequence_id (Triton's),
	// which the answer gives back instead of SequenceID.
	SequenceIDString *string
}

// Infer runs a request through the sidecar's typed Predict, the call
// runInference makes, as a batch of one entry. Errors are typed for
// StatusOf.
func (s *Server) Infer(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	resp := &InferResponse{ModelName: req.ModelName, ID: req.ID}
	r, err := s.Resolve(ctx, req.ModelName, req.ModelVersion)
	if err != nil {
		return resp, err
	}
	resp.ModelVersion, resp.ModelPath = r.Version, r.Path
	if len(req.Inputs) > s.opts.Limits.MaxTensors {
		return resp, errorf(http.StatusBadRequest, "request has %d inputs, the limit is %d", len(req.Inputs), s.opts.Limits.MaxTensors)
	}
	inputs, err := s.withSequenceInputs(req.Inputs, req.Sequence, req.Client)
	if err != nil {
		return resp, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	results, err := s.getBackend().Predict(ctx, []batch.Entry{{ModelPath: r.Path, Tensors: inputs}})
	if err == nil && len(results) != 1 {
		err = inferr.Errorf(inferr.OutputParsing, "sidecar answered %d results for 1 entry", len(results))
	}
	if err == nil {
		err = results[0].Err
	}
	if err != nil {
		err = fmt.Errorf("model %q version %q (model path %q): %w", req.ModelName, r.Version, r.Path, err)
		if msg := err.Error(); inferr.TypeOf(err) == inferr.InputParsing && (strings.Contains(msg, "DOUBLE") || strings.Contains(msg, "FLOAT")) {
			// The runtime speaks the batch contract's dtype names.
			err = fmt.Errorf("%w (in the protocol's names, FLOAT is FP32 and DOUBLE is FP64)", err)
		}
		return resp, err
	}
	outs := results[0].Tensors
	if req.Sequence.given() {
		outs, resp.SequenceID = takeSequenceID(outs)
		resp.SequenceIDUnsigned = req.Sequence.IDUnsigned
		if req.Sequence.IDString != nil && resp.SequenceID != nil {
			resp.SequenceID, resp.SequenceIDString = nil, req.Sequence.IDString
		}
	}
	if rename := s.outputNames(ctx, s.getBackend(), r.Path); rename != nil {
		for i, t := range outs {
			if n, ok := rename[t.Name]; ok {
				outs[i].Name = n
			}
		}
	}
	if len(req.Outputs) > 0 {
		picked := make([]tensor.Tensor, 0, len(req.Outputs))
		for _, name := range req.Outputs {
			i := slices.IndexFunc(outs, func(t tensor.Tensor) bool { return t.Name == name })
			if i < 0 {
				names := make([]string, len(outs))
				for j, t := range outs {
					names[j] = t.Name
				}
				return resp, errorf(http.StatusBadRequest, "requested output %q is not an output of model %q (outputs: %s)", name, req.ModelName, strings.Join(names, ", "))
			}
			picked = append(picked, outs[i])
		}
		outs = picked
	}
	resp.Outputs = outs
	return resp, nil
}
