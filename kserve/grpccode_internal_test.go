package kserve

import (
	"errors"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The KServe edge's one code table: each HTTP status an error carries
// becomes its gRPC code and, observed, the same status again; anything
// else is Internal and 500.
func TestStatusCodesRoundTrip(t *testing.T) {
	for _, c := range []struct {
		http int
		grpc codes.Code
	}{
		{http.StatusBadRequest, codes.InvalidArgument},
		{http.StatusNotFound, codes.NotFound},
		{http.StatusRequestEntityTooLarge, codes.ResourceExhausted},
		{http.StatusServiceUnavailable, codes.Unavailable},
		{http.StatusConflict, codes.AlreadyExists},
		{http.StatusPreconditionFailed, codes.FailedPrecondition},
		{http.StatusNotImplemented, codes.Unimplemented},
		{http.StatusInternalServerError, codes.Internal},
		{http.StatusTeapot, codes.Internal},
	} {
		err := toStatus(errorf(c.http, "x"))
		if got := status.Code(err); got != c.grpc {
			t.Errorf("HTTP %d is gRPC %v, want %v", c.http, got, c.grpc)
		}
		want := c.http
		if c.grpc == codes.Internal {
			want = http.StatusInternalServerError
		}
		if got := httpStatusOf(err); got != want {
			t.Errorf("gRPC %v observed as %d, want %d", c.grpc, got, want)
		}
	}
	if got := httpStatusOf(nil); got != http.StatusOK {
		t.Errorf("no error observed as %d, want 200", got)
	}
	if got := httpStatusOf(errors.New("not a status")); got != http.StatusInternalServerError {
		t.Errorf("a plain error observed as %d, want 500", got)
	}
}
