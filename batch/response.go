package batch

import (
	"math"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/sequence"
)

// ParseResponse parses response JSON back into results (for inferctl, tests and benchmarks).
//
// A whole-batch error response ({"response":[{"error":..}]} without
// model_path) comes back as a nil slice and that error, with its error_type
// and description. A response that is malformed is an OUTPUT_PARSING error
// whose description starts with "batch response".
func ParseResponse(data []byte) ([]Result, error) {
	arr, err := topLevelArray(data, "response", inferr.OutputParsing, "batch response")
	if err != nil {
		return nil, err
	}
	p := parser{
		lim:     Limits{MaxElements: math.MaxInt64, MaxEntries: math.MaxInt, MaxTensors: math.MaxInt},
		section: "batch response: response",
		typ:     inferr.OutputParsing,
		minDim:  0,
	}

	var results []Result
	var batchErr error
	arr.ForEach(func(_, v gjson.Result) bool {
		var r Result
		var isBatchErr bool
		r, isBatchErr, err = p.result(len(results), v)
		if err != nil {
			return false
		}
		if isBatchErr {
			batchErr = r.Err
		}
		results = append(results, r)
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case batchErr != nil && len(results) == 1:
		return nil, batchErr
	case batchErr != nil:
		return nil, inferr.Errorf(inferr.OutputParsing, "batch response: a whole-batch error (no model_path) among %d entries", len(results))
	}
	if results == nil {
		results = []Result{}
	}
	return results, nil
}

// result parses one response entry; isBatchErr reports an error entry
// without model_path.
func (p *parser) result(idx int, v gjson.Result) (r Result, isBatchErr bool, err error) {
	at := loc{section: p.section, typ: p.typ, entry: idx, tensor: -1}
	if !v.IsObject() {
		return r, false, at.errorf("entry is %s, want an object", describe(v))
	}
	var path, tensors, errObj gjson.Result
	dup := pickFields(v, resultFields, &path, &tensors, &errObj)
	switch {
	case dup != "":
		return r, false, at.errorf("field %q appears more than once", dup)
	case path.Exists() && (path.Type != gjson.String || !utf8.ValidString(path.Str)):
		return r, false, at.errorf("model_path is %s, want a UTF-8 string", describe(path))
	case errObj.Exists() && tensors.Exists():
		return r, false, at.errorf("entry has both tensors and error")
	case !errObj.Exists() && !path.Exists():
		return r, false, at.errorf("missing model_path")
	}
	if path.Exists() {
		r.ModelPath = p.keepPath(path)
		at.path = r.ModelPath
	}
	if errObj.Exists() {
		r.Err, err = parseErrorObject(&at, errObj)
		return r, !path.Exists(), err
	}
	if !tensors.IsArray() {
		return r, false, at.errorf("tensors is %s, want an array", describe(tensors))
	}
	start := len(p.tensorSlab)
	tensors.ForEach(func(_, tv gjson.Result) bool {
		at.tensor = len(p.tensorSlab) - start
		t, terr := p.tensor(&at, tv)
		if terr != nil {
			err = terr
			return false
		}
		start = p.pushTensor(start, t)
		return true
	})
	if err != nil {
		return r, false, err
	}
	r.Tensors = p.entryTensors(start)
	p.prevTensors = r.Tensors
	return r, false, nil
}

func parseErrorObject(at *loc, v gjson.Result) (error, error) {
	if !v.IsObject() {
		return nil, at.errorf("error is %s, want an object", describe(v))
	}
	typ, desc := v.Get("error_type"), v.Get("description")
	if typ.Type != gjson.String {
		return nil, at.errorf("error.error_type is %s, want a string", describe(typ))
	}
	if desc.Exists() && desc.Type != gjson.String {
		return nil, at.errorf("error.description is %s, want a string", describe(desc))
	}
	if seq := v.Get("sequence_error"); seq.Exists() {
		c, ok := sequence.ParseCode(seq.Str)
		if seq.Type != gjson.String || !ok {
			return nil, at.errorf("error.sequence_error is %s, want one of INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, UNAVAILABLE, FAILED_PRECONDITION", describe(seq))
		}
		return &inferr.Error{Type: inferr.ParseType(typ.Str), Err: &sequence.Error{Code: c, Msg: strings.Clone(desc.Str)}}, nil
	}
	return &inferr.Error{Type: inferr.ParseType(typ.Str), Msg: strings.Clone(desc.Str)}, nil
}
