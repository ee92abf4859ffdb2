package jsworker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	pb "github.com/inferbid/inferbid/proto/jsworkerpb"
)

// request is one GenerateBids in the scheduler.
type request struct {
	ctx context.Context
	req Request
	// gen is the code generation the request runs in, set when it is
	// admitted; version is the module it runs (its name in gen).
	gen     *generation
	version string
	counted bool // counted in scheduler.live

	// Guarded by scheduler.mu.
	results []Result
	logs    []logChunk
	pending [][2]int // ranges of groups not handed out yet
	running int      // chunks on workers
	queued  bool     // in scheduler.queue
	used    time.Duration
	stopErr error // set: pending and returned groups fail with it
	open    int   // groups without a result
	done    chan struct{}
}

// logChunk is the log lines of the chunk that started at group lo.
type logChunk struct {
	lo    int
	lines []*pb.LogLine
}

// chunk is groups [lo, hi) of a request, sent to one worker.
type chunk struct {
	r      *request
	lo, hi int
}

func newRequest(ctx context.Context, req Request, opts Options) *request {
	n := len(req.InterestGroups)
	r := &request{ctx: ctx, req: req, results: make([]Result, n), open: n, done: make(chan struct{})}
	if n == 0 {
		close(r.done)
		return r
	}
	// Split into as many ranges as the request may run at once.
	parts := min(opts.RequestConcurrency, n)
	size := (n + parts - 1) / parts
	for lo := 0; lo < n; lo += size {
		r.pending = append(r.pending, [2]int{lo, min(lo+size, n)})
	}
	return r
}

func (r *request) fn() string {
	if r.req.Function == "" {
		return "generateBid"
	}
	return r.req.Function
}

// stopAll fails every group (the request never reached the scheduler).
func (r *request) stopAll(err error) {
	for i := range r.results {
		r.results[i].Err = err
	}
	r.open = 0
	r.pending = nil
	select {
	case <-r.done:
	default:
		close(r.done)
	}
}

// response is the request's outcome once done is closed.
func (r *request) response() Response {
	resp := Response{Results: r.results}
	slices.SortStableFunc(r.logs, func(a, b logChunk) int { return a.lo - b.lo })
	for _, lc := range r.logs {
		for _, l := range lc.lines {
			resp.Logs = append(resp.Logs, LogLine{Source: l.GetSource(), Level: l.GetLevel(), Text: l.GetText()})
		}
	}
	return resp
}

// scheduler hands the chunks of concurrent requests to workers in turn:
// requests wait in a round-robin queue, a worker takes the next chunk of
// the request at its head, and the request goes to the back while it has
// more. A chunk whose slice ran out comes back, and its rest joins the back
// too: a request of 1,000 groups takes one slice of a worker at a time,
// between the slices of the others.
//
// Requests run in the code generation current when they were admitted:
// each worker serves one generation, and takes only its requests. After a
// swap the old generation's workers finish its requests, then stop.
type scheduler struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*request
	closed bool
	maxPer int
	budget time.Duration // < 0: none

	cur *generation
	// live counts the admitted requests not done yet, by generation.
	live map[*generation]int
	// draining counts retired generations with live requests: while
	// there are any, a new request wakes every waiting worker (one of the
	// right generation must see it).
	draining int
}

func newScheduler(maxPer int, budget time.Duration, g *generation) *scheduler {
	s := &scheduler{maxPer: maxPer, budget: budget, cur: g, live: map[*generation]int{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// add admits r into the current generation and queues it; a code version
// the generation does not have fails r at once.
func (s *scheduler) add(r *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.resolveLocked(r, ErrClosed)
		return
	}
	r.gen = s.cur
	r.version = r.req.CodeVersion
	if r.version == "" {
		r.version = r.gen.def
	}
	if _, ok := r.gen.modules[r.version]; !ok {
		s.resolveLocked(r, r.gen.unknown(r.req.CodeVersion))
		return
	}
	if r.open > 0 {
		r.counted = true
		s.live[r.gen]++
	}
	s.enqueueLocked(r)
}

// current is the generation new requests are admitted into.
func (s *scheduler) current() *generation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// swap makes g current and retires the previous generation: its workers
// finish its requests and then stop (next returns false to them).
func (s *scheduler) swap(g *generation) *generation {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur
	s.cur = g
	old.retired = true
	close(old.retiredCh)
	if s.live[old] > 0 {
		s.draining++
	}
	s.cond.Broadcast()
	return old
}

// doneLocked accounts for a request that has every result.
func (s *scheduler) doneLocked(r *request) {
	if !r.counted {
		return
	}
	r.counted = false
	s.live[r.gen]--
	if s.live[r.gen] > 0 {
		return
	}
	delete(s.live, r.gen)
	if r.gen.retired {
		s.draining--
		s.cond.Broadcast()
	}
}

// exhaustedLocked reports whether g's workers may stop: g is retired and
// has no request left.
func (s *scheduler) exhaustedLocked(g *generation) bool {
	return g.retired && s.live[g] == 0
}

// popLocked removes and returns the first queued request of generation g.
func (s *scheduler) popLocked(g *generation) *request {
	for i, r := range s.queue {
		if r.gen == g {
			if i == 0 {
				s.queue = s.queue[1:]
			} else {
				s.queue = slices.Delete(s.queue, i, i+1)
			}
			r.queued = false
			return r
		}
	}
	return nil
}

// enqueueLocked puts r at the back of the queue when it has work it may
// start now.
func (s *scheduler) enqueueLocked(r *request) {
	if r.queued || len(r.pending) == 0 || r.running >= s.maxPer {
		return
	}
	r.queued = true
	s.queue = append(s.queue, r)
	if s.draining > 0 {
		s.cond.Broadcast()
	} else {
		s.cond.Signal()
	}
}

// next blocks until a chunk of generation g is ready and returns it; false
// once closed, or once g is retired and has no request left.
func (s *scheduler) next(g *generation) (*chunk, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closed || s.exhaustedLocked(g) {
			return nil, false
		}
		r := s.popLocked(g)
		if r == nil {
			s.cond.Wait()
			continue
		}
		if len(r.pending) == 0 || r.running >= s.maxPer {
			continue
		}
		return s.takeLocked(r), true
	}
}

// tryNext returns a chunk of generation g when one is ready, without
// waiting.
func (s *scheduler) tryNext(g *generation) (*chunk, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closed {
		r := s.popLocked(g)
		if r == nil {
			break
		}
		if len(r.pending) == 0 || r.running >= s.maxPer {
			continue
		}
		return s.takeLocked(r), true
	}
	return nil, false
}

// takeLocked hands out r's next range.
func (s *scheduler) takeLocked(r *request) *chunk {
	rg := r.pending[0]
	r.pending = r.pending[1:]
	r.running++
	s.enqueueLocked(r)
	return &chunk{r: r, lo: rg[0], hi: rg[1]}
}

// queued is the number of requests waiting for a worker.
func (s *scheduler) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// finish records a chunk's outcome: results for groups [lo, lo+len), err
// for the groups after them up to notRun, and groups [notRun, hi) back in
// the request's pending ranges (not started: their slice ran out, or the
// chunk never reached a worker).
func (s *scheduler) finish(c *chunk, results []Result, notRun int, used time.Duration, err error) {
	s.finishWithLogs(c, results, notRun, used, err, nil)
}

func (s *scheduler) finishWithLogs(c *chunk, results []Result, notRun int, used time.Duration, err error, logs []*pb.LogLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := c.r
	r.running--
	// Logs first: the last result closes done.
	if len(logs) > 0 {
		r.logs = append(r.logs, logChunk{lo: c.lo, lines: logs})
	}
	i := c.lo
	for _, res := range results {
		s.setLocked(r, i, res)
		i++
	}
	for ; i < notRun; i++ {
		s.setLocked(r, i, Result{Err: err})
	}
	r.used += used
	if s.budget > 0 && r.used >= s.budget && r.stopErr == nil {
		r.stopErr = &callError{msg: fmt.Sprintf("not run: the request used its JS time budget of %v", s.budget), is: []error{ErrRequestBudget}}
	}
	if notRun < c.hi {
		r.pending = append([][2]int{{notRun, c.hi}}, r.pending...)
	}
	switch {
	case s.closed:
		s.resolveLocked(r, ErrClosed)
	case r.stopErr != nil:
		s.resolveLocked(r, r.stopErr)
	default:
		s.enqueueLocked(r)
	}
}

// setLocked records group i's result once.
func (s *scheduler) setLocked(r *request, i int, res Result) {
	if r.results[i].Bid != nil || r.results[i].Err != nil {
		return
	}
	if res.Bid == nil && res.Err == nil {
		res.Bid = []byte("null")
	}
	r.results[i] = res
	r.open--
	if r.open == 0 {
		s.doneLocked(r)
		close(r.done)
	}
}

// resolveLocked fails r's pending groups with err.
func (s *scheduler) resolveLocked(r *request, err error) {
	for _, rg := range r.pending {
		for i := rg[0]; i < rg[1]; i++ {
			s.setLocked(r, i, Result{Err: err})
		}
	}
	r.pending = nil
}

// stop fails r's groups not started yet with err (the first stop wins);
// chunks on workers finish.
func (s *scheduler) stop(r *request, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.stopErr == nil {
		r.stopErr = err
	}
	s.resolveLocked(r, r.stopErr)
}

// stopped returns r's stop error, or nil.
func (s *scheduler) stopped(r *request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.stopErr
}

func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	for _, r := range s.queue {
		s.resolveLocked(r, ErrClosed)
	}
	s.queue = nil
	s.cond.Broadcast()
	s.mu.Unlock()
}
