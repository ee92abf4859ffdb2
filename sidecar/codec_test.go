package sidecar

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/proto/inferencepb"
)

// The codec must read and write exactly what protobuf does; only where the
// bytes live differs.
func TestServerCodecMatchesProto(t *testing.T) {
	big := []byte(`{"request":[` + strings.Repeat(" ", 2*pooledMessageBytes) + `]}`)
	reqs := []*inferencepb.PredictRequest{
		{Input: &inferencepb.PredictRequest_BatchJson{BatchJson: []byte(`{"request":[]}`)}},
		{Input: &inferencepb.PredictRequest_BatchJson{BatchJson: big}, IsConsented: true},
		{Input: &inferencepb.PredictRequest_BatchJson{BatchJson: big}},
		{Input: &inferencepb.PredictRequest_BatchJson{BatchJson: []byte{}}},
		{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{Requests: []*inferencepb.ModelRequest{{ModelPath: strings.Repeat("m", 2*pooledMessageBytes)}}}}},
	}
	for i, want := range reqs {
		wire, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := &inferencepb.PredictRequest{IsConsented: true} // must be reset
		if err := (serverCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, got); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("request %d: decoded differently from proto.Unmarshal", i)
		}
	}
	// A truncated message is an error, as with proto.Unmarshal.
	wire, _ := proto.Marshal(reqs[1])
	if err := (serverCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire[:len(wire)-1])}, &inferencepb.PredictRequest{}); err == nil {
		t.Error("a truncated request decoded without error")
	}

	for i, resp := range []*inferencepb.PredictResponse{
		{Output: &inferencepb.PredictResponse_OutputJson{OutputJson: []byte(`{"response":[]}`)}},
		{Output: &inferencepb.PredictResponse_OutputJson{OutputJson: big}, DebugLogs: []string{"a", "b"}, Metrics: map[string]float64{"x": 1}},
		{Output: &inferencepb.PredictResponse_Result{Result: &inferencepb.BatchResult{Responses: []*inferencepb.ModelResponse{{ModelPath: string(big)}}}}},
	} {
		bs, err := (serverCodec{}).Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got := &inferencepb.PredictResponse{}
		if err := proto.Unmarshal(bs.Materialize(), got); err != nil || !proto.Equal(got, resp) {
			t.Errorf("response %d: round trip: %v", i, err)
		}
		if i == 1 && (len(bs) != 2 || !bytes.Equal(bs[1].ReadOnlyData(), big) || &bs[1].ReadOnlyData()[0] != &big[0]) {
			t.Errorf("a large output_json was copied into the message")
		}
		bs.Free()
	}
}

// FuzzUnmarshalJSONPredict: the aliasing decoder agrees with protobuf on
// every input it accepts.
func FuzzUnmarshalJSONPredict(f *testing.F) {
	for _, m := range []*inferencepb.PredictRequest{
		{Input: &inferencepb.PredictRequest_BatchJson{BatchJson: []byte(`{"request":[]}`)}, IsConsented: true},
		{Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{}}},
	} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x05, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		got := &inferencepb.PredictRequest{}
		if !unmarshalJSONPredict(b, got) {
			return
		}
		want := &inferencepb.PredictRequest{}
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatalf("accepted what protobuf rejects (%v)", err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("decoded %v, protobuf %v", got, want)
		}
	})
}
