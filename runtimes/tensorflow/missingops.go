package tensorflow

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// missingOps collects the ops without a kernel that the compiled subgraph
// needs, so a load error can name every one of them at once rather than
// the first the compiler met.
type missingOps struct {
	nodes  map[string][]string // op type -> nodes using it (with scope)
	seen   map[string]bool     // node (with scope) already recorded
	failed map[failedKey]error // nodes that failed, so a graph is not revisited past a missing op
}

type failedKey struct {
	sc   *scope
	name string
}

// record notes that node where (of op) failed with err, and reports
// whether err is a missing kernel, after which compiling goes on with the
// other inputs.
func (m *missingOps) record(op, where string, err error) bool {
	if !errors.Is(err, ErrUnsupportedOp) {
		return false
	}
	if m.nodes == nil {
		m.nodes, m.seen = map[string][]string{}, map[string]bool{}
	}
	// Only the node whose own op lacks a kernel is listed, not the nodes
	// downstream of it that fail with its error.
	var oe *OpError
	if errors.As(err, &oe) && oe.Node != where {
		return true
	}
	if !m.seen[where] {
		m.seen[where] = true
		m.nodes[op] = append(m.nodes[op], where)
	}
	return true
}

// maxListedNodes bounds how many node names the report gives per op.
const maxListedNodes = 3

// err is the report, nil when nothing is missing: the ops sorted by name,
// each with its node count and the first node names.
func (m *missingOps) err() error {
	if len(m.nodes) == 0 {
		return nil
	}
	ops := make([]string, 0, len(m.nodes))
	for op := range m.nodes {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	parts := make([]string, len(ops))
	for i, op := range ops {
		nodes := m.nodes[op]
		listed := nodes[:min(len(nodes), maxListedNodes)]
		s := fmt.Sprintf("%s (%d node", op, len(nodes))
		if len(nodes) > 1 {
			s += "s"
		}
		s += ": " + strings.Join(listed, ", ")
		if more := len(nodes) - len(listed); more > 0 {
			s += fmt.Sprintf(" and %d more", more)
		}
		parts[i] = s + ")"
	}
	noun := "op"
	if len(ops) > 1 {
		noun = "ops"
	}
	return fmt.Errorf("%w: the serving signature needs %d %s the TensorFlow runtime has no kernel for: %s", ErrUnsupportedOp, len(ops), noun, strings.Join(parts, "; "))
}

// isMissingOp reports whether err is a missing kernel, which compiling
// goes on past to report the others too.
func isMissingOp(err error) bool { return errors.Is(err, ErrUnsupportedOp) }
