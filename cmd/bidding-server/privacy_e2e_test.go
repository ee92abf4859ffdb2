package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// leakProbe is a bidding module that tries every way JS state can outlive
// a call: globals, a prototype, module scope, a replaced built-in (Date.now)
// and a closure left in a global. Each call reports what it found from
// earlier calls, then leaves its own user's name in all of them. It also
// draws from Math.random, which must not repeat across users (a fixed seed
// per fresh runtime would hand every user the same numbers).
const leakProbe = `
var moduleScope = [];
function generateBid(ig) {
  var seen = [];
  if (globalThis.leak) seen.push("global:" + globalThis.leak);
  if (({}).leakedProto) seen.push("proto:" + ({}).leakedProto);
  for (var i = 0; i < moduleScope.length; i++) seen.push("module:" + moduleScope[i]);
  if (Date.now.leaked) seen.push("date:" + Date.now.leaked);
  if (typeof globalThis.stash === "function") seen.push("closure:" + globalThis.stash());
  globalThis.leak = ig.user;
  Object.prototype.leakedProto = ig.user;
  moduleScope.push(ig.user);
  var user = ig.user;
  globalThis.stash = function () { return user; };
  var now = Date.now;
  Date.now = function () { return now(); };
  Date.now.leaked = ig.user;
  var r = [];
  for (var j = 0; j < 4; j++) r.push(Math.random());
  return {user: ig.user, seen: seen, random: r.join(",")};
}`

// TestNoJSStateCrossesRequests is the JS part of the "no state crosses
// requests" suite, through the real binary: concurrent requests of many
// users, three interest groups each. A call may see what its own request's
// earlier calls left (they share a runtime: one user), never another
// request's, and no two requests draw the same random numbers. With
// --js_isolate_calls=false (the mechanism removed) the same probe sees other
// users: the check can fail.
func TestNoJSStateCrossesRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	udf := filepath.Join(t.TempDir(), "probe.js")
	if err := os.WriteFile(udf, []byte(leakProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name   string
		args   []string
		leaks  bool
		ownOK  bool // a call may see its own request's earlier calls
		single bool // each call sees nothing at all
	}{
		{name: "workers", args: nil, ownOK: true},
		{name: "workers-each-call", args: []string{"--js_isolate_each_call"}, single: true},
		{name: "in-process", args: []string{"--js_in_process"}, ownOK: true},
		{name: "shared-unsafe", args: []string{"--js_isolate_calls=false", "--js_workers", "1"}, leaks: true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := startBiddingServer(t, server, append([]string{"--udf_code_path", udf}, mode.args...), nil)
			const users = 24
			var mu sync.Mutex
			var crossed []string
			randoms := map[string]string{}
			var wg sync.WaitGroup
			for u := range users {
				wg.Go(func() {
					user := fmt.Sprintf("user%02d", u)
					var igs []string
					for i := range 3 {
						igs = append(igs, fmt.Sprintf(`{"name":"ig%d","user":%q}`, i, user))
					}
					code, body := post(t, s.url+"/v1/generateBids", `{"interest_groups":[`+strings.Join(igs, ",")+`]}`)
					if code != 200 {
						t.Errorf("%s: %d %s", user, code, body)
						return
					}
					var resp struct {
						Bids []struct {
							Bid struct {
								User   string
								Seen   []string
								Random string
							}
							Error string
						}
					}
					if err := json.Unmarshal([]byte(body), &resp); err != nil {
						t.Errorf("%s: %v: %s", user, err, body)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					for i, b := range resp.Bids {
						if b.Error != "" {
							t.Errorf("%s ig%d: %s", user, i, b.Error)
							continue
						}
						for _, seen := range b.Bid.Seen {
							_, who, _ := strings.Cut(seen, ":")
							if who != user || mode.single {
								crossed = append(crossed, fmt.Sprintf("%s ig%d saw %s", user, i, seen))
							}
						}
						if other, dup := randoms[b.Bid.Random]; dup && !mode.leaks {
							t.Errorf("%s ig%d drew the same Math.random numbers as %s", user, i, other)
						}
						randoms[b.Bid.Random] = fmt.Sprintf("%s ig%d", user, i)
					}
				})
			}
			wg.Wait()
			if mode.leaks {
				if len(crossed) == 0 {
					t.Fatal("with runtimes shared between requests the probe saw no other user: the check cannot fail")
				}
				t.Logf("shared runtimes leaked, as expected: %d sightings, e.g. %s", len(crossed), crossed[0])
				return
			}
			if len(crossed) > 0 {
				t.Fatalf("%d sightings of state across requests (or calls), e.g.:\n%s", len(crossed), strings.Join(crossed[:min(10, len(crossed))], "\n"))
			}
		})
	}
}
