package testhelp

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	// EnvRequirePeer names the variable that, set to "1" (make test, make
	// bench), turns a missing Node.js peer into a failure instead of a skip.
	EnvRequirePeer = "INFERBID_REQUIRE_PEER"
	// EnvNode overrides the Node.js binary of the peer; the default is
	// /usr/bin/node.
	EnvNode     = "INFERBID_NODE"
	defaultNode = "/usr/bin/node"
	// ORTNodeVersion is the onnxruntime-node the peer runs
	// (scripts/install-node-peer.sh installs it).
	ORTNodeVersion = "1.30.0"
	// nodePeerModules is where scripts/install-node-peer.sh installs it,
	// under the module root.
	nodePeerModules = ".cache/node-peer/node_modules"
	// NodePeerHint says how to install the peer.
	NodePeerHint = "run `make deps-node-peer` (scripts/install-node-peer.sh)"
)

// NodePeer is Node.js with onnxruntime-node installed: what the peer
// comparisons' scripts (bench/peer/*.js) run on.
type NodePeer struct {
	Node        string // the node binary
	NodeVersion string // its --version
	Modules     string // the node_modules holding onnxruntime-node (NODE_PATH)
}

// Env is the environment a peer script runs with: this process's, with
// NODE_PATH set to Modules.
func (p *NodePeer) Env() []string {
	return append(os.Environ(), "NODE_PATH="+p.Modules)
}

// FindNodePeer locates node ($INFERBID_NODE or /usr/bin/node) and the
// onnxruntime-node installed under the module root.
func FindNodePeer(root string) (*NodePeer, error) {
	node := os.Getenv(EnvNode)
	if node == "" {
		node = defaultNode
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("the Node.js binary %s (set %s to use another): %v", node, EnvNode, err)
	}
	p := &NodePeer{
		Node:        node,
		NodeVersion: strings.TrimSpace(string(out)),
		Modules:     filepath.Join(root, filepath.FromSlash(nodePeerModules)),
	}
	pkgJSON := filepath.Join(p.Modules, "onnxruntime-node", "package.json")
	data, err := os.ReadFile(pkgJSON)
	if err != nil {
		return nil, fmt.Errorf("onnxruntime-node is not installed: %v; %s", err, NodePeerHint)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(data, &pkg); err != nil || pkg.Version != ORTNodeVersion {
		return nil, fmt.Errorf("%s: onnxruntime-node %q (%v), want %s; %s", pkgJSON, pkg.Version, err, ORTNodeVersion, NodePeerHint)
	}
	return p, nil
}

// RequireNodePeer returns the peer, or skips the test saying what is
// missing; with INFERBID_REQUIRE_PEER=1 it fails instead.
func RequireNodePeer(tb testing.TB) *NodePeer {
	tb.Helper()
	p, err := FindNodePeer(ModuleRoot(tb))
	if err == nil {
		return p
	}
	if os.Getenv(EnvRequirePeer) == "1" {
		tb.Fatalf("%s=1 and the Node.js peer is missing: %v", EnvRequirePeer, err)
	}
	tb.Skipf("the Node.js peer is missing (set %s=1 to fail instead): %v", EnvRequirePeer, err)
	return nil
}
