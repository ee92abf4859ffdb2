package tensorflow

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGemm512Generated: the committed gemm512_amd64.s is what
// gen_gemm512.go writes, so an edit to either cannot be lost by the next
// go generate.
func TestGemm512Generated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go run")
	}
	gen, err := os.ReadFile("gen_gemm512.go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gen_gemm512.go"), gen, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "gen_gemm512.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GO111MODULE=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen_gemm512.go: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(dir, "gemm512_amd64.s"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("gemm512_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("gemm512_amd64.s differs from what gen_gemm512.go writes: run go generate ./runtimes/tensorflow/")
	}
}
