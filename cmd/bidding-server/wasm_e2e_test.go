package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// TestWasmHelper: --udf_wasm_helper_path reaches generateBid as
// browserSignals.wasmHelper in the JS workers and in-process, through the
// real binary, with the example module (examples/wasmhelper), whose bids
// are the same with the helper as with its JS fallback; a helper that does
// not compile stops the server at start.
func TestWasmHelper(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	dir := filepath.Join("..", "..", "examples", "wasmhelper")
	udf := filepath.Join(dir, "generate_bid.js")
	helper := filepath.Join(dir, "feature_hash.wasm")
	req, err := os.ReadFile(filepath.Join(dir, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	bids := map[string]string{}
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"workers", []string{"--udf_wasm_helper_path", helper, "--js_workers", "1"}},
		{"in-process", []string{"--udf_wasm_helper_path", helper, "--js_in_process"}},
		{"no-helper", []string{"--js_workers", "1"}},
	} {
		s := startBiddingServer(t, server, append([]string{"--udf_code_path", udf}, mode.args...), nil)
		code, body := post(t, s.url+"/v1/generateBids", string(req))
		if code != 200 {
			t.Fatalf("%s: %d %s", mode.name, code, body)
		}
		want := `"hashedBy":"wasm"`
		if mode.name == "no-helper" {
			want = `"hashedBy":"js"`
		}
		if strings.Count(body, want) != 2 {
			t.Fatalf("%s: want two bids with %s: %s", mode.name, want, body)
		}
		bids[mode.name] = strings.ReplaceAll(body, `"hashedBy":"js"`, `"hashedBy":"wasm"`)
		t.Logf("%s: %s", mode.name, body)
	}
	if bids["workers"] != bids["in-process"] || bids["workers"] != bids["no-helper"] {
		t.Fatalf("the bids differ: %v", bids)
	}
	bad := filepath.Join(t.TempDir(), "bad.wasm")
	if err := os.WriteFile(bad, []byte("\x00asm\x01\x00\x00\x00\x01\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range [][]string{{"--js_workers", "1"}, {"--js_in_process"}} {
		s := launchBiddingServer(t, server, append([]string{"--udf_code_path", udf, "--udf_wasm_helper_path", bad}, mode...), nil)
		select {
		case err := <-s.done:
			if err == nil || !strings.Contains(s.log(), "Wasm helper") {
				t.Fatalf("%v: a helper that does not compile: %v\n%s", mode, err, s.log())
			}
		case <-time.After(time.Minute):
			t.Fatalf("%v: a helper that does not compile: still running\n%s", mode, s.log())
		}
	}
}
