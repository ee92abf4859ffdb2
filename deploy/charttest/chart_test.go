package charttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../helm/inferbid"

// serviceMonitor is monitoring.coreos.com/v1 ServiceMonitor, the fields the
// chart uses.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// clusterServingRuntime is serving.kserve.io/v1alpha1 ClusterServingRuntime,
// the fields deploy/kserve uses.
type clusterServingRuntime struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		SupportedModelFormats []struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AutoSelect *bool  `json:"autoSelect"`
		} `json:"supportedModelFormats"`
		ProtocolVersions []string           `json:"protocolVersions"`
		MultiModel       *bool              `json:"multiModel"`
		Annotations      map[string]string  `json:"annotations"`
		Containers       []corev1.Container `json:"containers"`
		Volumes          []corev1.Volume    `json:"volumes"`
	} `json:"spec"`
}

// inferenceService is serving.kserve.io/v1beta1 InferenceService, the fields
// the example uses.
type inferenceService struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Predictor struct {
			Model struct {
				ModelFormat struct {
					Name string `json:"name"`
				} `json:"modelFormat"`
				Runtime         string                 `json:"runtime"`
				ProtocolVersion string                 `json:"protocolVersion"`
				StorageURI      string                 `json:"storageUri"`
				Ports           []corev1.ContainerPort `json:"ports"`
			} `json:"model"`
		} `json:"predictor"`
	} `json:"spec"`
}

// newObject returns the typed struct for an apiVersion and kind.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &serviceMonitor{}, nil
	case "serving.kserve.io/v1alpha1 ClusterServingRuntime":
		return &clusterServingRuntime{}, nil
	case "serving.kserve.io/v1beta1 InferenceService":
		return &inferenceService{}, nil
	}
	return nil, fmt.Errorf("unexpected object %s %s", apiVersion, kind)
}

// decodeAll splits a multi-document YAML stream and decodes each object
// strictly into its typed struct; the result maps kind to objects.
func decodeAll(t *testing.T, stream []byte) map[string][]any {
	t.Helper()
	objects := map[string][]any{}
	for i, doc := range strings.Split("\n"+string(stream), "\n---") {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("document %d is not YAML: %v\n%s", i, err, doc)
		}
		if string(js) == "null" {
			continue // only comments
		}
		var meta metav1.TypeMeta
		if err := json.Unmarshal(js, &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		obj, err := newObject(meta.APIVersion, meta.Kind)
		if err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			t.Fatalf("%s (document %d) does not decode strictly: %v\n%s", meta.Kind, i, err, doc)
		}
		objects[meta.Kind] = append(objects[meta.Kind], obj)
	}
	return objects
}

func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("INFERBID_REQUIRE_HELM") == "1" {
			t.Fatalf("helm is required (make deps-helm): %v", err)
		}
		t.Skipf("no helm on PATH (make deps-helm): %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

func TestHelmLint(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	helm(t, "lint", "--strict", chartDir, "-f", "testdata/values-all.yaml")
}

// podChecks are what every rendering's pod must keep.
func podChecks(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1 (the server starts the sidecar)", len(pod.Containers))
	}
	c := &pod.Containers[0]
	sc := c.SecurityContext
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, runAsUser 65532", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, drop ALL", sc)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want /healthz", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want /readyz", p)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("no preStop sleep: %+v", c.Lifecycle)
	}
	tmp := false
	for _, m := range c.VolumeMounts {
		tmp = tmp || m.MountPath == "/tmp"
	}
	if !tmp {
		t.Error("no volume on /tmp: the sidecar's socket and the replay store have nowhere to go")
	}
	return c
}

func env(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestTemplateDefaults(t *testing.T) {
	objects := decodeAll(t, helm(t, "template", "r", chartDir))
	for kind, n := range map[string]int{"Deployment": 1, "Service": 1, "PodDisruptionBudget": 1,
		"HorizontalPodAutoscaler": 0, "ServiceMonitor": 0, "ConfigMap": 0} {
		if len(objects[kind]) != n {
			t.Errorf("%d %s, want %d", len(objects[kind]), kind, n)
		}
	}
	d := objects["Deployment"][0].(*appsv1.Deployment)
	c := podChecks(t, d)
	if c.Image != "inferbid:devel" {
		t.Errorf("image %q", c.Image)
	}
	if got := env(c, "INFERENCE_SIDECAR_BINARY_PATH"); got != "/usr/local/bin/inference-sidecar-tensorflow" {
		t.Errorf("sidecar %q", got)
	}
	// 5 s preStop + 5 s drain + 10 s grace + 10 s sidecar stop + 5 s.
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 35 {
		t.Errorf("terminationGracePeriodSeconds %v, want 35", g)
	}
	// 1024 MiB * 1.25 + 64 + 64, no models.
	if m := c.Resources.Requests.Memory().String(); m != "1408Mi" {
		t.Errorf("memory request %s, want 1408Mi", m)
	}
}

func TestTemplateAllValues(t *testing.T) {
	objects := decodeAll(t, helm(t, "template", "r", chartDir, "-f", "testdata/values-all.yaml"))
	for kind, n := range map[string]int{"Deployment": 1, "Service": 1, "PodDisruptionBudget": 1,
		"HorizontalPodAutoscaler": 1, "ServiceMonitor": 1, "ConfigMap": 1} {
		if len(objects[kind]) != n {
			t.Errorf("%d %s, want %d", len(objects[kind]), kind, n)
		}
	}
	d := objects["Deployment"][0].(*appsv1.Deployment)
	c := podChecks(t, d)
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d set beside an HPA", *d.Spec.Replicas)
	}
	if c.Image != "registry.example.com/inferbid-onnx:06f58814bf78" {
		t.Errorf("image %q", c.Image)
	}
	want := map[string]string{
		"INFERENCE_SIDECAR_BINARY_PATH":    "/usr/local/bin/inference-sidecar-onnx",
		"INFERENCE_MODEL_BUCKET_NAME":      "s3://models?region=eu-west-1",
		"INFERENCE_MODEL_CONFIG_PATH":      "fleet/model_config.json",
		"INFERENCE_MODEL_FETCH_PERIOD_MS":  "10s",
		"INFERENCE_SIDECAR_RLIMIT_MB":      "8192",
		"INFERENCE_SIDECAR_TRANSPORT":      "grpc",
		"INFERENCE_SIDECAR_RUNTIME_CONFIG": `{"dynamic_batching":{"default":{"max_batch_size":64,"max_delay_us":200}},"num_intraop_threads":2}`,
	}
	for k, v := range want {
		if got := env(c, k); got != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	for _, arg := range []string{"--drain_period=15s", "--shutdown_grace=20s", "--js_heap_budget_mb=512",
		"--udf_code_path=/etc/inferbid/udf/generate_bid.js", "--js_pool_size=4"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 60 {
		t.Errorf("terminationGracePeriodSeconds %v, want 10+15+20+10+5 = 60", g)
	}
	// 512*1.25+64 + 64 + 2 GiB*1.3 + 512 MiB*3 = 704+64+2662+1536.
	if m := c.Resources.Requests.Memory().String(); m != "4966Mi" {
		t.Errorf("memory request %s, want 4966Mi", m)
	}
	if m := c.Resources.Limits.Memory().String(); m != "9932Mi" {
		t.Errorf("memory limit %s, want 9932Mi (factor 2)", m)
	}
	cm := objects["ConfigMap"][0].(*corev1.ConfigMap)
	if js := cm.Data["generate_bid.js"]; strings.TrimSpace(js) != "function generateBid(interestGroup) { return {bid: 1}; }" {
		t.Errorf("generate_bid.js in the ConfigMap is %q", js)
	}
	hpa := objects["HorizontalPodAutoscaler"][0].(*autoscalingv2.HorizontalPodAutoscaler)
	if m := hpa.Spec.Metrics; len(m) != 1 || m[0].Pods == nil || m[0].Pods.Metric.Name != "inferbid_inference_request_duration_seconds_p99" {
		t.Errorf("HPA metrics %+v", m)
	}
	sm := objects["ServiceMonitor"][0].(*serviceMonitor)
	if e := sm.Spec.Endpoints; len(e) != 1 || e[0].Path != "/metrics" || e[0].Port != "http" {
		t.Errorf("ServiceMonitor endpoints %+v", e)
	}
}

// TestTemplateRejectsBadValues: a runtime without an image fails rendering
// with a message naming it, as do both UDF sources at once.
func TestTemplateRejectsBadValues(t *testing.T) {
	helm(t, "version") // skips without helm
	for set, want := range map[string]string{
		"runtime=mxnet":                      `runtime "mxnet"`,
		"udf.code=x,udf.existingConfigMap=y": "not both",
		"lifecycle.shutdownGraceSeconds=0":   "shutdownGraceSeconds",
	} {
		out, err := exec.Command("helm", "template", "r", chartDir, "--set", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("--set %s: err %v, output %q; want a failure naming %q", set, err, out, want)
		}
	}
}

func TestKServeManifests(t *testing.T) {
	for _, f := range []string{"../kserve/clusterservingruntime.yaml", "../kserve/inferenceservice-example.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		decodeAll(t, b)
	}
	b, _ := os.ReadFile("../kserve/clusterservingruntime.yaml")
	objects := decodeAll(t, b)
	if len(objects["ClusterServingRuntime"]) != 2 {
		t.Fatalf("%d ClusterServingRuntimes, want 2", len(objects["ClusterServingRuntime"]))
	}
	for _, o := range objects["ClusterServingRuntime"] {
		r := o.(*clusterServingRuntime)
		if !slices.Equal(r.Spec.ProtocolVersions, []string{"v2", "grpc-v2"}) || len(r.Spec.Containers) != 1 {
			t.Errorf("%s: protocols %q, %d containers", r.Metadata.Name, r.Spec.ProtocolVersions, len(r.Spec.Containers))
			continue
		}
		c := &r.Spec.Containers[0]
		for _, arg := range []string{"--listen=:8080", "--kserve_grpc_listen=:8081"} {
			if !slices.Contains(c.Args, arg) {
				t.Errorf("%s: args %q lack %s", r.Metadata.Name, c.Args, arg)
			}
		}
		// Knative takes one container port; KServe routes to the first.
		if len(c.Ports) != 1 || c.Ports[0].Name != "http1" || c.Ports[0].ContainerPort != 8080 {
			t.Errorf("%s: ports %v, want http1 8080 alone", r.Metadata.Name, c.Ports)
		}
		// Knative wants the probes on the declared port.
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntValue() != 8080 {
				t.Errorf("%s: a probe %v not an HTTP GET on 8080", r.Metadata.Name, p)
			}
		}
		if got := env(c, "INFERENCE_MODEL_BUCKET_NAME"); got != "file:///mnt/models" {
			t.Errorf("%s: bucket %q, want file:///mnt/models (KServe's storage initializer)", r.Metadata.Name, got)
		}
		format := r.Spec.SupportedModelFormats[0].Name
		if sidecar := env(c, "INFERENCE_SIDECAR_BINARY_PATH"); sidecar != "/usr/local/bin/inference-sidecar-"+format {
			t.Errorf("%s: format %s served by %s", r.Metadata.Name, format, sidecar)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: root filesystem not read-only", r.Metadata.Name)
		}
	}
}

// TestStrictDecodingRejectsUnknownFields: a misspelt field fails, so the
// checks above can fail.
func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	doc := "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {prots: []}\n"
	js, _ := yaml.YAMLToJSON([]byte(doc))
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&corev1.Service{}); err == nil || !strings.Contains(err.Error(), "prots") {
		t.Errorf("misspelt field: err %v, want an error naming prots", err)
	}
}

// TestTemplatePyTorch: runtime=pytorch picks the inferbid-pytorch image
// and its sidecar binary.
func TestTemplatePyTorch(t *testing.T) {
	objects := decodeAll(t, helm(t, "template", "r", chartDir, "--set", "runtime=pytorch,image.repository=registry.example.com/inferbid,image.tag=v1"))
	d := objects["Deployment"][0].(*appsv1.Deployment)
	c := podChecks(t, d)
	if c.Image != "registry.example.com/inferbid-pytorch:v1" {
		t.Errorf("image %q, want registry.example.com/inferbid-pytorch:v1", c.Image)
	}
	found := false
	for _, e := range c.Env {
		if e.Name == "INFERENCE_SIDECAR_BINARY_PATH" {
			found = true
			if e.Value != "/usr/local/bin/inference-sidecar-pytorch" {
				t.Errorf("INFERENCE_SIDECAR_BINARY_PATH %q", e.Value)
			}
		}
	}
	if !found {
		t.Error("no INFERENCE_SIDECAR_BINARY_PATH")
	}
}
