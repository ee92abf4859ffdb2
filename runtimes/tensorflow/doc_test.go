package tensorflow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOpCoverageTableComplete checks that doc.go's op tables list every op
// the runtime runs exactly once, and no op it does not run. The runtime's
// ops are the kernel builders' keys plus the ops compiler.build handles in
// its own switch (read from graph.go's source, so a new case there cannot
// be forgotten).
func TestOpCoverageTableComplete(t *testing.T) {
	documented := docTableOps(t)
	count := map[string]int{}
	for _, op := range documented {
		count[op]++
	}
	supported := map[string]bool{}
	for op := range builders {
		supported[op] = true
	}
	for _, op := range graphSwitchOps(t) {
		supported[op] = true
	}
	var missing, extra, twice []string
	for op := range supported {
		if count[op] == 0 {
			missing = append(missing, op)
		}
	}
	for op, n := range count {
		if !supported[op] {
			extra = append(extra, op)
		}
		if n > 1 {
			twice = append(twice, op)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	slices.Sort(twice)
	if len(missing)+len(extra)+len(twice) > 0 {
		t.Errorf("doc.go op tables: missing %v; listed but not supported %v; listed more than once %v", missing, extra, twice)
	}
	if len(supported) < 100 {
		t.Errorf("found only %d supported ops: is the builders map or graph.go's switch read correctly?", len(supported))
	}
}

// docTableOps returns the op names in doc.go's tab-indented table lines after
// "# Op coverage": the first column (up to two spaces), split at commas,
// with "Op(V2,V3)" meaning Op, OpV2 and OpV3. Continuation lines start with
// a space and header lines with "op".
func docTableOps(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	start := strings.Index(text, "// # Op coverage")
	if start < 0 {
		t.Fatal("doc.go has no # Op coverage section")
	}
	variants := regexp.MustCompile(`^(\w+)\(([\w,]+)\)$`)
	var ops []string
	for _, line := range strings.Split(text[start:], "\n") {
		row, ok := strings.CutPrefix(line, "//\t")
		if !ok || row == "" || row[0] == ' ' {
			continue
		}
		first, _, _ := strings.Cut(row, "  ")
		if first == "op" {
			continue
		}
		if m := variants.FindStringSubmatch(first); m != nil {
			ops = append(ops, m[1])
			for _, v := range strings.Split(m[2], ",") {
				ops = append(ops, m[1]+v)
			}
			continue
		}
		for _, name := range strings.Split(first, ",") {
			if name = strings.TrimSpace(name); name != "" {
				ops = append(ops, name)
			}
		}
	}
	return ops
}

// graphSwitchOps returns the string cases of the switch on nd.Op in
// compiler.build (graph.go).
func graphSwitchOps(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "graph.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "build" || fn.Recv == nil {
			continue
		}
		for _, st := range fn.Body.List {
			sw, ok := st.(*ast.SwitchStmt)
			if !ok {
				continue
			}
			if sel, ok := sw.Tag.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Op" {
				continue
			}
			for _, c := range sw.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					lit, ok := e.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("graph.go build: case %T is not a string literal", e)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					ops = append(ops, s)
				}
			}
		}
	}
	if len(ops) == 0 {
		t.Fatal("graph.go: no switch on nd.Op found in compiler.build")
	}
	return ops
}
