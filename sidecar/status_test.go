package sidecar

import (
	"io"
	"strings"
	"testing"

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
