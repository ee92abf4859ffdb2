package sidecar

// The gRPC edge of the error vocabulary: every error leaves the server
// through toStatus and enters the client through fromStatus, so both sides
// see the same six error types (inferr stays free of gRPC).

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferbid/inferbid/inferr"
)

// errorInfoDomain marks the ErrorInfo detail that carries an exact Type in a
// gRPC status.
const errorInfoDomain = "inferbid.dev"

var typeCodes = [...]codes.Code{
	inferr.Unknown:        codes.Unknown,
	inferr.InputParsing:   codes.InvalidArgument,
	inferr.ModelNotFound:  codes.NotFound,
	inferr.ModelExecution: codes.Internal,
	inferr.OutputParsing:  codes.DataLoss,
	inferr.GRPC:           codes.Unavailable,
}

// ToStatus translates err to a gRPC status error whose code matches its type
// and whose ErrorInfo detail names the type exactly. The message is made
// valid UTF-8 and bounded (inferr.Sanitize): gRPC cannot send a status
// whose message is not UTF-8, and would answer Internal instead of the
// error's own type.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && !isTyped(err) {
		if msg := inferr.Sanitize(st.Message()); msg != st.Message() {
			p := st.Proto()
			p.Message = msg
			return status.FromProto(p).Err()
		}
		return err
	}
	t := inferr.TypeOf(err)
	st := status.New(typeCodes[t], inferr.Sanitize(err.Error()))
	if withInfo, e := st.WithDetails(&errdetails.ErrorInfo{Reason: t.String(), Domain: errorInfoDomain}); e == nil {
		st = withInfo
	}
	return st.Err()
}

func isTyped(err error) bool {
	_, ok := errors.AsType[*inferr.Error](err)
	return ok
}

// FromStatus translates an error returned by a gRPC call back to a typed
// error. A status that carries inferbid's ErrorInfo keeps its type and
// message; transport failures (Unavailable, DeadlineExceeded, Canceled, ...)
// become GRPC errors.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return inferr.Wrap(inferr.GRPC, err, "sidecar call failed")
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == errorInfoDomain {
			return &inferr.Error{Type: inferr.ParseType(info.Reason), Msg: st.Message()}
		}
	}
	return &inferr.Error{Type: inferr.GRPC, Msg: fmt.Sprintf("sidecar call failed: %s: %s", st.Code(), st.Message())}
}
