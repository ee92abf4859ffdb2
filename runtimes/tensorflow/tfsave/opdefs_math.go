package tfsave

// mathOpSpecs are the element-wise, reduction and shape ops the runtime
// runs that opdefs.go does not declare, so tests can build graphs with
// them (the TensorFlow.js oracle tests among them). Signatures follow
// TensorFlow's REGISTER_OP (math_ops.cc, nn_ops.cc, array_ops.cc); float
// attrs without a default here (LeakyRelu alpha: 0.2) must be set.
var mathOpSpecs = []opSpec{
	{name: "StopGradient", in: "input:T", out: "output:T", attrs: "T:type"},
	{name: "Snapshot", in: "input:T", out: "output:T", attrs: "T:type"},
	{name: "BatchMatMul", in: "x:T y:T", out: "output:T", attrs: "T:type adj_x:bool=false adj_y:bool=false"},
	{name: "Div", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "DivNoNan", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "SquaredDifference", in: "x:T y:T", out: "z:T", attrs: "T:type", commutative: true},
	{name: "Pow", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "FloorDiv", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "FloorMod", in: "x:T y:T", out: "z:T", attrs: "T:type"},
	{name: "LogicalAnd", in: "x:bool y:bool", out: "z:bool", commutative: true},
	{name: "LogicalOr", in: "x:bool y:bool", out: "z:bool", commutative: true},
	{name: "LogicalNot", in: "x:bool", out: "y:bool"},
	{name: "Abs", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Sign", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Log1p", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Reciprocal", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Floor", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Ceil", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Round", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Erf", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "Softplus", in: "features:T", out: "activations:T", attrs: "T:type"},
	{name: "Elu", in: "features:T", out: "activations:T", attrs: "T:type"},
	{name: "Selu", in: "features:T", out: "activations:T", attrs: "T:type"},
	{name: "LeakyRelu", in: "features:T", out: "activations:T", attrs: "alpha:float T:type"},
	{name: "LogSoftmax", in: "logits:T", out: "logsoftmax:T", attrs: "T:type"},
	{name: "Prod", in: "input:T reduction_indices:Tidx", out: "output:T", attrs: "keep_dims:bool=false T:type Tidx:type=int32"},
	{name: "Size", in: "input:T", out: "output:out_type", attrs: "T:type out_type:type=int32"},
	{name: "Rank", in: "input:T", out: "output:int32", attrs: "T:type"},
	{name: "Fill", in: "dims:index_type value:T", out: "output:T", attrs: "T:type index_type:type=int32"},
	{name: "ZerosLike", in: "x:T", out: "y:T", attrs: "T:type"},
	{name: "OnesLike", in: "x:T", out: "y:T", attrs: "T:type"},
}

func init() { opSpecs = append(opSpecs, mathOpSpecs...) }
