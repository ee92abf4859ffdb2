package kserve_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/kserve"
	pb "github.com/inferbid/inferbid/proto/kservepb"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/sidecar"
)

// v2Fixture is a runtime's identity models of the datatypes only the v2
// surfaces carry: All takes every one of v2Values' datatypes, Typed all but
// FP16 (which has no typed contents field). Inputs are InName(lower-case
// datatype), outputs OutName(...).
type v2Fixture struct {
	All, Typed      runtimes.Files
	InName, OutName func(datatype string) string
}

// v2Value is one datatype's [2,2] test values in each form: JSON data in,
// JSON data out (flat), typed contents and raw bytes. Each carries edge
// values: extremes, FP16 subnormal and NaN/Inf bits (raw only: JSON has no
// NaN), BYTES that are not UTF-8 (gRPC) or hold JSON delimiters (HTTP).
type v2Value struct {
	datatype, jsonIn, jsonOut string
	typed                     *pb.InferTensorContents
	raw                       []byte
}

func u16le(vs ...uint16) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

func u32le(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

func u64le(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// rawBytes is BYTES elements in the protocol's raw form: a 4-byte
// little-endian length before each.
func rawBytes(vs ...[]byte) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

var binaryBytes = [][]byte{{0xff, 0x01, 0x80}, {}, []byte("é"), []byte("a,b]")}

var v2Values = []v2Value{
	{"BOOL", "[[true,false],[false,true]]", "[true,false,false,true]",
		&pb.InferTensorContents{BoolContents: []bool{true, false, false, true}}, []byte{1, 0, 0, 1}},
	{"UINT8", "[[0,1],[254,255]]", "[0,1,254,255]",
		&pb.InferTensorContents{UintContents: []uint32{0, 1, 254, 255}}, []byte{0, 1, 254, 255}},
	{"UINT16", "[[0,1],[40000,65535]]", "[0,1,40000,65535]",
		&pb.InferTensorContents{UintContents: []uint32{0, 1, 40000, 65535}}, u16le(0, 1, 40000, 65535)},
	{"UINT32", "[[0,1],[3000000000,4294967295]]", "[0,1,3000000000,4294967295]",
		&pb.InferTensorContents{UintContents: []uint32{0, 1, 3e9, 1<<32 - 1}}, u32le(0, 1, 3e9, 1<<32-1)},
	{"UINT64", "[[0,1],[9223372036854775808,18446744073709551615]]", "[0,1,9223372036854775808,18446744073709551615]",
		&pb.InferTensorContents{Uint64Contents: []uint64{0, 1, 1 << 63, 1<<64 - 1}}, u64le(0, 1, 1<<63, 1<<64-1)},
	{"FP16", "[[1,-2],[65504,5.9604645e-08]]", "[1,-2,65504,5.9604645e-08]",
		nil, u16le(0x3c00, 0x7e01, 0xfc00, 0x0001)}, // 1, NaN with a payload, -Inf, the smallest subnormal
	{"BYTES", `[["a, ]b\"","é"],["","\u0001"]]`, `["a, ]b\"","é","","\u0001"]`,
		&pb.InferTensorContents{BytesContents: binaryBytes}, rawBytes(binaryBytes...)},
}

// registerV2 registers the fixture's models as v2dtypes/ and v2typed/.
func registerV2(t *testing.T, client *sidecar.Client, fx v2Fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for path, files := range map[string]runtimes.Files{"v2dtypes/": fx.All, "v2typed/": fx.Typed} {
		if err := client.RegisterModel(ctx, path, files, ""); err != nil {
			t.Fatalf("register %s: %v", path, err)
		}
	}
}

// runV2DTypesConformance round-trips every v2-only datatype through the
// identity models over HTTP (JSON) and gRPC (typed and raw), exactly.
func runV2DTypesConformance(t *testing.T, client *sidecar.Client, fx v2Fixture) {
	registerV2(t, client, fx)
	srv := kserve.New(kserve.Options{})
	srv.SetBackend(client)
	lower := strings.ToLower
	t.Run("HTTP", func(t *testing.T) {
		url := serveHTTP(t, srv)
		code, body := call(t, "GET", url+"/v2/models/v2dtypes", "")
		var md kserve.ModelMetadata
		decodeJSON(t, body, &md)
		for _, v := range v2Values {
			i := slices.IndexFunc(md.Inputs, func(m kserve.TensorMetadata) bool { return m.Name == fx.InName(lower(v.datatype)) })
			if code != 200 || i < 0 || md.Inputs[i].Datatype != v.datatype {
				t.Errorf("metadata %d %s: want input %q of datatype %s", code, body, fx.InName(lower(v.datatype)), v.datatype)
			}
		}
		var inputs []string
		for _, v := range v2Values {
			inputs = append(inputs, fmt.Sprintf(`{"name":%q,"shape":[2,2],"datatype":%q,"data":%s}`, fx.InName(lower(v.datatype)), v.datatype, v.jsonIn))
		}
		code, body = call(t, "POST", url+"/v2/models/v2dtypes/infer", `{"inputs":[`+strings.Join(inputs, ",")+`]}`)
		if code != 200 {
			t.Fatalf("v2dtypes infer: %d %s", code, body)
		}
		var r struct {
			ModelName    string `json:"model_name"`
			ModelVersion string `json:"model_version"`
			Outputs      []struct {
				Name     string          `json:"name"`
				Shape    []int64         `json:"shape"`
				Datatype string          `json:"datatype"`
				Data     json.RawMessage `json:"data"`
			} `json:"outputs"`
		}
		decodeJSON(t, body, &r)
		for _, v := range v2Values {
			found := false
			for _, o := range r.Outputs {
				if o.Name != fx.OutName(lower(v.datatype)) {
					continue
				}
				found = true
				if o.Datatype != v.datatype || !slices.Equal(o.Shape, []int64{2, 2}) || string(o.Data) != v.jsonOut {
					t.Errorf("%s: output %s %v %s, want %s [2,2] %s", v.datatype, o.Datatype, o.Shape, o.Data, v.datatype, v.jsonOut)
				}
			}
			if !found {
				t.Errorf("no output %q in %s", fx.OutName(lower(v.datatype)), body)
			}
		}
	})
	t.Run("gRPC", func(t *testing.T) {
		c := serveGRPC(t, srv)
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		input := func(v v2Value) *pb.ModelInferRequest_InferInputTensor {
			return &pb.ModelInferRequest_InferInputTensor{Name: fx.InName(lower(v.datatype)), Datatype: v.datatype, Shape: []int64{2, 2}}
		}
		output := func(r *pb.ModelInferResponse, v v2Value) (int, *pb.ModelInferResponse_InferOutputTensor) {
			i := slices.IndexFunc(r.GetOutputs(), func(o *pb.ModelInferResponse_InferOutputTensor) bool {
				return o.GetName() == fx.OutName(lower(v.datatype))
			})
			if i < 0 {
				t.Fatalf("no output %q", fx.OutName(lower(v.datatype)))
			}
			return i, r.GetOutputs()[i]
		}

		// Typed contents, to the model without FP16.
		typed := &pb.ModelInferRequest{ModelName: "v2typed"}
		for _, v := range v2Values {
			if v.typed != nil {
				in := input(v)
				in.Contents = v.typed
				typed.Inputs = append(typed.Inputs, in)
			}
		}
		r, err := c.ModelInfer(ctx, typed)
		if err != nil {
			t.Fatalf("typed ModelInfer: %v", err)
		}
		if len(r.GetRawOutputContents()) != 0 {
			t.Errorf("a typed request got raw_output_contents")
		}
		for _, v := range v2Values {
			if v.typed == nil {
				continue
			}
			_, o := output(r, v)
			if o.GetDatatype() != v.datatype || !slices.Equal(o.GetShape(), []int64{2, 2}) || !proto.Equal(o.GetContents(), v.typed) {
				t.Errorf("typed %s: output %v, want %v", v.datatype, o, v.typed)
			}
		}

		// Raw contents, every datatype.
		raw := &pb.ModelInferRequest{ModelName: "v2dtypes"}
		for _, v := range v2Values {
			raw.Inputs = append(raw.Inputs, input(v))
			raw.RawInputContents = append(raw.RawInputContents, v.raw)
		}
		r, err = c.ModelInfer(ctx, raw)
		if err != nil {
			t.Fatalf("raw ModelInfer: %v", err)
		}
		for _, v := range v2Values {
			i, o := output(r, v)
			if o.GetDatatype() != v.datatype || o.GetContents() != nil || i >= len(r.GetRawOutputContents()) || string(r.GetRawOutputContents()[i]) != string(v.raw) {
				t.Errorf("raw %s: output %v, want raw % x", v.datatype, o, v.raw)
			}
		}

		// FP16 has no typed field: a 400 (InvalidArgument) naming the input.
		fp16 := &pb.ModelInferRequest{ModelName: "v2dtypes"}
		for _, v := range v2Values {
			in := input(v)
			in.Contents = v.typed
			if v.typed == nil {
				in.Contents = &pb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}
			}
			fp16.Inputs = append(fp16.Inputs, in)
		}
		_, err = c.ModelInfer(ctx, fp16)
		wantCode(t, "FP16 in typed contents", err, codes.InvalidArgument, fx.InName("fp16"), "raw_input_contents")

		// A datatype the model does not take: the runtime's 400 naming the
		// input and both datatypes.
		mismatch := &pb.ModelInferRequest{ModelName: "v2typed"}
		for _, v := range v2Values {
			if v.typed == nil {
				continue
			}
			in := input(v)
			in.Contents = v.typed
			if v.datatype == "UINT16" {
				in.Datatype, in.Contents = "INT16", &pb.InferTensorContents{IntContents: []int32{1, 2, 3, 4}}
			}
			mismatch.Inputs = append(mismatch.Inputs, in)
		}
		_, err = c.ModelInfer(ctx, mismatch)
		wantCode(t, "INT16 for a UINT16 input", err, codes.InvalidArgument, fx.InName("uint16"), "data_type INT16, model expects UINT16")
	})
}
