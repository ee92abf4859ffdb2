package sidecar

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/inferbid/inferbid/proto/inferencepb"
)

// pooledMessageBytes is the largest message whose encoding goes through
// gRPC's buffer pool. gRPC's default codec pools every size, and sync.Pool
// keeps a 400 MB buffer alive for two garbage collections, which an idle
// sidecar may not run for minutes; larger messages get buffers of their own
// that are freed with the request.
const pooledMessageBytes = 1 << 20

// inlineOutputBytes is the output_json size from which a PredictResponse is
// sent without copying the JSON into the encoded message.
const inlineOutputBytes = 64 << 10

// serverCodec is gRPC's proto codec, minus the copies a large JSON Predict
// made: the request's batch_json aliases the one buffer its message was
// read into (no second copy), a large output_json goes out as it is (no
// copy into an encoded message), and messages over pooledMessageBytes never
// enter a pool. Together they keep a JSON Predict near 2x its size; see
// docs/architecture.md (Memory of a JSON Predict).
type serverCodec struct{}

var _ encoding.CodecV2 = serverCodec{}

// Name is the content subtype the codec serves: gRPC's default.
func (serverCodec) Name() string { return "proto" }

func (serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("sidecar codec: cannot marshal %T, want a proto.Message", v)
	}
	if resp, ok := m.(*inferencepb.PredictResponse); ok && len(resp.GetOutputJson()) >= inlineOutputBytes {
		return marshalJSONResponse(resp)
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if size <= pooledMessageBytes && !mem.IsBelowBufferPoolingThreshold(size) {
		pool := mem.DefaultBufferPool()
		buf := pool.Get(size)
		if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
			pool.Put(buf)
			return nil, err
		}
		return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
	}
	b, err := opts.MarshalAppend(make([]byte, 0, size), m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// marshalJSONResponse encodes resp as the other fields, then output_json's
// tag and length, then the JSON itself as its own buffer: protobuf fields
// may come in any order, and the JSON is never copied.
func marshalJSONResponse(resp *inferencepb.PredictResponse) (mem.BufferSlice, error) {
	rest := &inferencepb.PredictResponse{DebugLogs: resp.GetDebugLogs(), Metrics: resp.GetMetrics()}
	head, err := proto.Marshal(rest)
	if err != nil {
		return nil, err
	}
	out := resp.GetOutputJson()
	head = protowire.AppendTag(head, 1, protowire.BytesType) // output_json = 1
	head = protowire.AppendVarint(head, uint64(len(out)))
	return mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(out)}, nil
}

func (serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("sidecar codec: cannot unmarshal into %T, want a proto.Message", v)
	}
	if data.Len() <= pooledMessageBytes {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		return proto.Unmarshal(buf.ReadOnlyData(), m)
	}
	// One buffer of the message's own, never pooled. A JSON Predict's
	// batch_json aliases it (the buffer is garbage once the request is);
	// other messages are copied out as usual, so that a model that keeps
	// one small file does not pin a whole registration.
	b := data.Materialize()
	if req, ok := m.(*inferencepb.PredictRequest); ok && unmarshalJSONPredict(b, req) {
		return nil
	}
	return proto.Unmarshal(b, m)
}

// unmarshalJSONPredict decodes b into req when b is a JSON Predict (fields
// batch_json and is_consented only), with BatchJson aliasing b: protobuf's
// own decoder always copies bytes fields. It reports false, leaving req
// alone, for anything else (proto.Unmarshal then decodes it, and words its
// errors).
func unmarshalJSONPredict(b []byte, req *inferencepb.PredictRequest) bool {
	var batchJSON []byte
	consented := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // batch_json
			batchJSON, n = protowire.ConsumeBytes(b)
		case num == 3 && typ == protowire.VarintType: // is_consented
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			consented = v != 0
		default:
			return false
		}
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	if batchJSON == nil {
		return false
	}
	proto.Reset(req)
	req.Input = &inferencepb.PredictRequest_BatchJson{BatchJson: batchJSON}
	req.IsConsented = consented
	return true
}
