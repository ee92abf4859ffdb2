package kserve

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// TFServingPredictHandler serves TensorFlow Serving's REST predict,
// POST /v1/models/{name}[/versions/{version}]:predict, in its columnar
// form: {"signature_name": ..., "inputs": {"x": [..], "sequence_id": [10]}}
// answered with {"outputs": {"sum": [..], "sequence_id": [10]}} (the value
// alone when there is one output, as TF Serving does). This is the form
// OpenVINO Model Server's stateful-model example uses; "instances" (the row
// form) is refused. Mount it at "POST /v1/models/".
func (s *Server) TFServingPredictHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, path := s.tfServingPredict(w, r)
		if s.opts.Observe != nil {
			s.opts.Observe(Observation{Protocol: "http", Endpoint: "tfserving_predict", Status: code, ModelPath: path})
		}
	})
}

func (s *Server) tfServingPredict(w http.ResponseWriter, r *http.Request) (int, string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/models/")
	if !ok || r.Method != http.MethodPost {
		return writeError(w, http.StatusNotFound, "want POST /v1/models/NAME[/versions/VERSION]:predict"), ""
	}
	rest, ok = strings.CutSuffix(rest, ":predict")
	if !ok {
		return writeError(w, http.StatusNotFound, fmt.Sprintf("unknown path %q: want POST /v1/models/NAME[/versions/VERSION]:predict", r.URL.Path)), ""
	}
	name, version, _ := strings.Cut(rest, "/versions/")
	if name == "" || strings.Contains(version, "/") {
		return writeError(w, http.StatusNotFound, fmt.Sprintf("unknown path %q: want POST /v1/models/NAME[/versions/VERSION]:predict", r.URL.Path)), ""
	}
	s.wake()
	var body bytes.Buffer
	if _, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes)); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", s.opts.MaxRequestBytes)), ""
		}
		return writeError(w, http.StatusBadRequest, "cannot read request body: "+err.Error()), ""
	}
	res, info, err := s.model(r.Context(), name, version)
	if err != nil {
		return writeError(w, StatusOf(err), err.Error()), res.Path
	}
	inputs, err := s.decodeTFServingJSON(body.Bytes(), info)
	if err != nil {
		return writeError(w, http.StatusBadRequest, fmt.Sprintf("model %q (model path %q): %v", name, res.Path, err)), res.Path
	}
	resp, err := s.Infer(r.Context(), &InferRequest{ModelName: name, ModelVersion: version, Inputs: inputs})
	if err != nil {
		return writeError(w, StatusOf(err), err.Error()), resp.ModelPath
	}
	out, err := appendTFServingResponse(make([]byte, 0, 256), resp.Outputs)
	if err != nil {
		return writeError(w, http.StatusInternalServerError, fmt.Sprintf("model %q (model path %q): %v", name, resp.ModelPath, err)), resp.ModelPath
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	return http.StatusOK, resp.ModelPath
}

// decodeTFServingJSON reads the columnar request: each input's dtype is the
// signature's (sequence_id UINT64, sequence_control_input UINT32: the seed's types), its shape
// the nesting of its value.
func (s *Server) decodeTFServingJSON(body []byte, info sidecar.ModelInfo) ([]tensor.Tensor, error) {
	if nestingDepth(body) > maxDepth {
		return nil, fmt.Errorf("request body nests deeper than %d levels", maxDepth)
	}
	if !gjson.ValidBytes(body) {
		return nil, errors.New("request body is not a JSON object")
	}
	var inputs gjson.Result
	err := fields(gjson.ParseBytes(body), "the request body", []string{"signature_name", "inputs", "instances"}, func(key string, v gjson.Result) error {
		switch key {
		case "signature_name":
			if v.Type != gjson.String || (v.Str != "" && v.Str != "serving_default") {
				return fmt.Errorf(`"signature_name" is %s, want "serving_default"`, inferr.ClipN(v.Raw, 32))
			}
		case "instances":
			return errors.New(`"instances" (the row format) is not supported: use "inputs" (the columnar format)`)
		case "inputs":
			inputs = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !inputs.IsObject() {
		return nil, errors.New(`request has no "inputs" object`)
	}
	dtypes := map[string]tensor.DType{sidecar.SequenceIDName: tensor.Uint64, sidecar.SequenceControlName: tensor.Uint32}
	for _, in := range info.Signature.Inputs {
		for _, n := range append([]string{in.Name}, in.Aliases...) {
			dtypes[n] = in.DType
		}
	}
	var out []tensor.Tensor
	inputs.ForEach(func(k, v gjson.Result) bool {
		if len(out) >= s.opts.Limits.MaxTensors {
			err = fmt.Errorf("request has more than %d inputs", s.opts.Limits.MaxTensors)
			return false
		}
		dt, ok := dtypes[k.Str]
		if !ok && !info.Signature.Positional {
			err = fmt.Errorf("input %q is not an input of the model", k.Str)
			return false
		}
		if dt == tensor.Invalid {
			dt = tensor.Float
		}
		var t tensor.Tensor
		if t, err = s.decodeNested(k.Str, v, dt); err != nil {
			return false
		}
		out = append(out, t)
		return true
	})
	return out, err
}

// decodeNested reads a (possibly nested) JSON array or a number as a tensor
// of dtype dt; the arrays must be rectangular.
func (s *Server) decodeNested(name string, v gjson.Result, dt tensor.DType) (tensor.Tensor, error) {
	var shape []int64
	for cur := v; cur.IsArray(); {
		a := cur.Array()
		shape = append(shape, int64(len(a)))
		if len(a) == 0 || len(shape) > 64 {
			break
		}
		cur = a[0]
	}
	t, err := s.newTensor(name, shape, dt)
	if err != nil {
		return t, err
	}
	var flat []gjson.Result
	var walk func(v gjson.Result, dim int) error
	walk = func(v gjson.Result, dim int) error {
		if dim == len(shape) {
			if v.Type != gjson.Number {
				return fmt.Errorf("input %q: %s is not a number", name, inferr.ClipN(v.Raw, 32))
			}
			flat = append(flat, v)
			return nil
		}
		a := v.Array()
		if !v.IsArray() || int64(len(a)) != shape[dim] {
			return fmt.Errorf("input %q is not rectangular: dimension %d should have %d elements (shape %s)", name, dim, shape[dim], tensor.FormatShape(shape))
		}
		for _, e := range a {
			if err := walk(e, dim+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(v, 0); err != nil {
		return t, err
	}
	t.Data = tensor.MakeData(dt, len(flat))
	for i, e := range flat {
		if err := setNumber(t.Data, i, e.Raw); err != nil {
			return t, fmt.Errorf("input %q element %d: %w", name, i, err)
		}
	}
	return t, nil
}

func setNumber(data any, i int, raw string) error {
	var err error
	switch d := data.(type) {
	case []float32:
		var f float64
		f, err = strconv.ParseFloat(raw, 32)
		d[i] = float32(f)
	case []float64:
		d[i], err = strconv.ParseFloat(raw, 64)
	case []int64:
		d[i], err = strconv.ParseInt(raw, 10, 64)
	case []int32:
		var n int64
		n, err = strconv.ParseInt(raw, 10, 32)
		d[i] = int32(n)
	case []int16:
		var n int64
		n, err = strconv.ParseInt(raw, 10, 16)
		d[i] = int16(n)
	case []int8:
		var n int64
		n, err = strconv.ParseInt(raw, 10, 8)
		d[i] = int8(n)
	case []uint64:
		d[i], err = strconv.ParseUint(raw, 10, 64)
	case []uint32:
		var n uint64
		n, err = strconv.ParseUint(raw, 10, 32)
		d[i] = uint32(n)
	default:
		return fmt.Errorf("unsupported dtype %T", data)
	}
	if err != nil {
		return fmt.Errorf("%s does not fit the input's dtype", inferr.ClipN(raw, 32))
	}
	return nil
}

// appendTFServingResponse writes {"outputs": VALUE} for one output or
// {"outputs": {NAME: VALUE, ...}} for several, each value nested by shape.
func appendTFServingResponse(b []byte, outs []tensor.Tensor) ([]byte, error) {
	b = append(b, `{"outputs":`...)
	if len(outs) != 1 {
		b = append(b, '{')
	}
	for i, t := range outs {
		if len(outs) != 1 {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t.Name)
			b = append(b, ':')
		}
		flat, err := appendData(nil, t)
		if err != nil {
			return nil, err
		}
		vals := gjson.ParseBytes(flat).Array()
		b = appendNested(b, vals, t.Shape)
	}
	if len(outs) != 1 {
		b = append(b, '}')
	}
	return append(b, "}\n"...), nil
}

func appendNested(b []byte, vals []gjson.Result, shape []int64) []byte {
	if len(shape) == 0 {
		if len(vals) == 0 {
			return append(b, "null"...)
		}
		return append(b, vals[0].Raw...)
	}
	b = append(b, '[')
	n := len(vals)
	if shape[0] > 0 {
		n = len(vals) / int(shape[0])
	}
	for i := range int(shape[0]) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNested(b, vals[i*n:(i+1)*n], shape[1:])
	}
	return append(b, ']')
}
