package pkggraph

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// TestDiagramMatchesImports fails when the package diagram committed in
// docs/architecture.md is not what the import graph gives: run make
// diagram and commit the result.
func TestDiagramMatchesImports(t *testing.T) {
	root := testhelp.ModuleRoot(t)
	g, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"tensor", "inferr", "kserve", "sidecar/fastlane", "jsworker", "cmd/bidding-server", "cmd/inference-sidecar-pytorch"} {
		if _, ok := g[must]; !ok {
			t.Errorf("go list gave no package %s", must)
		}
	}
	if len(g["tensor"]) != 0 || len(g["inferr"]) != 0 {
		t.Errorf("the leaves import module packages: tensor %v, inferr %v", g["tensor"], g["inferr"])
	}
	doc, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(Doc)))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := Section(string(doc))
	if !ok {
		t.Fatalf("%s has no diagram between %q and %q", Doc, Begin, End)
	}
	if want := g.Mermaid(); got != want {
		t.Errorf("the package diagram in %s is stale (make diagram rewrites it); committed:\n%s\nfrom go list:\n%s", Doc, got, want)
	}
}

// TestMermaidAndReplace draws a made-up graph and puts it between the
// markers of a made-up document.
func TestMermaidAndReplace(t *testing.T) {
	g := Graph{"a/b-c": {"d", "e"}, "d": {"e"}, "e": nil}
	want := "```mermaid\ngraph TD\n" +
		"  a_b_c[\"a/b-c\"]\n  d[\"d\"]\n  e[\"e\"]\n" +
		"  a_b_c --> d & e\n  d --> e\n```\n"
	if got := g.Mermaid(); got != want {
		t.Errorf("Mermaid:\n%s\nwant\n%s", got, want)
	}
	if g.Edges() != 3 {
		t.Errorf("Edges = %d, want 3", g.Edges())
	}
	doc := "# title\n" + Begin + "\nold diagram\n" + End + "\ntail\n"
	out, err := Replace(doc, want)
	if err != nil {
		t.Fatal(err)
	}
	if body, ok := Section(out); !ok || body != want || !strings.HasPrefix(out, "# title\n") || !strings.HasSuffix(out, End+"\ntail\n") {
		t.Errorf("Replace gave %q", out)
	}
	if _, err := Replace("no markers", want); err == nil {
		t.Error("Replace without markers succeeded")
	}
	if excluded("internal/testhelp") != true || excluded("internal/cmd/pkggraph") != true || excluded("internal/cli") {
		t.Error("excluded() disagrees with Excluded")
	}
}
