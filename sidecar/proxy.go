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

// needsFallback reports whether a request should go to the client's
// Fallback: it did not reach the sidecar, or an entry met a model the
// sidecar does not have, which the host may be replaying.
func (c *Client) needsFallback(resp *inferencepb.PredictResponse, err error) bool {
	if c.fallback == nil {
		return false
	}
	if err != nil {
		return errors.Is(err, fastlane.ErrNotSent)
	}
	for _, r := range resp.GetResult().GetResponses() {
		if r.GetError().GetType() == inferencepb.ErrorType(inferr.ModelNotFound) {
			return true
		}
	}
	return false
}

// ErrorToProto is the wire form of a typed error (its type, its sanitised
// message, a sequence error's class), as the fast lane's error frames carry it.
func ErrorToProto(err error) *inferencepb.Error { return errorToProto(err) }

// ErrorFromProto is the typed error of a wire error.
func ErrorFromProto(e *inferencepb.Error) error { return errorFromProto(e) }
