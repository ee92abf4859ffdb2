package jsbridge

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// regexpOnce sets regexp2's match timeout once per process.
var regexpOnce sync.Once

// setRegexpMatchTimeout gives regular expressions that goja runs on regexp2
// (those with backreferences or lookaround; the others run on Go's
// linear-time regexp) a match timeout. regexp2 reads it from a package
// variable when it compiles a pattern, so it is process-wide: the first
// New sets it to its CallTimeout, unless the program set it already. A
// timed-out match reads as "no match" to the script; with the timeout no
// shorter than the call's, that happens only after the call's deadline, so
// the pending interrupt ends the call with ErrDeadline instead and the
// script never sees it. What the timeout bounds is the work of a runtime
// abandoned inside a catastrophic match.
func setRegexpMatchTimeout(d time.Duration) {
	regexpOnce.Do(func() {
		if regexp2.DefaultMatchTimeout == time.Duration(math.MaxInt64) {
			regexp2.DefaultMatchTimeout = d
		}
	})
}

// RegexpMatchTimeout is the match timeout regular expressions on regexp2
// get (see New); math.MaxInt64 means none.
func RegexpMatchTimeout() time.Duration { return regexp2.DefaultMatchTimeout }

// heapPollInterval is how often the heap watchdog reads the heap size.
const heapPollInterval = 10 * time.Millisecond

// maxVictimAge bounds minVictimAge: a call the watchdog stops has run at
// least min(maxVictimAge, CallTimeout/4). Bids take milliseconds; a
// memory bomb runs as long as it takes to fill the budget. A heap over the
// budget for another reason (a model download) then stops no short call.
const maxVictimAge = 100 * time.Millisecond

// heapSamples are the runtime metrics the watchdog reads.
type heapSamples struct {
	s []metrics.Sample
}

func newHeapSamples() heapSamples {
	return heapSamples{s: []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"}, // live and not yet swept
		{Name: "/gc/heap/live:bytes"},                // live at the last GC
	}}
}

func (h heapSamples) read() (objects, live uint64) {
	metrics.Read(h.s)
	return h.s[0].Value.Uint64(), h.s[1].Value.Uint64()
}

// heapLimit is the heap the watchdog keeps calls under: HeapBudget plus
// HeapBaseline.
func (p *Pool) heapLimit() uint64 {
	limit := p.opts.HeapBudget
	if p.opts.HeapBaseline != nil {
		limit += max(0, p.opts.HeapBaseline())
	}
	return uint64(limit)
}

// watchHeap stops calls while the heap is over its limit (heapLimit). The
// heap counts every Go object of the process; JS values are Go objects,
// and nothing tells which runtime holds which, so the call that has run
// longest (and at least minVictimAge) is taken as the culprit. A call is
// stopped only when the live heap (as marked by a collection) is over the
// limit: when the objects, garbage included, near the limit but the last
// mark was under it, and a call old enough to blame runs, the watchdog
// forces a collection to know. When debug.SetMemoryLimit is at or under the limit
// the collector keeps garbage under it already, and objects over the limit
// are taken as live. After a stop, the stopped call's runtime is collected
// before the heap is looked at again.
func (p *Pool) watchHeap() {
	h := newHeapSamples()
	t := time.NewTicker(heapPollInterval)
	defer t.Stop()
	minAge := min(maxVictimAge, p.opts.CallTimeout/4)
	for {
		select {
		case <-p.closed:
			return
		case <-t.C:
		}
		limit := p.heapLimit()
		objects, live := h.read()
		// Look closer from 7/8 of the limit: a forced collection takes a
		// while, and a memory bomb keeps allocating meanwhile.
		if objects <= limit-limit/8 && live <= limit {
			continue
		}
		if p.oldestCall(minAge, false) == nil {
			// Over the limit with no call to stop: abandoned runtimes, the
			// host's own memory, or only young calls. New calls still run.
			continue
		}
		if live <= limit {
			if gcLimit := debug.SetMemoryLimit(-1); gcLimit < 0 || uint64(gcLimit) > limit {
				runtime.GC()
				if _, live = h.read(); live <= limit {
					continue
				}
			}
		}
		c := p.oldestCall(minAge, true)
		if c == nil {
			continue
		}
		p.heapStops.Add(1)
		p.opts.Logger.Warn("jsbridge: the heap is over its limit; stopping the longest-running call",
			"heap_objects_mib", objects>>20, "heap_live_mib", live>>20, "limit_mib", limit>>20, "call_ran", time.Since(c.start))
		c.end(ErrHeapBudget)
		// Once its runtime is dropped its memory is garbage: collect it, so
		// that the next look at the heap does not blame another call.
		select {
		case <-c.ended:
		case <-time.After(p.opts.InterruptGrace):
		case <-p.closed:
			return
		}
		runtime.GC()
	}
}

// oldestCall is the running call that started first, at least minAge ago,
// and was not stopped yet; with stop, it is marked stopped.
func (p *Pool) oldestCall(minAge time.Duration, stop bool) *call {
	p.callsMu.Lock()
	defer p.callsMu.Unlock()
	var oldest *call
	for c := range p.calls {
		if !c.stopped && (oldest == nil || c.start.Before(oldest.start)) {
			oldest = c
		}
	}
	if oldest == nil || time.Since(oldest.start) < minAge {
		return nil
	}
	oldest.stopped = stop
	return oldest
}
