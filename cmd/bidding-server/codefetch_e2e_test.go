package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
)

func codeJS(v string) string {
	return fmt.Sprintf("function generateBid(ig) {\n  return {ad: {v: %q}, bid: 1, render: \"https://ad.example/\" + ig.name};\n}\n", v)
}

// bidVersionOf posts one request and returns the version that bid, or the
// failure.
func bidVersionOf(url, codeVersion string) (string, int, error) {
	body := `{"interest_groups":[{"name":"a"}]`
	if codeVersion != "" {
		body += fmt.Sprintf(`,"code_version":%q`, codeVersion)
	}
	body += "}"
	resp, err := http.Post(url+"/v1/generateBids", "application/json", strings.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var out struct {
		Bids []struct {
			Bid   struct{ Ad struct{ V string } }
			Error string
		}
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Bids) != 1 {
		return "", resp.StatusCode, fmt.Errorf("answer %s: %v", b, err)
	}
	if e := out.Bids[0].Error; e != "" {
		return "", resp.StatusCode, fmt.Errorf("bid error: %s", e)
	}
	return out.Bids[0].Bid.Ad.V, resp.StatusCode, nil
}

// TestCodeBucketUploadFlow is the ad tech's upload flow through the binary
// with a file:// code bucket: a new default blob changes the bids within
// two poll periods under steady traffic with no failed request; a syntax
// error keeps the previous version serving and GET /v1/code shows it; a
// request naming an older blob runs it; a deleted blob is refused.
func TestCodeBucketUploadFlow(t *testing.T) {
	bin := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		// Written beside and renamed, as an upload tool would: a poll never
		// reads half a file.
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("bid.js", codeJS("v1"))
	write("bid-2026-11-01.js", codeJS("old"))
	const period = 300 * time.Millisecond
	cfg := fmt.Sprintf(`{"fetchMode":"BUCKET","protectedAuctionBiddingJsBucket":"file://%s","protectedAuctionBiddingJsBucketDefaultBlob":"bid.js","urlFetchPeriodMs":%d}`, dir, period.Milliseconds())
	s := startBiddingServer(t, bin, []string{"--js_workers", "2", "--js_heap_budget_mb", "0"}, []string{"BUYER_CODE_FETCH_CONFIG=" + cfg})
	if v, _, err := bidVersionOf(s.url, ""); err != nil || v != "v1" {
		t.Fatalf("first bid: %q, %v", v, err)
	}

	// Steady traffic while the default blob is replaced.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reqs, failed atomic.Int64
	var firstErr atomic.Value
	var sawV2 atomic.Int64 // unix nanos of the first v2 bid
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, _, err := bidVersionOf(s.url, "")
				reqs.Add(1)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				if v == "v2" {
					sawV2.CompareAndSwap(0, time.Now().UnixNano())
				}
			}
		})
	}
	time.Sleep(2 * period)
	uploaded := time.Now()
	write("bid.js", codeJS("v2"))
	deadline := uploaded.Add(20 * period)
	for sawV2.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(period)
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed across the swap; first: %v", n, reqs.Load(), firstErr.Load())
	}
	at := sawV2.Load()
	if at == 0 {
		t.Fatalf("no v2 bid within %v of the upload", 20*period)
	}
	took := time.Duration(at - uploaded.UnixNano())
	t.Logf("%d requests, none failed; the new default bid %v after the upload (poll period %v)", reqs.Load(), took.Round(time.Millisecond), period)
	// Two poll periods, plus the validation and the new workers' start
	// (tens of ms idle; more on a loaded machine running the race detector).
	if took > 2*period+2*time.Second {
		t.Errorf("the new default took %v, more than two poll periods (+2s to validate and start workers)", took)
	}

	// A broken upload: v2 keeps serving, /v1/code shows the error.
	write("bid.js", "function generateBid(ig) {\n  return {bid: 1 +};\n}\n")
	time.Sleep(3 * period)
	if v, _, err := bidVersionOf(s.url, ""); err != nil || v != "v2" {
		t.Fatalf("after a broken upload: %q, %v; want v2 still", v, err)
	}
	code, body := get(t, s.url+"/v1/code")
	var list struct{ Default string }
	_ = json.Unmarshal([]byte(body), &list)
	if code != 200 || list.Default != "bid.js" || !strings.Contains(body, `"state":"default"`) || !strings.Contains(body, "Line 2:") {
		t.Errorf("/v1/code after a broken upload: %d %s", code, body)
	}
	if n := strings.Count(s.log(), "version does not load"); n != 1 {
		t.Errorf("the broken upload was logged %d times over several polls, want once", n)
	}

	// A request pinned to an older blob runs it; an unknown one is a 400.
	if v, _, err := bidVersionOf(s.url, "bid-2026-11-01.js"); err != nil || v != "old" {
		t.Errorf("pinned: %q, %v", v, err)
	}
	if _, code, err := bidVersionOf(s.url, "nope.js"); code != 400 || !strings.Contains(err.Error(), "nope.js") {
		t.Errorf("unknown version: %d %v, want 400 naming it", code, err)
	}
	// A deleted blob stops being offered.
	if err := os.Remove(filepath.Join(dir, "bid-2026-11-01.js")); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * period)
	for {
		_, code, _ := bidVersionOf(s.url, "bid-2026-11-01.js")
		if code == 400 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted blob still serves after %v", 20*period)
		}
		time.Sleep(period / 2)
	}
	_, metrics := get(t, s.url+"/metrics")
	for _, m := range []string{"inferbid_code_swaps_total", "inferbid_code_versions_loaded 1", "inferbid_code_load_failures_total 1"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics has no %q", m)
		}
	}
	s.stop(t)
}

// TestCodeBucketMissingAtStart: a code bucket that cannot be opened, then
// a default blob that does not load, keep the server not ready, saying
// why, and are retried until they are fixed.
func TestCodeBucketMissingAtStart(t *testing.T) {
	bin := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	dir := filepath.Join(t.TempDir(), "code")
	cfg := fmt.Sprintf(`{"fetchMode":"BUCKET","protectedAuctionBiddingJsBucket":"file://%s","protectedAuctionBiddingJsBucketDefaultBlob":"bid.js","urlFetchPeriodMs":200}`, dir)
	s := launchBiddingServer(t, bin, []string{"--js_workers", "1", "--js_heap_budget_mb", "0", "--buyer_code_fetch_config", cfg}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(t, s.url+"/readyz")
		if code == 503 && strings.Contains(body, "code bucket not opened") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never said the code bucket is not opened: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The bucket appears with a broken default: still not ready, saying why.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bid.js"), []byte("function generateBid(ig) {\n  return 1 +;\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		code, body := get(t, s.url+"/readyz")
		if code == 503 && strings.Contains(body, "bidding code not fetched") && strings.Contains(body, "Line 2:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never gave the default's syntax error: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "bid.js"), []byte(codeJS("late")), 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t)
	if v, _, err := bidVersionOf(s.url, ""); err != nil || v != "late" {
		t.Fatalf("%q, %v", v, err)
	}
	s.stop(t)
}

func TestParseCodeFetchConfig(t *testing.T) {
	none := func(string) string { return "" }
	bucket := `{"fetchMode":"BUCKET","protectedAuctionBiddingJsBucket":"file:///code","protectedAuctionBiddingJsBucketDefaultBlob":"bid.js"}`
	c, err := parseConfig(nil, func(k string) string {
		if k == "BUYER_CODE_FETCH_CONFIG" {
			return bucket
		}
		return ""
	}, io.Discard)
	if err != nil || c.CodeFetch == nil || c.CodeFetch.Bucket != "file:///code" || c.CodeMaxBytes != 16<<20 {
		t.Fatalf("from the environment: %+v, %v", c.CodeFetch, err)
	}
	c, err = parseConfig([]string{"--buyer_code_fetch_config", `{"fetchMode":"LOCAL","biddingJsPath":"/srv/bid.js"}`}, none, io.Discard)
	if err != nil || c.CodeFetch != nil || c.UDFCodePath != "/srv/bid.js" {
		t.Fatalf("LOCAL is --udf_code_path: %+v, %v", c, err)
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"both":           {[]string{"--udf_code_path", "a.js", "--buyer_code_fetch_config", bucket}, "give one"},
		"in process":     {[]string{"--js_in_process", "--buyer_code_fetch_config", bucket}, "--js_in_process"},
		"unknown field":  {[]string{"--buyer_code_fetch_config", `{"fetchMode":"URL","biddingJsURL":"http://x/y"}`}, `unknown field "biddingJsURL"`},
		"contradiction":  {[]string{"--buyer_code_fetch_config", `{"fetchMode":"URL","biddingJsUrl":"http://x/y","protectedAuctionBiddingJsBucket":"gs://b"}`}, "protectedAuctionBiddingJsBucket is set"},
		"zero max bytes": {[]string{"--code_max_bytes", "0"}, "--code_max_bytes"},
	} {
		if _, err := parseConfig(c.args, none, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}
