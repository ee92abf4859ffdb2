package jsbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// wasmFile reads testdata/wasm/name.wasm (built from name.wat; see
// TestWasmTestdataUpToDate).
func wasmFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wasm", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsBytes is a JS statement defining name as a Uint8Array of b.
func jsBytes(name string, b []byte) string {
	var s strings.Builder
	fmt.Fprintf(&s, "const %s = new Uint8Array([", name)
	for i, c := range b {
		if i > 0 {
			s.WriteByte(',')
		}
		fmt.Fprint(&s, c)
	}
	s.WriteString("]);\n")
	return s.String()
}

// peerSource is testdata/wasm/peer.js with the modules it uses defined.
func peerSource(t testing.TB) string {
	t.Helper()
	js, err := os.ReadFile(filepath.Join("testdata", "wasm", "peer.js"))
	if err != nil {
		t.Fatal(err)
	}
	return jsBytes("KITCHEN", wasmFile(t, "kitchen")) + jsBytes("HUGETABLE", wasmFile(t, "hugetable")) +
		jsBytes("TABLEGROW", wasmFile(t, "tablegrow")) + string(js)
}

// nodePath is Node.js for the peer comparisons, or "" (the test skips,
// unless INFERBID_REQUIRE_PEER=1).
func nodePath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("INFERBID_NODE"), "/usr/bin/node"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if lp, err := exec.LookPath("node"); err == nil {
		return lp
	}
	if os.Getenv("INFERBID_REQUIRE_PEER") == "1" {
		t.Fatal("Node.js not found (INFERBID_REQUIRE_PEER=1): install nodejs or set INFERBID_NODE")
	}
	t.Skip("Node.js not found (/usr/bin/node, $INFERBID_NODE, PATH): the peer comparison is skipped")
	return ""
}

// runNode runs src in Node.js and returns what main() resolved to, as JSON.
func runNode(t testing.TB, node, src string) []byte {
	t.Helper()
	f := filepath.Join(t.TempDir(), "peer.js")
	src += "\nmain().then((r) => process.stdout.write(JSON.stringify(r)), (e) => { console.error(e); process.exit(1); });\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(node, f)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	return out
}

// TestWasmPeer runs the same JS (testdata/wasm/peer.js: modules, instances,
// every value type both ways, imports, memory both ways and its growth,
// globals, traps, errors and their classes, the promise API, hostile
// tables) in goja and in Node.js, and compares every output.
func TestWasmPeer(t *testing.T) {
	node := nodePath(t)
	src := peerSource(t)
	p, err := New("peer.js", src, Options{Size: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.CallJSON(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	want := runNode(t, node, src)
	var g, w map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("goja: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("node: %v: %s", err, want)
	}
	keys := map[string]bool{}
	for k := range g {
		keys[k] = true
	}
	for k := range w {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !reflect.DeepEqual(g[k], w[k]) {
			gj, _ := json.Marshal(g[k])
			wj, _ := json.Marshal(w[k])
			t.Errorf("%s:\n  goja: %s\n  node: %s", k, gj, wj)
		}
	}
}

// TestWasmTestdataUpToDate rebuilds every committed .wasm from its .wat with
// wabt's wat2wasm and compares. The .wasm files are committed so that tests
// and the example run without wabt; go generate (make wasm) rebuilds them.
func TestWasmTestdataUpToDate(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		if os.Getenv("INFERBID_REQUIRE_PEER") == "1" {
			t.Fatal("wat2wasm not found (INFERBID_REQUIRE_PEER=1): scripts/apt-install.sh wabt")
		}
		t.Skip("wat2wasm not found: the committed .wasm files are not checked (scripts/apt-install.sh wabt)")
	}
	wats, _ := filepath.Glob(filepath.Join("testdata", "wasm", "*.wat"))
	more, _ := filepath.Glob(filepath.Join("..", "examples", "wasmhelper", "*.wat"))
	wats = append(wats, more...)
	if len(wats) < 5 {
		t.Fatalf("found only %v", wats)
	}
	for _, wat := range wats {
		out := filepath.Join(t.TempDir(), "out.wasm")
		if b, err := exec.Command(wat2wasm, wat, "-o", out).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", wat, err, b)
			continue
		}
		got, _ := os.ReadFile(out)
		committed, err := os.ReadFile(strings.TrimSuffix(wat, ".wat") + ".wasm")
		if err != nil || !bytes.Equal(got, committed) {
			t.Errorf("%s: the committed .wasm is not what wat2wasm builds from it (%v): run go generate ./jsbridge/ ./examples/...", wat, err)
		}
	}
}
