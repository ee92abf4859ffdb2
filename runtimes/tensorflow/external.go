package tensorflow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/varstore"
)

// External variables (issue 32). A checkpoint variable that a model's
// registration names in external_variables (driver.LoadOptions) is not
// read from the checkpoint: RestoreV2 gives it a placeholder tensor of the
// checkpoint's dtype and shape holding no data (extTable), and the serving
// program's gathers on it (GatherV2 on axis 0 with batch_dims 0 over a
// ReadVariableOp or a TF1 VariableV2 and its Identity, ResourceGather:
// every form tf.nn.embedding_lookup and Keras' Embedding produce) are
// replaced by a kernel that checks the indices as the in-memory gather
// does, then fetches the rows from the store (varstore.Store.Rows: the
// batch's unique ids, the local cache first, one pipelined round trip per
// shard, under the call's context) straight into the output tensor. Any
// other use of the variable (a MatMul on it, an assignment, a gather on
// another axis, a read inside an If or While, a read fetched as an
// output) is refused at load, naming the op and node. Rows are the
// checkpoint's little-endian bytes, so the answers are bit-identical to
// the in-memory model's.

// extTable is a variable served from a store.
type extTable struct {
	name     string // the checkpoint key, as external_variables names it
	store    *varstore.Store
	checksum string
	dt       dtype
	shape    []int64 // the checkpoint's: rows x the row's shape
	rowBytes int
	restored bool // the restore op read it
}

// externalVars are a load's external variables by checkpoint key; nil when
// it has none.
type externalVars map[string]*extTable

// stores are a backend's stores, one per URL, shared by every model that
// names it: a cache and a connection pool per cluster, not per model.
type stores struct {
	mu sync.Mutex
	m  map[string]*varstore.Store
}

func (s *stores) open(url string, cacheBytes int64) (*varstore.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[url]; ok {
		return st, nil
	}
	opts := varstore.Options{CacheBytes: cacheBytes} // 0: DefaultExternalCacheBytes
	if cacheBytes < 0 {
		opts = varstore.Options{CacheRows: -1}
	}
	st, err := varstore.Open(url, opts)
	if err != nil {
		return nil, err
	}
	if s.m == nil {
		s.m = map[string]*varstore.Store{}
	}
	s.m[url] = st
	return st, nil
}

func (s *stores) stats() []driver.StoreStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]driver.StoreStats, 0, len(s.m))
	for _, url := range sortedKeys(s.m) {
		st := s.m[url].Stats()
		out = append(out, driver.StoreStats{URL: url, Hits: st.Hits, Misses: st.Misses})
	}
	return out
}

func (s *stores) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for url, st := range s.m {
		errs = append(errs, st.Close())
		delete(s.m, url)
	}
	return errors.Join(errs...)
}

// DefaultExternalCacheBytes bounds each store's row cache when
// driver.Config.ExternalVariablesCacheBytes is 0.
const DefaultExternalCacheBytes = varstore.DefaultCacheBytes

var _ driver.ExternalVariableLoader = (*Backend)(nil)

// ExternalVariableStats (driver.ExternalVariableLoader) reports each
// store's cache hits and misses since the backend opened it.
func (b *Backend) ExternalVariableStats() []driver.StoreStats { return b.stores.stats() }

// externalVarsOf opens the stores the load's options name.
func (b *Backend) externalVarsOf(ctx context.Context) (externalVars, error) {
	o := driver.LoadOptionsFrom(ctx)
	if len(o.ExternalVariables) == 0 {
		return nil, nil
	}
	if o.Checksum == "" {
		return nil, errors.New("external_variables: the registration carries no model checksum (the key prefix of the model's rows in the store)")
	}
	if !littleEndian {
		return nil, errors.New("external_variables: rows are little-endian bytes; this host is big-endian")
	}
	ext := externalVars{}
	names := make([]string, 0, len(o.ExternalVariables))
	for name := range o.ExternalVariables {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		url := o.ExternalVariables[name]
		st, err := b.stores.open(url, b.cfg.ExternalVariablesCacheBytes)
		if err != nil {
			return nil, fmt.Errorf("external_variables[%q]: %w", name, err)
		}
		ext[name] = &extTable{name: name, store: st, checksum: o.Checksum}
	}
	return ext, nil
}

// placeholder is what RestoreV2 gives for an external variable: its
// dtype and shape, no data.
func (x *extTable) placeholder(e *cpb.BundleEntryProto) (*dense, error) {
	if _, err := gatherFunc(e.Dtype, dtInt64); err != nil {
		return nil, fmt.Errorf("external variable %q: %v (want a numeric table)", x.name, err)
	}
	shape, err := shapeWithin(e.Shape, maxMappedElements)
	if err != nil {
		return nil, fmt.Errorf("%w: external variable %q: %v", ErrCorruptCheckpoint, x.name, err)
	}
	if len(shape) == 0 || shape[0] <= 0 {
		return nil, fmt.Errorf("external variable %q has shape %v: want a table of rows (rank >= 1)", x.name, shape)
	}
	// A row is gathered into the heap as any tensor: bounded as the
	// model's own tensors are (the table itself is bounded only by the
	// store), so that an index cannot make one lookup allocate terabytes.
	if n := int64(numElems(shape[1:])); n > maxModelElements {
		return nil, fmt.Errorf("%w: external variable %q has shape %v: a row of %d elements (more than %d)", ErrCorruptCheckpoint, x.name, shape, n, maxModelElements)
	}
	row := int64(elemSize(e.Dtype)) * int64(numElems(shape[1:]))
	if row*shape[0] != e.Size {
		return nil, fmt.Errorf("%w: external variable %q: %d bytes in the checkpoint for shape %v", ErrCorruptCheckpoint, x.name, e.Size, shape)
	}
	x.dt, x.shape, x.rowBytes, x.restored = e.Dtype, shape, int(row), true
	return &dense{dt: e.Dtype, shape: shape, ext: x, restored: true}, nil
}

// checkRestored fails when an external variable is not one the restore op
// read: not a checkpoint variable of the model.
func (ext externalVars) checkRestored() error {
	for _, name := range sortedKeys(ext) {
		if !ext[name].restored {
			return fmt.Errorf("external_variables names %q, which the model does not restore from its checkpoint (inferctl variables lists the checkpoint's variables)", name)
		}
	}
	return nil
}

// extOf returns the external table whose placeholder v holds, if any.
func extOf(v *variable) *extTable {
	if v == nil || v.value == nil {
		return nil
	}
	return v.value.ext
}

// refuseExternal is the load error for a use of an external variable other
// than a gather.
func refuseExternal(st *step, x *extTable, how string) error {
	return &OpError{Op: st.op, Node: st.node, Err: fmt.Errorf("variable %q is served from the store %s (external_variables), and only gathers may read it (GatherV2 on axis 0, ResourceGather, embedding_lookup); %s", x.name, x.store.URL(), how)}
}

// externalGathers rewrites p's gathers on external variables into store
// lookups and refuses any other use of them. It runs before p.finish.
func externalGathers(p *program) error {
	ext := map[int]*extTable{} // slots holding an external variable's value
	for i := range p.steps {
		st := &p.steps[i]
		x := extOf(st.usesVar)
		if x == nil {
			continue
		}
		switch st.op {
		case "ReadVariableOp", "VariableV2", "Variable":
			for _, o := range st.outs {
				ext[o] = x
			}
		case "ResourceGather":
			if st.deadAware {
				return refuseExternal(st, x, "this gather runs under a TF1 tf.cond (Switch/Merge)")
			}
			if len(st.ins) != 2 || len(st.outs) != 1 {
				return refuseExternal(st, x, "this one has an unexpected form")
			}
			x.rewrite(st, st.ins[1], st.outs[0])
		default:
			return refuseExternal(st, x, "this op "+useVerb(st))
		}
	}
	for i := range p.steps {
		st := &p.steps[i]
		for j, in := range st.ins {
			x := ext[in]
			if x == nil {
				continue
			}
			if st.op != "GatherV2" || j != 0 {
				return refuseExternal(st, x, fmt.Sprintf("this op takes it as input %d", j))
			}
			if st.deadAware {
				return refuseExternal(st, x, "this gather runs under a TF1 tf.cond (Switch/Merge)")
			}
			if st.batchDims != 0 {
				return refuseExternal(st, x, fmt.Sprintf("this gather has batch_dims %d", st.batchDims))
			}
			if len(st.ins) != 3 || len(st.outs) != 1 || ext[st.ins[1]] != nil {
				return refuseExternal(st, x, "this gather has an unexpected form")
			}
			ax := p.consts[st.ins[2]]
			a, err := scalarIntOrErr(ax)
			if err != nil || (a != 0 && a != -int64(len(x.shape))) {
				return refuseExternal(st, x, "this gather's axis is not a constant 0")
			}
			x.rewrite(st, st.ins[1], st.outs[0])
			break
		}
	}
	for _, f := range p.fetches {
		if x := ext[f]; x != nil {
			return fmt.Errorf("variable %q is served from the store %s (external_variables): serving returns the table itself as an output; only gathers may read it", x.name, x.store.URL())
		}
	}
	for i := range p.steps {
		for _, sub := range p.steps[i].subs {
			if err := refuseInSub(sub); err != nil {
				return err
			}
		}
	}
	return nil
}

func useVerb(st *step) string {
	if st.writes != nil {
		return "assigns it"
	}
	return "reads it"
}

func scalarIntOrErr(t *dense) (int64, error) {
	if t == nil {
		return 0, errors.New("not a constant")
	}
	return scalarInt(t)
}

// refuseInSub refuses any use of an external variable inside an If or
// While (its reads there cannot be told apart from other uses).
func refuseInSub(p *program) error {
	for i := range p.steps {
		st := &p.steps[i]
		if x := extOf(st.usesVar); x != nil {
			return refuseExternal(st, x, "this op uses it inside an If or While")
		}
		for _, sub := range st.subs {
			if err := refuseInSub(sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// rewrite makes st a store lookup of the rows idx names, into out.
func (x *extTable) rewrite(st *step, idx, out int) {
	st.pure, st.readVar, st.usesVar, st.fuse = false, nil, nil, nil
	st.run = func([]*dense) error {
		return fmt.Errorf("variable %q is served from the store %s: it cannot be read at load", x.name, x.store.URL())
	}
	st.runCtx = func(ctx context.Context, v []*dense) error { return x.gather(ctx, v[out], v[idx]) }
}

// gather is GatherV2(table, indices, axis 0) with the rows from the store.
func (x *extTable) gather(ctx context.Context, o, indices *dense) error {
	idx, err := intsOf(indices, o.scratch2)
	if err != nil {
		return err
	}
	o.scratch2 = idx
	limit := x.shape[0]
	for _, i := range idx {
		if i < 0 || i >= limit {
			return fmt.Errorf("index %d is out of range [0, %d)", i, limit) // as gather's
		}
	}
	shape := append(o.scratch[:0], indices.shape...)
	shape = append(shape, x.shape[1:]...)
	o.scratch = shape
	return x.store.Rows(ctx, x.checksum, x.name, idx, x.rowBytes, rowsBuffer(o, x.dt, shape))
}

// rowsBuffer allocates o's data for dt and shape and returns its bytes.
func rowsBuffer(o *dense, dt dtype, shape []int64) []byte {
	switch dt {
	case dtFloat:
		return bytesOf(alloc[float32](o, dt, shape))
	case dtDouble:
		return bytesOf(alloc[float64](o, dt, shape))
	case dtInt32:
		return bytesOf(alloc[int32](o, dt, shape))
	case dtInt64:
		return bytesOf(alloc[int64](o, dt, shape))
	case dtInt16:
		return bytesOf(alloc[int16](o, dt, shape))
	case dtInt8:
		return bytesOf(alloc[int8](o, dt, shape))
	default: // dtUint8: placeholder allows only gatherFunc's dtypes
		return alloc[uint8](o, dt, shape)
	}
}
