package kserve

import (
	"fmt"

	"github.com/inferbid/inferbid/tensor"
)

// Datatypes are the protocol's tensor data type names, in its table's
// order.
var Datatypes = []string{"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"}

// supported maps the protocol's datatypes to the sidecar's dtypes: all of
// them. Whether a model takes one is the runtime's answer (a 400 naming the
// input when it does not).
var supported = map[string]tensor.DType{
	"BOOL": tensor.Bool, "UINT8": tensor.Uint8, "UINT16": tensor.Uint16, "UINT32": tensor.Uint32, "UINT64": tensor.Uint64,
	"INT8": tensor.Int8, "INT16": tensor.Int16, "INT32": tensor.Int32, "INT64": tensor.Int64,
	"FP16": tensor.Half, "FP32": tensor.Float, "FP64": tensor.Double, "BYTES": tensor.Bytes,
}

// DatatypeOf is the protocol name of a dtype ("FP32" for FLOAT); "" for
// Invalid (a model input of any type).
func DatatypeOf(d tensor.DType) string {
	switch d {
	case tensor.Invalid:
		return ""
	case tensor.Float:
		return "FP32"
	case tensor.Double:
		return "FP64"
	}
	return d.String() // the other names are the protocol's
}

// ParseDatatype maps a protocol datatype name (case-sensitive, as the
// protocol says) to its dtype; a name outside the protocol is an error that
// names input.
func ParseDatatype(input, name string) (tensor.DType, error) {
	if d, ok := supported[name]; ok {
		return d, nil
	}
	return tensor.Invalid, fmt.Errorf("input %q: datatype %q is not a datatype of the protocol (one of %v, case-sensitive)", input, name, Datatypes)
}
