package tfsave

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opdefpb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/inferbid/inferbid/tensor"
)

// Shape is a shape attribute value for Op's attrs: -1 marks an unknown
// dimension, nil an unknown rank.
type Shape []int64

// Func is a function attribute value for Op's attrs: the name of a function
// of the graph's library.
type Func string

// ServingSignature is the signature key TensorFlow Serving and inferbid
// serve.
const ServingSignature = "serving_default"

// PredictMethod is the method name of predict SignatureDefs.
const PredictMethod = "tensorflow/serving/predict"

// node is one graph node with its op definition.
type node struct {
	def   *nodepb.NodeDef
	opDef *opdefpb.OpDef
	// outer nodes (placeholders, variables and their initializers) stay in
	// the main graph when Options.FunctionCall moves computations into
	// functions.
	outer bool
	// varRead marks the ReadVariableOp of a resource variable's Value: it
	// stays in the main graph and is also cloned into function bodies,
	// which read the variable through a resource argument.
	varRead bool
	// shapes are the statically known shapes of the outputs (nil entries:
	// unknown rank).
	shapes [][]int64
}

type variable struct {
	Var
	key         string // checkpoint key
	value       tensor.Tensor
	initializer string // node that assigns the initial value
}

type signature struct {
	key             string
	method          string
	inputs, outputs map[string]string
}

// Builder assembles a graph, its signatures and its variables, then writes
// them as SavedModel files. Methods return graph tensor names ("node:0") to
// feed to later calls. The first error is remembered and returned by Files;
// calls after it do nothing, so a model can be built without checking each
// call.
type Builder struct {
	opts   Options
	err    error
	nodes  []*node
	byName map[string]*node
	vars   []*variable
	sigs   map[string]*signature
	files  map[string][]byte // set once Files has run
}

// NewBuilder returns a builder with default options (TF2 resource
// variables, computation in the main graph).
func NewBuilder() *Builder { return NewBuilderWith(Options{}) }

// NewBuilderWith returns a builder with the given options.
func NewBuilderWith(opts Options) *Builder {
	return &Builder{opts: opts, byName: map[string]*node{}, sigs: map[string]*signature{}}
}

func (b *Builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *Builder) failf(format string, args ...any) {
	b.fail(fmt.Errorf("tfsave: "+format, args...))
}

// Err returns the first error a builder method met.
func (b *Builder) Err() error { return b.err }

// Placeholder adds a graph input of dtype and shape (-1 marks an unknown
// dimension; nil is an unknown rank) and returns "name:0". TF2 exports name
// serving inputs "serving_default_<key>".
func (b *Builder) Placeholder(name string, dtype tensor.DType, shape []int64) string {
	if name == "" {
		b.failf("Placeholder needs a name")
		return ""
	}
	dt, err := DataType(dtype)
	if err != nil {
		b.fail(fmt.Errorf("placeholder %q: %w", name, err))
		return ""
	}
	out := b.OpNamed(name, "Placeholder", nil, map[string]any{"dtype": dt, "shape": Shape(shape)})
	if n := b.byName[name]; n != nil && b.err == nil {
		n.outer = true
	}
	return out
}

// PlaceholderWithDefault adds an optional graph input of shape (-1 marks
// an unknown dimension) that takes the value def when not fed, and returns
// "name:0". The default is a Const named "name/input".
func (b *Builder) PlaceholderWithDefault(name string, def tensor.Tensor, shape []int64) string {
	if b.err != nil {
		return ""
	}
	if name == "" {
		b.failf("PlaceholderWithDefault needs a name")
		return ""
	}
	in := b.Const(name+"/input", def)
	out := b.OpNamed(name, "PlaceholderWithDefault", []string{in}, map[string]any{"shape": Shape(shape)})
	b.markOuter(name)
	return out
}

// Const adds a constant holding t's data and shape (t.Name is ignored) and
// returns "name:0". An empty name picks "Const", "Const_1", ...
func (b *Builder) Const(name string, t tensor.Tensor) string {
	if b.err != nil {
		return ""
	}
	p, err := tensorProto(t)
	if err != nil {
		b.fail(fmt.Errorf("const %q: %w", name, err))
		return ""
	}
	return b.OpNamed(name, "Const", nil, map[string]any{"dtype": p.Dtype, "value": p})
}

// ConstOf adds a constant from a Go slice and shape (nil shape: a vector of
// len(data)).
func ConstOf[T tensor.Element](b *Builder, name string, shape []int64, data ...T) string {
	if shape == nil {
		shape = []int64{int64(len(data))}
	}
	return b.Const(name, tensor.New("", shape, data))
}

// Variable adds a variable whose checkpointed value is t (t.Name is
// ignored). Its initializer assigns zeros, as an untrained model would, so a
// model computes the intended values only once its variables are restored
// from the checkpoint.
func (b *Builder) Variable(name string, t tensor.Tensor) Var {
	if b.err != nil {
		return Var{}
	}
	if name == "" || strings.HasPrefix(name, "save/") {
		b.failf("variable name %q is empty or in the saver's scope", name)
		return Var{}
	}
	dt, err := checkTensor(t)
	if err != nil {
		b.fail(fmt.Errorf("variable %q: %w", name, err))
		return Var{}
	}
	shape := append([]int64{}, t.Shape...)
	zeros := tensor.Tensor{Shape: shape, Data: tensor.MakeData(t.DType(), t.Len())}
	v := &variable{Var: Var{Name: name, DType: t.DType(), Shape: shape}, value: t, key: name}
	if b.opts.FunctionCall {
		v.key = name + "/.ATTRIBUTES/VARIABLE_VALUE"
	}
	if b.opts.Variables == RefVariables {
		initVal := b.Const(name+"/initial_value", zeros)
		v.Handle = b.OpNamed(name, "VariableV2", nil, map[string]any{"dtype": dt, "shape": Shape(shape)})
		v.initializer = nodeName(b.OpNamed(name+"/Assign", "Assign", []string{v.Handle, initVal}, nil))
		v.Value = b.OpNamed(name+"/read", "Identity", []string{v.Handle}, nil)
		b.markOuter(name+"/initial_value", name, name+"/Assign", name+"/read")
	} else {
		v.Handle = b.OpNamed(name, "VarHandleOp", nil, map[string]any{"dtype": dt, "shape": Shape(shape), "shared_name": name})
		initVal := b.Const(name+"/Initializer/initial_value", zeros)
		v.initializer = b.OpNamed(name+"/Assign", "AssignVariableOp", []string{v.Handle, initVal}, nil)
		v.Value = b.OpNamed(name+"/Read/ReadVariableOp", "ReadVariableOp", []string{v.Handle}, map[string]any{"dtype": dt})
		b.markOuter(name, name+"/Initializer/initial_value", name+"/Assign", name+"/Read/ReadVariableOp")
		if n := b.byName[name+"/Read/ReadVariableOp"]; n != nil {
			n.varRead = true
		}
	}
	if b.err != nil {
		return Var{}
	}
	b.vars = append(b.vars, v)
	return v.Var
}

func (b *Builder) markOuter(names ...string) {
	for _, n := range names {
		if nd := b.byName[n]; nd != nil {
			nd.outer = true
		}
	}
}

// Op adds a node of opType with a name made from opType as TensorFlow makes
// them ("MatMul", "MatMul_1", ...) and returns its first output "node:0"
// (the bare node name when the op has no outputs, ready for "^"+name).
// inputs are tensor names ("node:i"; "node" means "node:0") or control
// inputs "^node". attrs values may be tensor.DType, a TensorFlow DataType,
// []tensor.DType, Shape, []Shape, int, int64, []int, []int64, float32,
// float64, bool, string, []string, tensor.Tensor, *TensorProto, Func or a
// ready *AttrValue. Attributes the op's definition derives from its inputs
// (T, N, Tidx, dtypes, ...) are filled in when left out, and defaults are
// written out as TF1 graphs do.
func (b *Builder) Op(opType string, inputs []string, attrs map[string]any) string {
	return b.OpNamed("", opType, inputs, attrs)
}

// OpNamed is Op with an explicit node name ("" picks one as Op does).
func (b *Builder) OpNamed(name, opType string, inputs []string, attrs map[string]any) string {
	if b.err != nil {
		return ""
	}
	if b.files != nil {
		b.failf("node %q added after Files", name)
		return ""
	}
	n, err := b.newNode(name, opType, inputs, attrs)
	if err != nil {
		b.fail(err)
		return ""
	}
	b.nodes = append(b.nodes, n)
	b.byName[n.def.Name] = n
	if len(n.opDef.OutputArg) == 0 {
		return n.def.Name
	}
	return n.def.Name + ":0"
}

// UniqueName returns base if no node has that name, else base_1, base_2...
func (b *Builder) UniqueName(base string) string {
	if _, taken := b.byName[base]; !taken {
		return base
	}
	for i := 1; ; i++ {
		n := base + "_" + strconv.Itoa(i)
		if _, taken := b.byName[n]; !taken {
			return n
		}
	}
}

func (b *Builder) newNode(name, opType string, inputs []string, attrs map[string]any) (*node, error) {
	od, err := lookupOpDef(opType)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = b.UniqueName(opType)
	}
	if err := checkNodeName(name); err != nil {
		return nil, err
	}
	if _, dup := b.byName[name]; dup {
		return nil, fmt.Errorf("tfsave: node %q added twice", name)
	}
	def := &nodepb.NodeDef{Name: name, Op: opType, Attr: map[string]*attrpb.AttrValue{}}
	for k, v := range attrs {
		av, err := attrValue(v)
		if err != nil {
			return nil, fmt.Errorf("tfsave: node %q (%s) attr %q: %w", name, opType, k, err)
		}
		def.Attr[k] = av
	}
	// Data inputs, then control inputs, as TensorFlow requires.
	var data []string
	var control []string
	for _, in := range inputs {
		if c, ok := strings.CutPrefix(in, "^"); ok {
			if _, exists := b.byName[c]; !exists {
				return nil, fmt.Errorf("tfsave: node %q (%s): control input %q: no such node", name, opType, c)
			}
			control = append(control, in)
			continue
		}
		src, idx, err := splitTensor(in)
		if err != nil {
			return nil, fmt.Errorf("tfsave: node %q (%s): %w", name, opType, err)
		}
		data = append(data, canonicalInput(src, idx))
	}
	dtypes := make([]typespb.DataType, len(data))
	for i, in := range data {
		if dtypes[i], err = b.tensorDType(in); err != nil {
			return nil, fmt.Errorf("tfsave: node %q (%s) input %d: %w", name, opType, i, err)
		}
	}
	if err := bindInputs(def, od, dtypes); err != nil {
		return nil, fmt.Errorf("tfsave: node %q (%s): %w", name, opType, err)
	}
	if err := completeAttrs(def, od); err != nil {
		return nil, fmt.Errorf("tfsave: node %q (%s): %w", name, opType, err)
	}
	def.Input = append(data, control...)
	n := &node{def: def, opDef: od}
	if _, err := outputTypes(n); err != nil {
		return nil, fmt.Errorf("tfsave: node %q (%s): %w", name, opType, err)
	}
	n.shapes = b.inferShapes(n)
	return n, nil
}

func checkNodeName(name string) error {
	if name == "" || strings.ContainsAny(name, ":^ ") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.HasPrefix(name, "_") {
		return fmt.Errorf("tfsave: bad node name %q", name)
	}
	return nil
}

// splitTensor parses "node:i" or "node".
func splitTensor(t string) (string, int, error) {
	if t == "" {
		return "", 0, errors.New("empty tensor name")
	}
	i := strings.LastIndexByte(t, ':')
	if i < 0 {
		return t, 0, nil
	}
	idx, err := strconv.Atoi(t[i+1:])
	if err != nil || idx < 0 || i == 0 {
		return "", 0, fmt.Errorf("bad tensor name %q", t)
	}
	return t[:i], idx, nil
}

// canonicalInput is how GraphDefs write an input: "node" for output 0.
func canonicalInput(node string, idx int) string {
	if idx == 0 {
		return node
	}
	return node + ":" + strconv.Itoa(idx)
}

// canonicalTensor is how signatures write a tensor: always "node:i".
func canonicalTensor(t string) (string, error) {
	n, i, err := splitTensor(t)
	if err != nil {
		return "", err
	}
	return n + ":" + strconv.Itoa(i), nil
}

func nodeName(t string) string {
	n, _, _ := splitTensor(t)
	return n
}

// tensorDType is the DataType of a graph tensor (a _REF type for TF1
// variables).
func (b *Builder) tensorDType(t string) (typespb.DataType, error) {
	src, idx, err := splitTensor(t)
	if err != nil {
		return 0, err
	}
	n, ok := b.byName[src]
	if !ok {
		return 0, fmt.Errorf("tensor %q: no node %q", t, src)
	}
	types, err := outputTypes(n)
	if err != nil {
		return 0, err
	}
	if idx >= len(types) {
		return 0, fmt.Errorf("tensor %q: node %q (%s) has %d outputs", t, src, n.def.Op, len(types))
	}
	return types[idx], nil
}

func (b *Builder) tensorShape(t string) []int64 {
	src, idx, err := splitTensor(t)
	if err != nil {
		return nil
	}
	n, ok := b.byName[src]
	if !ok || idx >= len(n.shapes) {
		return nil
	}
	return n.shapes[idx]
}

func baseType(t typespb.DataType) typespb.DataType {
	if t > 100 {
		return t - 100
	}
	return t
}

// argCount is how many flat tensors an arg stands for, from the node's
// attrs; -1 when the attr is not known yet.
func argCount(def *nodepb.NodeDef, a *opdefpb.OpDef_ArgDef) int {
	switch {
	case a.NumberAttr != "":
		if v, ok := def.Attr[a.NumberAttr]; ok {
			return int(v.GetI())
		}
		return -1
	case a.TypeListAttr != "":
		if v, ok := def.Attr[a.TypeListAttr]; ok {
			return len(v.GetList().GetType())
		}
		return -1
	}
	return 1
}

// bindInputs matches the flat input dtypes to the op's input args, checking
// types and filling the type, number and type-list attrs left out.
func bindInputs(def *nodepb.NodeDef, od *opdefpb.OpDef, dtypes []typespb.DataType) error {
	counts := make([]int, len(od.InputArg))
	known, unknown := 0, -1
	for i, a := range od.InputArg {
		counts[i] = argCount(def, a)
		if counts[i] < 0 {
			if unknown >= 0 {
				return fmt.Errorf("cannot split inputs between args %q and %q: set %s", od.InputArg[unknown].Name, a.Name, a.NumberAttr+a.TypeListAttr)
			}
			unknown = i
			continue
		}
		known += counts[i]
	}
	if unknown >= 0 {
		counts[unknown] = len(dtypes) - known
		if counts[unknown] < 0 {
			return fmt.Errorf("takes at least %d inputs, got %d", known, len(dtypes))
		}
	} else if known != len(dtypes) {
		return fmt.Errorf("takes %d inputs, got %d", known, len(dtypes))
	}
	pos := 0
	for i, a := range od.InputArg {
		got := dtypes[pos : pos+counts[i]]
		pos += counts[i]
		if a.NumberAttr != "" {
			if _, ok := def.Attr[a.NumberAttr]; !ok {
				def.Attr[a.NumberAttr] = &attrpb.AttrValue{Value: &attrpb.AttrValue_I{I: int64(len(got))}}
			}
		}
		if a.TypeListAttr != "" {
			if _, ok := def.Attr[a.TypeListAttr]; !ok {
				list := make([]typespb.DataType, len(got))
				for k, t := range got {
					list[k] = baseType(t)
				}
				def.Attr[a.TypeListAttr] = &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{Type: list}}}
			}
			want := def.Attr[a.TypeListAttr].GetList().GetType()
			for k, t := range got {
				if baseType(t) != want[k] {
					return fmt.Errorf("input %s[%d] is %s, attr %s says %s", a.Name, k, t, a.TypeListAttr, want[k])
				}
			}
			continue
		}
		for k, t := range got {
			if a.IsRef && t < 100 {
				return fmt.Errorf("input %s[%d] must be a ref (a VariableV2 output), got %s", a.Name, k, t)
			}
			want := a.Type
			if a.TypeAttr != "" {
				if v, ok := def.Attr[a.TypeAttr]; ok {
					want = v.GetType()
				} else {
					def.Attr[a.TypeAttr] = &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: baseType(t)}}
					want = baseType(t)
				}
			}
			if baseType(t) != want {
				return fmt.Errorf("input %s[%d] is %s, want %s", a.Name, k, baseType(t), want)
			}
		}
	}
	return nil
}

// completeAttrs writes defaults for attrs left out and rejects missing or
// unknown ones (names starting with "_" are free-form, as in TensorFlow).
func completeAttrs(def *nodepb.NodeDef, od *opdefpb.OpDef) error {
	declared := map[string]bool{}
	for _, a := range od.Attr {
		declared[a.Name] = true
		if _, ok := def.Attr[a.Name]; ok {
			continue
		}
		if a.DefaultValue == nil {
			return fmt.Errorf("attr %q (%s) is required", a.Name, a.Type)
		}
		def.Attr[a.Name] = a.DefaultValue
	}
	for k := range def.Attr {
		if !declared[k] && !strings.HasPrefix(k, "_") {
			return fmt.Errorf("op has no attr %q", k)
		}
	}
	return nil
}

// outputTypes lists the DataType of every output of a node.
func outputTypes(n *node) ([]typespb.DataType, error) {
	var out []typespb.DataType
	for _, a := range n.opDef.OutputArg {
		ts, err := argTypes(n.def, a)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

func argTypes(def *nodepb.NodeDef, a *opdefpb.OpDef_ArgDef) ([]typespb.DataType, error) {
	if a.TypeListAttr != "" {
		v, ok := def.Attr[a.TypeListAttr]
		if !ok {
			return nil, fmt.Errorf("output %s: attr %q not set", a.Name, a.TypeListAttr)
		}
		return v.GetList().GetType(), nil
	}
	t := a.Type
	if a.TypeAttr != "" {
		v, ok := def.Attr[a.TypeAttr]
		if !ok {
			return nil, fmt.Errorf("output %s: attr %q not set", a.Name, a.TypeAttr)
		}
		t = v.GetType()
	}
	if t == 0 {
		return nil, fmt.Errorf("output %s has no type", a.Name)
	}
	if a.IsRef {
		t += 100
	}
	n := argCount(def, a)
	if n < 0 {
		return nil, fmt.Errorf("output %s: attr %q not set", a.Name, a.NumberAttr)
	}
	ts := make([]typespb.DataType, n)
	for i := range ts {
		ts[i] = t
	}
	return ts, nil
}

// outputArg maps a flat output index to the output arg's name and the index
// within it: the "node:out_arg:index" form function bodies use.
func outputArg(n *node, idx int) (string, int, error) {
	for _, a := range n.opDef.OutputArg {
		ts, err := argTypes(n.def, a)
		if err != nil {
			return "", 0, err
		}
		if idx < len(ts) {
			return a.Name, idx, nil
		}
		idx -= len(ts)
	}
	return "", 0, fmt.Errorf("node %q (%s) has no output %d", n.def.Name, n.def.Op, idx)
}

func attrValue(v any) (*attrpb.AttrValue, error) {
	switch x := v.(type) {
	case *attrpb.AttrValue:
		return x, nil
	case tensor.DType:
		t, err := DataType(x)
		if err != nil {
			return nil, err
		}
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: t}}, nil
	case typespb.DataType:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: x}}, nil
	case []tensor.DType:
		list := make([]typespb.DataType, len(x))
		for i, d := range x {
			t, err := DataType(d)
			if err != nil {
				return nil, err
			}
			list[i] = t
		}
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{Type: list}}}, nil
	case []typespb.DataType:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{Type: x}}}, nil
	case Shape:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Shape{Shape: shapeProto(x)}}, nil
	case []Shape:
		list := make([]*shapepb.TensorShapeProto, len(x))
		for i, s := range x {
			list[i] = shapeProto(s)
		}
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{Shape: list}}}, nil
	case int:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_I{I: int64(x)}}, nil
	case int64:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_I{I: x}}, nil
	case []int:
		list := make([]int64, len(x))
		for i, d := range x {
			list[i] = int64(d)
		}
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{I: list}}}, nil
	case []int64:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{I: x}}}, nil
	case float32:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_F{F: x}}, nil
	case float64:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_F{F: float32(x)}}, nil
	case bool:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_B{B: x}}, nil
	case string:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_S{S: []byte(x)}}, nil
	case []string:
		list := make([][]byte, len(x))
		for i, s := range x {
			list[i] = []byte(s)
		}
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{S: list}}}, nil
	case tensor.Tensor:
		p, err := tensorProto(x)
		if err != nil {
			return nil, err
		}
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Tensor{Tensor: p}}, nil
	case *tensorpb.TensorProto:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Tensor{Tensor: x}}, nil
	case Func:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Func{Func: &attrpb.NameAttrList{Name: string(x)}}}, nil
	}
	return nil, fmt.Errorf("unsupported attr value type %T", v)
}

// Output names output i of a node: Output("split", 1) is "split:1".
func Output(node string, i int) string { return node + ":" + strconv.Itoa(i) }

// Signature adds a predict SignatureDef mapping signature keys to graph
// tensor names ("node:i" or "node"). Files fails if a tensor does not exist.
func (b *Builder) Signature(key string, inputs, outputs map[string]string) {
	b.SignatureWithMethod(key, PredictMethod, inputs, outputs)
}

// SignatureWithMethod is Signature with another method name (e.g.
// "tensorflow/serving/regress").
func (b *Builder) SignatureWithMethod(key, method string, inputs, outputs map[string]string) {
	if b.err != nil {
		return
	}
	if key == "" {
		b.failf("signature key is empty")
		return
	}
	if _, dup := b.sigs[key]; dup {
		b.failf("signature %q added twice", key)
		return
	}
	s := &signature{key: key, method: method, inputs: map[string]string{}, outputs: map[string]string{}}
	for _, m := range []struct {
		src, dst map[string]string
		what     string
	}{{inputs, s.inputs, "input"}, {outputs, s.outputs, "output"}} {
		for k, t := range m.src {
			c, err := canonicalTensor(t)
			if err != nil {
				b.failf("signature %q %s %q: %v", key, m.what, k, err)
				return
			}
			if _, err := b.tensorDType(c); err != nil {
				b.failf("signature %q %s %q: %v", key, m.what, k, err)
				return
			}
			m.dst[k] = c
		}
	}
	b.sigs[key] = s
}

// SetShape overrides the static shape recorded for a tensor (what
// SignatureDefs report); -1 marks an unknown dimension, nil an unknown rank.
func (b *Builder) SetShape(tensor string, shape []int64) {
	if b.err != nil {
		return
	}
	src, idx, err := splitTensor(tensor)
	if err != nil {
		b.failf("SetShape: %v", err)
		return
	}
	n, ok := b.byName[src]
	if !ok || idx >= len(n.shapes) {
		b.failf("SetShape: no tensor %q", tensor)
		return
	}
	n.shapes[idx] = append([]int64(nil), shape...)
	if shape == nil {
		n.shapes[idx] = nil
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
