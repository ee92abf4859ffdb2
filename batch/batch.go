package batch

import "github.com/inferbid/inferbid/tensor"

// Default limits, used where a Limits field is zero.
const (
	DefaultMaxEntries = 4096
	DefaultMaxTensors = 1024
	// MaxRank bounds the number of dimensions of one tensor; no runtime
	// serves more (TensorFlow's own cap is 254, ONNX models stay far below).
	MaxRank = 64
	// MaxDepth bounds the nesting of the whole document. gjson's validator is
	// recursive; without this bound a few MB of "[" would grow the goroutine
	// stack towards its 1 GB limit, which is a fatal, unrecoverable crash.
	MaxDepth = 256
)

// Limits bound what Parse accepts; zero fields mean defaults. Components
// that hold Limits resolve them once with WithDefaults when they are built.
type Limits struct {
	MaxElements int64 // per tensor; 0 = tensor.DefaultMaxElements
	MaxEntries  int   // entries per batch; 0 = 4096
	MaxTensors  int   // tensors per entry; 0 = 1024
}

// WithDefaults returns l with every zero field set to its default: the one
// place the batch limits' defaults are resolved.
func (l Limits) WithDefaults() Limits {
	if l.MaxElements <= 0 {
		l.MaxElements = tensor.DefaultMaxElements
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxTensors <= 0 {
		l.MaxTensors = DefaultMaxTensors
	}
	return l
}

// Entry is one request entry: a model path and its input tensors, or the error that makes it unrunnable.
type Entry struct {
	ModelPath string
	Tensors   []tensor.Tensor
	Err       error // typed (inferr) per-entry error; when set the entry is not run
}

// Result is the outcome for one entry.
type Result struct {
	ModelPath string
	Tensors   []tensor.Tensor
	Err       error // typed per-entry error
}
