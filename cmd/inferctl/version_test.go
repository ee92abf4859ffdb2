package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// versionRE is what --version prints: the name, the module version, the
// commit (or why there is none) and the Go version.
var versionRE = regexp.MustCompile(`^(\S+) (devel|v\S+) \((commit ([0-9a-f]{7,})(, modified)?(, \S+)?|commit unknown: built without VCS information)\) go\S+\n$`)

// versionBinaries are the binaries whose --version is checked: cmd/ path
// and whether it builds with cgo. The PyTorch sidecar joins them with
// -tags pytorch (version_pytorch_test.go).
var versionBinaries = []struct {
	pkg   string
	cgo   bool
	flags []string
}{
	{"cmd/bidding-server", false, nil},
	{"cmd/inferctl", false, nil},
	{"cmd/inference-sidecar-tensorflow", false, nil},
	{"cmd/inference-sidecar-onnx", true, nil},
}

// TestVersionOnEveryBinary: every binary prints one version line and exits
// 0 on --version, whatever else its command line lacks (the sidecars'
// required --socket). Built with -buildvcs=auto from a clone (.git is a
// directory; go build does not stamp git worktrees) the line carries the
// checkout's commit.
func TestVersionOnEveryBinary(t *testing.T) {
	root := testhelp.ModuleRoot(t)
	head := ""
	if fi, err := os.Stat(filepath.Join(root, ".git")); err == nil && fi.IsDir() {
		if out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
			head = strings.TrimSpace(string(out))
		}
	}
	for _, b := range versionBinaries {
		bin := testhelp.BuildBinary(t, b.pkg, b.cgo, append([]string{"-buildvcs=auto"}, b.flags...)...)
		name := filepath.Base(b.pkg)
		out, errOut, code := runBinary(t, bin, "--version")
		m := versionRE.FindStringSubmatch(out)
		switch {
		case code != 0 || errOut != "" || m == nil || m[1] != name:
			t.Errorf("%s --version: exit %d, stdout %q, stderr %q; want exit 0 and a version line", name, code, out, errOut)
		case head != "" && m[4] != head:
			t.Errorf("%s --version: %q, want commit %s", name, out, head)
		default:
			t.Logf("%s", strings.TrimSpace(out))
		}
	}
	// Anywhere on inferctl's command line.
	bin := testhelp.BuildBinary(t, "cmd/inferctl", false, "-buildvcs=auto")
	for _, args := range [][]string{{"-version"}, {"register", "x", "--version"}, {"--socket", "s", "predict", "--version", "f"}} {
		out, errOut, code := runBinary(t, bin, args...)
		if code != 0 || errOut != "" || !versionRE.MatchString(out) {
			t.Errorf("inferctl %q: exit %d, stdout %q, stderr %q; want exit 0 and a version line", args, code, out, errOut)
		}
	}
	// In process (a test binary has no VCS stamp), the same format.
	var stdout strings.Builder
	if err := run(context.Background(), []string{"--version"}, nil, &stdout, &stdout); err != nil || !versionRE.MatchString(stdout.String()) {
		t.Errorf("run --version: %v, %q", err, stdout.String())
	}
}
