package tfsave

import typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

// seqOpSpecs are the ops Keras LSTM/GRU layers use besides control flow,
// kept apart from opdefs.go so op families can be added independently.
var seqOpSpecs = []opSpec{
	{name: "Transpose", in: "x:T perm:Tperm", out: "y:T", attrs: "T:type Tperm:type=int32"},
	{name: "Split", in: "split_dim:int32 value:T", out: "output:num_split*T", attrs: "num_split:int>=1 T:type"},
	{name: "SplitV", in: "value:T size_splits:Tlen split_dim:int32", out: "output:num_split*T", attrs: "num_split:int>=1 T:type Tlen:type=int64"},
	{name: "ReverseV2", in: "tensor:T axis:Tidx", out: "output:T", attrs: "Tidx:type=int32 T:type"},
	{name: "TensorListReserve", in: "element_shape:shape_type num_elements:int32", out: "handle:variant", attrs: "element_dtype:type shape_type:type"},
	{name: "TensorListFromTensor", in: "tensor:element_dtype element_shape:shape_type", out: "output_handle:variant", attrs: "element_dtype:type shape_type:type"},
	{name: "TensorListSetItem", in: "input_handle:variant index:int32 item:element_dtype", out: "output_handle:variant", attrs: "element_dtype:type resize_if_index_out_of_bounds:bool=false"},
	{name: "TensorListGetItem", in: "input_handle:variant index:int32 element_shape:int32", out: "item:element_dtype", attrs: "element_dtype:type"},
	{name: "TensorListStack", in: "input_handle:variant element_shape:int32", out: "tensor:element_dtype", attrs: "element_dtype:type num_elements:int=-1"},
	{name: "TensorListLength", in: "input_handle:variant", out: "length:int32"},
	{name: "TensorListElementShape", in: "input_handle:variant", out: "element_shape:shape_type", attrs: "shape_type:type"},
}

func init() {
	fixedTypes["variant"] = typespb.DataType_DT_VARIANT
	opSpecs = append(opSpecs, seqOpSpecs...)
}
