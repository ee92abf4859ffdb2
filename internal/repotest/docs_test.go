package repotest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// TestReadmeNamesEveryTopLevelPackage fails when a top-level directory
// holding Go code has no row in README.md's package table (a line starting
// "| `dir/`"): the table is where a newcomer finds every part.
func TestReadmeNamesEveryTopLevelPackage(t *testing.T) {
	var dirs []string
	for _, name := range trackedFiles(t) {
		dir, rest, ok := strings.Cut(name, "/")
		if ok && strings.HasSuffix(rest, ".go") && !strings.HasPrefix(dir, ".") && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) < 10 {
		t.Fatalf("only %d top-level directories with Go code: %v", len(dirs), dirs)
	}
	readme, err := os.ReadFile(filepath.Join(testhelp.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if !strings.Contains(string(readme), "\n| `"+dir+"/") {
			t.Errorf("README.md's package table has no row for %s/ (a line starting \"| `%s/`\")", dir, dir)
		}
	}
}
