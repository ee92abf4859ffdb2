package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
)

// TestREADMEFlagTable checks README.md's bidding-server flag table against
// the flags newFlagSet defines: every `--flag` a row names exists, and
// every environment variable a row names beside its flag is read
// (envFlags), so the documented table cannot drift from the binary; and
// every inference_* flag reads its environment variable, as config's doc
// says.
func TestREADMEFlagTable(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(testhelp.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var c config
	var raw flagText
	fs := newFlagSet(&c, &raw, io.Discard)
	text := string(readme)
	start := strings.Index(text, "| flag / env | meaning |")
	if start < 0 {
		t.Fatal(`README.md has no "| flag / env | meaning |" table`)
	}
	flagRe := regexp.MustCompile("`--([a-z0-9_]+)`")
	envRe := regexp.MustCompile("`--([a-z0-9_]+)` / `([A-Z0-9_]+)`")
	rows := 0
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		rows++
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range flagRe.FindAllStringSubmatch(first, -1) {
			if fs.Lookup(m[1]) == nil {
				t.Errorf("README.md documents --%s, which bidding-server does not define", m[1])
			}
		}
		for _, m := range envRe.FindAllStringSubmatch(first, -1) {
			if strings.HasPrefix(m[2], "OTEL_") {
				continue // read by parseConfig under its standard name
			}
			if m[2] != strings.ToUpper(m[1]) || !slices.Contains(envFlags, m[1]) {
				t.Errorf("README.md documents %s for --%s, which parseConfig does not read (envFlags)", m[2], m[1])
			}
		}
	}
	// config's doc: every INFERENCE_* setting is also an environment
	// variable.
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "inference_") && !slices.Contains(envFlags, f.Name) {
			t.Errorf("--%s reads no environment variable %s (envFlags)", f.Name, strings.ToUpper(f.Name))
		}
	})
	if rows < 10 {
		t.Fatalf("README.md's flag table has %d rows: the table was not found where expected", rows)
	}
}
