package scripts_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tfjsRepo copies install-tfjs.sh into a fresh repository layout and, when
// version is not empty, fakes an installed TensorFlow.js of that version
// (the package.json files the script reads).
func tfjsRepo(t *testing.T, version string) string {
	t.Helper()
	root := t.TempDir()
	src, err := os.ReadFile("install-tfjs.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "scripts", "install-tfjs.sh"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	if version == "" {
		return root
	}
	for _, pkg := range []string{"tfjs-core", "tfjs-backend-cpu", "tfjs-converter", "tfjs-layers"} {
		dir := filepath.Join(root, ".cache", "tfjs", "node_modules", "@tensorflow", pkg)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		meta := "{\n  \"name\": \"@tensorflow/" + pkg + "\",\n  \"version\": \"" + version + "\",\n  \"main\": \"dist/index.js\"\n}\n"
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// runNoNode runs the script with a PATH that holds the few tools it needs
// and no node or npm, so nothing can be downloaded.
func runNoNode(t *testing.T, root string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	for _, tool := range []string{"bash", "sed", "head", "dirname", "mkdir"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not found: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "bash"), filepath.Join(root, "scripts", "install-tfjs.sh"))
	cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir()}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestInstallTFJSIdempotent: with the pinned version installed the script
// exits at once, silently, without needing node or npm.
func TestInstallTFJSIdempotent(t *testing.T) {
	out, err := runNoNode(t, tfjsRepo(t, "4.22.0"))
	if err != nil || out != "" {
		t.Fatalf("install-tfjs.sh with 4.22.0 installed: err %v, output %q; want a silent exit 0", err, out)
	}
}

// TestInstallTFJSNeedsNode: another version installed (or none) means an
// install, which without node fails saying so.
func TestInstallTFJSNeedsNode(t *testing.T) {
	for _, version := range []string{"4.21.0", ""} {
		out, err := runNoNode(t, tfjsRepo(t, version))
		if err == nil || !strings.Contains(out, "node is not installed") {
			t.Errorf("installed %q, no node: err %v, output %q; want a failure naming node", version, err, out)
		}
	}
}
