package timerless

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestContext(t *testing.T) {
	at := time.Now().Add(time.Hour)
	ctx, cancel := WithDeadline(context.Background(), at)
	if d, ok := ctx.Deadline(); !ok || !d.Equal(at) {
		t.Fatalf("Deadline() = %v, %v; want %v, true", d, ok, at)
	}
	if ctx.Err() != nil {
		t.Fatalf("Err() = %v before the end", ctx.Err())
	}
	cancel(context.DeadlineExceeded)
	<-ctx.Done()
	if err := ctx.Err(); err != context.DeadlineExceeded {
		t.Errorf("ended for its deadline: Err() = %v, want DeadlineExceeded", err)
	}

	ctx, cancel = WithDeadline(context.Background(), at)
	stop := errors.New("stopped")
	cancel(stop)
	if err := ctx.Err(); err != context.Canceled || context.Cause(ctx) != stop {
		t.Errorf("ended with a cause: Err() = %v, Cause = %v; want Canceled, %v", err, context.Cause(ctx), stop)
	}

	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel = WithDeadline(parent, at)
	defer cancel(nil)
	cancelParent()
	<-ctx.Done()
	if err := ctx.Err(); err != context.Canceled {
		t.Errorf("parent cancelled: Err() = %v, want Canceled", err)
	}
}
