package jsworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// versionJS is a module whose bids say which version answered.
func versionJS(v string) string {
	return fmt.Sprintf(`function generateBid(ig) { return {v: %q, ig: ig.name}; }`, v)
}

func startVersions(t *testing.T, mods []Module, def string, opts Options) *Host {
	t.Helper()
	opts.Modules, opts.DefaultModule = mods, def
	opts.Logger = slog.New(slog.NewTextHandler(&bufLogger{}, nil))
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	opts.RequireFunctions = []string{"generateBid"}
	h, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// bidVersion runs one group and returns the version that answered.
func bidVersion(h *Host, version string) (string, error) {
	resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups("a"), CodeVersion: version})
	r := resp.Results[0]
	if r.Err != nil {
		return "", r.Err
	}
	s := string(r.Bid)
	i := strings.Index(s, `"v":"`)
	if i < 0 {
		return "", fmt.Errorf("bid %s names no version", s)
	}
	s = s[i+5:]
	return s[:strings.IndexByte(s, '"')], nil
}

func TestVersionPinnedPerRequest(t *testing.T) {
	h := startVersions(t, []Module{{Name: "v1.js", Source: versionJS("1")}, {Name: "v2.js", Source: versionJS("2")}}, "v2.js", Options{})
	for _, c := range []struct{ ask, want string }{{"", "2"}, {"v1.js", "1"}, {"v2.js", "2"}} {
		got, err := bidVersion(h, c.ask)
		if err != nil || got != c.want {
			t.Errorf("code_version %q: version %q, %v; want %q", c.ask, got, err, c.want)
		}
	}
	_, err := bidVersion(h, "v3.js")
	if !errors.Is(err, ErrUnknownVersion) || !strings.Contains(err.Error(), `"v3.js"`) {
		t.Errorf("unknown version: %v, want ErrUnknownVersion naming it", err)
	}
	names, def := h.Versions()
	if strings.Join(names, ",") != "v1.js,v2.js" || def != "v2.js" {
		t.Errorf("Versions() = %v, %q", names, def)
	}
}

func TestValidateReportsEachVersion(t *testing.T) {
	h := startVersions(t, []Module{{Name: "ok.js", Source: versionJS("1")}}, "", Options{Workers: 1, Spares: -1})
	errs := h.Validate(context.Background(), []Module{
		{Name: "good.js", Source: versionJS("g")},
		{Name: "syntax.js", Source: "function generateBid(ig) {\n  return 1 +;\n}"},
		{Name: "throws.js", Source: "throw new Error('top level boom')"},
		{Name: "nofn.js", Source: "var x = 1;"},
	})
	if len(errs) != 3 || errs["good.js"] != nil {
		t.Fatalf("Validate: %v, want errors for the three bad versions only", errs)
	}
	if e := errs["syntax.js"].Error(); !strings.Contains(e, "Line 2:13") {
		t.Errorf("syntax error %q does not give line and column", e)
	}
	if e := errs["throws.js"].Error(); !strings.Contains(e, "top level boom") {
		t.Errorf("top-level exception: %q", e)
	}
	if e := errs["nofn.js"].Error(); !strings.Contains(e, "generateBid") {
		t.Errorf("missing generateBid: %q", e)
	}
}

// TestValidateNamesTheModuleThatHangs: a module whose top level never ends
// holds its worker past StartLimit; Validate then loads each module alone
// and names only that one.
func TestValidateNamesTheModuleThatHangs(t *testing.T) {
	h := startVersions(t, []Module{{Name: "ok.js", Source: versionJS("1")}}, "", Options{Workers: 1, Spares: -1, StartLimit: 700 * time.Millisecond})
	errs := h.Validate(context.Background(), []Module{
		{Name: "good.js", Source: versionJS("g")},
		{Name: "hang.js", Source: "while (true) {}"},
	})
	if len(errs) != 1 || errs["hang.js"] == nil {
		t.Fatalf("Validate: %v, want an error for hang.js alone", errs)
	}
}

func TestSetModulesRefusesBrokenSet(t *testing.T) {
	h := startVersions(t, []Module{{Name: "bid.js", Source: versionJS("1")}}, "", Options{})
	err := h.SetModules(context.Background(), []Module{{Name: "bid.js", Source: "function generateBid( {"}}, "")
	var me *ModuleError
	if !errors.As(err, &me) || me.Versions["bid.js"] == "" {
		t.Fatalf("SetModules with a syntax error: %v, want a ModuleError naming bid.js", err)
	}
	if got, err := bidVersion(h, ""); err != nil || got != "1" {
		t.Fatalf("after a refused set: %q, %v; want the previous version serving", got, err)
	}
	if h.Stats().Swaps != 0 {
		t.Errorf("Swaps = %d after a refused set", h.Stats().Swaps)
	}
}

// TestSwapUnderTraffic swaps code versions while requests run without a
// pause: none fails, every request runs one version whole, the new one
// answers after the swap, and a version dropped by the swap is refused.
func TestSwapUnderTraffic(t *testing.T) {
	const slow = `function generateBid(ig) { var t = Date.now(); while (Date.now() - t < 2) {} return {v: %q, ig: ig.name}; }`
	h := startVersions(t, []Module{{Name: "old.js", Source: fmt.Sprintf(slow, "old")}}, "", Options{Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var reqs, failures atomic.Int64
	var firstErr atomic.Value
	var sawNew atomic.Bool
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp := h.GenerateBids(context.Background(), Request{InterestGroups: groups(namesN("g", 6)...)})
				reqs.Add(1)
				var v string
				for i, r := range resp.Results {
					if r.Err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, r.Err)
						continue
					}
					got := string(r.Bid)
					ver := got[strings.Index(got, `"v":"`)+5:]
					ver = ver[:strings.IndexByte(ver, '"')]
					if i == 0 {
						v = ver
					} else if ver != v {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Errorf("one request ran versions %q and %q", v, ver))
					}
					if ver == "new" {
						sawNew.Store(true)
					}
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	for i := range 3 {
		name := fmt.Sprintf("new%d.js", i)
		if err := h.SetModules(context.Background(), []Module{{Name: name, Source: fmt.Sprintf(slow, "new")}}, ""); err != nil {
			t.Fatalf("SetModules: %v", err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d failed calls of %d requests across swaps; first: %v", n, reqs.Load(), firstErr.Load())
	}
	if !sawNew.Load() {
		t.Fatal("no request ran the new version")
	}
	if _, err := bidVersion(h, "old.js"); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("a version dropped by the swap: %v, want ErrUnknownVersion", err)
	}
	if got := h.Stats().Swaps; got != 3 {
		t.Errorf("Swaps = %d, want 3", got)
	}
	// The old generations' workers stop once drained: Workers plus a spare.
	deadline := time.Now().Add(5 * time.Second)
	for len(h.PIDs()) > h.Workers()+1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(h.PIDs()); n > h.Workers()+1 {
		t.Errorf("%d worker processes after the swaps, want at most %d", n, h.Workers()+1)
	}
	t.Logf("%d requests across 3 swaps, none failed", reqs.Load())
}

// TestDroppedVersionFinishesInFlight: a request running a version that a
// swap drops finishes on it; later requests for it are refused.
func TestDroppedVersionFinishesInFlight(t *testing.T) {
	const slow = `function generateBid(ig) { var t = Date.now(); while (Date.now() - t < 150) {} return {v: "a", ig: ig.name}; }`
	h := startVersions(t, []Module{{Name: "a.js", Source: slow}, {Name: "b.js", Source: versionJS("b")}}, "b.js", Options{Workers: 2, RequestConcurrency: 2})
	done := make(chan Response, 1)
	go func() {
		done <- h.GenerateBids(context.Background(), Request{InterestGroups: groups(namesN("g", 6)...), CodeVersion: "a.js"})
	}()
	time.Sleep(50 * time.Millisecond) // the request is admitted and running
	if err := h.SetModules(context.Background(), []Module{{Name: "b.js", Source: versionJS("b2")}}, ""); err != nil {
		t.Fatal(err)
	}
	resp := <-done
	for i, r := range resp.Results {
		if r.Err != nil || !strings.Contains(string(r.Bid), `"v":"a"`) {
			t.Fatalf("group %d of the in-flight request: %s, %v", i, r.Bid, r.Err)
		}
	}
	if _, err := bidVersion(h, "a.js"); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("after the swap a.js: %v, want ErrUnknownVersion", err)
	}
	if v, err := bidVersion(h, ""); err != nil || v != "b2" {
		t.Errorf("default after the swap: %q, %v", v, err)
	}
}
