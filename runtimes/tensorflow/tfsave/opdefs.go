package tfsave

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	opdefpb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// opSpec declares one op in a compact form of TensorFlow's REGISTER_OP:
// args are space-separated "name:type" where type is a fixed type (float,
// int32, string, resource, ...), a type attr (T), "N*T" (number attr times a
// type attr or fixed type), "$attr" (type-list attr) or "ref(T)"; attrs are
// "name:kind[>=min][=default]". allowed_values are left out: no consumer of
// these models checks them.
type opSpec struct {
	name, in, out, attrs string
	stateful             bool
	commutative          bool
	allowsUninit         bool
}

var opSpecs = []opSpec{
	// Graph structure.
	{name: "Placeholder", out: "output:dtype", attrs: "dtype:type shape:shape=?"},
	{name: "PlaceholderWithDefault", in: "input:dtype", out: "output:dtype", attrs: "dtype:type shape:shape"},
	{name: "Const", out: "output:dtype", attrs: "value:tensor dtype:type"},
	{name: "Identity", in: "input:T", out: "output:T", attrs: "T:type"},
	{name: "PreventGradient", in: "input:T", out: "output:T", attrs: "T:type message:string="},
	{name: "RefIdentity", in: "input:ref(T)", out: "output:ref(T)", attrs: "T:type", allowsUninit: true},
	{name: "IdentityN", in: "input:$T", out: "output:$T", attrs: "T:list(type)>=1"},
	{name: "NoOp"},
	{name: "PartitionedCall", in: "args:$Tin", out: "output:$Tout", attrs: "Tin:list(type)>=0 Tout:list(type)>=0 f:func config:string= config_proto:string= executor_type:string="},
	{name: "StatefulPartitionedCall", in: "args:$Tin", out: "output:$Tout", attrs: "Tin:list(type)>=0 Tout:list(type)>=0 f:func config:string= config_proto:string= executor_type:string=", stateful: true},
	// Variables.
	{name: "VarHandleOp", out: "resource:resource", attrs: "container:string= shared_name:string= dtype:type shape:shape allowed_devices:list(string)=[]", stateful: true},
	{name: "ReadVariableOp", in: "resource:resource", out: "value:dtype", attrs: "dtype:type", stateful: true},
	{name: "AssignVariableOp", in: "resource:resource value:dtype", attrs: "dtype:type validate_shape:bool=false", stateful: true},
	{name: "AssignAddVariableOp", in: "resource:resource value:dtype", attrs: "dtype:type", stateful: true},
	{name: "AssignSubVariableOp", in: "resource:resource value:dtype", attrs: "dtype:type", stateful: true},
	{name: "VarIsInitializedOp", in: "resource:resource", out: "is_initialized:bool", stateful: true},
	{name: "DestroyResourceOp", in: "resource:resource", attrs: "ignore_lookup_error:bool=true", stateful: true},
	{name: "ResourceGather", in: "resource:resource indices:Tindices", out: "output:dtype", attrs: "batch_dims:int=0 validate_indices:bool=true dtype:type Tindices:type", stateful: true},
	{name: "VariableV2", out: "ref:ref(dtype)", attrs: "shape:shape dtype:type container:string= shared_name:string=", stateful: true},
	{name: "Assign", in: "ref:ref(T) value:T", out: "output_ref:ref(T)", attrs: "T:type validate_shape:bool=true use_locking:bool=true", allowsUninit: true},
	{name: "AssignAdd", in: "ref:ref(T) value:T", out: "output_ref:ref(T)", attrs: "T:type use_locking:bool=false"},
	// Checkpoints.
	{name: "RestoreV2", in: "prefix:string tensor_names:string shape_and_slices:string", out: "tensors:$dtypes", attrs: "dtypes:list(type)>=1", stateful: true},
	{name: "SaveV2", in: "prefix:string tensor_names:string shape_and_slices:string tensors:$dtypes", attrs: "dtypes:list(type)>=1", stateful: true},
	{name: "MergeV2Checkpoints", in: "checkpoint_prefixes:string destination_prefix:string", attrs: "delete_old_dirs:bool=true allow_missing_files:bool=false", stateful: true},
	{name: "ShardedFilename", in: "basename:string shard:int32 num_shards:int32", out: "filename:string"},
	{name: "StringJoin", in: "inputs:N*string", out: "output:string", attrs: "N:int>=0 separator:string="},
	// Shapes and indexing.
	{name: "Cast", in: "x:SrcT", out: "y:DstT", attrs: "SrcT:type DstT:type Truncate:bool=false"},
	{name: "Reshape", in: "tensor:T shape:Tshape", out: "output:T", attrs: "T:type Tshape:type=int32"},
	{name: "Squeeze", in: "input:T", out: "output:T", attrs: "T:type squeeze_dims:list(int)>=0=[]"},
	{name: "ExpandDims", in: "input:T dim:Tdim", out: "output:T", attrs: "T:type Tdim:type=int32"},
	{name: "Shape", in: "input:T", out: "output:out_type", attrs: "T:type out_type:type=int32"},
	{name: "ConcatV2", in: "values:N*T axis:Tidx", out: "output:T", attrs: "N:int>=2 T:type Tidx:type=int32"},
	{name: "Pack", in: "values:N*T", out: "output:T", attrs: "N:int>=1 T:type axis:int=0"},
	{name: "Unpack", in: "value:T", out: "output:num*T", attrs: "num:int>=0 T:type axis:int=0"},
	{name: "GatherV2", in: "params:Tparams indices:Tindices axis:Taxis", out: "output:Tparams", attrs: "batch_dims:int=0 Tparams:type Tindices:type Taxis:type"},
	{name: "Slice", in: "input:T begin:Index size:Index", out: "output:T", attrs: "T:type Index:type"},
	{name: "StridedSlice", in: "input:T begin:Index end:Index strides:Index", out: "output:T", attrs: "T:type Index:type begin_mask:int=0 end_mask:int=0 ellipsis_mask:int=0 new_axis_mask:int=0 shrink_axis_mask:int=0"},
	{name: "Tile", in: "input:T multiples:Tmultiples", out: "output:T", attrs: "T:type Tmultiples:type=int32"},
	{name: "Pad", in: "input:T paddings:Tpaddings", out: "output:T", attrs: "T:type Tpaddings:type=int32"},
	{name: "PadV2", in: "input:T paddings:Tpaddings constant_values:T", out: "output:T", attrs: "T:type Tpaddings:type=int32"},
	{name: "MirrorPad", in: "input:T paddings:Tpaddings", out: "output:T", attrs: "T:type Tpaddings:type=int32 mode:string"},
	{name: "OneHot", in: "indices:TI depth:int32 on_value:T off_value:T", out: "output:T", attrs: "axis:int=-1 T:type TI:type=int64"},
	// Math.
	{name: "MatMul", in: "a:T b:T", out: "product:T", attrs: "transpose_a:bool=false transpose_b:bool=false T:type"},
	{name: "BatchMatMulV2", in: "x:T y:T", out: "output:T", attrs: "T:type adj_x:bool=false adj_y:bool=false"},
	{name: "BatchMatMulV3", in: "x:Ta y:Tb", out: "output:Tout", attrs: "Ta:type Tb:type Tout:type adj_x:bool=false adj_y:bool=false grad_x:bool=false grad_y:bool=false"},
	{name: "BiasAdd", in: "value:T bias:T", out: "output:T", attrs: "T:type data_format:string=NHWC"},
	{name: "Add", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "AddV2", in: "x:T y:T", out: "z:T", attrs: "T:type", commutative: true},
	{name: "Sub", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "Mul", in: "x:T y:T", out: "z:T", attrs: "T:type", commutative: true},
	{name: "RealDiv", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "Minimum", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "Maximum", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "Neg", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Exp", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Log", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Sqrt", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Rsqrt", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Square", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Tanh", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Sigmoid", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Relu", in: "features:T", out: "activations:T", attrs: "T:type"},
	{name: "Relu6", in: "features:T", out: "activations:T", attrs: "T:type"},
	{name: "Softmax", in: "logits:T", out: "softmax:T", attrs: "T:type"},
	{name: "Sum", in: "input:T reduction_indices:Tidx", out: "output:T", attrs: "keep_dims:bool=false T:type Tidx:type=int32"},
	{name: "Mean", in: "input:T reduction_indices:Tidx", out: "output:T", attrs: "keep_dims:bool=false T:type Tidx:type=int32"},
	{name: "Max", in: "input:T reduction_indices:Tidx", out: "output:T", attrs: "keep_dims:bool=false T:type Tidx:type=int32"},
	{name: "Min", in: "input:T reduction_indices:Tidx", out: "output:T", attrs: "keep_dims:bool=false T:type Tidx:type=int32"},
	{name: "Select", in: "condition:bool t:T e:T", out: "output:T", attrs: "T:type"},
	{name: "SelectV2", in: "condition:bool t:T e:T", out: "output:T", attrs: "T:type"},
	{name: "Greater", in: "x:T y:T", out: "z:bool", attrs: "T:type"},
	{name: "GreaterEqual", in: "x:T y:T", out: "z:bool", attrs: "T:type"},
	{name: "Less", in: "x:T y:T", out: "z:bool", attrs: "T:type"},
	{name: "LessEqual", in: "x:T y:T", out: "z:bool", attrs: "T:type"},
	{name: "Equal", in: "x:T y:T", out: "z:bool", attrs: "T:type incompatible_shape_error:bool=true", commutative: true},
	{name: "NotEqual", in: "x:T y:T", out: "z:bool", attrs: "T:type incompatible_shape_error:bool=true", commutative: true},
	// Ops a model must never contain (the reader's validator rejects them);
	// declared so tests can build such models.
	{name: "WriteFile", in: "filename:string contents:string", stateful: true},
	{name: "ReadFile", in: "filename:string", out: "contents:string"},
}

var fixedTypes = map[string]typespb.DataType{
	"float": typespb.DataType_DT_FLOAT, "double": typespb.DataType_DT_DOUBLE,
	"int8": typespb.DataType_DT_INT8, "int16": typespb.DataType_DT_INT16,
	"int32": typespb.DataType_DT_INT32, "int64": typespb.DataType_DT_INT64,
	"uint8": typespb.DataType_DT_UINT8, "string": typespb.DataType_DT_STRING,
	"bool": typespb.DataType_DT_BOOL, "resource": typespb.DataType_DT_RESOURCE,
}

var (
	opDefsOnce sync.Once
	opDefs     map[string]*opdefpb.OpDef
	opDefsErr  error
)

// lookupOpDef returns the OpDef of an op type the package knows.
func lookupOpDef(opType string) (*opdefpb.OpDef, error) {
	opDefsOnce.Do(func() {
		opDefs = make(map[string]*opdefpb.OpDef, len(opSpecs))
		for _, s := range opSpecs {
			d, err := s.opDef()
			if err != nil {
				opDefsErr = fmt.Errorf("tfsave: op spec %s: %w", s.name, err)
				return
			}
			opDefs[s.name] = d
		}
	})
	if opDefsErr != nil {
		return nil, opDefsErr
	}
	d, ok := opDefs[opType]
	if !ok {
		return nil, fmt.Errorf("tfsave: unknown op type %q (no OpDef declared in opdefs.go)", opType)
	}
	return d, nil
}

// KnownOps lists the op types the builder can add.
func KnownOps() []string {
	names := make([]string, len(opSpecs))
	for i, s := range opSpecs {
		names[i] = s.name
	}
	return names
}

func (s opSpec) opDef() (*opdefpb.OpDef, error) {
	d := &opdefpb.OpDef{Name: s.name, IsStateful: s.stateful, IsCommutative: s.commutative, AllowsUninitializedInput: s.allowsUninit}
	var err error
	if d.InputArg, err = parseArgs(s.in); err != nil {
		return nil, err
	}
	if d.OutputArg, err = parseArgs(s.out); err != nil {
		return nil, err
	}
	for _, f := range strings.Fields(s.attrs) {
		a, err := parseAttrDef(f)
		if err != nil {
			return nil, err
		}
		d.Attr = append(d.Attr, a)
	}
	return d, nil
}

func parseArgs(spec string) ([]*opdefpb.OpDef_ArgDef, error) {
	var args []*opdefpb.OpDef_ArgDef
	for _, f := range strings.Fields(spec) {
		name, typ, ok := strings.Cut(f, ":")
		if !ok {
			return nil, fmt.Errorf("arg %q has no type", f)
		}
		a := &opdefpb.OpDef_ArgDef{Name: name}
		if n, t, ok := strings.Cut(typ, "*"); ok {
			a.NumberAttr = n
			typ = t
		}
		if strings.HasPrefix(typ, "ref(") && strings.HasSuffix(typ, ")") {
			a.IsRef = true
			typ = typ[4 : len(typ)-1]
		}
		switch {
		case strings.HasPrefix(typ, "$"):
			a.TypeListAttr = typ[1:]
		case fixedTypes[typ] != 0:
			a.Type = fixedTypes[typ]
		default:
			a.TypeAttr = typ
		}
		args = append(args, a)
	}
	return args, nil
}

func parseAttrDef(f string) (*opdefpb.OpDef_AttrDef, error) {
	name, rest, ok := strings.Cut(f, ":")
	if !ok {
		return nil, fmt.Errorf("attr %q has no kind", f)
	}
	a := &opdefpb.OpDef_AttrDef{Name: name}
	var kind, def string
	var hasDef bool
	if k, r, ok := strings.Cut(rest, ">="); ok {
		min, d, has := strings.Cut(r, "=")
		m, err := strconv.ParseInt(min, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("attr %q: bad minimum", f)
		}
		a.HasMinimum, a.Minimum = true, m
		kind, def, hasDef = k, d, has
	} else {
		kind, def, hasDef = strings.Cut(rest, "=")
	}
	a.Type = kind
	if !hasDef {
		return a, nil
	}
	v := &attrpb.AttrValue{}
	switch kind {
	case "type":
		t, ok := fixedTypes[def]
		if !ok {
			return nil, fmt.Errorf("attr %q: bad default type", f)
		}
		v.Value = &attrpb.AttrValue_Type{Type: t}
	case "int":
		i, err := strconv.ParseInt(def, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("attr %q: bad default", f)
		}
		v.Value = &attrpb.AttrValue_I{I: i}
	case "bool":
		v.Value = &attrpb.AttrValue_B{B: def == "true"}
	case "string":
		v.Value = &attrpb.AttrValue_S{S: []byte(def)}
	case "shape":
		v.Value = &attrpb.AttrValue_Shape{Shape: &shapepb.TensorShapeProto{UnknownRank: true}}
	default:
		if strings.HasPrefix(kind, "list(") && def == "[]" {
			v.Value = &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{}}
		} else {
			return nil, fmt.Errorf("attr %q: unsupported default", f)
		}
	}
	a.DefaultValue = v
	return a, nil
}
