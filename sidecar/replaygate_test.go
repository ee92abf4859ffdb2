package sidecar

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/inferr"
)

func TestReplayGate(t *testing.T) {
	g := newReplayGate()
	done, cancel := context.WithCancel(context.Background())
	cancel() // waits that would block fail at once instead
	paths := func(ps ...string) func(func(string) bool) { return slices.Values(ps) }
	blocked := func(p string) bool {
		t.Helper()
		err := g.wait(done, paths(p))
		if err != nil && (inferr.TypeOf(err) != inferr.GRPC || !strings.Contains(err.Error(), p)) {
			t.Errorf("wait(%s) = %v, want a GRPC error naming it", p, err)
		}
		return err != nil
	}
	listed := func() string {
		ps, ok := g.modelPaths()
		if !ok {
			return "inactive"
		}
		return strings.Join(ps, ",")
	}

	if blocked("a/") || listed() != "inactive" {
		t.Fatal("an inactive gate holds calls or lists models")
	}
	if msg, _ := g.state(); msg != "" {
		t.Fatalf("inactive gate state %q", msg)
	}
	g.begin([]string{"b/", "a/"}, false)
	if msg, _ := g.state(); !strings.Contains(msg, "restarting (2 models to replay)") {
		t.Errorf("state while down: %q", msg)
	}
	if !blocked("a/") || !blocked("b/") || blocked("other/") || listed() != "a/,b/" {
		t.Fatalf("down: a/ %v b/ %v other/ %v, listed %s", blocked("a/"), blocked("b/"), blocked("other/"), listed())
	}
	gen := g.begin([]string{"a/", "b/"}, true)
	g.finish(gen, "a/", true)
	if msg, _ := g.state(); !strings.Contains(msg, "replaying 1 of 2 models") {
		t.Errorf("state while replaying: %q", msg)
	}
	if blocked("a/") || !blocked("b/") || listed() != "a/,b/" {
		t.Fatalf("a/ back: a/ %v b/ %v, listed %s", blocked("a/"), blocked("b/"), listed())
	}
	// The sidecar dies during the replay: a/ is pending again, and the
	// dead replay's failure of b/ changes nothing.
	g.begin([]string{"a/", "b/"}, false)
	g.finish(gen, "b/", false)
	if !blocked("a/") || !blocked("b/") || listed() != "a/,b/" {
		t.Fatalf("after a death mid-replay: a/ %v b/ %v, listed %s", blocked("a/"), blocked("b/"), listed())
	}
	gen = g.begin([]string{"a/", "b/"}, true)
	g.finish(gen, "b/", false) // failed: released and no longer listed
	if blocked("b/") || listed() != "a/" {
		t.Fatalf("b/ failed: b/ %v, listed %s", blocked("b/"), listed())
	}
	g.forget("a/") // deleted meanwhile
	if blocked("a/") || listed() != "" {
		t.Fatalf("a/ deleted: a/ %v, listed %q", blocked("a/"), listed())
	}
	g.begin([]string{"c/"}, true)
	_, idle := g.state()
	g.end()
	<-idle
	if blocked("c/") || listed() != "inactive" {
		t.Fatal("an ended gate holds calls or lists models")
	}
	var nilGate *replayGate
	if nilGate.wait(done, paths("a/")) != nil || nilGate.outage(done) {
		t.Error("a client without a supervisor waits")
	}
}
