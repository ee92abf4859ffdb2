package ociimage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/inferbid/inferbid/proto/kservepb"
)

// These tests run the images as the shipped manifests configure them: the
// container's args, env and ports are read from the rendered manifest, never
// repeated here, so a manifest whose flags the server rejects, or whose
// ports serve nothing, fails them.

const (
	kserveManifest = "../kserve/clusterservingruntime.yaml"
	chartDir       = "../helm/inferbid"
)

// containerScript runs a container's process from an unpacked image as a
// container runtime would: its own mount and network namespaces (so the
// manifests' fixed ports cannot clash with anything on the host), the root
// filesystem read-only, /proc and /dev from the host, a fresh writable
// /tmp (the manifests' emptyDir). $1 is the root; the rest is the command:
// env -i, the environment, chroot --userspec, the root, the entrypoint and
// the args.
const containerScript = `set -e
root=$1; shift
ip link set lo up
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount --bind /proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
exec env -i "$@"
`

// container is a running container: its process and a client that reaches
// the ports inside its network namespace.
type container struct {
	spec   corev1.Container
	pid    int
	client *http.Client
	logs   bytes.Buffer
	done   chan error
}

func requireContainerTools(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount and network namespaces and chroot")
	}
	for _, tool := range []string{"unshare", "mount", "chroot", "bash", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
}

// imageByName unpacks the built image whose repository is the one spec's
// image names (inferbid:devel → the built inferbid:TAG).
func imageByName(t *testing.T, ref string) (v1.Image, string) {
	t.Helper()
	_, _, out, images := sharedBuild(t)
	repo, _, _ := strings.Cut(ref, ":")
	for _, want := range images {
		if r, _, _ := strings.Cut(want.Ref, ":"); r == repo {
			idx, err := layout.ImageIndexFromPath(filepath.Join(out, "layout"))
			if err != nil {
				t.Fatal(err)
			}
			img, err := idx.Image(want.Digest)
			if err != nil {
				t.Fatal(err)
			}
			root := unpack(t, img)
			for _, d := range []string{"proc", "dev"} {
				if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			return img, root
		}
	}
	t.Skipf("image %s not built (the ONNX image needs make deps-onnx)", ref)
	return nil, ""
}

// startContainer runs spec from img unpacked at root. The environment is the
// image's, then the container's (which wins); the user the image's.
func startContainer(t *testing.T, img v1.Image, root string, spec corev1.Container) *container {
	t.Helper()
	for _, m := range spec.VolumeMounts {
		if m.MountPath != "/tmp" {
			t.Fatalf("volume mount %s: this harness provides only /tmp", m.MountPath)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	env := slices.Clone(cf.Config.Env)
	for _, e := range spec.Env {
		if e.ValueFrom != nil {
			t.Fatalf("env %s: valueFrom is not supported here", e.Name)
		}
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, e.Name+"=") })
		env = append(env, e.Name+"="+e.Value)
	}
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil && fmt.Sprint(*sc.RunAsUser) != strings.Split(cf.Config.User, ":")[0] {
		t.Errorf("runAsUser %d, the image's user %s", *sc.RunAsUser, cf.Config.User)
	}
	// Kubernetes' rule: command replaces the image's entrypoint and its
	// Cmd, args replace the Cmd.
	entrypoint, cmdArgs := cf.Config.Entrypoint, cf.Config.Cmd
	if len(spec.Command) > 0 {
		entrypoint, cmdArgs = spec.Command, nil
	}
	if len(spec.Args) > 0 {
		cmdArgs = spec.Args
	}
	command := slices.Concat(entrypoint, cmdArgs)
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		t.Fatal(err)
	}
	args := slices.Concat([]string{"-m", "-n", "bash", "-c", containerScript, "container", root},
		env, []string{chroot, "--userspec=" + cf.Config.User, root}, command)
	c := &container{spec: spec, done: make(chan error, 1)}
	cmd := exec.Command("unshare", args...)
	cmd.Stdout, cmd.Stderr = &c.logs, &c.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.pid = cmd.Process.Pid
	go func() { c.done <- cmd.Wait() }()
	c.client = &http.Client{Transport: &http.Transport{DialContext: c.dial, DisableKeepAlives: true}, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(60 * time.Second): // a hang guard
			cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("the container's log:\n%s", c.logs.String())
		}
	})
	return c
}

// dial connects inside the container's network namespace: a thread locked
// to this goroutine enters it, makes the socket (which stays in that
// namespace) and is discarded with the goroutine, never unlocked.
func (c *container) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		nsPath := fmt.Sprintf("/proc/%d/ns/net", c.pid)
		own, _ := os.Readlink("/proc/thread-self/ns/net")
		if theirs, err := os.Readlink(nsPath); err != nil || theirs == own {
			// Not yet unshared: never reach the host's ports instead.
			ch <- result{err: fmt.Errorf("%s: not the container's network namespace yet (%v)", nsPath, err)}
			return
		}
		f, err := os.Open(nsPath)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", nsPath, err)}
			return
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// port resolves a probe's or a test's port (a number or a port name) to
// its number.
func (c *container) port(t *testing.T, p intstr.IntOrString) int {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	t.Fatalf("no container port named %q", p.StrVal)
	return 0
}

func (c *container) url(port int, path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(port) + path
}

// do sends a request and returns the status and body; a transport error is
// status 0.
func (c *container) do(method, url, body string) (int, string) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls url until it answers 200, failing if the process exits or
// nothing answers within a minute (a hang guard).
func (c *container) waitFor(t *testing.T, url string) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for {
		status, body := c.do("GET", url, "")
		if status == 200 {
			t.Logf("%s answered 200 %v after the start (a figure, not asserted)", url, time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case err := <-c.done:
			c.done <- err
			t.Fatalf("the container exited before %s answered: %v", url, err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not 200 within 60 s: last answer %d %q", url, status, body)
		}
	}
}

// checkProbes sends the container's liveness and readiness probes.
func (c *container) checkProbes(t *testing.T) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"liveness": c.spec.LivenessProbe, "readiness": c.spec.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		url := c.url(c.port(t, p.HTTPGet.Port), p.HTTPGet.Path)
		if status, body := c.do("GET", url, ""); status != 200 {
			t.Errorf("%s probe %s: %d %q", name, url, status, body)
		}
	}
}

// v2Case is a model of a bucket and an inference with a known answer.
type v2Case struct {
	model, version string
	inputs         []v2Input
	output         string
	want           []float64
	tolerance      float64
}

type v2Input struct {
	name  string
	shape []int64
	fp32  []float32
	int64 []int64
}

// Known answers: pctr/v2/ of examples/bucket answers README's v2 example
// (the TensorFlow image); affine_v1.onnx is y = 2x + 1 (the ONNX image).
var (
	pctrCase = v2Case{model: "pctr", version: "v2", output: "pctr", inputs: []v2Input{
		{name: "ad_id", shape: []int64{2, 1}, int64: []int64{7, 42}},
		{name: "publisher_id", shape: []int64{2, 1}, int64: []int64{3, 3}},
		{name: "dense", shape: []int64{2, 6}, fp32: []float32{0, 0.1, 0.2, 0.3, 0.4, 0.5, 1, 1, 1, 1, 1, 1}},
	}, want: []float64{0.53478813, 0.88565004}, tolerance: 1e-6}
	affineCase = v2Case{model: "affine", version: "v1", inputs: []v2Input{
		{name: "", shape: []int64{2, 3}, fp32: []float32{0, 1, 2, -1, 0.5, 100}},
	}, want: []float64{1, 3, 5, -1, 2, 201}}
)

// resolve fills what the model's metadata names (the ONNX export's input
// and output names) from GET /v2/models/NAME.
func (v v2Case) resolve(t *testing.T, c *container, base string) v2Case {
	t.Helper()
	status, body := c.do("GET", base+"/v2/models/"+v.model, "")
	var md struct {
		Name     string   `json:"name"`
		Versions []string `json:"versions"`
		Inputs   []struct {
			Name string `json:"name"`
		} `json:"inputs"`
		Outputs []struct {
			Name string `json:"name"`
		} `json:"outputs"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &md) != nil || md.Name != v.model ||
		!slices.Contains(md.Versions, v.version) || len(md.Inputs) != len(v.inputs) || len(md.Outputs) != 1 {
		t.Fatalf("metadata %s/v2/models/%s: %d %s", base, v.model, status, body)
	}
	v.inputs = slices.Clone(v.inputs)
	if v.inputs[0].name == "" {
		v.inputs[0].name = md.Inputs[0].Name
	}
	if v.output == "" {
		v.output = md.Outputs[0].Name
	}
	if md.Outputs[0].Name != v.output {
		t.Fatalf("metadata %s: output %q, want %q", v.model, md.Outputs[0].Name, v.output)
	}
	return v
}

func (v v2Case) check(t *testing.T, surface string, got []float64) {
	t.Helper()
	if len(got) != len(v.want) {
		t.Errorf("%s: %v, want %v", surface, got, v.want)
		return
	}
	for i := range got {
		if math.Abs(got[i]-v.want[i]) > v.tolerance {
			t.Errorf("%s: %v, want %v (within %g)", surface, got, v.want, v.tolerance)
			return
		}
	}
}

// checkV2HTTP drives the v2 HTTP API at base: server live and ready, model
// ready, metadata, and the inference with its known answer.
func checkV2HTTP(t *testing.T, c *container, base string, v v2Case) {
	t.Helper()
	for _, path := range []string{"/v2/health/live", "/v2/health/ready", "/v2/models/" + v.model + "/ready",
		"/v2/models/" + v.model + "/versions/" + v.version + "/ready"} {
		if status, body := c.do("GET", base+path, ""); status != 200 {
			t.Errorf("GET %s%s: %d %q", base, path, status, body)
		}
	}
	if status, body := c.do("GET", base+"/v2", ""); status != 200 || !strings.Contains(body, `"name":"inferbid"`) {
		t.Errorf("GET %s/v2: %d %s", base, status, body)
	}
	v = v.resolve(t, c, base)
	type input struct {
		Name     string  `json:"name"`
		Shape    []int64 `json:"shape"`
		Datatype string  `json:"datatype"`
		Data     any     `json:"data"`
	}
	var req struct {
		ID     string  `json:"id"`
		Inputs []input `json:"inputs"`
	}
	req.ID = "manifest"
	for _, in := range v.inputs {
		if in.fp32 != nil {
			req.Inputs = append(req.Inputs, input{in.name, in.shape, "FP32", in.fp32})
		} else {
			req.Inputs = append(req.Inputs, input{in.name, in.shape, "INT64", in.int64})
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	url := base + "/v2/models/" + v.model + "/versions/" + v.version + "/infer"
	status, answer := c.do("POST", url, string(body))
	var r struct {
		ID           string `json:"id"`
		ModelVersion string `json:"model_version"`
		Outputs      []struct {
			Name string    `json:"name"`
			Data []float64 `json:"data"`
		} `json:"outputs"`
	}
	if status != 200 || json.Unmarshal([]byte(answer), &r) != nil || r.ID != "manifest" ||
		r.ModelVersion != v.version || len(r.Outputs) != 1 || r.Outputs[0].Name != v.output {
		t.Fatalf("POST %s: %d %s", url, status, answer)
	}
	v.check(t, "POST "+url, r.Outputs[0].Data)
}

// checkV2GRPC drives the v2 gRPC service at port with kservepb's client.
func checkV2GRPC(t *testing.T, c *container, port int, v v2Case) {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///127.0.0.1:"+strconv.Itoa(port),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return c.dial(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := kservepb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	if r, err := client.ServerLive(ctx, &kservepb.ServerLiveRequest{}); err != nil || !r.GetLive() {
		t.Fatalf("gRPC ServerLive on %d: %v %v", port, r, err)
	}
	if r, err := client.ServerReady(ctx, &kservepb.ServerReadyRequest{}); err != nil || !r.GetReady() {
		t.Errorf("gRPC ServerReady: %v %v", r, err)
	}
	if r, err := client.ModelReady(ctx, &kservepb.ModelReadyRequest{Name: v.model, Version: v.version}); err != nil || !r.GetReady() {
		t.Errorf("gRPC ModelReady %s %s: %v %v", v.model, v.version, r, err)
	}
	md, err := client.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: v.model})
	if err != nil || md.GetName() != v.model || len(md.GetInputs()) != len(v.inputs) {
		t.Fatalf("gRPC ModelMetadata %s: %v %v", v.model, md, err)
	}
	req := &kservepb.ModelInferRequest{ModelName: v.model, ModelVersion: v.version, Id: "manifest"}
	for _, in := range v.inputs {
		name := in.name
		if name == "" {
			name = md.GetInputs()[0].GetName()
		}
		tensor := &kservepb.ModelInferRequest_InferInputTensor{Name: name, Shape: in.shape}
		if in.fp32 != nil {
			tensor.Datatype, tensor.Contents = "FP32", &kservepb.InferTensorContents{Fp32Contents: in.fp32}
		} else {
			tensor.Datatype, tensor.Contents = "INT64", &kservepb.InferTensorContents{Int64Contents: in.int64}
		}
		req.Inputs = append(req.Inputs, tensor)
	}
	r, err := client.ModelInfer(ctx, req)
	if err != nil || r.GetModelVersion() != v.version || r.GetId() != "manifest" || len(r.GetOutputs()) != 1 {
		t.Fatalf("gRPC ModelInfer %s %s: %v %v", v.model, v.version, r, err)
	}
	var got []float64
	for _, x := range r.GetOutputs()[0].GetContents().GetFp32Contents() {
		got = append(got, float64(x))
	}
	if raw := r.GetRawOutputContents(); len(got) == 0 && len(raw) == 1 {
		for i := 0; i+4 <= len(raw[0]); i += 4 {
			b := raw[0][i : i+4]
			got = append(got, float64(math.Float32frombits(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24)))
		}
	}
	v.check(t, "gRPC ModelInfer", got)
}

// clusterServingRuntime holds what these tests read of a
// ClusterServingRuntime (charttest decodes the whole of it strictly).
type clusterServingRuntime struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		SupportedModelFormats []struct {
			Name string `json:"name"`
		} `json:"supportedModelFormats"`
		Containers []corev1.Container `json:"containers"`
	} `json:"spec"`
}

// splitYAML splits a multi-document YAML stream, dropping empty documents.
func splitYAML(stream []byte) [][]byte {
	var docs [][]byte
	for _, doc := range bytes.Split(stream, []byte("\n---")) {
		if len(bytes.TrimSpace(yamlWithoutComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs
}

func yamlWithoutComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

// grpcListenPort is the port of the container's --kserve_grpc_listen.
func grpcListenPort(t *testing.T, spec corev1.Container) int {
	t.Helper()
	for _, arg := range spec.Args {
		if addr, ok := strings.CutPrefix(arg, "--kserve_grpc_listen="); ok {
			_, port, err := net.SplitHostPort(addr)
			n, err2 := strconv.Atoi(port)
			if err != nil || err2 != nil {
				t.Fatalf("%s: not HOST:PORT", arg)
			}
			return n
		}
	}
	t.Fatalf("args %q: no --kserve_grpc_listen=ADDR", spec.Args)
	return 0
}

// exampleInferenceService is what the tests read of an InferenceService
// of deploy/kserve: its runtime and the h2c port it declares, if any.
type exampleInferenceService struct {
	name, runtime string
	h2c           int
}

func exampleInferenceServices(t *testing.T) []exampleInferenceService {
	t.Helper()
	const path = "../kserve/inferenceservice-example.yaml"
	stream, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []exampleInferenceService
	for _, doc := range splitYAML(stream) {
		var isvc struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Predictor struct {
					Model struct {
						Runtime string                 `json:"runtime"`
						Ports   []corev1.ContainerPort `json:"ports"`
					} `json:"model"`
				} `json:"predictor"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &isvc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		e := exampleInferenceService{name: isvc.Metadata.Name, runtime: isvc.Spec.Predictor.Model.Runtime}
		for _, p := range isvc.Spec.Predictor.Model.Ports {
			if p.Name == "h2c" {
				e.h2c = int(p.ContainerPort)
			}
		}
		out = append(out, e)
	}
	return out
}

// storageInitializer lays a bucket out under root's /mnt/models as KServe's
// storage initializer leaves a storageUri's prefix: its objects, at the top.
func storageInitializer(t *testing.T, root, format string) v2Case {
	t.Helper()
	models := filepath.Join(root, "mnt/models")
	switch format {
	case "tensorflow":
		if err := os.CopyFS(models, os.DirFS(filepath.Join(repoRoot, "examples/bucket"))); err != nil {
			t.Fatal(err)
		}
		return pctrCase
	case "onnx":
		if err := os.MkdirAll(filepath.Join(models, "affine/v1"), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join(repoRoot, "runtimes/onnx/testdata/affine_v1.onnx"), filepath.Join(models, "affine/v1/affine.onnx"))
		if err := os.WriteFile(filepath.Join(models, "model_config.json"), []byte(`{"model_metadata":[{"model_path":"affine/v1/"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return affineCase
	}
	t.Fatalf("no test bucket for model format %q", format)
	return v2Case{}
}

// TestKServeRuntimesServe starts each image as each ClusterServingRuntime
// of deploy/kserve runs it (its container's args, env and ports as
// written), a storageUri's layout in /mnt/models, and drives the Open
// Inference Protocol: v2 HTTP on the container's one port, v2 gRPC on its
// --kserve_grpc_listen port (the h2c port a gRPC InferenceService
// declares, which the examples must match), then the probes.
func TestKServeRuntimesServe(t *testing.T) {
	requireContainerTools(t)
	stream, err := os.ReadFile(kserveManifest)
	if err != nil {
		t.Fatal(err)
	}
	examples := exampleInferenceServices(t)
	docs := splitYAML(stream)
	if len(docs) != 2 {
		t.Fatalf("%s: %d documents, want 2", kserveManifest, len(docs))
	}
	for _, doc := range docs {
		var rt clusterServingRuntime
		if err := yaml.Unmarshal(doc, &rt); err != nil {
			t.Fatalf("%s: %v", kserveManifest, err)
		}
		t.Run(rt.Metadata.Name, func(t *testing.T) {
			if len(rt.Spec.Containers) != 1 || len(rt.Spec.SupportedModelFormats) != 1 {
				t.Fatalf("%d containers, %d model formats, want 1 and 1", len(rt.Spec.Containers), len(rt.Spec.SupportedModelFormats))
			}
			spec := rt.Spec.Containers[0]
			img, root := imageByName(t, spec.Image)
			v := storageInitializer(t, root, rt.Spec.SupportedModelFormats[0].Name)
			c := startContainer(t, img, root, spec)
			// The one declared port, where KServe routes v2 HTTP.
			if len(spec.Ports) != 1 {
				t.Fatalf("ports %v, want one (Knative takes one)", spec.Ports)
			}
			httpPort := int(spec.Ports[0].ContainerPort)
			grpcPort := grpcListenPort(t, spec)
			for _, isvc := range examples {
				if isvc.runtime == rt.Metadata.Name && isvc.h2c != 0 && isvc.h2c != grpcPort {
					t.Errorf("InferenceService %s declares h2c port %d, the runtime serves gRPC on %d", isvc.name, isvc.h2c, grpcPort)
				}
			}
			c.waitFor(t, c.url(httpPort, "/v2/models/"+v.model+"/ready"))
			checkV2HTTP(t, c, c.url(httpPort, ""), v)
			checkV2GRPC(t, c, grpcPort, v)
			c.checkProbes(t)
		})
	}
}

// TestChartServes renders the Helm chart with its default values and a
// file:// bucket, and starts the image the chart names with the rendered
// container: the probes must answer and a model of the bucket serve, on
// the v2 API the main listener carries.
func TestChartServes(t *testing.T) {
	requireContainerTools(t)
	helmPath, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("INFERBID_REQUIRE_HELM") == "1" {
			t.Fatalf("helm is required (make deps-helm): %v", err)
		}
		t.Skipf("no helm on PATH (make deps-helm): %v", err)
	}
	const bucketDir = "/mnt/bucket"
	var stderr bytes.Buffer
	cmd := exec.Command(helmPath, "template", "r", chartDir, "--set", "bucket.url=file://"+bucketDir)
	cmd.Stderr = &stderr
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.Bytes())
	}
	var deployment *appsv1.Deployment
	for _, doc := range splitYAML(rendered) {
		var kind struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &kind); err != nil {
			t.Fatal(err)
		}
		if kind.Kind == "Deployment" {
			deployment = new(appsv1.Deployment)
			if err := yaml.Unmarshal(doc, deployment); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deployment == nil || len(deployment.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no Deployment with one container in the rendered chart:\n%s", rendered)
	}
	spec := deployment.Spec.Template.Spec.Containers[0]
	img, root := imageByName(t, spec.Image)
	if err := os.CopyFS(filepath.Join(root, bucketDir), os.DirFS(filepath.Join(repoRoot, "examples/bucket"))); err != nil {
		t.Fatal(err)
	}
	c := startContainer(t, img, root, spec)
	if len(spec.Ports) == 0 {
		t.Fatal("the container has no ports")
	}
	port := int(spec.Ports[0].ContainerPort)
	c.waitFor(t, c.url(port, "/readyz"))
	c.checkProbes(t)
	checkV2HTTP(t, c, c.url(port, ""), pctrCase)
}
