package jsbridge

import "time"

// Hooks observe the pool for metrics. They are called on the calling
// goroutine, after the event, and must be cheap and safe for concurrent use.
type Hooks struct {
	// OnCall follows every call into JS (CallJSON, Do, each call of a
	// CallJSONGroup that ran).
	OnCall func(CallEvent)
	// OnInference follows every runInference.
	OnInference func(*InferenceEvent)
	// OnModelPaths follows every getModelPaths that asked the sidecar.
	OnModelPaths func(err error)
}

// CallEvent describes one call into JS.
type CallEvent struct {
	Func     string
	Duration time.Duration
	Err      error // nil, ErrDeadline, *ScriptError, ...
}

// InferenceEvent describes one runInference call. The event must not be kept
// after the hook returns.
type InferenceEvent struct {
	Duration      time.Duration
	RequestBytes  int  // the JSON argument's size; 0 for an object argument
	ObjectArg     bool // the argument was a JS object
	ResponseBytes int
	// Err is the whole-batch error (typed, see inferr.TypeOf) or nil.
	Err error
	// Entries are the per-entry outcomes (empty on a whole-batch error).
	Entries []EntryEvent
}

// EntryEvent is the outcome of one batch entry.
type EntryEvent struct {
	ModelPath string
	// BatchSize is the first dimension of the entry's first tensor (1 for a
	// scalar, 0 when the entry could not be parsed).
	BatchSize int64
	Err       error // typed per-entry error or nil
}
