package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferbid/inferbid/modelstore"
)

// Back-off of the start-up retries (opening the bucket, reading its config
// for the first time): from retryMin doubling to the poll period, kept
// within [retryCapMin, retryCapMax].
const (
	retryMin    = 200 * time.Millisecond
	retryCapMin = time.Second
	retryCapMax = 30 * time.Second
	// retryRelog is how often a failure that keeps repeating is logged
	// again at WARN, with its count.
	retryRelog = 10 * time.Minute
)

// retrier paces the retries of one start-up step and logs their failures
// deduplicated: a new reason at WARN, its repeats at DEBUG (and at WARN
// again every retryRelog, with their count).
type retrier struct {
	log           *slog.Logger
	next, ceiling time.Duration
	attempts      int // failures since the last reset
	lastMsg       string
	repeats       int // failures with lastMsg since it was logged at WARN
	loggedAt      time.Time
}

func newRetrier(logger *slog.Logger, what string, period time.Duration, attrs ...any) *retrier {
	if period <= 0 {
		period = modelstore.DefaultPeriod
	}
	return &retrier{
		log:     logger.With(append([]any{"step", what}, attrs...)...),
		next:    retryMin,
		ceiling: min(max(period, retryCapMin), retryCapMax),
	}
}

// failed reports err in /readyz (through srv) and the log, then waits for
// the next attempt; false when ctx ended first.
func (r *retrier) failed(ctx context.Context, srv *server, msg string, err error) bool {
	return r.failedReport(ctx, srv.setSyncResult, msg, err)
}

// failedReport is failed with report in place of the model sync's result.
func (r *retrier) failedReport(ctx context.Context, report func(error), msg string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	r.attempts++
	wait := r.next
	r.next = min(2*r.next, r.ceiling)
	report(fmt.Errorf("%s (attempt %d, next in %s): %w", msg, r.attempts, wait, err))
	text := msg + ": " + err.Error()
	switch {
	case text != r.lastMsg:
		r.lastMsg, r.repeats, r.loggedAt = text, 0, time.Now()
		r.log.Warn(msg+"; retrying with back-off (repeats are logged at DEBUG)", "err", err, "attempt", r.attempts, "in", wait)
	case time.Since(r.loggedAt) >= retryRelog:
		r.log.Warn(msg+"; still retrying", "err", err, "attempt", r.attempts, "repeats", r.repeats+1, "in", wait)
		r.repeats, r.loggedAt = 0, time.Now()
	default:
		r.repeats++
		r.log.Debug(msg+"; retrying", "err", err, "attempt", r.attempts, "in", wait)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// reset ends a run of failures: it logs the recovery and starts the
// back-off again from retryMin.
func (r *retrier) reset() {
	if r.attempts > 0 {
		r.log.Info("recovered", "failed_attempts", r.attempts)
	}
	r.next, r.attempts, r.lastMsg, r.repeats = retryMin, 0, "", 0
}

// undoRegisterer registers collectors and can unregister all of them, so a
// constructor that registers metrics and then fails can be called again.
type undoRegisterer struct {
	prometheus.Registerer
	added []prometheus.Collector
}

func (u *undoRegisterer) Register(c prometheus.Collector) error {
	if err := u.Registerer.Register(c); err != nil {
		return err
	}
	u.added = append(u.added, c)
	return nil
}

func (u *undoRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := u.Register(c); err != nil {
			panic(err)
		}
	}
}

func (u *undoRegisterer) undo() {
	for _, c := range u.added {
		u.Registerer.Unregister(c)
	}
	u.added = nil
}
