package registry

import (
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
)

// A Tally adds up one model's files against the registry's byte limits:
// heap (MaxModelBytes) bounds the files the runtime holds in memory, mapped
// (MaxMappedModelBytes, when > 0) the files it serves from a memory
// mapping (runtimes.Runtime.MapsFile: the TensorFlow runtime's checkpoint
// data shards, with --map_variables_dir), which need address space and
// disk, not heap, once loaded.
type Tally struct {
	rt                 *runtimes.Runtime
	maxHeap, maxMapped int64
	heap, mapped       int64
}

// NewTally starts a tally of one model's files against the registry's
// limits (a streamed registration checks its declared sizes with one
// before it receives anything).
func (r *Registry) NewTally() *Tally {
	return &Tally{rt: r.rt, maxHeap: r.maxBytes, maxMapped: r.maxMapped}
}

// Add counts one file of size bytes; the error names the file and the cap
// it would pass (INPUT_PARSING).
func (t *Tally) Add(model, name string, size int64) error {
	if size < 0 {
		return inferr.Errorf(inferr.InputParsing, "register model %s: file %q declares %d bytes", inferr.Quote(model), name, size)
	}
	if t.maxMapped > 0 && t.rt != nil && t.rt.MapsFile(name, size) {
		if size > t.maxMapped-t.mapped {
			return inferr.Errorf(inferr.InputParsing, "register model %s: file %q (%d bytes, memory-mapped): the model's mapped files would exceed the limit of %d bytes (--max_mapped_model_bytes)", inferr.Quote(model), name, size, t.maxMapped)
		}
		t.mapped += size
		return nil
	}
	if size > t.maxHeap-t.heap {
		return inferr.Errorf(inferr.InputParsing, "register model %s: file %q declares %d bytes; the model would exceed the limit of %d bytes", inferr.Quote(model), name, size, t.maxHeap)
	}
	t.heap += size
	return nil
}

// Bytes is the total counted so far.
func (t *Tally) Bytes() int64 { return t.heap + t.mapped }
