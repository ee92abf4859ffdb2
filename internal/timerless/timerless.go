// Package timerless is a context with a deadline and no timer of its own,
// for hot paths where arming a runtime timer per call costs microseconds
// (a timer earlier than the poller's next wake-up wakes the poller). The
// code that makes one ends it when the deadline passes, with one timer it
// reuses or a watchdog it already runs, by cancelling it with cause
// context.DeadlineExceeded; its Err then reports DeadlineExceeded, as a
// context.WithTimeout's would.
package timerless

import (
	"context"
	"errors"
	"time"
)

// Context is a context.WithCancelCause context that reports At as its
// deadline. The zero value is not usable: set both fields (or use
// WithDeadline). It can be held by value in a larger struct, so that a
// call's context costs no allocation of its own.
type Context struct {
	context.Context // from context.WithCancelCause
	At              time.Time
}

// WithDeadline returns a Context under parent with deadline at, and the
// function that ends it: call it with context.DeadlineExceeded when the
// deadline passes, with another cause (or nil, for Canceled) to end it
// earlier.
func WithDeadline(parent context.Context, at time.Time) (*Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	return &Context{Context: ctx, At: at}, cancel
}

// Deadline reports At.
func (c *Context) Deadline() (time.Time, bool) { return c.At, true }

// Err is the embedded context's error, but DeadlineExceeded when it was
// ended for its deadline.
func (c *Context) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}
