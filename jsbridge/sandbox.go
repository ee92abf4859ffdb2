// The process-wide part of the sandbox: regexp2's match timeout. The
// deadlines and the heap watchdog are in watchdog.go.

package jsbridge

import (
	"math"
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
