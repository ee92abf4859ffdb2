package kserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/batch"
	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/httpjson"
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
	if rep, name := repositoryRoute(path); rep != "" {
		return rep, s.serveRepository(w, r, rep, name), ""
	}
	if ep == epUnknown {
		return ep, httpjson.Error(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s (the v2 API: /v2, /v2/health/{live,ready}, /v2/models/NAME[/versions/VERSION][/ready|/infer])", r.Method, r.URL.Path)), ""
	}
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		return ep, httpjson.Error(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method)), ""
	}
	ctx := r.Context()
	switch ep {
	case epLive:
		return ep, health(w, s.Live()), ""
	case epReady:
		return ep, health(w, s.ServerReady(ctx) == nil), ""
	case epServerMetadata:
		httpjson.Write(w, http.StatusOK, s.Metadata())
		return ep, http.StatusOK, ""
	}
	name, version, ok := modelName(strings.TrimPrefix(path, "/v2/models/"), ep)
	if !ok {
		return ep, httpjson.Error(w, http.StatusNotFound, fmt.Sprintf("no model name in %s (/v2/models/NAME[/versions/VERSION]...)", r.URL.Path)), ""
	}
	switch ep {
	case epModelReady:
		res, err := s.ModelReady(ctx, name, version)
		if err != nil {
			code := StatusOf(err)
			if code >= 500 {
				code = http.StatusBadRequest // health answers are 200 or 4xx
			}
			// Why not ready (loading, failed to load: its error).
			return ep, httpjson.Error(w, code, err.Error()), res.Path
		}
		w.WriteHeader(http.StatusOK)
		return ep, http.StatusOK, res.Path
	case epModelMetadata:
		md, err := s.ModelMetadata(ctx, name, version)
		if err != nil {
			return ep, httpjson.Error(w, StatusOf(err), err.Error()), ""
		}
		httpjson.Write(w, http.StatusOK, md)
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
	body, code, err := s.readBody(w, r)
	if err != nil {
		return httpjson.Error(w, code, err.Error()), ""
	}
	headerLen := -1
	if h := r.Header.Get(HeaderContentLength); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 || n > len(body) {
			return httpjson.Error(w, http.StatusBadRequest, fmt.Sprintf("%s is %q: want the length of the JSON header, at most the body's %d bytes", HeaderContentLength, inferr.ClipN(h, 40), len(body))), ""
		}
		headerLen = n
	}
	req, err := s.decodeInferRequest(body, headerLen)
	if err != nil {
		return httpjson.Error(w, http.StatusBadRequest, err.Error()), ""
	}
	req.ModelName, req.ModelVersion = name, version
	req.Client = remoteHost(r.RemoteAddr)
	resp, err := s.Infer(r.Context(), req)
	if err != nil {
		return httpjson.Error(w, StatusOf(err), err.Error()), resp.ModelPath
	}
	out, bin, err := appendInferResponseBinary(make([]byte, 0, 256), resp, req.binary)
	if err != nil {
		return httpjson.Error(w, http.StatusInternalServerError, fmt.Sprintf("model %q (model path %q): %v", name, resp.ModelPath, err)), resp.ModelPath
	}
	if bin == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
		return http.StatusOK, resp.ModelPath
	}
	// The binary tensor data extension: the JSON header, then each binary
	// output's bytes in output order.
	total := len(out)
	for _, b := range bin {
		total += len(b)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(HeaderContentLength, strconv.Itoa(len(out)))
	w.Header().Set("Content-Length", strconv.Itoa(total))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	for _, b := range bin {
		_, _ = w.Write(b)
	}
	return http.StatusOK, resp.ModelPath
}

// maxDepth bounds the nesting of a request body before gjson's recursive
// validator sees it (as batch.MaxDepth does for the batch JSON).
const maxDepth = 256

// nestingDepth is how deep body nests, counted up to maxDepth+1 (strings
// skipped).
func nestingDepth(body []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > maxDepth {
					return deepest
				}
			}
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// fields walks a JSON object's fields in order, by exact key (the
// protocol's strings, field names included, are case-sensitive): a key
// that differs from one of known only in case, or a known key given twice,
// is an error; other keys are ignored. what names the object in errors.
func fields(o gjson.Result, what string, known []string, each func(key string, v gjson.Result) error) error {
	if !o.IsObject() {
		return fmt.Errorf("%s is not a JSON object", what)
	}
	var seen uint32
	var err error
	o.ForEach(func(k, v gjson.Result) bool {
		for i, f := range known {
			switch {
			case k.Str == f:
				if seen&(1<<i) != 0 {
					err = fmt.Errorf("%s has the field %q twice", what, f)
					return false
				}
				seen |= 1 << i
				if v.Type != gjson.Null {
					err = each(f, v)
				}
				return err == nil
			case strings.EqualFold(k.Str, f):
				err = fmt.Errorf("%s has a field %q: field names are case-sensitive (%q)", what, k.Str, f)
				return false
			}
		}
		return true
	})
	return err
}

// HeaderContentLength is the binary tensor data extension's header: the
// length of the JSON part of a body whose binary tensor data follows it.
const HeaderContentLength = "Inference-Header-Content-Length"

// decodeInferJSON reads a JSON-only $inference_request into typed tensors.
func (s *Server) decodeInferJSON(body []byte) (*InferRequest, error) {
	return s.decodeInferRequest(body, -1)
}

// binaryOutputs is what a request asks of the binary tensor data
// extension for its outputs: every output binary (binary_data_output), or
// each named one as its binary_data parameter says.
type binaryOutputs struct {
	all    bool
	byName map[string]bool
}

// binary reports whether output name goes back as binary data.
func (b binaryOutputs) binary(name string) bool {
	if v, ok := b.byName[name]; ok {
		return v
	}
	return b.all
}

// binarySection is the part of a body after its JSON header, handed out
// to the inputs with binary_data_size in input order.
type binarySection struct {
	b   []byte
	off int
}

// take returns the next n bytes of the section.
func (bs *binarySection) take(what string, n int64) ([]byte, error) {
	if bs == nil {
		return nil, fmt.Errorf(`%s has "binary_data_size" but the request has no binary data (no %s header)`, what, HeaderContentLength)
	}
	if rest := int64(len(bs.b) - bs.off); n > rest {
		return nil, fmt.Errorf(`%s: "binary_data_size" is %d but %d bytes of binary data remain`, what, n, rest)
	}
	out := bs.b[bs.off : bs.off+int(n) : bs.off+int(n)]
	bs.off += int(n)
	return out, nil
}

// decodeInferRequest reads $inference_request into typed tensors: body is
// JSON alone (headerLen < 0) or, with the binary tensor data extension,
// headerLen bytes of JSON followed by the binary data of the inputs that
// give a binary_data_size (in input order, each little-endian and
// row-major, BYTES elements each a 4-byte little-endian length and then
// the bytes). Every error names the input or field at fault.
func (s *Server) decodeInferRequest(body []byte, headerLen int) (*InferRequest, error) {
	var bin *binarySection
	if headerLen >= 0 {
		if headerLen > len(body) {
			return nil, fmt.Errorf("%s is %d, longer than the %d-byte body", HeaderContentLength, headerLen, len(body))
		}
		bin = &binarySection{b: body[headerLen:]}
		body = body[:headerLen]
	}
	if nestingDepth(body) > maxDepth {
		return nil, fmt.Errorf("request body nests deeper than %d levels", maxDepth)
	}
	if !gjson.ValidBytes(body) {
		return nil, errors.New("request body is not an inference request JSON object: not JSON, or more than one JSON value")
	}
	req := &InferRequest{}
	var inputs, outputs gjson.Result
	err := fields(gjson.ParseBytes(body), "the request body", []string{"id", "parameters", "inputs", "outputs"}, func(key string, v gjson.Result) error {
		switch key {
		case "id":
			if v.Type != gjson.String {
				return errors.New(`the request: "id" is not a string`)
			}
			req.ID = v.Str
		case "parameters":
			if err := checkParameters("parameters", v); err != nil {
				return err
			}
			var err error
			v.ForEach(func(k, p gjson.Result) bool {
				if k.Str == "binary_data_output" {
					if p.Type != gjson.True && p.Type != gjson.False {
						err = fmt.Errorf(`parameters: "binary_data_output" is %s, want true or false`, inferr.ClipN(p.Raw, 32))
						return false
					}
					req.binary.all = p.Type == gjson.True
					return true
				}
				err = sequenceParamJSON(&req.Sequence, k.Str, p)
				return err == nil
			})
			return err
		case "inputs":
			inputs = v
		case "outputs":
			outputs = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if inputs.Exists() && !inputs.IsArray() {
		return nil, errors.New(`the request: "inputs" is not an array`)
	}
	ins := inputs.Array()
	if len(ins) == 0 {
		return nil, errors.New(`request has no "inputs"`)
	}
	if len(ins) > s.opts.Limits.MaxTensors {
		return nil, fmt.Errorf("request has %d inputs, the limit is %d", len(ins), s.opts.Limits.MaxTensors)
	}
	seen := make(map[string]bool, len(ins))
	req.Inputs = make([]tensor.Tensor, len(ins))
	for i, in := range ins {
		t, err := s.decodeInput(in, i, seen, bin)
		if err != nil {
			return nil, err
		}
		req.Inputs[i] = t
	}
	if outputs.Exists() && !outputs.IsArray() {
		return nil, errors.New(`the request: "outputs" is not an array`)
	}
	for i, out := range outputs.Array() {
		what := fmt.Sprintf("outputs[%d]", i)
		var name, binaryData gjson.Result
		err := fields(out, what, []string{"name", "parameters"}, func(key string, v gjson.Result) error {
			if key == "name" {
				name = v
				return nil
			}
			if err := checkParameters(what+" parameters", v); err != nil {
				return err
			}
			binaryData = v.Get(`binary_data`)
			if binaryData.Exists() && binaryData.Type != gjson.True && binaryData.Type != gjson.False {
				return fmt.Errorf(`%s parameters: "binary_data" is %s, want true or false`, what, inferr.ClipN(binaryData.Raw, 32))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !name.Exists() {
			return nil, fmt.Errorf(`%s has no "name"`, what)
		}
		if name.Type != gjson.String {
			return nil, fmt.Errorf(`%s: "name" is not a string`, what)
		}
		req.Outputs = append(req.Outputs, name.Str)
		if binaryData.Exists() {
			if req.binary.byName == nil {
				req.binary.byName = map[string]bool{}
			}
			req.binary.byName[name.Str] = binaryData.Type == gjson.True
		}
	}
	if bin != nil && bin.off != len(bin.b) {
		return nil, fmt.Errorf(`the body holds %d bytes of binary data after the inputs' "binary_data_size" bytes (%d)`, len(bin.b)-bin.off, bin.off)
	}
	return req, nil
}

// decodeInput reads one $request_input; seen holds the names before it,
// bin the binary data not yet taken (nil without the extension).
func (s *Server) decodeInput(in gjson.Result, i int, seen map[string]bool, bin *binarySection) (tensor.Tensor, error) {
	what := fmt.Sprintf("inputs[%d]", i)
	var name, shape, datatype, data, binarySize gjson.Result
	err := fields(in, what, []string{"name", "shape", "datatype", "parameters", "data"}, func(key string, v gjson.Result) error {
		switch key {
		case "name":
			name = v
		case "shape":
			shape = v
		case "datatype":
			datatype = v
		case "data":
			data = v
		case "parameters":
			if err := checkParameters(what+" parameters", v); err != nil {
				return err
			}
			binarySize = v.Get("binary_data_size")
		}
		return nil
	})
	if err != nil {
		return tensor.Tensor{}, err
	}
	switch {
	case !name.Exists():
		return tensor.Tensor{}, fmt.Errorf(`%s has no "name"`, what)
	case name.Type != gjson.String:
		return tensor.Tensor{}, fmt.Errorf(`%s: "name" is not a string`, what)
	case name.Str == "":
		return tensor.Tensor{}, fmt.Errorf(`%s has an empty "name"`, what)
	case seen[name.Str]:
		return tensor.Tensor{}, fmt.Errorf("input %q is given twice", name.Str)
	}
	seen[name.Str] = true
	what = fmt.Sprintf("input %q", name.Str)
	switch {
	case !datatype.Exists():
		return tensor.Tensor{}, fmt.Errorf(`%s has no "datatype"`, what)
	case datatype.Type != gjson.String:
		return tensor.Tensor{}, fmt.Errorf(`%s: "datatype" is not a string`, what)
	case !shape.Exists():
		return tensor.Tensor{}, fmt.Errorf(`%s has no "shape"`, what)
	}
	dims, err := decodeShape(shape)
	if err != nil {
		return tensor.Tensor{}, fmt.Errorf("%s: %w", what, err)
	}
	dt, err := ParseDatatype(name.Str, datatype.Str)
	if err != nil {
		return tensor.Tensor{}, err
	}
	t, err := s.newTensor(name.Str, dims, dt)
	if err != nil {
		return tensor.Tensor{}, err
	}
	n, _ := tensor.NumElements(t.Shape, s.opts.Limits.MaxElements)
	if binarySize.Exists() {
		if data.Exists() {
			return tensor.Tensor{}, fmt.Errorf(`%s has both "data" and a "binary_data_size" parameter`, what)
		}
		size, err := strconv.ParseInt(binarySize.Raw, 10, 64)
		if binarySize.Type != gjson.Number || err != nil || size < 0 {
			return tensor.Tensor{}, fmt.Errorf(`%s: "binary_data_size" is %s, want a non-negative integer`, what, inferr.ClipN(binarySize.Raw, 32))
		}
		b, err := bin.take(what, size)
		if err != nil {
			return tensor.Tensor{}, err
		}
		if t.Data, err = decodeRaw(b, dt, n); err != nil {
			return tensor.Tensor{}, fmt.Errorf("input %q (%s, shape %s): %s", name.Str, datatype.Str, tensor.FormatShape(t.Shape), strings.ReplaceAll(err.Error(), "raw_input_contents", "binary data"))
		}
		return t, nil
	}
	if !data.Exists() {
		return tensor.Tensor{}, fmt.Errorf(`%s has no "data"`, what)
	}
	if t.Data, err = decodeData(data.Raw, dt, n); err != nil {
		return tensor.Tensor{}, fmt.Errorf("input %q (%s, shape %s): %w", name.Str, datatype.Str, tensor.FormatShape(t.Shape), err)
	}
	return t, nil
}

// decodeShape reads a "shape": an array of JSON integers, at most
// batch.MaxRank of them.
func decodeShape(v gjson.Result) ([]int64, error) {
	if !v.IsArray() {
		return nil, errors.New(`"shape" is not an array of integers`)
	}
	var dims []int64
	var err error
	v.ForEach(func(_, d gjson.Result) bool {
		if len(dims) == batch.MaxRank {
			err = fmt.Errorf(`"shape" has more than %d dimensions`, batch.MaxRank)
			return false
		}
		n, perr := strconv.ParseInt(d.Raw, 10, 64)
		if d.Type != gjson.Number || perr != nil {
			err = errors.New(`"shape" is not an array of integers`)
			return false
		}
		dims = append(dims, n)
		return true
	})
	if dims == nil {
		dims = []int64{}
	}
	return dims, err
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

// checkParameters checks a $parameters object: string, number or boolean
// values. inferbid defines no parameters; the ones given are ignored.
func checkParameters(what string, v gjson.Result) error {
	if !v.IsObject() {
		return fmt.Errorf("%s is not a JSON object", what)
	}
	var err error
	v.ForEach(func(k, p gjson.Result) bool {
		switch p.Type {
		case gjson.String, gjson.Number, gjson.True, gjson.False:
			return true
		}
		err = fmt.Errorf("%s: %q is not a string, number or boolean", what, k.Str)
		return false
	})
	return err
}

// appendInferResponseBinary writes $inference_response with the outputs
// bo asks for as binary data: such an output has a binary_data_size
// parameter instead of data, and its bytes are returned in output order
// (nil when no output is binary).
func appendInferResponseBinary(b []byte, resp *InferResponse, bo binaryOutputs) ([]byte, [][]byte, error) {
	var bins [][]byte
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
	if resp.SequenceID != nil {
		b = append(b, `,"parameters":{"sequence_id":`...)
		b = strconv.AppendUint(b, *resp.SequenceID, 10)
		b = append(b, '}')
	} else if resp.SequenceIDString != nil {
		b = append(b, `,"parameters":{"sequence_id":`...)
		b = appendString(b, *resp.SequenceIDString)
		b = append(b, '}')
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
		if bo.binary(t.Name) {
			raw := encodeRaw(t)
			bins = append(bins, raw)
			b = append(b, `","parameters":{"binary_data_size":`...)
			b = strconv.AppendInt(b, int64(len(raw)), 10)
			b = append(b, "}}"...)
			continue
		}
		b = append(b, `","data":`...)
		var err error
		if b, err = appendData(b, t); err != nil {
			return nil, nil, err
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...), bins, nil
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}
