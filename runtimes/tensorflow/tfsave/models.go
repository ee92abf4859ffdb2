package tfsave

import (
	"fmt"
	"math"

	"github.com/inferbid/inferbid/tensor"
)

// MLPWeights returns the benchmark MLP's weights as the team contract
// defines them: W1 [8,16] with W1[i][j] = float32(0.5*sin(i*16+j)),
// b1[j] = float32(0.1*cos(j)), W2 [16,1] with W2[j][0] = float32(0.5*sin(100+j)),
// b2 = [0.05]. Row-major.
func MLPWeights() (w1, b1, w2, b2 []float32) {
	w1 = make([]float32, 8*16)
	for i := 0; i < 8; i++ {
		for j := 0; j < 16; j++ {
			w1[i*16+j] = float32(0.5 * math.Sin(float64(i*16+j)))
		}
	}
	b1 = make([]float32, 16)
	w2 = make([]float32, 16)
	for j := 0; j < 16; j++ {
		b1[j] = float32(0.1 * math.Cos(float64(j)))
		w2[j] = float32(0.5 * math.Sin(float64(100+j)))
	}
	return w1, b1, w2, []float32{0.05}
}

// MLPInput is the contract's benchmark input: x[b][i] = float32((b*8+i)%10)/10,
// shape [batch,8].
func MLPInput(batch int) []float32 {
	x := make([]float32, batch*8)
	for i := range x {
		x[i] = float32(i%10) / 10
	}
	return x
}

// MLP returns the team's benchmark MLP: signature input "x" (placeholder
// "serving_default_x") FLOAT [-1,8], output "y" FLOAT [-1,1];
// y = sigmoid(relu(x·W1 + b1)·W2 + b2) with MLPWeights held in the
// variables dense/kernel, dense/bias, dense_1/kernel, dense_1/bias.
func MLP(opts Options) (map[string][]byte, error) {
	w1, b1, w2, b2 := MLPWeights()
	b := NewBuilderWith(opts)
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, 8})
	h := b.dense("dense", x, w1, b1, 8, 16, "Relu")
	y := b.dense("dense_1", h, w2, b2, 16, 1, "Sigmoid")
	y = b.OpNamed("y", "Identity", []string{y}, nil)
	b.Signature(ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	return b.Files()
}

// dense adds a Keras-style Dense layer: activation(x·kernel + bias) with the
// kernel [in,out] and bias [out] as variables under scope.
func (b *Builder) dense(scope, x string, kernel, bias []float32, in, out int64, activation string) string {
	k := b.Variable(scope+"/kernel", tensor.New("", []int64{in, out}, kernel))
	bv := b.Variable(scope+"/bias", tensor.New("", []int64{out}, bias))
	mm := b.OpNamed(scope+"/MatMul", "MatMul", []string{x, k.Value}, nil)
	y := b.OpNamed(scope+"/BiasAdd", "BiasAdd", []string{mm, bv.Value}, nil)
	if activation == "" {
		return y
	}
	return b.OpNamed(scope+"/"+activation, activation, []string{y}, nil)
}

// AllDTypesSpec lists the AllDTypes model's signature keys: input
// "<dtype>_in" and output "<dtype>_out" per dtype (lower-case contract
// name, e.g. "int16_in"), each shape [-1,2].
var AllDTypesSpec = []tensor.DType{tensor.Double, tensor.Float, tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64}

// AllDTypesModel returns the conformance AllDTypes fixture: six inputs
// "double_in", "float_in", "int8_in", "int16_in", "int32_in", "int64_in"
// (placeholders "serving_default_<key>") of shape [-1,2]; six outputs
// "<dtype>_out", each the unchanged input (Identity).
func AllDTypesModel(opts Options) (map[string][]byte, error) {
	b := NewBuilderWith(opts)
	ins, outs := map[string]string{}, map[string]string{}
	for _, d := range AllDTypesSpec {
		name := lower(d.String())
		x := b.Placeholder("serving_default_"+name+"_in", d, []int64{-1, 2})
		ins[name+"_in"] = x
		outs[name+"_out"] = b.OpNamed(name+"_out", "Identity", []string{x}, nil)
	}
	b.Signature(ServingSignature, ins, outs)
	return b.Files()
}

// V2DTypesSpec lists the V2DTypes model's dtypes: those only the v2
// (KServe) surfaces carry.
var V2DTypesSpec = []tensor.DType{tensor.Bool, tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64, tensor.Half, tensor.Bytes}

// V2DTypesModel returns a model of one input "<dtype>_in" per dtype of
// dtypes (V2DTypesSpec when none; lower-case protocol name, e.g. "fp16_in";
// DT_HALF for FP16, DT_STRING for BYTES) of shape [-1,2], and outputs
// "<dtype>_out", each the unchanged input (Identity), plus "bool_as_float"
// and "fp16_as_float", the BOOL and FP16 inputs Cast to FLOAT.
func V2DTypesModel(opts Options, dtypes ...tensor.DType) (map[string][]byte, error) {
	if len(dtypes) == 0 {
		dtypes = V2DTypesSpec
	}
	b := NewBuilderWith(opts)
	ins, outs := map[string]string{}, map[string]string{}
	for _, d := range dtypes {
		name := lower(d.String())
		x := b.Placeholder("serving_default_"+name+"_in", d, []int64{-1, 2})
		ins[name+"_in"] = x
		outs[name+"_out"] = b.OpNamed(name+"_out", "Identity", []string{x}, nil)
		if d == tensor.Bool || d == tensor.Half {
			outs[name+"_as_float"] = b.OpNamed(name+"_as_float", "Cast", []string{x}, map[string]any{"SrcT": d, "DstT": tensor.Float})
		}
	}
	b.Signature(ServingSignature, ins, outs)
	return b.Files()
}

func lower(s string) string {
	r := []byte(s)
	for i, c := range r {
		if c >= 'A' && c <= 'Z' {
			r[i] = c + 'a' - 'A'
		}
	}
	return string(r)
}

// AffineModel returns a model with input "x" (placeholder
// "serving_default_x") FLOAT [-1,3] and output "y" = a*x + c, where a and c
// are scalar variables "a" and "c" restored from the checkpoint.
func AffineModel(opts Options, a, c float32) (map[string][]byte, error) {
	b := NewBuilderWith(opts)
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, 3})
	av := b.Variable("a", tensor.New("", []int64{}, []float32{a}))
	cv := b.Variable("c", tensor.New("", []int64{}, []float32{c}))
	ax := b.OpNamed("mul", "Mul", []string{x, av.Value}, nil)
	y := b.OpNamed("y", "AddV2", []string{ax, cv.Value}, nil)
	b.Signature(ServingSignature, map[string]string{"x": x}, map[string]string{"y": y})
	return b.Files()
}

// Weight fills n float32 weights deterministically:
// w[i] = float32(scale * sin(seed + 0.7*i)). The example models use it so
// tests can recompute their answers independently.
func Weight(seed, scale float64, n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(scale * math.Sin(seed+0.7*float64(i)))
	}
	return w
}

// Example model dimensions.
const (
	PCTRAdVocab        = 100 // ad_id in [0,100)
	PCTRPublisherVocab = 50  // publisher_id in [0,50)
	PCTREmbedDim       = 4
	PCTRDense          = 6
	PCTRHidden         = 16

	PCVRCampaignVocab = 64 // campaign_id in [0,64)
	PCVRCountryVocab  = 32 // country_id in [0,32)
	PCVRCampaignDim   = 4
	PCVRCountryDim    = 3
	PCVRFeatures      = 5
	PCVRHidden        = 8
)

// PCTRModel returns the example pCTR model. Signature serving_default:
//
//	inputs  ad_id        INT64 [-1,1]  in [0,100)  (placeholder serving_default_ad_id)
//	        publisher_id INT64 [-1,1]  in [0,50)   (serving_default_publisher_id)
//	        dense        FLOAT [-1,6]               (serving_default_dense)
//	output  pctr         FLOAT [-1,1]  in (0,1)
//
// pctr = sigmoid(relu(concat(E_ad[ad_id], E_pub[publisher_id], dense)·W1 + b1)·W2 + b2)
// with E_ad [100,4] looked up by ResourceGather (GatherV2 with RefVariables), E_pub [50,4] by GatherV2 on
// its read value, W1 [14,16], b1 [16], W2 [16,1], b2 [1]; the weights are
// Weight(seed, scale, n) with (seed, scale) = (1, 0.5), (2, 0.5), (3, 0.4),
// (4, 0.1), (5, 0.5), (6, 0.1) in that order.
func PCTRModel(opts Options) (map[string][]byte, error) {
	b := NewBuilderWith(opts)
	ad := b.Placeholder("serving_default_ad_id", tensor.Int64, []int64{-1, 1})
	pub := b.Placeholder("serving_default_publisher_id", tensor.Int64, []int64{-1, 1})
	dense := b.Placeholder("serving_default_dense", tensor.Float, []int64{-1, PCTRDense})
	adE := b.Variable("ad_embedding/embeddings", tensor.New("", []int64{PCTRAdVocab, PCTREmbedDim}, Weight(1, 0.5, PCTRAdVocab*PCTREmbedDim)))
	pubE := b.Variable("publisher_embedding/embeddings", tensor.New("", []int64{PCTRPublisherVocab, PCTREmbedDim}, Weight(2, 0.5, PCTRPublisherVocab*PCTREmbedDim)))
	flat := ConstOf[int32](b, "flatten/Const", []int64{2}, -1, PCTREmbedDim)
	var adLookup string
	if opts.Variables == RefVariables {
		// TF1 variables have no resource to gather from.
		adLookup = b.OpNamed("ad_embedding/embedding_lookup", "GatherV2", []string{adE.Value, ad, ConstOf[int32](b, "ad_embedding/axis", []int64{}, 0)}, nil)
	} else {
		adLookup = b.OpNamed("ad_embedding/embedding_lookup", "ResourceGather", []string{adE.Handle, ad}, map[string]any{"dtype": tensor.Float})
	}
	adVec := b.OpNamed("flatten/Reshape", "Reshape", []string{adLookup, flat}, nil)
	axis0 := ConstOf[int32](b, "publisher_embedding/axis", []int64{}, 0)
	pubLookup := b.OpNamed("publisher_embedding/GatherV2", "GatherV2", []string{pubE.Value, pub, axis0}, nil)
	pubVec := b.OpNamed("flatten/Reshape_1", "Reshape", []string{pubLookup, flat}, nil)
	axis1 := ConstOf[int32](b, "concatenate/axis", []int64{}, 1)
	cat := b.OpNamed("concatenate/concat", "ConcatV2", []string{adVec, pubVec, dense, axis1}, nil)
	in := int64(2*PCTREmbedDim + PCTRDense)
	h := b.dense("dense", cat, Weight(3, 0.4, int(in*PCTRHidden)), Weight(4, 0.1, PCTRHidden), in, PCTRHidden, "Relu")
	y := b.dense("dense_1", h, Weight(5, 0.5, PCTRHidden), Weight(6, 0.1, 1), PCTRHidden, 1, "Sigmoid")
	y = b.OpNamed("pctr", "Identity", []string{y}, nil)
	b.Signature(ServingSignature, map[string]string{"ad_id": ad, "publisher_id": pub, "dense": dense}, map[string]string{"pctr": y})
	return b.Files()
}

// PCVRModel returns the example pCVR model. Signature serving_default:
//
//	inputs  campaign_id INT64  [-1,1] in [0,64)  (placeholder serving_default_campaign_id)
//	        country_id  INT64  [-1,1] in [0,32)  (serving_default_country_id)
//	        features    DOUBLE [-1,5]             (serving_default_features)
//	output  pcvr        FLOAT  [-1,1] in (0,1)
//
// pcvr = sigmoid(relu(concat(E_c[campaign_id], E_k[country_id], float32(features))·W1 + b1)·W2 + b2)
// with E_c [64,4] and E_k [32,3] looked up by GatherV2 on their read values
// (axis 0) and squeezed to rank 2, W1 [12,8], b1 [8], W2 [8,1], b2 [1];
// the weights are Weight(seed, scale, n) with (seed, scale) = (11, 0.5),
// (12, 0.5), (13, 0.4), (14, 0.1), (15, 0.6), (16, 0.1) in that order.
func PCVRModel(opts Options) (map[string][]byte, error) {
	b := NewBuilderWith(opts)
	camp := b.Placeholder("serving_default_campaign_id", tensor.Int64, []int64{-1, 1})
	country := b.Placeholder("serving_default_country_id", tensor.Int64, []int64{-1, 1})
	feats := b.Placeholder("serving_default_features", tensor.Double, []int64{-1, PCVRFeatures})
	campE := b.Variable("campaign_embedding/embeddings", tensor.New("", []int64{PCVRCampaignVocab, PCVRCampaignDim}, Weight(11, 0.5, PCVRCampaignVocab*PCVRCampaignDim)))
	countryE := b.Variable("country_embedding/embeddings", tensor.New("", []int64{PCVRCountryVocab, PCVRCountryDim}, Weight(12, 0.5, PCVRCountryVocab*PCVRCountryDim)))
	axis0 := ConstOf[int32](b, "axis", []int64{}, 0)
	lookup := func(scope, table, ids string) string {
		g := b.OpNamed(scope+"/embedding_lookup", "GatherV2", []string{table, ids, axis0}, nil)
		return b.OpNamed(scope+"/Squeeze", "Squeeze", []string{g}, map[string]any{"squeeze_dims": []int64{1}})
	}
	c := lookup("campaign_embedding", campE.Value, camp)
	k := lookup("country_embedding", countryE.Value, country)
	f := b.OpNamed("features/Cast", "Cast", []string{feats}, map[string]any{"DstT": tensor.Float})
	axis1 := ConstOf[int32](b, "concatenate/axis", []int64{}, 1)
	cat := b.OpNamed("concatenate/concat", "ConcatV2", []string{c, k, f, axis1}, nil)
	in := int64(PCVRCampaignDim + PCVRCountryDim + PCVRFeatures)
	h := b.dense("dense", cat, Weight(13, 0.4, int(in*PCVRHidden)), Weight(14, 0.1, PCVRHidden), in, PCVRHidden, "Relu")
	y := b.dense("dense_1", h, Weight(15, 0.6, PCVRHidden), Weight(16, 0.1, 1), PCVRHidden, 1, "Sigmoid")
	y = b.OpNamed("pcvr", "Identity", []string{y}, nil)
	b.Signature(ServingSignature, map[string]string{"campaign_id": camp, "country_id": country, "features": feats}, map[string]string{"pcvr": y})
	return b.Files()
}

// CounterModel returns a stateful model like the reference's: input
// "input_1" (placeholder "serving_default_input_1") FLOAT [-1], unused;
// output "output_1" INT32 scalar. Each call adds 1 to the resource variable
// "counter" (AssignAddVariableOp) and returns its new value. The checkpoint
// holds start, so successive calls return start+1, start+2, ...
func CounterModel(opts Options, start int32) (map[string][]byte, error) {
	if opts.Variables == RefVariables {
		return nil, fmt.Errorf("tfsave: CounterModel needs resource variables (AssignAddVariableOp)")
	}
	b := NewBuilderWith(opts)
	v := b.Variable("counter", tensor.New("", []int64{}, []int32{start}))
	x := b.Placeholder("serving_default_input_1", tensor.Float, []int64{-1})
	one := ConstOf[int32](b, "add/y", []int64{}, 1)
	inc := b.OpNamed("AssignAddVariableOp", "AssignAddVariableOp", []string{v.Handle, one}, nil)
	read := b.OpNamed("ReadVariableOp", "ReadVariableOp", []string{v.Handle, "^" + inc}, map[string]any{"dtype": tensor.Int32})
	y := b.OpNamed("output_1", "Identity", []string{read}, nil)
	b.Signature(ServingSignature, map[string]string{"input_1": x}, map[string]string{"output_1": y})
	return b.Files()
}

// RunningSumModel returns a stateful model for sequences: input "x"
// (placeholder "serving_default_x") FLOAT [1]; output "sum" FLOAT [1]. Each
// call adds x to the resource variable "running_sum" (AssignAddVariableOp) and
// returns its new value; the checkpoint holds start.
func RunningSumModel(opts Options, start float32) (map[string][]byte, error) {
	if opts.Variables == RefVariables {
		return nil, fmt.Errorf("tfsave: RunningSumModel needs resource variables (AssignAddVariableOp)")
	}
	b := NewBuilderWith(opts)
	v := b.Variable("running_sum", tensor.New("", []int64{1}, []float32{start}))
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{1})
	inc := b.OpNamed("AssignAddVariableOp", "AssignAddVariableOp", []string{v.Handle, x}, nil)
	read := b.OpNamed("ReadVariableOp", "ReadVariableOp", []string{v.Handle, "^" + inc}, map[string]any{"dtype": tensor.Float})
	y := b.OpNamed("sum", "Identity", []string{read}, nil)
	b.Signature(ServingSignature, map[string]string{"x": x}, map[string]string{"sum": y})
	return b.Files()
}
