package tfsave

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	functionpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opdefpb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	protopb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/tensor"
)

// This file is a deliberately small, independent graph interpreter used to
// check that what the writer produces computes what it should: it parses
// the files with the graft protos, restores variables by running the
// SaverDef's restore op against the checkpoint (read with goleveldb), and
// evaluates a signature, following function calls through the library and
// resolving "node:out_arg:index" references with the model's own
// stripped_op_list. Values are float64 or int64 whatever the dtype.

type tval struct {
	dtype typespb.DataType
	shape []int64
	f     []float64
	i     []int64
	s     []string
	res   string // resource or ref: the variable's name
}

func (v *tval) isInt() bool {
	switch v.dtype {
	case typespb.DataType_DT_INT8, typespb.DataType_DT_INT16, typespb.DataType_DT_INT32, typespb.DataType_DT_INT64, typespb.DataType_DT_BOOL:
		return true
	}
	return false
}

func (v *tval) n() int64 {
	n := int64(1)
	for _, d := range v.shape {
		n *= d
	}
	return n
}

type evalModel struct {
	t      *testing.T
	files  map[string][]byte
	meta   *protopb.MetaGraphDef
	nodes  map[string]*nodepb.NodeDef
	funcs  map[string]*functionpb.FunctionDef
	ops    map[string]*opdefpb.OpDef
	vars   map[string]*tval
	ranOps map[string]int // op type -> times executed (what the model really used)
}

func loadEval(t *testing.T, files map[string][]byte) *evalModel {
	t.Helper()
	sm := savedModelOf(t, files)
	m := &evalModel{t: t, files: files, meta: sm.MetaGraphs[0], nodes: map[string]*nodepb.NodeDef{},
		funcs: map[string]*functionpb.FunctionDef{}, ops: map[string]*opdefpb.OpDef{}, vars: map[string]*tval{}, ranOps: map[string]int{}}
	for _, n := range m.meta.GraphDef.Node {
		if m.nodes[n.Name] != nil {
			t.Fatalf("node %q twice", n.Name)
		}
		m.nodes[n.Name] = n
	}
	for _, f := range m.meta.GraphDef.GetLibrary().GetFunction() {
		m.funcs[f.Signature.Name] = f
	}
	for _, o := range m.meta.MetaInfoDef.GetStrippedOpList().GetOp() {
		m.ops[o.Name] = o
	}
	if sd := m.meta.SaverDef; sd != nil {
		m.runMain(map[string]*tval{sd.FilenameTensorName: {dtype: typespb.DataType_DT_STRING, s: []string{"variables/variables"}}}, nil, []string{sd.RestoreOpName})
	}
	return m
}

// predict runs a signature: inputs by signature key, outputs by key.
func (m *evalModel) predict(sigKey string, inputs map[string]*tval) map[string]*tval {
	m.t.Helper()
	sig := m.meta.SignatureDef[sigKey]
	if sig == nil {
		m.t.Fatalf("no signature %q", sigKey)
	}
	feeds := map[string]*tval{}
	for k, v := range inputs {
		ti := sig.Inputs[k]
		if ti == nil {
			m.t.Fatalf("signature has no input %q", k)
		}
		if ti.Dtype != v.dtype {
			m.t.Fatalf("input %q: signature dtype %s, fed %s", k, ti.Dtype, v.dtype)
		}
		feeds[ti.GetName()] = v
	}
	keys := sortedKeys(sig.Outputs)
	fetch := make([]string, len(keys))
	for i, k := range keys {
		fetch[i] = sig.Outputs[k].GetName()
	}
	vals := m.runMain(feeds, fetch, nil)
	out := map[string]*tval{}
	for i, k := range keys {
		if vals[i].dtype != sig.Outputs[k].Dtype {
			m.t.Errorf("output %q: dtype %s, signature says %s", k, vals[i].dtype, sig.Outputs[k].Dtype)
		}
		out[k] = vals[i]
	}
	return out
}

// scope evaluates nodes of one graph or function body.
type scope struct {
	m        *evalModel
	nodes    map[string]*nodepb.NodeDef
	args     map[string]*tval // function arguments
	feeds    map[string]*tval // main graph feeds by "node:i"
	done     map[string][]*tval
	inFunc   bool
	visiting map[string]bool
}

func (m *evalModel) runMain(feeds map[string]*tval, fetch, targets []string) []*tval {
	s := &scope{m: m, nodes: m.nodes, feeds: feeds, done: map[string][]*tval{}, visiting: map[string]bool{}}
	for _, tg := range targets {
		s.node(tg)
	}
	out := make([]*tval, len(fetch))
	for i, f := range fetch {
		out[i] = s.ref(f)
	}
	return out
}

func (s *scope) fatalf(format string, args ...any) {
	s.m.t.Helper()
	s.m.t.Fatalf(format, args...)
}

// ref resolves an input reference: "^x" (run x), "arg", "node", "node:i"
// (main graph), "node:out_arg:i" (function bodies).
func (s *scope) ref(r string) *tval {
	if c, ok := strings.CutPrefix(r, "^"); ok {
		s.node(c)
		return nil
	}
	parts := strings.Split(r, ":")
	if s.inFunc {
		if len(parts) == 1 {
			v, ok := s.args[r]
			if !ok {
				s.fatalf("function body refers to %q: neither an argument nor node:out_arg:index", r)
			}
			return v
		}
		if len(parts) != 3 {
			s.fatalf("function body reference %q is not node:out_arg:index", r)
		}
		nd := s.nodes[parts[0]]
		if nd == nil {
			s.fatalf("function body refers to unknown node %q", parts[0])
		}
		op := s.m.ops[nd.Op]
		if op == nil {
			s.fatalf("op %s is missing from stripped_op_list", nd.Op)
		}
		flat, found := 0, false
		for _, a := range op.OutputArg {
			if a.Name == parts[1] {
				found = true
				break
			}
			flat += argLen(nd, a)
		}
		if !found {
			s.fatalf("%q: op %s has no output arg %q", r, nd.Op, parts[1])
		}
		var k int
		fmt.Sscan(parts[2], &k)
		return s.node(parts[0])[flat+k]
	}
	name, idx := r, 0
	if len(parts) == 2 {
		name = parts[0]
		fmt.Sscan(parts[1], &idx)
	} else if len(parts) != 1 {
		s.fatalf("main graph reference %q", r)
	}
	if v, ok := s.feeds[name+":"+fmt.Sprint(idx)]; ok {
		return v
	}
	outs := s.node(name)
	if idx >= len(outs) {
		s.fatalf("%q: node has %d outputs", r, len(outs))
	}
	return outs[idx]
}

func argLen(nd *nodepb.NodeDef, a *opdefpb.OpDef_ArgDef) int {
	switch {
	case a.NumberAttr != "":
		return int(nd.Attr[a.NumberAttr].GetI())
	case a.TypeListAttr != "":
		return len(nd.Attr[a.TypeListAttr].GetList().GetType())
	}
	return 1
}

func (s *scope) node(name string) []*tval {
	if v, ok := s.done[name]; ok {
		return v
	}
	nd := s.nodes[name]
	if nd == nil {
		s.fatalf("unknown node %q", name)
	}
	if s.visiting[name] {
		s.fatalf("cycle at %q", name)
	}
	s.visiting[name] = true
	var in []*tval
	for _, r := range nd.Input {
		if v := s.ref(r); !strings.HasPrefix(r, "^") {
			in = append(in, v)
		}
	}
	if s.m.ops[nd.Op] == nil {
		s.fatalf("node %q: op %s is missing from stripped_op_list", name, nd.Op)
	}
	s.m.ranOps[nd.Op]++
	out := s.m.exec(s, nd, in)
	s.done[name] = out
	return out
}

func (m *evalModel) exec(s *scope, nd *nodepb.NodeDef, in []*tval) []*tval {
	t := m.t
	t.Helper()
	attr := nd.Attr
	one := func(v *tval) []*tval { return []*tval{v} }
	switch nd.Op {
	case "NoOp", "SaveV2", "MergeV2Checkpoints":
		return nil
	case "Placeholder":
		t.Fatalf("placeholder %q not fed", nd.Name)
	case "PlaceholderWithDefault", "Identity":
		if v := in[0]; v.dtype > 100 { // a TF1 ref: Identity reads the variable
			if m.vars[v.res] == nil {
				t.Fatalf("%s: variable %q read before it was restored", nd.Name, v.res)
			}
			return one(m.vars[v.res])
		}
		return one(in[0])
	case "Const":
		return one(decodeConst(t, attr["value"].GetTensor()))
	case "VarHandleOp":
		name := nd.Name
		if sn := string(attr["shared_name"].GetS()); sn != "" {
			name = sn
		}
		return one(&tval{dtype: typespb.DataType_DT_RESOURCE, res: name})
	case "VariableV2":
		return one(&tval{dtype: attr["dtype"].GetType() + 100, res: nd.Name})
	case "ReadVariableOp":
		v := m.vars[in[0].res]
		if v == nil {
			t.Fatalf("%s: variable %q read before it was restored", nd.Name, in[0].res)
		}
		return one(v)
	case "AssignVariableOp", "Assign":
		m.vars[in[0].res] = in[1]
		return one(in[0])
	case "AssignAddVariableOp":
		old := m.vars[in[0].res]
		nv := &tval{dtype: old.dtype, shape: old.shape, i: append([]int64{}, old.i...), f: append([]float64{}, old.f...)}
		for k := range nv.i {
			nv.i[k] += in[1].i[k%len(in[1].i)]
		}
		for k := range nv.f {
			nv.f[k] += in[1].f[k%len(in[1].f)]
		}
		m.vars[in[0].res] = nv
		return nil
	case "RestoreV2":
		return m.restore(in[0].s[0], in[1].s, attr["dtypes"].GetList().GetType())
	case "MatMul":
		a, b := in[0], in[1]
		r, k, c := a.shape[0], a.shape[1], b.shape[1]
		if b.shape[0] != k {
			t.Fatalf("%s: MatMul %v x %v", nd.Name, a.shape, b.shape)
		}
		out := &tval{dtype: a.dtype, shape: []int64{r, c}, f: make([]float64, r*c)}
		for i := int64(0); i < r; i++ {
			for j := int64(0); j < c; j++ {
				var acc float64
				for x := int64(0); x < k; x++ {
					acc += a.f[i*k+x] * b.f[x*c+j]
				}
				out.f[i*c+j] = acc
			}
		}
		return one(out)
	case "BiasAdd", "AddV2", "Mul":
		a, b := in[0], in[1]
		out := &tval{dtype: a.dtype, shape: a.shape, f: make([]float64, len(a.f))}
		if len(b.f) > len(a.f) {
			t.Fatalf("%s: broadcast of %v onto %v unsupported here", nd.Name, b.shape, a.shape)
		}
		for k := range a.f {
			bv := b.f[k%len(b.f)]
			if nd.Op == "Mul" {
				out.f[k] = a.f[k] * bv
			} else {
				out.f[k] = a.f[k] + bv
			}
		}
		return one(out)
	case "Relu", "Sigmoid":
		out := &tval{dtype: in[0].dtype, shape: in[0].shape, f: make([]float64, len(in[0].f))}
		for k, x := range in[0].f {
			if nd.Op == "Relu" {
				out.f[k] = math.Max(x, 0)
			} else {
				out.f[k] = 1 / (1 + math.Exp(-x))
			}
		}
		return one(out)
	case "Cast":
		v := in[0]
		out := &tval{dtype: attr["DstT"].GetType(), shape: v.shape}
		if out.isInt() {
			t.Fatalf("%s: Cast to int unsupported here", nd.Name)
		}
		out.f = append([]float64{}, v.f...)
		for _, x := range v.i {
			out.f = append(out.f, float64(x))
		}
		return one(out)
	case "Reshape":
		v := in[0]
		shape := append([]int64{}, in[1].i...)
		known, unknown := int64(1), -1
		for k, d := range shape {
			if d < 0 {
				unknown = k
			} else {
				known *= d
			}
		}
		if unknown >= 0 {
			shape[unknown] = v.n() / known
		}
		return one(&tval{dtype: v.dtype, shape: shape, f: v.f, i: v.i})
	case "Squeeze":
		v := in[0]
		var shape []int64
		drop := map[int64]bool{}
		for _, d := range attr["squeeze_dims"].GetList().GetI() {
			drop[d] = true
		}
		for k, d := range v.shape {
			if !(drop[int64(k)] && d == 1) {
				shape = append(shape, d)
			}
		}
		return one(&tval{dtype: v.dtype, shape: shape, f: v.f, i: v.i})
	case "GatherV2", "ResourceGather":
		params, ids := in[0], in[1]
		if nd.Op == "ResourceGather" {
			params = m.vars[params.res]
		} else if in[2].i[0] != 0 {
			t.Fatalf("%s: axis %d unsupported here", nd.Name, in[2].i[0])
		}
		row := params.n() / params.shape[0]
		out := &tval{dtype: params.dtype, shape: append(append([]int64{}, ids.shape...), params.shape[1:]...)}
		for _, id := range ids.i {
			if id < 0 || id >= params.shape[0] {
				t.Fatalf("%s: id %d out of range", nd.Name, id)
			}
			out.f = append(out.f, params.f[id*row:(id+1)*row]...)
		}
		return one(out)
	case "ConcatV2":
		vals, axis := in[:len(in)-1], in[len(in)-1].i[0]
		if axis != 1 || len(vals[0].shape) != 2 {
			t.Fatalf("%s: only rank-2 concat on axis 1 here", nd.Name)
		}
		rows := vals[0].shape[0]
		var cols int64
		for _, v := range vals {
			cols += v.shape[1]
		}
		out := &tval{dtype: vals[0].dtype, shape: []int64{rows, cols}}
		for r := int64(0); r < rows; r++ {
			for _, v := range vals {
				out.f = append(out.f, v.f[r*v.shape[1]:(r+1)*v.shape[1]]...)
			}
		}
		return one(out)
	case "PartitionedCall", "StatefulPartitionedCall":
		f := m.funcs[attr["f"].GetFunc().GetName()]
		if f == nil {
			t.Fatalf("%s: no function %q", nd.Name, attr["f"].GetFunc().GetName())
		}
		if nd.Op == "PartitionedCall" && f.Signature.IsStateful {
			t.Errorf("%s: PartitionedCall of stateful function %s", nd.Name, f.Signature.Name)
		}
		return m.call(f, in)
	}
	t.Fatalf("evaluator has no kernel for %s (node %q)", nd.Op, nd.Name)
	return nil
}

func (m *evalModel) call(f *functionpb.FunctionDef, in []*tval) []*tval {
	sig := f.Signature
	if len(in) != len(sig.InputArg) {
		m.t.Fatalf("function %s takes %d args, got %d", sig.Name, len(sig.InputArg), len(in))
	}
	s := &scope{m: m, nodes: map[string]*nodepb.NodeDef{}, args: map[string]*tval{}, done: map[string][]*tval{}, inFunc: true, visiting: map[string]bool{}}
	for i, a := range sig.InputArg {
		if a.Type != in[i].dtype {
			m.t.Fatalf("function %s arg %s: type %s, got %s", sig.Name, a.Name, a.Type, in[i].dtype)
		}
		s.args[a.Name] = in[i]
	}
	for _, n := range f.NodeDef {
		s.nodes[n.Name] = n
	}
	out := make([]*tval, len(sig.OutputArg))
	for i, a := range sig.OutputArg {
		r, ok := f.Ret[a.Name]
		if !ok {
			m.t.Fatalf("function %s: no ret for %s", sig.Name, a.Name)
		}
		out[i] = s.ref(r)
	}
	// Stateful nodes run even when no output needs them.
	for _, n := range f.NodeDef {
		if op := m.ops[n.Op]; op != nil && op.IsStateful {
			s.node(n.Name)
		}
	}
	return out
}

func (m *evalModel) restore(prefix string, names []string, dtypes []typespb.DataType) []*tval {
	t := m.t
	if prefix != "variables/variables" {
		t.Fatalf("restore prefix %q", prefix)
	}
	_, _, entries := readBundle(t, m.files[VariablesIndex])
	data := m.files[VariablesData]
	byKey := map[string]*protopb.BundleEntryProto{}
	for _, e := range entries {
		byKey[e.key] = e.entry
	}
	out := make([]*tval, len(names))
	for i, name := range names {
		e := byKey[name]
		if e == nil {
			t.Fatalf("RestoreV2: checkpoint has no %q", name)
		}
		if e.Dtype != dtypes[i] {
			t.Fatalf("RestoreV2 %q: checkpoint dtype %s, restore wants %s", name, e.Dtype, dtypes[i])
		}
		if crc, _ := entryCRC(t, name, e, data); unmask(e.Crc32C) != crc {
			t.Fatalf("RestoreV2 %q: CRC mismatch", name)
		}
		if e.Dtype == typespb.DataType_DT_STRING {
			_, strs := entryCRC(t, name, e, data)
			out[i] = &tval{dtype: e.Dtype, s: strs}
			continue
		}
		out[i] = fromTensor(decodeNumeric(t, e, data[e.Offset:e.Offset+e.Size]))
	}
	return out
}

func fromTensor(x tensor.Tensor) *tval {
	dt, _ := DataType(x.DType())
	v := &tval{dtype: dt, shape: append([]int64{}, x.Shape...)}
	switch d := x.Data.(type) {
	case []float64:
		v.f = d
	case []float32:
		for _, e := range d {
			v.f = append(v.f, float64(e))
		}
	case []int8:
		for _, e := range d {
			v.i = append(v.i, int64(e))
		}
	case []int16:
		for _, e := range d {
			v.i = append(v.i, int64(e))
		}
	case []int32:
		for _, e := range d {
			v.i = append(v.i, int64(e))
		}
	case []int64:
		v.i = append(v.i, d...)
	}
	return v
}

// decodeConst reads a TensorProto the way TensorFlow does: tensor_content
// when present, else the typed field, a single value filling the shape.
func decodeConst(t *testing.T, p *tensorpb.TensorProto) *tval {
	t.Helper()
	v := &tval{dtype: p.Dtype}
	for _, d := range p.GetTensorShape().GetDim() {
		v.shape = append(v.shape, d.Size)
	}
	if v.shape == nil {
		v.shape = []int64{}
	}
	n := v.n()
	c := p.TensorContent
	switch p.Dtype {
	case typespb.DataType_DT_STRING:
		for _, s := range p.StringVal {
			v.s = append(v.s, string(s))
		}
		return v
	case typespb.DataType_DT_FLOAT:
		for k := 0; k+4 <= len(c); k += 4 {
			v.f = append(v.f, float64(math.Float32frombits(binary.LittleEndian.Uint32(c[k:]))))
		}
		for _, x := range p.FloatVal {
			v.f = append(v.f, float64(x))
		}
	case typespb.DataType_DT_DOUBLE:
		for k := 0; k+8 <= len(c); k += 8 {
			v.f = append(v.f, math.Float64frombits(binary.LittleEndian.Uint64(c[k:])))
		}
		v.f = append(v.f, p.DoubleVal...)
	case typespb.DataType_DT_INT32:
		for k := 0; k+4 <= len(c); k += 4 {
			v.i = append(v.i, int64(int32(binary.LittleEndian.Uint32(c[k:]))))
		}
		for _, x := range p.IntVal {
			v.i = append(v.i, int64(x))
		}
	case typespb.DataType_DT_INT64:
		for k := 0; k+8 <= len(c); k += 8 {
			v.i = append(v.i, int64(binary.LittleEndian.Uint64(c[k:])))
		}
		v.i = append(v.i, p.Int64Val...)
	default:
		t.Fatalf("const dtype %s unsupported here", p.Dtype)
	}
	switch l := int64(len(v.f) + len(v.i)); {
	case l == 1 && n > 1 && len(v.f) == 1:
		for int64(len(v.f)) < n {
			v.f = append(v.f, v.f[0])
		}
	case l == 1 && n > 1:
		for int64(len(v.i)) < n {
			v.i = append(v.i, v.i[0])
		}
	case l != n:
		t.Fatalf("const has %d values for shape %v", l, v.shape)
	}
	return v
}

func floats(dt typespb.DataType, shape []int64, vals ...float64) *tval {
	return &tval{dtype: dt, shape: shape, f: vals}
}

func ints(dt typespb.DataType, shape []int64, vals ...int64) *tval {
	return &tval{dtype: dt, shape: shape, i: vals}
}
