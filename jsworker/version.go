package jsworker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownVersion is matched by the error of every interest group of a
// request whose CodeVersion the host does not serve (never a fallback to
// another version).
var ErrUnknownVersion = errors.New("jsworker: unknown code version")

// generation is one set of code versions that workers serve: the workers
// started for it load every one. A swap makes a new generation current;
// requests stay in the generation they were admitted into.
type generation struct {
	modules map[string]Module
	order   []Module // as given
	def     string

	retired   bool          // scheduler.mu
	retiredCh chan struct{} // closed when retired
}

// newGeneration checks a set of modules: names non-empty and unique, the
// default among them ("" = the first).
func newGeneration(mods []Module, def string) (*generation, error) {
	if len(mods) == 0 {
		return nil, errors.New("jsworker: no module")
	}
	g := &generation{modules: make(map[string]Module, len(mods)), order: slices.Clone(mods), def: def, retiredCh: make(chan struct{})}
	for i, m := range mods {
		if m.Name == "" {
			return nil, fmt.Errorf("jsworker: module %d has no name", i)
		}
		if _, dup := g.modules[m.Name]; dup {
			return nil, fmt.Errorf("jsworker: module %q given twice", m.Name)
		}
		g.modules[m.Name] = m
	}
	if g.def == "" {
		g.def = mods[0].Name
	}
	if _, ok := g.modules[g.def]; !ok {
		return nil, fmt.Errorf("jsworker: default module %q is not among the modules", g.def)
	}
	return g, nil
}

// names are the generation's version names, sorted.
func (g *generation) names() []string {
	names := make([]string, 0, len(g.order))
	for _, m := range g.order {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// unknown is the error of a request for a version g does not have.
func (g *generation) unknown(v string) error {
	names := g.names()
	list := strings.Join(names, ", ")
	if len(names) > 20 {
		list = strings.Join(names[:20], ", ") + fmt.Sprintf(", … (%d in all)", len(names))
	}
	return &callError{msg: fmt.Sprintf("jsworker: code version %q is not served (serving: %s; default %q)", v, list, g.def), is: []error{ErrUnknownVersion}}
}

// Validate loads mods in a fresh worker process configured by opts, as
// Host.Validate does, without a Host: for checking code before the first
// Host starts.
func Validate(ctx context.Context, opts Options, mods []Module) map[string]error {
	opts = opts.withDefaults()
	h := &Host{opts: opts, log: opts.Logger, closed: make(chan struct{}), procs: map[*proc]struct{}{}}
	return h.Validate(ctx, mods)
}
