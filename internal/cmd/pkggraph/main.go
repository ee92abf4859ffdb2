// Command pkggraph rewrites the package diagram of docs/architecture.md
// from `go list` (package internal/pkggraph); make diagram runs it from the
// module root.
package main

import (
	"fmt"
	"os"

	"github.com/inferbid/inferbid/internal/pkggraph"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pkggraph:", err)
		os.Exit(1)
	}
}

func run() error {
	g, err := pkggraph.List(".")
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(pkggraph.Doc)
	if err != nil {
		return err
	}
	out, err := pkggraph.Replace(string(doc), g.Mermaid())
	if err != nil {
		return err
	}
	if out == string(doc) {
		return nil
	}
	fmt.Printf("pkggraph: %s: %d packages, %d arrows\n", pkggraph.Doc, len(g), g.Edges())
	return os.WriteFile(pkggraph.Doc, []byte(out), 0o644)
}
