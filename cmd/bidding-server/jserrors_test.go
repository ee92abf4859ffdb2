package main

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferbid/inferbid/codestore"
	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/jsbridge"
)

// throwingModule throws a ReferenceError on line 4, column 10, for the
// group named "ref"; a TypeError built from the request's data on line 6
// for "data"; a string for "str".
const throwingModule = `function generateBid(ig, auctionSignals) {
  var secret = ig.secret;
  if (ig.name === "ref") {
    return undefinedVar + 1;
  }
  if (ig.name === "data") { throw new TypeError("bad " + secret); }
  throw "plain " + secret;
}
`

func TestScriptErrorsHavePositionAndAreLoggedWithoutData(t *testing.T) {
	var logs testhelp.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil)) // the default level: info
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	pool, err := jsbridge.New("bid.js", throwingModule, jsbridge.Options{Size: 1, Logger: logger, Hooks: m.hooks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	s := &server{pool: pool, metrics: m, gatherer: reg, logger: logger, maxBody: 1 << 20, maxGroups: 10,
		module: codestore.VersionStatus{Name: "bid.js"}}
	s.setSyncResult(nil)
	ts := httptest.NewServer(s.handler())
	t.Cleanup(ts.Close)

	const secret = "user-42-private"
	body := `{"interest_groups":[{"name":"ref","secret":"` + secret + `"},{"name":"data","secret":"` + secret + `"},{"name":"str","secret":"` + secret + `"},{"name":"ref"}]}`
	code, out := post(t, ts.URL+"/v1/generateBids", body)
	var r bidsResponse
	if code != 200 || json.Unmarshal([]byte(out), &r) != nil || len(r.Bids) != 4 {
		t.Fatalf("generateBids: %d %s", code, out)
	}
	for i, want := range []string{
		"generateBid threw: ReferenceError: undefinedVar is not defined (at bid.js:4:12)",
		"generateBid threw: TypeError: bad " + secret + " (at bid.js:6:",
		"generateBid threw: plain " + secret + " (at bid.js:7:",
	} {
		if !strings.HasPrefix(r.Bids[i].Error, want) {
			t.Errorf("bid %d error %q, want it to start with %q", i, r.Bids[i].Error, want)
		}
	}
	log := logs.String()
	t.Logf("log:\n%s", log)
	if strings.Contains(log, secret) {
		t.Errorf("the log holds the request's data %q", secret)
	}
	for _, want := range []string{
		`error_class=ReferenceError module_version=bid.js position=bid.js:4:12`,
		`error_class=TypeError module_version=bid.js position=bid.js:6:`,
		`error_class="thrown value" module_version=bid.js position=bid.js:7:`,
	} {
		if strings.Count(log, want) != 1 {
			t.Errorf("the log has %d lines with %q, want 1 (the second ReferenceError is rate-limited)", strings.Count(log, want), want)
		}
	}
}

func TestScriptPosition(t *testing.T) {
	for msg, want := range map[string]string{
		"ReferenceError: x is not defined\n\tat generateBid (bid.js:3:10(3))\n":     "bid.js:3:10",
		"Error: y\n\tat f (v1/bid.js:12:5(7))\n\tat generateBid (v1/bid.js:3:1(2))": "v1/bid.js:12:5",
		"Error: z\n\tat bid.js:1:1(1)\n":                                            "bid.js:1:1",
		"no stack":                                                                  "",
		"Error: x\n\tat native":                                                     "",
	} {
		if got := scriptPosition(msg); got != want {
			t.Errorf("scriptPosition(%q) = %q, want %q", msg, got, want)
		}
	}
}
