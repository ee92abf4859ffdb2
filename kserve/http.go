package kserve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/inferbid/inferbid/tensor"
)

// Handler serves the protocol's HTTP/REST API under /v2: mount it at "/v2"
// and "/v2/" of a mux.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

// routes of the HTTP API.
const (
	epLive           = "live"
	epReady          = "ready"
	epModelReady     = "model_ready"
	epServerMetadata = "server_metadata"
	epModelMetadata  = "model_metadata"
	epInfer          = "infer"
	epUnknown        = "unknown"
)

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ep, status, modelPath := s.route(w, r)
	if s.opts.Observe != nil {
		s.opts.Observe(Observation{Protocol: "http", Endpoint: ep, Status: status, ModelPath: modelPath, Duration: time.Since(start)})
	}
}

// route answers one request and returns its endpoint, status and model
// path.
func (s *Server) route(w http.ResponseWriter, r *http.Request) (string, int, string) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	method := http.MethodGet
	ep := epUnknown
	switch {
	case path == "/v2":
		ep = epServerMetadata
	case path == "/v2/health/live":
		ep = epLive
	case path == "/v2/health/ready":
		ep = epReady
	case strings.HasPrefix(path, "/v2/models/"):
		switch {
		case strings.HasSuffix(path, "/ready"):
			ep = epModelReady
		case strings.HasSuffix(path, "/infer"):
			ep, method = epInfer, http.MethodPost
		default:
			ep = epModelMetadata
		}
	}
	if ep == epUnknown {
		return ep, writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s (the v2 API: /v2, /v2/health/{live,ready}, /v2/models/NAME[/versions/VERSION][/ready|/infer])", r.Method, r.URL.Path)), ""
	}
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		return ep, writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method)), ""
	}
	ctx := r.Context()
	switch ep {
	case epLive:
		return ep, health(w, s.Live()), ""
	case epReady:
		return ep, health(w, s.ServerReady(ctx) == nil), ""
	case epServerMetadata:
		writeJSON(w, http.StatusOK, s.Metadata())
		return ep, http.StatusOK, ""
	}
	name, version, ok := modelName(strings.TrimPrefix(path, "/v2/models/"), ep)
	if !ok {
		return ep, writeError(w, http.StatusNotFound, fmt.Sprintf("no model name in %s (/v2/models/NAME[/versions/VERSION]...)", r.URL.Path)), ""
	}
	switch ep {
	case epModelReady:
		res, err := s.ModelReady(ctx, name, version)
		code := http.StatusOK
		if err != nil {
			code = StatusOf(err)
			if code >= 500 {
				code = http.StatusBadRequest // health answers are 200 or 4xx
			}
		}
		w.WriteHeader(code)
		return ep, code, res.Path
	case epModelMetadata:
		md, err := s.ModelMetadata(ctx, name, version)
		if err != nil {
			return ep, writeError(w, StatusOf(err), err.Error()), ""
		}
		writeJSON(w, http.StatusOK, md)
		return ep, http.StatusOK, md.ModelPath
	}
	code, modelPath := s.inferHTTP(w, r, name, version)
	return ep, code, modelPath
}

// modelName splits "NAME[/versions/VERSION][/ready|/infer]". A name may
// hold slashes (percent-encoded or not); the last "/versions/" starts the
// version.
func modelName(rest, ep string) (name, version string, ok bool) {
	switch ep {
	case epModelReady:
		rest = strings.TrimSuffix(rest, "/ready")
	case epInfer:
		rest = strings.TrimSuffix(rest, "/infer")
	}
	if i := strings.LastIndex(rest, "/versions/"); i >= 0 {
		rest, version = rest[:i], rest[i+len("/versions/"):]
		if version == "" || strings.Contains(version, "/") {
			return "", "", false
		}
	}
	return rest, version, rest != ""
}

// health answers a health endpoint: 200 for true, 400 for false, no body.
func health(w http.ResponseWriter, ok bool) int {
	code := http.StatusOK
	if !ok {
		code = http.StatusBadRequest
	}
	w.WriteHeader(code)
	return code
}

func (s *Server) inferHTTP(w http.ResponseWriter, r *http.Request, name, version string) (int, string) {
	s.wake()
	var body bytes.Buffer
	if _, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes)); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", s.opts.MaxRequestBytes)), ""
		}
		return writeError(w, http.StatusBadRequest, "cannot read request body: "+err.Error()), ""
	}
	req, err := s.decodeInferJSON(body.Bytes())
	if err != nil {
		return writeError(w, http.StatusBadRequest, err.Error()), ""
	}
	req.ModelName, req.ModelVersion = name, version
	resp, err := s.Infer(r.Context(), req)
	if err != nil {
		return writeError(w, StatusOf(err), err.Error()), resp.ModelPath
	}
	out, err := appendInferResponse(make([]byte, 0, 256), resp)
	if err != nil {
		return writeError(w, http.StatusInternalServerError, fmt.Sprintf("model %q (model path %q): %v", name, resp.ModelPath, err)), resp.ModelPath
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return http.StatusOK, resp.ModelPath
}

// object is a JSON object by exact key: the protocol's strings, field
// names included, are case-sensitive (encoding/json's struct fields are
// not).
type object map[string]json.RawMessage

// decodeObject reads a JSON object; what names it in errors. A key that
// differs from a protocol field only in case is an error; other unknown
// keys are ignored.
func decodeObject(raw json.RawMessage, what string, fields ...string) (object, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, fmt.Errorf("%s is not a JSON object", what)
	}
	for k := range o {
		for _, f := range fields {
			if k != f && strings.EqualFold(k, f) {
				return nil, fmt.Errorf("%s has a field %q: field names are case-sensitive (%q)", what, k, f)
			}
		}
	}
	return o, nil
}

// get returns a field's value; false when it is absent or null.
func (o object) get(key string) (json.RawMessage, bool) {
	v, ok := o[key]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// str reads a string field; what names the object in errors.
func (o object) str(key, what string) (string, bool, error) {
	v, ok := o.get(key)
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, fmt.Errorf("%s: %q is not a string", what, key)
	}
	return s, true, nil
}

// array reads an array-of-objects field.
func (o object) array(key, what string) ([]json.RawMessage, error) {
	v, ok := o.get(key)
	if !ok {
		return nil, nil
	}
	var a []json.RawMessage
	if err := json.Unmarshal(v, &a); err != nil {
		return nil, fmt.Errorf("%s: %q is not an array", what, key)
	}
	return a, nil
}

// decodeInferJSON reads $inference_request into typed tensors. Every
// error names the input or field at fault.
func (s *Server) decodeInferJSON(body []byte) (*InferRequest, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("request body is not an inference request JSON object: %w", err)
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return nil, errors.New("request body holds more than one JSON value")
	}
	top, err := decodeObject(raw, "the request body", "id", "parameters", "inputs", "outputs")
	if err != nil {
		return nil, err
	}
	req := &InferRequest{}
	if req.ID, _, err = top.str("id", "the request"); err != nil {
		return nil, err
	}
	if err := checkParameters("parameters", top); err != nil {
		return nil, err
	}
	inputs, err := top.array("inputs", "the request")
	if err != nil {
		return nil, err
	}
	if len(inputs) == 0 {
		return nil, errors.New(`request has no "inputs"`)
	}
	if len(inputs) > s.opts.Limits.MaxTensors {
		return nil, fmt.Errorf("request has %d inputs, the limit is %d", len(inputs), s.opts.Limits.MaxTensors)
	}
	seen := map[string]bool{}
	req.Inputs = make([]tensor.Tensor, len(inputs))
	for i, rawIn := range inputs {
		what := fmt.Sprintf("inputs[%d]", i)
		x, err := decodeObject(rawIn, what, "name", "shape", "datatype", "parameters", "data")
		if err != nil {
			return nil, err
		}
		name, ok, err := x.str("name", what)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf(`%s has no "name"`, what)
		}
		if name == "" {
			return nil, fmt.Errorf(`%s has an empty "name"`, what)
		}
		if seen[name] {
			return nil, fmt.Errorf("input %q is given twice", name)
		}
		seen[name] = true
		what = fmt.Sprintf("input %q", name)
		datatype, ok, err := x.str("datatype", what)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf(`%s has no "datatype"`, what)
		}
		rawShape, ok := x.get("shape")
		if !ok {
			return nil, fmt.Errorf(`%s has no "shape"`, what)
		}
		var shape []int64
		if err := json.Unmarshal(rawShape, &shape); err != nil || shape == nil {
			return nil, fmt.Errorf(`%s: "shape" is not an array of integers`, what)
		}
		if err := checkParameters(what+" parameters", x); err != nil {
			return nil, err
		}
		dt, err := ParseDatatype(name, datatype)
		if err != nil {
			return nil, err
		}
		t, err := s.newTensor(name, shape, dt)
		if err != nil {
			return nil, err
		}
		data, ok := x.get("data")
		if !ok {
			return nil, fmt.Errorf(`%s has no "data"`, what)
		}
		n, _ := tensor.NumElements(t.Shape, s.opts.Limits.MaxElements)
		if t.Data, err = decodeData(data, dt, n); err != nil {
			return nil, fmt.Errorf("input %q (%s, shape %s): %w", name, datatype, tensor.FormatShape(t.Shape), err)
		}
		req.Inputs[i] = t
	}
	outputs, err := top.array("outputs", "the request")
	if err != nil {
		return nil, err
	}
	for i, rawOut := range outputs {
		what := fmt.Sprintf("outputs[%d]", i)
		o, err := decodeObject(rawOut, what, "name", "parameters")
		if err != nil {
			return nil, err
		}
		name, ok, err := o.str("name", what)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf(`%s has no "name"`, what)
		}
		if err := checkParameters(fmt.Sprintf("output %q parameters", name), o); err != nil {
			return nil, err
		}
		req.Outputs = append(req.Outputs, name)
	}
	return req, nil
}

// newTensor checks a shape against the limits (every dimension at least
// 1, at most batch.MaxRank dimensions, the element cap) before any data is
// allocated.
func (s *Server) newTensor(name string, shape []int64, dt tensor.DType) (tensor.Tensor, error) {
	if len(shape) > 64 {
		return tensor.Tensor{}, fmt.Errorf("input %q: shape has %d dimensions, the limit is 64", name, len(shape))
	}
	if _, err := tensor.NumElements(shape, s.opts.Limits.MaxElements); err != nil {
		return tensor.Tensor{}, fmt.Errorf("input %q: shape %s: %w", name, tensor.FormatShape(shape), err)
	}
	return tensor.Tensor{Name: name, Shape: shape}, nil
}

// checkParameters checks the "parameters" field of o, a $parameters
// object: string, number or boolean values. inferbid defines no
// parameters; the ones given are ignored.
func checkParameters(what string, o object) error {
	raw, ok := o.get("parameters")
	if !ok {
		return nil
	}
	var params map[string]any
	if err := json.Unmarshal(raw, &params); err != nil || params == nil {
		return fmt.Errorf("%s is not a JSON object", what)
	}
	for k, v := range params {
		switch v.(type) {
		case string, float64, bool:
		default:
			return fmt.Errorf("%s: %q is not a string, number or boolean", what, k)
		}
	}
	return nil
}

// appendInferResponse writes $inference_response: model_name,
// model_version (for a versioned model), id (when the request had one) and
// the outputs with flat data.
func appendInferResponse(b []byte, resp *InferResponse) ([]byte, error) {
	b = append(b, `{"model_name":`...)
	b = appendString(b, resp.ModelName)
	if resp.ModelVersion != "" {
		b = append(b, `,"model_version":`...)
		b = appendString(b, resp.ModelVersion)
	}
	if resp.ID != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, resp.ID)
	}
	b = append(b, `,"outputs":[`...)
	for i, t := range resp.Outputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, t.Name)
		b = append(b, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"datatype":"`...)
		b = append(b, DatatypeOf(t.DType())...)
		b = append(b, `","data":`...)
		var err error
		if b, err = appendData(b, t); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...), nil
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError writes the protocol's error object {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) int {
	writeJSON(w, code, map[string]string{"error": msg})
	return code
}
