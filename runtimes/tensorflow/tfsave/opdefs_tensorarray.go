package tfsave

// tensorArrayOpSpecs are TF1's TensorArray ops (data_flow_ops.cc), which
// tf.compat.v1.nn.dynamic_rnn and TF1 while loops use, and Range, which
// their unstack and stack use.
var tensorArrayOpSpecs = []opSpec{
	{name: "TensorArrayV3", in: "size:int32", out: "handle:resource flow:float", attrs: "dtype:type element_shape:shape=? dynamic_size:bool=false clear_after_read:bool=true identical_element_shapes:bool=false tensor_array_name:string=", stateful: true},
	{name: "TensorArrayWriteV3", in: "handle:resource index:int32 value:T flow_in:float", out: "flow_out:float", attrs: "T:type", stateful: true},
	{name: "TensorArrayReadV3", in: "handle:resource index:int32 flow_in:float", out: "value:dtype", attrs: "dtype:type", stateful: true},
	{name: "TensorArrayGatherV3", in: "handle:resource indices:int32 flow_in:float", out: "value:dtype", attrs: "dtype:type element_shape:shape=?", stateful: true},
	{name: "TensorArrayScatterV3", in: "handle:resource indices:int32 value:T flow_in:float", out: "flow_out:float", attrs: "T:type", stateful: true},
	{name: "TensorArraySizeV3", in: "handle:resource flow_in:float", out: "size:int32", stateful: true},
	{name: "TensorArraySplitV3", in: "handle:resource value:T lengths:int64 flow_in:float", out: "flow_out:float", attrs: "T:type", stateful: true},
	{name: "TensorArrayConcatV3", in: "handle:resource flow_in:float", out: "value:dtype lengths:int64", attrs: "dtype:type element_shape_except0:shape=?", stateful: true},
	{name: "TensorArrayCloseV3", in: "handle:resource", stateful: true},
	{name: "Range", in: "start:Tidx limit:Tidx delta:Tidx", out: "output:Tidx", attrs: "Tidx:type=int32"},
}

func init() { opSpecs = append(opSpecs, tensorArrayOpSpecs...) }
