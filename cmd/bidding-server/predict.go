package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/internal/httpjson"
	"github.com/inferbid/inferbid/kserve"
)

// batchPredictor runs a runInference batch JSON (the sidecar client).
type batchPredictor interface {
	PredictJSON(ctx context.Context, batchJSON []byte) ([]byte, error)
}

// predict answers POST /v1/predict: a runInference batch JSON run as a
// module's runInference runs it (the same sidecar call, limits, errors),
// answered with runInference's return value, for `inferctl predict
// --server`. Entry errors are in the answer (200), as runInference returns
// them; a batch that cannot run answers runInference's batch error JSON
// with 400 (INPUT_PARSING) or 503 (the sidecar is not there).
func (s *server) predict(w http.ResponseWriter, r *http.Request) int {
	if code, ok := s.notStarted(w); ok {
		return code
	}
	if s.predictor == nil {
		return httpjson.Error(w, http.StatusNotFound, "inference is disabled (no --inference_sidecar_binary_path): no batch to run")
	}
	body, err := readBody(w, r, kserve.DefaultMaxRequestBytes)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return httpjson.Error(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("batch is larger than %d bytes (runInference's argument limit)", kserve.DefaultMaxRequestBytes))
		}
		return httpjson.Error(w, http.StatusBadRequest, "cannot read request body: "+err.Error())
	}
	ctx := r.Context()
	if s.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.requestTimeout)
		defer cancel()
	}
	out, err := s.predictor.PredictJSON(ctx, body)
	code := http.StatusOK
	if err != nil {
		out = batch.AppendBatchError(nil, err)
		code = kserve.StatusOf(err)
		if code == http.StatusInternalServerError {
			code = http.StatusServiceUnavailable
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(out, '\n'))
	return code
}
