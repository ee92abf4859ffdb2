// Package pkggraph draws the module's package diagram, the mermaid graph of
// docs/architecture.md section 2, from `go list`: one node per package of
// the product (test plumbing, tools and examples left out, see Excluded),
// one arrow per direct import between them (blank imports included, so the
// commands' backends show). The diagram in the document sits between the
// markers Begin and End; TestDiagramMatchesImports fails when it differs
// from what the import graph gives, and `go run ./internal/cmd/pkggraph`
// (make diagram) rewrites it.
//
// It runs the go command rather than loading packages with
// golang.org/x/tools/go/packages: `go list -json` gives the imports, and the
// module need not depend on x/tools for it.
package pkggraph
