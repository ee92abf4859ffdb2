package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the numeric user and group the images run as (distroless's
// "nonroot"): numeric so that runAsNonRoot can check it without /etc/passwd.
const NonRoot = 65532

// BinDir is where the binaries are in the images; the ONNX sidecar finds
// ONNX Runtime in ../lib/onnxruntime beside it.
const BinDir = "/usr/local/bin"

// PureBinaries are the CGO_ENABLED=0 binaries of the inferbid image.
var PureBinaries = []string{"bidding-server", "inferctl", "inference-sidecar-tensorflow"}

// ONNXSidecar is the cgo binary of the inferbid-onnx image.
const ONNXSidecar = "inference-sidecar-onnx"

// PyTorchSidecar is the cgo binary (built with -tags pytorch) of the
// inferbid-pytorch image.
const PyTorchSidecar = "inference-sidecar-pytorch"

// Options say where the inputs are and where the output goes.
type Options struct {
	// BinDir holds PureBinaries and, unless ONNXRuntimeLib is "", ONNXSidecar.
	BinDir string
	// ONNXRuntimeLib is libonnxruntime.so.1; "" builds only the inferbid image.
	ONNXRuntimeLib string
	// PyTorch says BinDir also holds PyTorchSidecar: builds inferbid-pytorch
	// too. A third image rather than a part of inferbid-onnx, so that the
	// ONNX image stays small: libtorch's closure is about 490 MB.
	PyTorch bool
	// CACertificates is the PEM bundle for TLS to s3:// and gs:// buckets;
	// "" = /etc/ssl/certs/ca-certificates.crt.
	CACertificates string
	// OutDir receives layout/ (an OCI image layout with every image) and a
	// docker-load tarball per image; what was there is replaced.
	OutDir string
	// Repository prefixes the image names; "" = "inferbid".
	Repository string
	// Tag of every image; "" = "devel".
	Tag string
	// Epoch is every file's and the config's time; zero = the Unix epoch.
	Epoch time.Time
}

// Image is one image written.
type Image struct {
	Ref      string // e.g. inferbid-onnx:devel
	Digest   v1.Hash
	Size     int64 // compressed layers, config and manifest
	Tarball  string
	Manifest *v1.Manifest
}

// file is one regular file of a layer.
type file struct {
	path   string // inside the image, absolute
	source string // on this machine
	data   []byte // instead of source
	mode   int64
}

// Build writes inferbid, inferbid-onnx when ONNXRuntimeLib is set and
// inferbid-pytorch when PyTorch is set.
func Build(o Options) ([]Image, error) {
	if o.BinDir == "" || o.OutDir == "" {
		return nil, errors.New("ociimage: BinDir and OutDir are required")
	}
	if o.Repository == "" {
		o.Repository = "inferbid"
	}
	if o.Tag == "" {
		o.Tag = "devel"
	}
	if o.CACertificates == "" {
		o.CACertificates = "/etc/ssl/certs/ca-certificates.crt"
	}
	if o.Epoch.IsZero() {
		o.Epoch = time.Unix(0, 0)
	}
	o.Epoch = o.Epoch.UTC()

	base := []file{
		{path: "/etc/passwd", data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), mode: 0o644},
		{path: "/etc/group", data: []byte("root:x:0:\nnonroot:x:65532:\n"), mode: 0o644},
		{path: "/etc/ssl/certs/ca-certificates.crt", source: o.CACertificates, mode: 0o644},
	}
	var pure []file
	for _, b := range PureBinaries {
		pure = append(pure, file{path: path.Join(BinDir, b), source: filepath.Join(o.BinDir, b), mode: 0o755})
	}
	baseLayer, err := layer(base, o.Epoch, true)
	if err != nil {
		return nil, fmt.Errorf("ociimage: base layer: %w", err)
	}
	pureLayer, err := layer(pure, o.Epoch, false)
	if err != nil {
		return nil, fmt.Errorf("ociimage: binaries layer: %w", err)
	}
	type spec struct {
		name   string
		layers []v1.Layer
		what   []string
	}
	specs := []spec{{o.Repository, []v1.Layer{baseLayer, pureLayer}, []string{"base files", "pure-Go binaries"}}}
	if o.ONNXRuntimeLib != "" {
		onnx, err := sidecarFiles(filepath.Join(o.BinDir, ONNXSidecar),
			file{path: "/usr/local/lib/onnxruntime/libonnxruntime.so.1", source: o.ONNXRuntimeLib, mode: 0o644})
		if err != nil {
			return nil, err
		}
		onnxLayer, err := layer(onnx, o.Epoch, false)
		if err != nil {
			return nil, fmt.Errorf("ociimage: ONNX layer: %w", err)
		}
		specs = append(specs, spec{o.Repository + "-onnx", []v1.Layer{baseLayer, pureLayer, onnxLayer},
			[]string{"base files", "pure-Go binaries", "ONNX sidecar, ONNX Runtime and their C libraries"}})
	}
	if o.PyTorch {
		torch, err := sidecarFiles(filepath.Join(o.BinDir, PyTorchSidecar))
		if err != nil {
			return nil, err
		}
		torchLayer, err := layer(torch, o.Epoch, false)
		if err != nil {
			return nil, fmt.Errorf("ociimage: PyTorch layer: %w", err)
		}
		specs = append(specs, spec{o.Repository + "-pytorch", []v1.Layer{baseLayer, pureLayer, torchLayer},
			[]string{"base files", "pure-Go binaries", "PyTorch sidecar and libtorch's C and C++ libraries"}})
	}

	layoutDir := filepath.Join(o.OutDir, "layout")
	if err := os.RemoveAll(layoutDir); err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("ociimage: layout %s: %w", layoutDir, err)
	}
	var out []Image
	for _, s := range specs {
		img, err := image(s.layers, s.what, o.Epoch)
		if err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", s.name, err)
		}
		ref := s.name + ":" + o.Tag
		tag, err := name.NewTag(ref)
		if err != nil {
			return nil, fmt.Errorf("ociimage: image name %q: %w", ref, err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref,
		})); err != nil {
			return nil, fmt.Errorf("ociimage: %s into %s: %w", ref, layoutDir, err)
		}
		tarPath := filepath.Join(o.OutDir, strings.ReplaceAll(s.name, "/", "_")+".tar")
		if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", tarPath, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		m, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		raw, _ := img.RawManifest()
		size := m.Config.Size + int64(len(raw))
		for _, l := range m.Layers {
			size += l.Size
		}
		out = append(out, Image{Ref: ref, Digest: digest, Size: size, Tarball: tarPath, Manifest: m})
	}
	return out, nil
}

// image puts layers on an empty base with inferbid's config.
func image(layers []v1.Layer, what []string, epoch time.Time) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for i, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "mkimage: " + what[i]}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = "amd64"
	cf.OS = "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	cf.Config.Entrypoint = []string{path.Join(BinDir, "bidding-server")}
	// The server's own default, 127.0.0.1, is unreachable from outside a
	// container.
	cf.Config.Cmd = []string{"--listen=:8080"}
	cf.Config.Env = []string{"PATH=" + BinDir, "TMPDIR=/tmp"}
	cf.Config.WorkingDir = "/"
	cf.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}}
	cf.Config.Volumes = map[string]struct{}{"/tmp": {}}
	cf.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/inferbid/inferbid"}
	return mutate.ConfigFile(img, cf)
}

// sidecarFiles are a cgo sidecar, the extra files beside it (ONNX Runtime),
// and every library either loads (their ldd closure), copied from this
// machine.
func sidecarFiles(sidecar string, extra ...file) ([]file, error) {
	roots := append([]file{{path: path.Join(BinDir, filepath.Base(sidecar)), source: sidecar, mode: 0o755}}, extra...)
	files := slices.Clone(roots)
	seen := map[string]bool{}
	for _, f := range roots {
		libs, err := lddClosure(f.source)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			if seen[l] {
				continue
			}
			seen[l] = true
			mode := int64(0o644)
			if strings.Contains(l, "ld-linux") {
				mode = 0o755
			}
			files = append(files, file{path: imageLibPath(l), source: l, mode: mode})
		}
	}
	return files, nil
}

// imageLibPath maps a library path ldd printed to where the image keeps it:
// /usr/lib/... (merged /usr) becomes /lib/..., so that the binaries'
// interpreter /lib64/ld-linux-x86-64.so.2 and glibc's default search path
// /lib/x86_64-linux-gnu find them.
func imageLibPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/usr/lib/"); ok {
		return "/lib/" + rest
	}
	return p
}

// lddClosure lists the shared libraries bin loads, as ldd prints them.
func lddClosure(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ociimage: ldd %s: %w: %s", bin, err, bytes.TrimSpace(out))
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 3 && fields[1] == "=>" && strings.HasPrefix(fields[2], "/"):
			libs = append(libs, fields[2])
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"): // the interpreter
			libs = append(libs, fields[0])
		case len(fields) >= 3 && fields[1] == "=>" && fields[2] == "not":
			return nil, fmt.Errorf("ociimage: %s needs %s, which ldd cannot find", bin, fields[0])
		}
	}
	sort.Strings(libs)
	return libs, nil
}

// layer makes a reproducible layer of files: parent directories added,
// entries sorted, every time epoch, owner root, with /tmp (mode 1777) when
// withTmp is set. Files are read while the tar streams into gzip, and the
// layer is compressed once: libtorch's 490 MB would otherwise be held twice
// in memory and gzipped once per digest, layout and tarball.
func layer(files []file, epoch time.Time, withTmp bool) (v1.Layer, error) {
	dirs := map[string]int64{}
	if withTmp {
		dirs["/tmp"] = 0o1777
	}
	byPath := map[string]file{}
	for _, f := range files {
		if _, dup := byPath[f.path]; dup {
			return nil, fmt.Errorf("%s twice", f.path)
		}
		byPath[f.path] = f
		for d := path.Dir(f.path); d != "/"; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
	}
	type entry struct {
		path string
		dir  bool
	}
	var entries []entry
	for d := range dirs {
		entries = append(entries, entry{d, true})
	}
	for p := range byPath {
		entries = append(entries, entry{p, false})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	var compressed bytes.Buffer
	// No name or time in the gzip header: the same tar gives the same bytes.
	// BestSpeed, as go-containerregistry compresses (the same digests): at
	// the default level libtorch's layer is 10% smaller but 3x slower.
	zw, _ := gzip.NewWriterLevel(&compressed, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: strings.TrimPrefix(e.path, "/"), ModTime: epoch}
		var data []byte
		if e.dir {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", dirs[e.path]
		} else {
			f := byPath[e.path]
			data = f.data
			if data == nil {
				b, err := os.ReadFile(f.source)
				if err != nil {
					return nil, err
				}
				data = b
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, f.mode, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !e.dir {
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	gz := compressed.Bytes()
	// An opener that yields gzip makes a layer that is already compressed.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
