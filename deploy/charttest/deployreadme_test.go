package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// appVersion is the chart's appVersion: the one image tag.
func appVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: *"?([^"\n]+)"?$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Chart.yaml has no appVersion")
	}
	return string(m[1])
}

// TestOneImageTag: make image's default tag, the chart's default image and
// the KServe runtimes' images name one tag, the chart's appVersion.
func TestOneImageTag(t *testing.T) {
	tag := appVersion(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("no make: %v", err)
	}
	out, err := exec.Command("make", "-s", "-C", "../..", "print-image-tag").Output()
	if err != nil {
		t.Fatalf("make print-image-tag: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != tag {
		t.Errorf("make image's default tag %q, the chart's appVersion %q", got, tag)
	}
	b, err := os.ReadFile("../kserve/clusterservingruntime.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decodeAll(t, b)["ClusterServingRuntime"] {
		r := o.(*clusterServingRuntime)
		for _, c := range r.Spec.Containers {
			if _, got, _ := strings.Cut(c.Image, ":"); got != tag {
				t.Errorf("KServe runtime %s: image %q, want tag %q", r.Metadata.Name, c.Image, tag)
			}
		}
	}
	d := decodeAll(t, helm(t, "template", "r", chartDir))["Deployment"][0].(*appsv1.Deployment)
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "inferbid:"+tag {
		t.Errorf("the chart's default image %q, want inferbid:%s", got, tag)
	}
}

// TestDeployReadme runs deploy/README.md's sh blocks that are not marked
// skip, from the repository root, as written: helm install rendered as
// helm template and kubectl apply printing what it would apply (shims on
// PATH). Every image the manifests name must be one make image builds
// (inferbid, inferbid-onnx, inferbid-pytorch), under the registry the page
// pushes to, with make's tag.
func TestDeployReadme(t *testing.T) {
	helmPath, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("INFERBID_REQUIRE_HELM") == "1" {
			t.Fatalf("helm is required (make deps-helm): %v", err)
		}
		t.Skipf("no helm on PATH (make deps-helm): %v", err)
	}
	for _, tool := range []string{"make", "bash", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	doc, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	registry := ""
	blocks := regexp.MustCompile("(?ms)^(<!-- deploy-test: skip \\([^)]*\\) -->\n)?```([a-z]*)\n(.*?)^```$").FindAllStringSubmatch(string(doc), -1)
	for _, b := range blocks {
		if b[1] != "" {
			continue
		}
		if b[2] != "sh" {
			t.Fatalf("a %q block: deploy/README.md's blocks are sh (or marked skip)", b[2])
		}
		script.WriteString(b[3])
		if m := regexp.MustCompile(`(?m)^REGISTRY=(\S+)$`).FindStringSubmatch(b[3]); m != nil {
			registry = m[1]
		}
	}
	if registry == "" || !strings.Contains(script.String(), "helm install") || !strings.Contains(script.String(), "kubectl apply") {
		t.Fatalf("the blocks run set no REGISTRY, or have no helm install or kubectl apply:\n%s", script.String())
	}
	shims := t.TempDir()
	writeShim := func(name, body string) {
		if err := os.WriteFile(filepath.Join(shims, name), []byte("#!/bin/bash\nset -e\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeShim("helm", `if [ "$1" = install ]; then shift; set -- template "$@"; fi
exec `+helmPath+` "$@"
`)
	writeShim("kubectl", `[ "$1" = apply ] && [ "$2" = -f ] || { echo "kubectl shim: only apply -f" >&2; exit 2; }
echo ---
if [ "$3" = - ]; then cat; else cat "$3"; fi
`)
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script.String())
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "PATH="+shims+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deploy/README.md's blocks: %v\n%s\n--- script ---\n%s", err, stderr.String(), script.String())
	}
	tag := appVersion(t)
	want := []string{registry + "/inferbid:" + tag, registry + "/inferbid-onnx:" + tag, registry + "/inferbid-pytorch:" + tag}
	objects := decodeAll(t, out)
	var images []string
	for _, o := range objects["Deployment"] {
		for _, c := range o.(*appsv1.Deployment).Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
	}
	nDeploy := len(images)
	for _, o := range objects["ClusterServingRuntime"] {
		for _, c := range o.(*clusterServingRuntime).Spec.Containers {
			images = append(images, c.Image)
		}
	}
	if nDeploy < 2 || len(images) == nDeploy {
		t.Fatalf("rendered %d Deployment containers and %d KServe runtime containers, want the two helm installs and the runtimes", nDeploy, len(images)-nDeploy)
	}
	for _, img := range images {
		if !slices.Contains(want, img) {
			t.Errorf("deployed image %q is not one make image builds and the page pushes (%q)", img, want)
		}
	}
	for _, w := range want[:2] {
		if !slices.Contains(images[:nDeploy], w) {
			t.Errorf("no helm install deploys %s (deployed: %q)", w, images[:nDeploy])
		}
	}
	t.Logf("images deployed: %q", images)
}
