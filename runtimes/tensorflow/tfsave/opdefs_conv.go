package tfsave

// CNN ops (TensorFlow's nn_ops.cc). Defaults this compact form cannot write
// (dilations [1,1,1,1], float epsilon) are left required: set them.
func init() {
	opSpecs = append(opSpecs,
		opSpec{name: "Conv2D", in: "input:T filter:T", out: "output:T", attrs: "T:type strides:list(int) use_cudnn_on_gpu:bool=true padding:string explicit_paddings:list(int)=[] data_format:string=NHWC dilations:list(int)"},
		opSpec{name: "DepthwiseConv2dNative", in: "input:T filter:T", out: "output:T", attrs: "T:type strides:list(int) padding:string explicit_paddings:list(int)=[] data_format:string=NHWC dilations:list(int)"},
		opSpec{name: "MaxPool", in: "input:T", out: "output:T", attrs: "T:type=float ksize:list(int)>=4 strides:list(int)>=4 padding:string explicit_paddings:list(int)=[] data_format:string=NHWC"},
		opSpec{name: "AvgPool", in: "value:T", out: "output:T", attrs: "ksize:list(int)>=4 strides:list(int)>=4 padding:string data_format:string=NHWC T:type"},
		opSpec{name: "FusedBatchNormV3", in: "x:T scale:U offset:U mean:U variance:U", out: "y:T batch_mean:U batch_variance:U reserve_space_1:U reserve_space_2:U reserve_space_3:U", attrs: "T:type U:type epsilon:float exponential_avg_factor:float data_format:string=NHWC is_training:bool=true"},
		opSpec{name: "FusedBatchNorm", in: "x:T scale:T offset:T mean:T variance:T", out: "y:T batch_mean:T batch_variance:T reserve_space_1:T reserve_space_2:T", attrs: "T:type epsilon:float exponential_avg_factor:float data_format:string=NHWC is_training:bool=true"},
	)
}
