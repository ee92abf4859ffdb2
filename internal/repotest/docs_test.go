package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
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

// startHere is the walk of a runInference call.
const startHere = "docs/start-here.md"

// nameRef is a name in start-here.md: `dir.Name`, `dir.Type.Method` or
// `dir.(*Type).Method`, with dir a package directory of the module.
var nameRef = regexp.MustCompile("`([a-z][a-z0-9_-]*(?:/[a-z][a-z0-9_-]*)*)\\.(?:\\(\\*?([A-Za-z_]\\w*)\\)\\.|([A-Za-z_]\\w*)\\.)?([A-Za-z_]\\w*)`")

// stepRow is a row of the walk's table: | n | `function` | `file` | ... |.
var stepRow = regexp.MustCompile("^\\| \\d+ \\| (`[^`]+`) \\| `([^`]+\\.go)` \\|")

// TestStartHereNamesExist fails when docs/start-here.md names a function,
// method or type that its package does not declare, or when a step of its
// table gives a function the file it names does not declare.
func TestStartHereNamesExist(t *testing.T) {
	root := testhelp.ModuleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, startHere))
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]map[string][]string{} // dir -> "Type.Name" or "Name" -> files
	declsOf := func(dir string) map[string][]string {
		if d, ok := decls[dir]; ok {
			return d
		}
		d := map[string][]string{}
		files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			rel := filepath.ToSlash(strings.TrimPrefix(f, root+string(filepath.Separator)))
			for _, decl := range af.Decls {
				switch decl := decl.(type) {
				case *ast.FuncDecl:
					name := decl.Name.Name
					if decl.Recv != nil && len(decl.Recv.List) == 1 {
						typ := decl.Recv.List[0].Type
						if star, ok := typ.(*ast.StarExpr); ok {
							typ = star.X
						}
						if id, ok := typ.(*ast.Ident); ok {
							name = id.Name + "." + name
						}
					}
					d[name] = append(d[name], rel)
				case *ast.GenDecl:
					for _, spec := range decl.Specs {
						switch spec := spec.(type) {
						case *ast.TypeSpec:
							d[spec.Name.Name] = append(d[spec.Name.Name], rel)
						case *ast.ValueSpec:
							for _, n := range spec.Names {
								d[n.Name] = append(d[n.Name], rel)
							}
						}
					}
				}
			}
		}
		decls[dir] = d
		return d
	}
	isPackage := func(dir string) bool {
		files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*.go"))
		return len(files) > 0
	}
	key := func(m []string) string {
		recv := m[2] + m[3]
		if recv == "" {
			return m[4]
		}
		return recv + "." + m[4]
	}
	checked := 0
	for _, m := range nameRef.FindAllStringSubmatch(string(doc), -1) {
		if !isPackage(m[1]) {
			continue // a file name (`client.go`) or a JS name
		}
		checked++
		if _, ok := declsOf(m[1])[key(m)]; !ok {
			t.Errorf("%s names %s, which package %s does not declare", startHere, m[0], m[1])
		}
	}
	steps := 0
	for _, line := range strings.Split(string(doc), "\n") {
		row := stepRow.FindStringSubmatch(line)
		if row == nil {
			continue
		}
		steps++
		m := nameRef.FindStringSubmatch(row[1])
		if m == nil {
			t.Errorf("%s: step %s is not a name", startHere, row[1])
			continue
		}
		if files := declsOf(m[1])[key(m)]; !slices.Contains(files, row[2]) {
			t.Errorf("%s: step %s is declared in %v, not in %s", startHere, row[1], files, row[2])
		}
	}
	if checked < 20 || steps < 15 {
		t.Fatalf("%s: only %d names and %d steps checked", startHere, checked, steps)
	}
}
