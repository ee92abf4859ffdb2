package sidecar

import (
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
)

// modelLimits cap one model's bytes: heap bounds the files the runtime
// holds in memory, mapped (when > 0) the files it serves from a memory
// mapping (runtimes.Runtime.MapsFile: the TensorFlow runtime's checkpoint
// data shards, with --map_variables_dir), which need address space and
// disk, not heap, once loaded.
type modelLimits struct {
	rt           *runtimes.Runtime
	heap, mapped int64
}

// tally adds up a model's files against the limits.
type tally struct {
	lim          modelLimits
	heap, mapped int64
}

// add counts one file of size bytes; the error names the file and the cap
// it would pass (INPUT_PARSING).
func (t *tally) add(model, name string, size int64) error {
	if size < 0 {
		return inferr.Errorf(inferr.InputParsing, "register model %s: file %q declares %d bytes", inferr.Quote(model), name, size)
	}
	if t.lim.mapped > 0 && t.lim.rt != nil && t.lim.rt.MapsFile(name, size) {
		if size > t.lim.mapped-t.mapped {
			return inferr.Errorf(inferr.InputParsing, "register model %s: file %q (%d bytes, memory-mapped): the model's mapped files would exceed the limit of %d bytes (--max_mapped_model_bytes)", inferr.Quote(model), name, size, t.lim.mapped)
		}
		t.mapped += size
		return nil
	}
	if size > t.lim.heap-t.heap {
		return inferr.Errorf(inferr.InputParsing, "register model %s: file %q declares %d bytes; the model would exceed the limit of %d bytes", inferr.Quote(model), name, size, t.lim.heap)
	}
	t.heap += size
	return nil
}

func (r *registry) byteLimits() modelLimits {
	return modelLimits{rt: r.rt, heap: r.maxBytes, mapped: r.maxMapped}
}
