package repotest

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

const module = "github.com/inferbid/inferbid/"

// pkgInfo is what `go list -json` says of one package.
type pkgInfo struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
}

// listPackages runs `go list -deps -json` on patterns (with build tags) in
// the module root.
func listPackages(t *testing.T, tags string, patterns ...string) map[string]pkgInfo {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	args := []string{"list", "-json=ImportPath,Imports,Deps,Standard"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goTool, append(args, patterns...)...)
	cmd.Dir = testhelp.ModuleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkgInfo{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	return pkgs
}

// forbidden returns the dependencies of p that start with any of prefixes.
func forbidden(p pkgInfo, prefixes ...string) []string {
	var bad []string
	for _, d := range p.Deps {
		for _, pre := range prefixes {
			if d == pre || strings.HasPrefix(d, pre+"/") {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

// TestImportGraph keeps the layering of docs/architecture.md: leaves stay
// leaves, backends speak only the driver interface, the conformance suite
// links no server, the fast lane links no gRPC, and the SavedModel writer (and the tools built on it)
// links neither test code, gRPC nor the sidecar.
func TestImportGraph(t *testing.T) {
	pkgs := listPackages(t, "", "./...")
	pkg := func(name string) pkgInfo {
		p, ok := pkgs[name]
		if !ok {
			t.Fatalf("package %s not found by go list", name)
		}
		return p
	}

	// Leaves: only the standard library (tensor below driver).
	for name, allowed := range map[string][]string{
		"tensor":          nil,
		"inferr":          nil,
		"runtimes/driver": {module + "tensor"},
	} {
		for _, imp := range pkg(name).Imports {
			if !isStd(pkgs, imp) && !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s; it may import only the standard library %v", name, imp, allowed)
			}
		}
	}

	// Backends build no wire-level errors: the portable layer types them.
	// (They link inferr through runtimes, whose Register they call.)
	for _, name := range []string{"runtimes/tensorflow", "runtimes/onnx", "runtimes/pytorch"} {
		if slices.Contains(pkg(name).Imports, module+"inferr") {
			t.Errorf("%s imports inferr; backends return plain or driver sentinel errors", name)
		}
	}

	// The conformance suite imports the portable layer, never a server.
	if bad := forbidden(pkg("runtimes/conformance"), module+"sidecar", module+"jsbridge", "google.golang.org/grpc"); len(bad) > 0 {
		t.Errorf("runtimes/conformance links %v", bad)
	}

	// The fast lane speaks protobuf on its own framing: the gRPC edge stays
	// in sidecar. (It links gRPC all the same: proto/inferencepb holds the
	// generated stubs beside the messages.)
	for _, imp := range pkg("sidecar/fastlane").Imports {
		if strings.HasPrefix(imp, "google.golang.org/grpc") || strings.HasPrefix(imp, module+"sidecar") {
			t.Errorf("sidecar/fastlane imports %s", imp)
		}
	}

	// The SavedModel writer and its tools: no testing, no gRPC, no sidecar.
	for _, name := range []string{"runtimes/tensorflow/tfsave", "runtimes/tensorflow/tfsave/cmd/gen-tf-models", "examples/internal/genbucket"} {
		if bad := forbidden(pkg(name), "testing", "google.golang.org/grpc", module+"sidecar"); len(bad) > 0 {
			t.Errorf("%s links %v", name, bad)
		}
	}

	// Only cmd/ (and tests) link the backends.
	for name, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module) || strings.HasPrefix(name, "cmd/") || strings.HasPrefix(name, "runtimes/") || strings.HasPrefix(name, "examples/internal/") {
			continue
		}
		for _, backend := range []string{"runtimes/tensorflow", "runtimes/onnx", "runtimes/pytorch"} {
			if slices.Contains(p.Deps, module+backend) {
				t.Errorf("library %s links the backend %s; only cmd/ blank-imports backends", name, backend)
			}
		}
	}
}

// TestPyTorchBackendImportsNoInferr checks the pytorch backend with its
// build tag, where its cgo code lives.
func TestPyTorchBackendImportsNoInferr(t *testing.T) {
	pkgs := listPackages(t, "pytorch", "./runtimes/pytorch")
	if p, ok := pkgs["runtimes/pytorch"]; !ok || slices.Contains(p.Imports, module+"inferr") {
		t.Errorf("runtimes/pytorch (tag pytorch) imports inferr, or was not listed: %+v", ok)
	}
}

func isStd(pkgs map[string]pkgInfo, path string) bool {
	if p, ok := pkgs[path]; ok {
		return p.Standard
	}
	// Not in the listing as a module package: a standard package has no
	// dot in its first element.
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}
