package tensorflow

import (
	"errors"
	"fmt"
)

// Load errors. Backend.Load wraps them with the file or node at fault;
// test with errors.Is.
var (
	// ErrCorruptModel: saved_model.pb is missing, truncated or malformed.
	ErrCorruptModel = errors.New("corrupt SavedModel")
	// ErrCorruptCheckpoint: the variables bundle is missing, truncated or
	// malformed.
	ErrCorruptCheckpoint = errors.New("corrupt checkpoint")
	// ErrChecksum: a checkpoint tensor does not match its CRC32C.
	ErrChecksum = errors.New("checkpoint checksum mismatch")
	// ErrNoServeGraph: no MetaGraph has exactly the tag set {serve}.
	ErrNoServeGraph = errors.New("no serve MetaGraph")
	// ErrNoSignature: the serve MetaGraph has no serving_default signature.
	ErrNoSignature = errors.New("no serving_default signature")
	// ErrForbiddenOp: the graph holds an op that writes files or summaries.
	ErrForbiddenOp = errors.New("forbidden op")
	// ErrUnsupportedOp: an op the serving signature needs has no kernel.
	ErrUnsupportedOp = errors.New("unsupported op")
	// ErrBadGraph: the graph is inconsistent (dangling input, cycle, bad
	// attribute, ...).
	ErrBadGraph = errors.New("invalid graph")
)

// OpError is an error of one node of the graph.
type OpError struct {
	Op   string // op type, e.g. "MatMul"
	Node string // node name, with the function it is in
	Err  error
}

func (e *OpError) Error() string { return fmt.Sprintf("op %s (node %s): %v", e.Op, e.Node, e.Err) }
func (e *OpError) Unwrap() error { return e.Err }
