package sidecar

import (
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferbid/inferbid/inferr"
)

func TestStatusRoundTripKeepsTypeAndMessage(t *testing.T) {
	for typ := inferr.Unknown; typ <= inferr.GRPC; typ++ {
		err := inferr.Errorf(typ, "model %q: something about %s", "p/", typ)
		st := toStatus(err)
		if s, _ := status.FromError(st); s.Code() != typeCodes[typ] {
			t.Errorf("%v: code %v, want %v", typ, s.Code(), typeCodes[typ])
		}
		back := fromStatus(st)
		if inferr.TypeOf(back) != typ || back.Error() != err.Error() {
			t.Errorf("%v: round trip gave %v %q", typ, inferr.TypeOf(back), back)
		}
	}
}

func TestFromStatusTransportErrorsAreGRPC(t *testing.T) {
	err := fromStatus(status.Error(codes.Unavailable, "connection refused"))
	if inferr.TypeOf(err) != inferr.GRPC || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("got %v %q", inferr.TypeOf(err), err)
	}
	if inferr.TypeOf(fromStatus(io.EOF)) != inferr.GRPC {
		t.Fatal("a non-status error from a call is a GRPC error")
	}
	if fromStatus(nil) != nil || toStatus(nil) != nil {
		t.Fatal("nil must stay nil")
	}
}

// A message that is not UTF-8 (ONNX Runtime echoes a model's bytes) must
// still travel with its type: gRPC refuses such a status message and would
// answer Internal.
func TestStatusSanitizesMessages(t *testing.T) {
	err := inferr.Errorf(inferr.ModelExecution, "load model %q: No Op registered for M\xffl", "p/")
	back := fromStatus(toStatus(err))
	if inferr.TypeOf(back) != inferr.ModelExecution || !utf8.ValidString(back.Error()) || !strings.Contains(back.Error(), "M\uFFFDl") {
		t.Fatalf("got %v %q", inferr.TypeOf(back), back)
	}
	plain := toStatus(status.Error(codes.Internal, "bad \xff byte"))
	if s, _ := status.FromError(plain); !utf8.ValidString(s.Message()) || s.Code() != codes.Internal {
		t.Fatalf("untyped status: %v %q", s.Code(), s.Message())
	}
	huge := inferr.Errorf(inferr.ModelNotFound, "model %s", strings.Repeat("x", 1<<20))
	if s, _ := status.FromError(toStatus(huge)); len(s.Message()) > inferr.MaxMessageBytes+40 {
		t.Fatalf("a 1 MiB message went out as %d bytes", len(s.Message()))
	}
	if d := errorToProto(err).GetDescription(); !utf8.ValidString(d) {
		t.Fatalf("errorToProto kept invalid UTF-8: %q", d)
	}
}
