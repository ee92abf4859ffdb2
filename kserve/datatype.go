package kserve

import (
	"fmt"

	"github.com/inferbid/inferbid/tensor"
)

// Datatypes are the protocol's tensor data type names, in its table's
// order.
var Datatypes = []string{"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"}

// supported maps the datatypes the sidecar carries to its dtypes.
var supported = map[string]tensor.DType{
	"INT8": tensor.Int8, "INT16": tensor.Int16, "INT32": tensor.Int32, "INT64": tensor.Int64,
	"FP32": tensor.Float, "FP64": tensor.Double,
}

// DatatypeOf is the protocol name of a dtype ("FP32" for FLOAT); "" for
// Invalid (a model input of any type).
func DatatypeOf(d tensor.DType) string {
	for name, dt := range supported {
		if dt == d {
			return name
		}
	}
	return ""
}

// ParseDatatype maps a protocol datatype name (case-sensitive, as the
// protocol says) to the dtype the sidecar carries. A name of the protocol
// the sidecar cannot carry yet, and a name outside the protocol, are errors
// that name input.
func ParseDatatype(input, name string) (tensor.DType, error) {
	if d, ok := supported[name]; ok {
		return d, nil
	}
	for _, n := range Datatypes {
		if n == name {
			return tensor.Invalid, fmt.Errorf("input %q: datatype %s is not supported by inferbid's runtimes yet (supported: INT8, INT16, INT32, INT64, FP32, FP64)", input, name)
		}
	}
	return tensor.Invalid, fmt.Errorf("input %q: datatype %q is not a datatype of the protocol (one of %v, case-sensitive)", input, name, Datatypes)
}
