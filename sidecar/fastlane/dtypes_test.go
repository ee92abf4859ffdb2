package fastlane

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/proto/inferencepb"
)

// v2DTypeTensors are tensors of the dtypes only the v2 surfaces carry, with
// edge values (FP16 NaN bits, BYTES with NUL and non-UTF-8 bytes).
func v2DTypeTensors() []*inferencepb.Tensor {
	s := []int64{2}
	return []*inferencepb.Tensor{
		{Name: "b", DataType: inferencepb.DataType_BOOL, Shape: s, BoolData: []bool{true, false}},
		{Name: "u8", DataType: inferencepb.DataType_UINT8, Shape: s, UintData: []uint32{0, 255}},
		{Name: "u16", DataType: inferencepb.DataType_UINT16, Shape: s, UintData: []uint32{0, 65535}},
		{Name: "u32", DataType: inferencepb.DataType_UINT32, Shape: s, UintData: []uint32{0, math.MaxUint32}},
		{Name: "u64", DataType: inferencepb.DataType_UINT64, Shape: s, Uint64Data: []uint64{0, math.MaxUint64}},
		{Name: "h", DataType: inferencepb.DataType_FP16, Shape: s, Fp16Data: []byte{0x00, 0x3c, 0x01, 0x7e}},
		{Name: "s", DataType: inferencepb.DataType_BYTES, Shape: s, BytesData: [][]byte{{0, 0xff, 0}, []byte("é")}},
	}
}

// TestV2DTypesCrossTheFastLane: a typed batch of every v2-only dtype goes
// to a real fast-lane server and back (the server echoes the tensors)
// unchanged.
func TestV2DTypesCrossTheFastLane(t *testing.T) {
	echo := func(_ context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
		out := &inferencepb.BatchResult{}
		for _, r := range req.GetBatch().GetRequests() {
			out.Responses = append(out.Responses, &inferencepb.ModelResponse{ModelPath: r.GetModelPath(), Tensors: r.GetTensors()})
		}
		return &inferencepb.PredictResponse{Output: &inferencepb.PredictResponse_Result{Result: out}}, nil
	}
	ts := startServer(t, ServerOptions{Handler: echo})
	c := NewClient(ts.socket, ClientOptions{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := v2DTypeTensors()
	req := &inferencepb.PredictRequest{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{
		Requests: []*inferencepb.ModelRequest{{ModelPath: "m/", Tensors: want}}}}}
	resp, err := c.Predict(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetResult().GetResponses()
	if len(got) != 1 || len(got[0].GetTensors()) != len(want) {
		t.Fatalf("answer %v, want one response of %d tensors", resp, len(want))
	}
	for i, w := range want {
		if !proto.Equal(got[0].GetTensors()[i], w) {
			t.Errorf("tensor %s: got %v, want %v", w.GetName(), got[0].GetTensors()[i], w)
		}
	}
}
