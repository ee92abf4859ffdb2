package registry

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// The registry knows no transport. It imports no gRPC, protobuf, wire
// protocol or fast-lane package itself; and nothing it imports reaches the
// gRPC server, its transport, the wire protocol (proto/...), the fast lane
// or package sidecar. (Package sequence names its errors' classes with
// google.golang.org/grpc/codes, a table of numbers, and the Prometheus
// client encodes with protobuf: those stay.)
func TestRegistryImportsNoTransport(t *testing.T) {
	list := func(format string) []string {
		t.Helper()
		cmd := exec.Command("go", "list", "-deps", "-f", format, ".")
		cmd.Dir = filepath.Join(testhelp.ModuleRoot(t), "sidecar", "registry")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		return strings.Fields(string(out))
	}
	const self = "github.com/inferbid/inferbid/sidecar/registry"
	transport := func(d string) bool {
		return d == "google.golang.org/grpc" || strings.HasPrefix(d, "google.golang.org/grpc/internal/transport") ||
			d == "github.com/inferbid/inferbid/sidecar" || strings.HasPrefix(d, "github.com/inferbid/inferbid/sidecar/fastlane") ||
			strings.HasPrefix(d, "github.com/inferbid/inferbid/proto/")
	}
	deps := list("{{.ImportPath}}")
	if len(deps) < 10 || deps[len(deps)-1] != self {
		t.Fatalf("go list -deps gave %q", deps)
	}
	for _, d := range deps {
		if transport(d) {
			t.Errorf("sidecar/registry imports %s (directly or not)", d)
		}
	}
	direct := list(`{{if eq .ImportPath "` + self + `"}}{{join .Imports " "}}{{end}}`)
	if len(direct) < 5 {
		t.Fatalf("direct imports %q", direct)
	}
	for _, d := range direct {
		if strings.HasPrefix(d, "google.golang.org/") || transport(d) {
			t.Errorf("sidecar/registry imports %s", d)
		}
	}
}
