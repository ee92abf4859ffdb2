package sidecar

import (
	"context"
	"errors"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/sidecar/fastlane"
)

// Fallback sends a typed PredictRequest another way: a JS worker's Client,
// which has no replay gate of its own, hands the host the requests the
// sidecar could not be reached for, or whose answer named a model the
// sidecar does not have (yet), and the host's Client (a Supervisor's) waits
// for a replay in progress (PredictProto).
type Fallback func(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error)

// PredictProto runs a typed request as Predict does: during a replay after a
// sidecar restart it waits for the request's models, and a request that
// never reached a sidecar that has just died is sent again, once. It is the
// host's side of a JS worker's Fallback.
func (c *Client) PredictProto(ctx context.Context, req *inferencepb.PredictRequest) (*inferencepb.PredictResponse, error) {
	paths := func(yield func(string) bool) {
		for _, m := range req.GetBatch().GetRequests() {
			if !yield(m.GetModelPath()) {
				return
			}
		}
	}
	return c.send(ctx, req, paths)
}

// withFallback hands the client's Fallback what the sidecar could not
// answer: the whole request when it never reached the sidecar, and only the
// entries answered MODEL_NOT_FOUND (a model the host may be replaying) when
// it did: the others ran, and running them again would, for a sequence,
// apply its step twice. The retried entries' answers, and their debug lines
// (numbered as in req), replace and follow the first ones; when the
// fallback fails with a GRPC error (the host's sidecar is unavailable, or
// the call was abandoned), that error is theirs; when it fails otherwise,
// the first answers stand.
func (c *Client) withFallback(ctx context.Context, req *inferencepb.PredictRequest, resp *inferencepb.PredictResponse, err error) (*inferencepb.PredictResponse, error) {
	if c.fallback == nil {
		return resp, err
	}
	if err != nil {
		if errors.Is(err, fastlane.ErrNotSent) {
			return c.fallback(ctx, req)
		}
		return resp, err
	}
	got := resp.GetResult().GetResponses()
	reqs := req.GetBatch().GetRequests()
	var missing []int
	for j, r := range got {
		if r.GetError().GetType() == inferencepb.ErrorType(inferr.ModelNotFound) && j < len(reqs) {
			missing = append(missing, j)
		}
	}
	if len(missing) == 0 {
		return resp, nil
	}
	retry := &inferencepb.PredictRequest{IsConsented: req.GetIsConsented(), Input: &inferencepb.PredictRequest_Batch{Batch: &inferencepb.Batch{}}}
	for _, j := range missing {
		retry.GetBatch().Requests = append(retry.GetBatch().Requests, reqs[j])
	}
	again, ferr := c.fallback(ctx, retry)
	if ferr != nil && inferr.TypeOf(ferr) == inferr.GRPC {
		// The host could not serve them either: the sidecar is
		// unavailable (hung, crash-looping) or the call was abandoned.
		// That, not MODEL_NOT_FOUND from a sidecar that has just
		// restarted, is the entries' answer.
		for _, j := range missing {
			got[j] = &inferencepb.ModelResponse{ModelPath: got[j].GetModelPath(), Error: errorToProto(ferr)}
		}
		return resp, nil
	}
	if ferr != nil || len(again.GetResult().GetResponses()) != len(missing) {
		return resp, nil
	}
	for k, j := range missing {
		got[j] = again.GetResult().GetResponses()[k]
	}
	for _, l := range again.GetDebugLogs() {
		resp.DebugLogs = append(resp.DebugLogs, renumberDebugLine(l, missing))
	}
	return resp, nil
}

// ErrorToProto is the wire form of a typed error (its type, its sanitised
// message, a sequence error's class), as the fast lane's error frames carry it.
func ErrorToProto(err error) *inferencepb.Error { return errorToProto(err) }

// ErrorFromProto is the typed error of a wire error.
func ErrorFromProto(e *inferencepb.Error) error { return errorFromProto(e) }
