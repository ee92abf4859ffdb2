package driver

import (
	"context"
	"errors"

	"github.com/inferbid/inferbid/tensor"
)

// Sentinel errors a backend wraps (with %w) so that the portable layer can
// give the right error type. Any other error from Load or Predict is the
// runtime's own failure (MODEL_EXECUTION); a context error stays a context
// error (the call's deadline or cancellation).
var (
	// ErrInvalidInput: the inputs passed the signature checks but the model
	// cannot take them (for example dimensions that disagree between two
	// inputs, which no signature can express). INPUT_PARSING.
	ErrInvalidInput = errors.New("invalid input")
	// ErrInvalidOutput: the model ran but produced something that cannot be
	// returned (an unsupported element type, a non-tensor value, too many
	// elements). OUTPUT_PARSING.
	ErrInvalidOutput = errors.New("invalid output")
)

// Config.OutputNames values.
const (
	OutputNamesGraph        = "graph"
	OutputNamesSignatureKey = "signature_key"
)

// Config is what the runtimes read of the sidecar's runtime config (the
// JSON of INFERENCE_SIDECAR_RUNTIME_CONFIG): the rest of that JSON, how the
// sidecar serves the models (dynamic batching, sequences, shared state,
// cpuset), is package sidecar/registry's Settings and package sidecar's
// RuntimeConfig. The zero value means defaults everywhere.
type Config struct {
	// NumInteropThreads and NumIntraopThreads size the runtime's thread
	// pools; 0 lets the runtime choose.
	NumInteropThreads int `json:"num_interop_threads,omitempty"`
	NumIntraopThreads int `json:"num_intraop_threads,omitempty"`
	// FusedMultiplyAdd lets the TensorFlow runtime compute float32 MatMul
	// and Conv2D with fused multiply-adds (one rounding per step): about
	// 1.5x faster at large batches on AVX-512 CPUs, much slower elsewhere
	// (a Go loop gives the same bits). Results then differ from
	// TensorFlow's default CPU kernels, which multiply then add, in the
	// last bits (TensorFlow's own oneDNN builds also fuse); false, the
	// default, keeps TensorFlow's rounding. The ONNX and PyTorch runtimes
	// ignore it: they already use fused multiply-adds where the CPU has
	// them.
	FusedMultiplyAdd bool `json:"fused_multiply_add,omitempty"`
	// OutputNames is how the TensorFlow runtime names output tensors in
	// answers: OutputNamesGraph ("" too, B&A's) the graph tensor
	// ("pctr:0", "StatefulPartitionedCall:0", which a re-export may
	// change), OutputNamesSignatureKey the signature's output key ("pctr"),
	// stable across re-exports. The signature (GetModels, /v1/models)
	// lists both either way: the graph name, with the key as its alias.
	// Other runtimes' names are their models' own and stay.
	OutputNames string `json:"output_names,omitempty"`
	// ModuleName names the runtime the config is meant for ("tensorflow",
	// "pytorch", "onnx"); when set it must match the sidecar's runtime.
	ModuleName string `json:"module_name,omitempty"`
	// ModelResetProbability is the chance per inference that the state of
	// a model served with shared state (SharedStateModel; the sidecar's
	// shared_state_models) is restored from
	// its checkpoint first: defence in depth for that opt-out. Every other
	// model keeps no state between calls, so there is nothing to reset.
	// The default, 0, is B&A's.
	ModelResetProbability float64 `json:"model_reset_probability,omitempty"`
	// LibraryPath points a runtime at its native library (ONNX Runtime);
	// empty means the runtime's default location.
	LibraryPath string `json:"library_path,omitempty"`
	// MaxTensorElements bounds the element count of any one input tensor;
	// 0 means tensor.DefaultMaxElements.
	MaxTensorElements int64 `json:"max_tensor_elements,omitempty"`
	// MapVariablesDir, when set, lets the TensorFlow runtime serve
	// checkpoint tensors from a read-only memory mapping instead of heap
	// copies: of the received data shard files themselves (LoadDisk), or
	// of a copy of the shards written to this directory and unlinked at
	// once (Load from memory). The sidecar sets it from its flags
	// (--map_variables_dir); it is not part of the runtime config JSON.
	// Other runtimes ignore it.
	MapVariablesDir string `json:"-"`
	// MapVariablesMinBytes is the size from which a data shard is mapped
	// (smaller ones are copied as before); 0 maps every shard.
	MapVariablesMinBytes int64 `json:"-"`
	// MapVariablesVerifyCRC makes the TensorFlow runtime check the CRC32C
	// of the tensors it serves from a received shard file mapped in place
	// (a streamed registration): that reads every page of the file at
	// load. Off, those files are trusted to the SHA-256 the host checked
	// them against (--map_variables_verify_crc).
	MapVariablesVerifyCRC bool `json:"-"`
	// MapVariablesGatherFromMapping makes the TensorFlow runtime's
	// gathers over a mapped table read rows through the mapping (faster
	// for rows read again, but every fault maps the page cache around the
	// row into the process: RSS grows to most of the table) instead of
	// with pread from its file (--map_variables_gather_from_mapping).
	MapVariablesGatherFromMapping bool `json:"-"`
	// ExternalVariablesCacheBytes bounds the local cache of rows each
	// store of external variables (LoadOptions.ExternalVariables) keeps;
	// 0 means the default (64 MiB), negative no cache. The sidecar sets it
	// from its flags (--external_variables_cache_bytes). Only TensorFlow
	// serves external variables.
	ExternalVariablesCacheBytes int64 `json:"-"`
}

// Files are the files of one model: slash-separated paths relative to the
// model's root (e.g. "saved_model.pb", "variables/variables.index") mapped to
// their contents. A single-file model has one entry.
type Files map[string][]byte

// Size is the total size of the files in bytes.
func (f Files) Size() int64 {
	var n int64
	for _, b := range f {
		n += int64(len(b))
	}
	return n
}

// Signature describes what a model takes and returns.
type Signature struct {
	Inputs  []TensorSpec
	Outputs []TensorSpec
	// Positional models take their inputs by position and ignore names
	// (PyTorch's forward()). Inputs may then be empty (unknown).
	Positional bool
}

// TensorSpec describes one input or output of a model.
type TensorSpec struct {
	// Name is the canonical name: the graph tensor name for TensorFlow
	// ("serving_default_x:0"), the graph input name for ONNX.
	Name string
	// Aliases are other names accepted for an input (TensorFlow's
	// signature key, "x").
	Aliases []string
	// DType is the element type; Invalid means any.
	DType tensor.DType
	// Shape is nil when even the rank is unknown; -1 marks an unknown
	// dimension.
	Shape []int64
	// Optional inputs may be left out (TensorFlow PlaceholderWithDefault,
	// the state inputs of ONNX and PyTorch stateful models); a positional
	// model then takes its required inputs in order.
	Optional bool
}

// Backend is what a runtime implements: it loads models from bytes.
type Backend interface {
	// Load parses, validates and prepares a model. files is never empty.
	// It must not keep a reference to files beyond what the model needs.
	Load(ctx context.Context, files Files) (Model, error)
	Close() error
}

// Model is one loaded model of a backend. Predict is called concurrently
// from many goroutines; Close is called once, after every Predict has
// returned.
type Model interface {
	// Signature is called once, right after Load.
	Signature() Signature
	// Predict runs one request. The portable layer has already checked
	// inputs against Signature(): each is a valid tensor (data of a known
	// dtype, as many elements as its shape, within the element cap) of the
	// declared dtype and shape, aligned with Signature().Inputs (for
	// positional models: as the caller gave them); an absent optional input
	// has nil Data. inputs may be the caller's own slice: Predict must not
	// modify it. Every output must be a valid tensor with a name; the
	// portable layer checks that too.
	Predict(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error)
	Close() error
}

// WarmUpRunner is implemented by models that need the warm-up request run
// more than once before they are fast (TorchScript's profiling executor).
type WarmUpRunner interface {
	WarmUpRuns() int
}

// StatefulModel is implemented by models that have state: a TensorFlow
// graph that assigns variables, an ONNX or PyTorch model with state inputs.
// Within one call the rows of a batch could meet through that state, so
// such a model's calls are never merged with others. Outside a sequence
// (and without SharedStateModel's opt-out) no call's state reaches another
// call.
type StatefulModel interface {
	Stateful() bool
}

// SharedStateModel is implemented by stateful models that can run every
// call outside a sequence on one state shared by all calls, as B&A's
// TensorFlow sidecar does, instead of a fresh state per call (the runtime
// config's shared_state_models opt-out).
type SharedStateModel interface {
	// ShareState switches the model to one shared state; it is called once,
	// before the model's first call. It fails for a model without state.
	ShareState() error
}

// SequenceModel is implemented by stateful models that can keep one state
// per client sequence (OpenVINO Model Server's stateful models) instead of
// one shared state.
type SequenceModel interface {
	// NewSequenceState returns the state a new sequence starts from: the
	// model's state as the restore op sets it. It shares nothing writable
	// with any other state, so no sequence sees another's.
	NewSequenceState() (any, error)
	// PredictSequence runs one request on a sequence's state, as Predict
	// does on the shared state, and leaves the updated state in st. The
	// caller never runs two calls with the same st at once.
	PredictSequence(ctx context.Context, st any, inputs []tensor.Tensor) ([]tensor.Tensor, error)
}

// DiskFiles are the files of one model on local disk: the same
// slash-separated model paths as Files, each mapped to the local file that
// holds its content. The files stay in place until Load returns. They are
// read-only: in the sidecar a file may be a hard link to the sidecar
// supervisor's replay copy (a registration by path), so a write would
// change what a replay brings back (the replay's SHA-256 check would then
// refuse it).
type DiskFiles map[string]string

// DiskLoader is a Backend that loads a model from its files on disk without
// reading them into memory first (ONNX Runtime reads a model from its path;
// the TensorFlow runtime maps large checkpoint shards in place).
// A Backend that is not one gets the files read into Files.
type DiskLoader interface {
	// LoadDisk is Load from files on disk; files is never empty. The
	// model must not use the files' paths once LoadDisk has returned:
	// they are removed (unlinked). It may keep files it opened or
	// mapped read-only (the inode lives on until it closes them), so the
	// caller must never write a file in place once it is handed over: it
	// may only unlink or rename it. (The sidecar hands over files it
	// received into its own private directory and only removes them.)
	LoadDisk(ctx context.Context, files DiskFiles) (Model, error)
}
