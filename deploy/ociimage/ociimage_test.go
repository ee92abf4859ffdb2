package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// repoRoot is the main module's root, two levels above this package.
const repoRoot = "../.."

// buildBinaries builds what `make image` builds, as it builds them.
// It reports whether the PyTorch sidecar built: it needs libtorch (make
// deps-pytorch), which INFERBID_REQUIRE_NATIVE=1 requires.
func buildBinaries(t *testing.T, dir string, withONNX bool) (bin string, withPyTorch bool) {
	t.Helper()
	abs := filepath.Join(dir, "bin")
	var pkgs []string
	for _, b := range PureBinaries {
		pkgs = append(pkgs, "./cmd/"+b)
	}
	goBuild := func(cgo string, args ...string) error {
		cmd := exec.Command("go", append([]string{"build", "-trimpath", "-o", abs + "/"}, args...)...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %v: %w\n%s", args, err, out)
		}
		return nil
	}
	if err := goBuild("0", pkgs...); err != nil {
		t.Fatal(err)
	}
	if withONNX {
		if err := goBuild("1", "./cmd/"+ONNXSidecar); err != nil {
			t.Fatal(err)
		}
	}
	if err := goBuild("1", "-tags", "pytorch", "./cmd/"+PyTorchSidecar); err != nil {
		if os.Getenv("INFERBID_REQUIRE_NATIVE") == "1" {
			t.Fatalf("the PyTorch sidecar does not build (make deps-pytorch): %v", err)
		}
		t.Logf("no PyTorch image: %v", err)
		return abs, false
	}
	return abs, true
}

// onnxRuntimeLib is lib/onnxruntime/libonnxruntime.so.1 (make deps-onnx), or
// "" when it is missing and not required.
func onnxRuntimeLib(t *testing.T) string {
	lib, err := filepath.Abs(filepath.Join(repoRoot, "lib/onnxruntime/libonnxruntime.so.1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		if os.Getenv("INFERBID_REQUIRE_NATIVE") == "1" {
			t.Fatalf("ONNX Runtime missing (make deps-onnx): %v", err)
		}
		t.Logf("building only the pure-Go image: %v", err)
		return ""
	}
	return lib
}

func fileSHA(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// shared is one build of the binaries and the images, for every test: gzip
// of the layers (about 630 MB with libtorch's) dominates the tests' time.
var shared struct {
	once   sync.Once
	bin    string
	lib    string
	torch  bool
	out    string
	epoch  time.Time
	images []Image
	err    error
}

func sharedBuild(t *testing.T) (bin, lib, out string, images []Image) {
	t.Helper()
	shared.once.Do(func() {
		shared.lib = onnxRuntimeLib(t)
		dir, err := os.MkdirTemp("", "inferbid-ociimage-test-*")
		if err != nil {
			shared.err = err
			return
		}
		shared.bin, shared.torch = buildBinaries(t, dir, shared.lib != "")
		shared.out = filepath.Join(dir, "out")
		shared.epoch = time.Unix(1764000000, 0)
		start := time.Now()
		shared.images, shared.err = Build(Options{BinDir: shared.bin, ONNXRuntimeLib: shared.lib,
			PyTorch: shared.torch, OutDir: shared.out, Epoch: shared.epoch, Tag: "test"})
		t.Logf("Build took %.1f s", time.Since(start).Seconds())
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.bin, shared.lib, shared.out, shared.images
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.bin != "" {
		os.RemoveAll(filepath.Dir(shared.bin))
	}
	os.Exit(code)
}

// TestImagesReproducible builds the images twice from the same binaries and
// expects the same digests, layout index and tarballs.
func TestImagesReproducible(t *testing.T) {
	bin, lib, out, first := sharedBuild(t)
	again := t.TempDir()
	second, err := Build(Options{BinDir: bin, ONNXRuntimeLib: lib, PyTorch: shared.torch, OutDir: again, Epoch: shared.epoch, Tag: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(second) || len(first) == 0 {
		t.Fatalf("got %d and %d images", len(first), len(second))
	}
	for i := range first {
		a, b := first[i], second[i]
		t.Logf("%s %s %.1f MB compressed", a.Ref, a.Digest, float64(a.Size)/1e6)
		if a.Digest != b.Digest {
			t.Errorf("%s: digest %s then %s", a.Ref, a.Digest, b.Digest)
		}
		if fileSHA(t, a.Tarball) != fileSHA(t, b.Tarball) {
			t.Errorf("%s: tarballs %s and %s differ", a.Ref, a.Tarball, b.Tarball)
		}
	}
	if x, y := fileSHA(t, filepath.Join(out, "layout/index.json")), fileSHA(t, filepath.Join(again, "layout/index.json")); x != y {
		t.Errorf("layout index.json differs: %s, %s", x, y)
	}
}

// TestLayerTimeIsTheEpoch: another epoch is another layer, so the time does
// reach the output (and nothing else varies, by TestImagesReproducible).
func TestLayerTimeIsTheEpoch(t *testing.T) {
	files := []file{{path: "/a/b", data: []byte("x"), mode: 0o644}}
	var digests []v1.Hash
	for _, epoch := range []time.Time{time.Unix(0, 0), time.Unix(0, 0), time.Unix(3600, 0)} {
		l, err := layer(files, epoch, true)
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] || digests[1] == digests[2] {
		t.Errorf("layer digests for epochs 0, 0, 3600: %v", digests)
	}
}

// TestImagesRun unpacks each image from the OCI layout and runs every binary
// with --version from the unpacked root filesystem; it checks the config's
// user and entrypoint and that there is no shell. As root it also runs them
// chrooted into the root filesystem as UID 65532, as a container would.
func TestImagesRun(t *testing.T) {
	_, _, out, images := sharedBuild(t)
	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range images {
		t.Run(want.Ref, func(t *testing.T) {
			img, err := idx.Image(want.Digest)
			if err != nil {
				t.Fatalf("%s not in the layout: %v", want.Ref, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532", cf.Config.User)
			}
			if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/bidding-server"}) {
				t.Errorf("entrypoint %q", cf.Config.Entrypoint)
			}
			if cf.OS != "linux" || cf.Architecture != "amd64" {
				t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
			}
			root := unpack(t, img)
			for _, sh := range []string{"bin/sh", "bin/bash", "usr/bin/sh"} {
				if _, err := os.Lstat(filepath.Join(root, sh)); err == nil {
					t.Errorf("the image has a shell: /%s", sh)
				}
			}
			names := slices.Clone(PureBinaries)
			if strings.Contains(want.Ref, "-onnx:") {
				names = append(names, ONNXSidecar)
			}
			if strings.Contains(want.Ref, "-pytorch:") {
				names = append(names, PyTorchSidecar)
			}
			for _, name := range names {
				exe := filepath.Join(root, BinDir, name)
				var cmd *exec.Cmd
				if name == ONNXSidecar || name == PyTorchSidecar {
					// A cgo binary: its interpreter and libraries from the image
					// (glibc's default directories, without an ld.so cache).
					cmd = exec.Command(filepath.Join(root, "lib64/ld-linux-x86-64.so.2"),
						"--library-path", filepath.Join(root, "lib/x86_64-linux-gnu")+":"+filepath.Join(root, "lib"), exe, "--version")
				} else {
					cmd = exec.Command(exe, "--version")
				}
				checkVersion(t, cmd, name)
				if os.Geteuid() == 0 {
					cmd := exec.Command(filepath.Join(BinDir, name), "--version")
					cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root,
						Credential: &syscall.Credential{Uid: NonRoot, Gid: NonRoot}}
					cmd.Dir = "/"
					cmd.Env = cf.Config.Env
					checkVersion(t, cmd, name+" (chroot, UID 65532)")
				}
			}
			if strings.Contains(want.Ref, "-onnx:") {
				if _, err := os.Stat(filepath.Join(root, "usr/local/lib/onnxruntime/libonnxruntime.so.1")); err != nil {
					t.Errorf("ONNX Runtime is not where the sidecar looks: %v", err)
				}
			}
		})
	}
}

func checkVersion(t *testing.T, cmd *exec.Cmd, name string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s --version: %v\n%s", name, err, out)
		return
	}
	if prog := strings.Fields(name)[0]; !strings.HasPrefix(string(out), prog+" ") {
		t.Errorf("%s --version printed %q, want a line starting with %q", name, out, prog)
	}
}

// unpack extracts img's flattened filesystem into a new directory, checking
// that every entry is owned by root and none is setuid.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Mode&(04000|02000) != 0 {
			t.Errorf("%s: owner %d:%d mode %o, want root-owned, not setuid", h.Name, h.Uid, h.Gid, h.Mode)
		}
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, root+string(filepath.Separator)) {
			t.Fatalf("entry %q leaves the root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, os.FileMode(h.Mode)&os.ModePerm|0o700); err != nil {
				t.Fatal(err)
			}
			if h.Mode&01000 != 0 {
				os.Chmod(p, os.FileMode(h.Mode)&os.ModePerm|os.ModeSticky)
			}
		case tar.TypeReg:
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, tr); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, buf.Bytes(), os.FileMode(h.Mode)&os.ModePerm); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: unexpected tar entry type %c", h.Name, h.Typeflag)
		}
	}
	// The chrooted user must reach the binaries.
	os.Chmod(root, 0o755)
	return root
}

// serveScript runs bidding-server from an unpacked image as a container
// would: in its own mount namespace, the root filesystem read-only, /proc
// and /dev from the host, a fresh writable /tmp, UID 65532. $1 is the root;
// the rest are bidding-server's arguments.
const serveScript = `set -e
root=$1; shift
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount --bind /proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
exec env -i TMPDIR=/tmp PATH=/usr/local/bin "$(command -v chroot)" --userspec=65532:65532 "$root" /usr/local/bin/bidding-server "$@"
`

// TestImagesServeReadOnly starts bidding-server from each unpacked image,
// with a read-only root filesystem and only /tmp writable, as UID 65532:
// the TensorFlow sidecar on the examples bucket, the ONNX sidecar (ONNX
// Runtime found beside it, its libraries found without an ld.so cache) on
// an ONNX model, the PyTorch sidecar (libtorch's closure likewise) on a
// TorchScript model. Each must become ready and serve its models. It needs
// root (mount namespaces, chroot); elsewhere it skips.
func TestImagesServeReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace and chroot")
	}
	for _, tool := range []string{"unshare", "mount", "chroot", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	_, _, out, images := sharedBuild(t)
	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range images {
		t.Run(want.Ref, func(t *testing.T) {
			img, err := idx.Image(want.Digest)
			if err != nil {
				t.Fatal(err)
			}
			root := unpack(t, img)
			// What a container runtime provides, and the model volume.
			for _, d := range []string{"proc", "dev", "models"} {
				if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			var args []string
			var wantModel string
			switch {
			case strings.Contains(want.Ref, "-onnx:"):
				copyFile(t, filepath.Join(repoRoot, "runtimes/onnx/testdata/affine_v1.onnx"), filepath.Join(root, "models/affine.onnx"))
				args = []string{"--inference_sidecar_binary_path=/usr/local/bin/" + ONNXSidecar,
					"--inference_model_local_paths=affine/=/models/affine.onnx"}
				wantModel = "affine/"
			case strings.Contains(want.Ref, "-pytorch:"):
				copyFile(t, filepath.Join(repoRoot, "runtimes/pytorch/testdata/affine_v1.pt"), filepath.Join(root, "models/affine.pt"))
				args = []string{"--inference_sidecar_binary_path=/usr/local/bin/" + PyTorchSidecar,
					"--inference_model_local_paths=affine/=/models/affine.pt"}
				wantModel = "affine/"
			default:
				if err := os.CopyFS(filepath.Join(root, "models/bucket"), os.DirFS(filepath.Join(repoRoot, "examples/bucket"))); err != nil {
					t.Fatal(err)
				}
				args = []string{"--inference_sidecar_binary_path=/usr/local/bin/inference-sidecar-tensorflow",
					"--inference_model_bucket_name=file:///models/bucket", "--inference_model_config_path=model_config.json"}
				wantModel = "pctr/v1/"
			}
			addr := freeAddr(t)
			var logs bytes.Buffer
			cmd := exec.Command("unshare", append([]string{"-m", "bash", "-c", serveScript, "serve", root, "--listen=" + addr}, args...)...)
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() {
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(60 * time.Second): // a hang guard
					cmd.Process.Kill()
					<-done
				}
				if t.Failed() {
					t.Logf("bidding-server's log:\n%s", logs.String())
				}
			}()
			deadline := time.Now().Add(60 * time.Second) // a hang guard
			for {
				body, status, err := get("http://" + addr + "/v1/models/" + wantModel)
				if err == nil && status == 200 && strings.Contains(body, `"state":"serving"`) {
					if body, status, _ := get("http://" + addr + "/readyz"); status != 200 {
						t.Errorf("/readyz %d %s with %s serving", status, body, wantModel)
					}
					return
				}
				select {
				case err := <-done:
					done <- err
					t.Fatalf("bidding-server exited: %v", err)
				case <-time.After(100 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s not serving within 60 s: last answer %d %q, %v", wantModel, status, body, err)
				}
			}
		})
	}
}

func get(url string) (string, int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
