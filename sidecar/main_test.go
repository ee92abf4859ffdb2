package sidecar_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binDir holds the binaries the end-to-end tests build once per run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sidecar-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Map // binary name -> *buildResult
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// buildBinary go-builds ./cmd/<name> of this module once per test run.
func buildBinary(t testing.TB, name string, cgo bool) string {
	t.Helper()
	v, _ := buildOnce.LoadOrStore(name, &buildResult{})
	br := v.(*buildResult)
	br.once.Do(func() {
		br.path = filepath.Join(binDir, name)
		cmd := exec.Command("go", "build", "-o", br.path, "./cmd/"+name)
		cmd.Dir = ".."
		cmd.Env = os.Environ()
		if !cgo {
			cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			br.err = fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	})
	if br.err != nil {
		t.Fatal(br.err)
	}
	return br.path
}
