package kserve

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/httpjson"
	"github.com/inferbid/inferbid/sidecar"
	"github.com/inferbid/inferbid/tensor"
)

// TFServingPredictHandler serves TensorFlow Serving's REST predict,
// POST /v1/models/{name}[/versions/{version}]:predict, in both of its
// forms. The columnar form, {"signature_name": ..., "inputs": {"x": [..],
// "sequence_id": [10]}}, is answered with {"outputs": {"sum": [..],
// "sequence_id": [10]}} (the value alone when there is one output, as TF
// Serving does; "inputs" may also be a bare value for a model of one
// input); it is the form OpenVINO Model Server's stateful-model example
// uses. The row form, {"instances": [{"x": [..]}, {"x": [..]}]} (named
// inputs, one object per row) or {"instances": [[..], [..]]} (a model of one
// input), stacks the rows along a new first dimension and is answered with
// {"predictions": [ROW, ...]} (one output) or {"predictions": [{"sum": ROW,
// ...}, ...]} (several), each output split along its first dimension.
// Values are numbers, true/false, strings or {"b64": "..."} (binary
// strings); a BYTES output whose name ends in "_bytes" is answered as
// {"b64": "..."} (TF Serving's rule).
// :classify and :regress (tf.Example inputs) are answered 501 with TF
// Serving's {"error": ...}. Mount it at "POST /v1/models/".
func (s *Server) TFServingPredictHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code, path := s.tfServingPredict(w, r)
		if s.opts.Observe != nil {
			s.opts.Observe(Observation{Protocol: "http", Endpoint: "tfserving_predict", Status: code, ModelPath: path, Duration: time.Since(start)})
		}
	})
}

func (s *Server) tfServingPredict(w http.ResponseWriter, r *http.Request) (int, string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/models/")
	if !ok || r.Method != http.MethodPost {
		return httpjson.Error(w, http.StatusNotFound, "want POST /v1/models/NAME[/versions/VERSION]:predict"), ""
	}
	for _, method := range []string{":classify", ":regress"} {
		if strings.HasSuffix(rest, method) {
			return httpjson.Error(w, http.StatusNotImplemented, fmt.Sprintf("%s is not supported: inferbid serves only :predict (the Classify and Regress APIs take tf.Example protos, which no inferbid runtime reads)", method)), ""
		}
	}
	rest, ok = strings.CutSuffix(rest, ":predict")
	if !ok {
		return httpjson.Error(w, http.StatusNotFound, fmt.Sprintf("unknown path %q: want POST /v1/models/NAME[/versions/VERSION]:predict", r.URL.Path)), ""
	}
	name, version, _ := strings.Cut(rest, "/versions/")
	if name == "" || strings.Contains(version, "/") {
		return httpjson.Error(w, http.StatusNotFound, fmt.Sprintf("unknown path %q: want POST /v1/models/NAME[/versions/VERSION]:predict", r.URL.Path)), ""
	}
	s.wake()
	body, code, err := s.readBody(w, r)
	if err != nil {
		return httpjson.Error(w, code, err.Error()), ""
	}
	if n, err := strconv.ParseInt(version, 10, 64); err == nil && strings.Trim(version, "0123456789") == "" {
		if version, err = s.tfServingVersion(r.Context(), name, n); err != nil {
			return httpjson.Error(w, StatusOf(err), err.Error()), ""
		}
	}
	res, err := s.Resolve(r.Context(), name, version)
	if err != nil {
		return httpjson.Error(w, StatusOf(err), err.Error()), res.Path
	}
	sig, err := s.signature(r.Context(), s.getBackend(), res.Path)
	if err != nil {
		return httpjson.Error(w, StatusOf(err), fmt.Sprintf("model %q: %v", name, err)), res.Path
	}
	info := sidecar.ModelInfo{Path: res.Path, Signature: sig}
	inputs, rows, err := s.decodeTFServingJSON(body, info)
	if err != nil {
		return httpjson.Error(w, http.StatusBadRequest, fmt.Sprintf("model %q (model path %q): %v", name, res.Path, err)), res.Path
	}
	resp, err := s.Infer(r.Context(), &InferRequest{ModelName: name, ModelVersion: version, Inputs: inputs, Client: remoteHost(r.RemoteAddr)})
	if err != nil {
		return httpjson.Error(w, StatusOf(err), err.Error()), resp.ModelPath
	}
	var out []byte
	if rows {
		out, err = appendTFServingRows(make([]byte, 0, 256), resp.Outputs)
	} else {
		out, err = appendTFServingResponse(make([]byte, 0, 256), resp.Outputs)
	}
	if err != nil {
		return httpjson.Error(w, http.StatusInternalServerError, fmt.Sprintf("model %q (model path %q): %v", name, resp.ModelPath, err)), resp.ModelPath
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	return http.StatusOK, resp.ModelPath
}

// decodeTFServingJSON reads the request, columnar ("inputs") or row
// ("instances", rows reports it): each input's dtype is the signature's
// (sequence_id UINT64, sequence_control_input UINT32: the seed's types),
// its shape the nesting of its value.
func (s *Server) decodeTFServingJSON(body []byte, info sidecar.ModelInfo) (_ []tensor.Tensor, rows bool, _ error) {
	if nestingDepth(body) > maxDepth {
		return nil, false, fmt.Errorf("request body nests deeper than %d levels", maxDepth)
	}
	if !gjson.ValidBytes(body) {
		return nil, false, errors.New("request body is not a JSON object")
	}
	var inputs, instances gjson.Result
	err := fields(gjson.ParseBytes(body), "the request body", []string{"signature_name", "inputs", "instances"}, func(key string, v gjson.Result) error {
		switch key {
		case "signature_name":
			if v.Type != gjson.String || (v.Str != "" && v.Str != "serving_default") {
				return fmt.Errorf(`"signature_name" is %s, want "serving_default"`, inferr.ClipN(v.Raw, 32))
			}
		case "instances":
			instances = v
		case "inputs":
			inputs = v
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	switch {
	case inputs.Exists() && instances.Exists():
		return nil, false, errors.New(`request has both "inputs" (the columnar format) and "instances" (the row format): give one`)
	case instances.Exists():
		in, err := s.decodeTFServingRows(instances, info)
		return in, true, err
	case !inputs.Exists():
		return nil, false, errors.New(`request has neither "inputs" (the columnar format) nor "instances" (the row format)`)
	}
	dtypes := tfServingDTypes(info)
	if !inputs.IsObject() {
		// One unnamed input: the model's only one.
		name, err := soleInput(info)
		if err != nil {
			return nil, false, fmt.Errorf(`"inputs" is not an object naming the inputs: %w`, err)
		}
		t, err := s.decodeNested(name, inputs, dtypeOr(dtypes[name]))
		if err != nil {
			return nil, false, err
		}
		return []tensor.Tensor{t}, false, nil
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
		var t tensor.Tensor
		if t, err = s.decodeNested(k.Str, v, dtypeOr(dt)); err != nil {
			return false
		}
		out = append(out, t)
		return true
	})
	return out, false, err
}

// tfServingDTypes maps every name of the model's inputs (and the sequence
// inputs) to its dtype.
func tfServingDTypes(info sidecar.ModelInfo) map[string]tensor.DType {
	dtypes := map[string]tensor.DType{sidecar.SequenceIDName: tensor.Uint64, sidecar.SequenceControlName: tensor.Uint32}
	for _, in := range info.Signature.Inputs {
		for _, n := range append([]string{in.Name}, in.Aliases...) {
			dtypes[n] = in.DType
		}
	}
	return dtypes
}

// dtypeOr is dt, or FLOAT for an input whose dtype the signature leaves
// open.
func dtypeOr(dt tensor.DType) tensor.DType {
	if dt == tensor.Invalid {
		return tensor.Float
	}
	return dt
}

// soleInput is the name (signature key) of the model's only input, for
// the unnamed forms.
func soleInput(info sidecar.ModelInfo) (string, error) {
	ins := info.Signature.Inputs
	if len(ins) != 1 {
		names := make([]string, len(ins))
		for i, in := range ins {
			names[i] = in.Name
			if len(in.Aliases) > 0 {
				names[i] = in.Aliases[0]
			}
		}
		return "", fmt.Errorf("values without input names need a model of one input; the model has %d (%s): name them", len(ins), strings.Join(names, ", "))
	}
	if len(ins[0].Aliases) > 0 {
		return ins[0].Aliases[0], nil
	}
	return ins[0].Name, nil
}

// decodeTFServingRows reads "instances": a list of rows, each an object of
// named inputs (every row naming the same inputs) or, for a model of one
// input, that input's value. Each input is the rows' values stacked along
// a new first dimension, so they must share a shape.
func (s *Server) decodeTFServingRows(instances gjson.Result, info sidecar.ModelInfo) ([]tensor.Tensor, error) {
	if !instances.IsArray() {
		return nil, errors.New(`"instances" is not a list of rows`)
	}
	rows := instances.Array()
	if len(rows) == 0 {
		return nil, errors.New(`"instances" is an empty list`)
	}
	dtypes := tfServingDTypes(info)
	if !rows[0].IsObject() {
		name, err := soleInput(info)
		if err != nil {
			return nil, fmt.Errorf(`"instances" rows are not objects naming the inputs: %w`, err)
		}
		for i, r := range rows {
			if r.IsObject() {
				return nil, fmt.Errorf(`"instances"[%d] is an object while "instances"[0] is not: every row takes one form`, i)
			}
		}
		t, err := s.decodeNested(name, instances, dtypeOr(dtypes[name]))
		if err != nil {
			return nil, fmt.Errorf(`"instances": %w`, err)
		}
		return []tensor.Tensor{t}, nil
	}
	// Named rows: the names of the first row, in its order.
	var names []string
	cols := map[string][]string{}
	var err error
	rows[0].ForEach(func(k, _ gjson.Result) bool {
		if _, dup := cols[k.Str]; dup {
			err = fmt.Errorf(`"instances"[0] names input %q twice`, k.Str)
			return false
		}
		if len(names) >= s.opts.Limits.MaxTensors {
			err = fmt.Errorf("request has more than %d inputs", s.opts.Limits.MaxTensors)
			return false
		}
		if _, ok := dtypes[k.Str]; !ok && !info.Signature.Positional {
			err = fmt.Errorf("input %q is not an input of the model", k.Str)
			return false
		}
		names = append(names, k.Str)
		cols[k.Str] = make([]string, 0, len(rows))
		return true
	})
	if err != nil {
		return nil, err
	}
	for i, r := range rows {
		if !r.IsObject() {
			return nil, fmt.Errorf(`"instances"[%d] is not an object while "instances"[0] is: every row takes one form`, i)
		}
		n := 0
		r.ForEach(func(k, v gjson.Result) bool {
			col, ok := cols[k.Str]
			if !ok {
				err = fmt.Errorf(`"instances"[%d] names input %q, which "instances"[0] does not: every row names the same inputs`, i, k.Str)
				return false
			}
			if len(col) != i {
				err = fmt.Errorf(`"instances"[%d] names input %q twice`, i, k.Str)
				return false
			}
			cols[k.Str] = append(col, v.Raw)
			n++
			return true
		})
		if err != nil {
			return nil, err
		}
		if n != len(names) {
			return nil, fmt.Errorf(`"instances"[%d] names %d inputs, "instances"[0] %d: every row names the same inputs`, i, n, len(names))
		}
	}
	out := make([]tensor.Tensor, 0, len(names))
	for _, name := range names {
		// The column as one JSON array: the stacked tensor.
		stacked := "[" + strings.Join(cols[name], ",") + "]"
		t, err := s.decodeNested(name, gjson.Parse(stacked), dtypeOr(dtypes[name]))
		if err != nil {
			return nil, fmt.Errorf(`"instances": %w`, err)
		}
		out = append(out, t)
	}
	return out, nil
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
			switch {
			case v.Type == gjson.Number, v.Type == gjson.True, v.Type == gjson.False, v.Type == gjson.String:
			case v.IsObject() && dt == tensor.Bytes && v.Get("b64").Type == gjson.String:
			default:
				return fmt.Errorf("input %q: %s is not a number, a boolean, a string or {\"b64\": ...}", name, inferr.ClipN(v.Raw, 32))
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
	total := 0
	for i, e := range flat {
		if e.IsObject() { // {"b64": "..."}: TF Serving's binary string
			b, err := base64.StdEncoding.DecodeString(e.Get("b64").Str)
			if err != nil {
				return t, fmt.Errorf("input %q element %d: \"b64\" is not base64: %w", name, i, err)
			}
			t.Data.([][]byte)[i] = b
		} else if err := setElement(t.Data, int64(i), e.Raw); err != nil {
			return t, fmt.Errorf("input %q element %d: %w", name, i, err)
		}
		if b, ok := t.Data.([][]byte); ok {
			if total += len(b[i]); total > tensor.DefaultMaxBytes {
				return t, fmt.Errorf("input %q: BYTES content is over %d bytes", name, tensor.DefaultMaxBytes)
			}
		}
	}
	return t, nil
}

// tfServingFlat is an output's elements as a flat JSON array; a BYTES
// output whose name ends in "_bytes" is written as {"b64": ...} objects, as
// TF Serving writes binary strings.
func tfServingFlat(t tensor.Tensor) ([]byte, error) {
	d, ok := t.Data.([][]byte)
	if !ok || !strings.HasSuffix(t.Name, "_bytes") {
		return appendData(nil, t)
	}
	b := []byte{'['}
	for i, v := range d {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"b64":"`...)
		b = base64.StdEncoding.AppendEncode(b, v)
		b = append(b, `"}`...)
	}
	return append(b, ']'), nil
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
		flat, err := tfServingFlat(t)
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

// appendTFServingRows writes the row form's answer: {"predictions": [ROW,
// ...]} for one output, {"predictions": [{NAME: ROW, ...}, ...]} for
// several, each output split along its first dimension, which must be the
// same for every output (TF Serving's rule).
func appendTFServingRows(b []byte, outs []tensor.Tensor) ([]byte, error) {
	if len(outs) == 0 {
		return nil, errors.New("the model answered no outputs")
	}
	n := int64(-1)
	vals := make([][]gjson.Result, len(outs))
	for i, t := range outs {
		if len(t.Shape) == 0 {
			return nil, fmt.Errorf("output %q is a scalar: the row format needs a first (batch) dimension; use \"inputs\" (the columnar format)", t.Name)
		}
		if n >= 0 && t.Shape[0] != n {
			return nil, fmt.Errorf("outputs %q and %q have first dimensions %d and %d: the row format needs them equal; use \"inputs\" (the columnar format)", outs[0].Name, t.Name, n, t.Shape[0])
		}
		n = t.Shape[0]
		flat, err := tfServingFlat(t)
		if err != nil {
			return nil, err
		}
		vals[i] = gjson.ParseBytes(flat).Array()
	}
	b = append(b, `{"predictions":[`...)
	for r := range n {
		if r > 0 {
			b = append(b, ',')
		}
		if len(outs) > 1 {
			b = append(b, '{')
		}
		for i, t := range outs {
			per := int64(len(vals[i])) / n
			if len(outs) > 1 {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, t.Name)
				b = append(b, ':')
			}
			b = appendNested(b, vals[i][r*per:(r+1)*per], t.Shape[1:])
		}
		if len(outs) > 1 {
			b = append(b, '}')
		}
	}
	return append(b, "]}\n"...), nil
}
