package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
)

func TestRunWritesModelsReproducibly(t *testing.T) {
	out := t.TempDir()
	all := "pctr,pcvr,counter,mlp,affine_v1,affine_v2,all_dtypes"
	for _, style := range []string{"tf2", "function", "graph", "tf1"} {
		models := all
		if style == "tf1" {
			models = "pctr,pcvr,mlp,affine_v1,affine_v2,all_dtypes" // the counter needs resource variables
		}
		if err := write(io.Discard, filepath.Join(out, style), style, models); err != nil {
			t.Fatalf("%s: %v", style, err)
		}
	}
	first, err := os.ReadFile(filepath.Join(out, "tf2", "pctr", tfsave.VariablesIndex))
	if err != nil {
		t.Fatal(err)
	}
	// A stale checkpoint file from an earlier run is removed, and a second
	// run writes the same bytes.
	if err := write(io.Discard, filepath.Join(out, "tf2"), "tf2", "pctr"); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(filepath.Join(out, "tf2", "pctr", tfsave.VariablesIndex))
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("second run differs (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(out, "graph", "all_dtypes", tfsave.VariablesIndex)); !os.IsNotExist(err) {
		t.Errorf("graph-mode all_dtypes has no variables, yet a checkpoint exists (%v)", err)
	}
	for _, bad := range [][2]string{{"tf2", "nope"}, {"tf3", "pctr"}, {"tf1", "counter"}} {
		if err := write(io.Discard, out, bad[0], bad[1]); err == nil {
			t.Errorf("write(%q, %q): no error", bad[0], bad[1])
		}
	}
	if err := write(io.Discard, "", "tf2", "pctr"); err == nil {
		t.Error("empty -out: no error")
	}
}

func TestChecksumMatchesContract(t *testing.T) {
	// The value of the shell pipeline the contract names, computed with
	// coreutils: printf '%s%s' "$(printf a | sha256sum | cut -c1-64)" \
	//   "$(printf b | sha256sum | cut -c1-64)" | sha256sum
	const want = "62af5c3cb8da3e4f25061e829ebeea5c7513c54949115b1acc225930a90154da"
	if got := checksum(map[string][]byte{"z/b": []byte("b"), "a": []byte("a")}); got != want {
		t.Fatalf("checksum %s, want %s", got, want)
	}
}
