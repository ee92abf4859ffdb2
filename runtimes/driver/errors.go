package driver

import (
	"strings"
	"unicode/utf8"
)

// NativeError returns err with a message that is valid UTF-8, still
// unwrapping to err. Backends apply it where a native library's message
// enters Go: ONNX Runtime and libtorch quote names and bytes from the model
// file, which need not be UTF-8, and such a message cannot travel in a gRPC
// status or a protobuf string. A nil or already valid err is returned as is.
func NativeError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if utf8.ValidString(msg) {
		return err
	}
	return &nativeError{msg: strings.ToValidUTF8(msg, "\uFFFD"), err: err}
}

type nativeError struct {
	msg string
	err error
}

func (e *nativeError) Error() string { return e.msg }
func (e *nativeError) Unwrap() error { return e.err }
