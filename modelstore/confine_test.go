package modelstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
)

// symlinkEnv is a file:// bucket in root/bucket with a secret file beside
// it, outside the bucket root.
type symlinkEnv struct {
	*env
	dir     string // the bucket root
	outside string // a directory outside it
	secret  []byte
}

func newSymlinkEnv(t *testing.T) *symlinkEnv {
	top := t.TempDir()
	dir := filepath.Join(top, "bucket")
	outside := filepath.Join(top, "outside")
	for _, d := range []string{dir, filepath.Join(outside, "m")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := []byte("a file the server can read but the bucket must not serve")
	for _, p := range []string{filepath.Join(outside, "secret"), filepath.Join(outside, "m", "saved_model.pb")} {
		if err := os.WriteFile(p, secret, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, backend{name: "file", newBucket: func(*testing.T) string { return "file://" + dir }}, nil)
	return &symlinkEnv{env: e, dir: dir, outside: outside, secret: secret}
}

func (s *symlinkEnv) symlink(target, key string) {
	s.t.Helper()
	p := filepath.Join(s.dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		s.t.Fatal(err)
	}
}

// expectRefused checks that err reports key as leaving the bucket root.
func (s *symlinkEnv) expectRefused(err error, key string) {
	s.t.Helper()
	if err == nil {
		s.t.Fatalf("SyncOnce succeeded, want %q refused", key)
	}
	for _, want := range []string{`"` + key + `": leaves the bucket root ` + s.dir, "refused"} {
		if !strings.Contains(err.Error(), want) {
			s.t.Errorf("SyncOnce = %v, want it to contain %q", err, want)
		}
	}
}

// TestFileBucketRefusesSymlinksOutOfTheRoot: a listed model file that is a
// symlink to a file outside the bucket root, or reached through a
// symlinked directory, is refused for that model only (the other model of
// the config loads) and never read.
func TestFileBucketRefusesSymlinksOutOfTheRoot(t *testing.T) {
	s := newSymlinkEnv(t)
	good := s.putModel("good/", tfModel(t, "g"))
	s.put("dir/saved_model.pb", []byte("real"))
	s.symlink(filepath.Join(s.outside, "secret"), "dir/variables/variables.index") // absolute target
	s.symlink(filepath.Join("..", "outside", "secret"), "exact.pt")                // relative target
	s.symlink(s.outside, "linkdir")                                                // a directory
	s.putConfig(cfgEntry{path: "good/", checksum: good}, cfgEntry{path: "dir/"}, cfgEntry{path: "exact.pt"},
		cfgEntry{path: "linkdir/m/"})
	err := s.sync()
	s.expectRefused(err, "dir/variables/variables.index")
	s.expectRefused(err, "exact.pt")
	s.expectRefused(err, "linkdir/m/saved_model.pb")
	if errors.Is(err, ErrConfig) {
		t.Errorf("refused models reported as a config failure: %v", err)
	}
	for _, c := range s.expectCalls("register good/") {
		for rel, b := range c.files {
			if string(b) == string(s.secret) {
				t.Errorf("%s: %s holds the file outside the root", c.path, rel)
			}
		}
	}
	if got := s.counter("inferbid_modelstore_fetches_total", "kind", "model", "result", reasonOutsideRoot); got != 3 {
		t.Errorf("fetches{model,outside_bucket_root} = %v, want 3", got)
	}
	if _, ok := s.w.Models()["exact.pt"]; ok {
		t.Error("refused model recorded as loaded")
	}
}

// TestFileBucketAllowsSymlinksInsideTheRoot: relative symlinks that
// resolve inside the bucket root (a shared blob, a versioned directory)
// are followed, and so is a bucket root that is itself a symlink. An
// absolute symlink is refused even when it points inside: os.Root
// resolves only relative ones.
func TestFileBucketAllowsSymlinksInsideTheRoot(t *testing.T) {
	top := t.TempDir()
	real := filepath.Join(top, "releases", "r1")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(top, "current")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, backend{name: "file", newBucket: func(*testing.T) string { return "file://" + link }}, nil)
	s := &symlinkEnv{env: e, dir: link}
	weights := randomBytes(t, 3000)
	s.put("blobs/shared.pt", weights)
	s.symlink(filepath.Join("..", "blobs", "shared.pt"), "rel/model.pt")
	s.symlink(filepath.Join(link, "blobs", "shared.pt"), "abs/model.pt")
	tf := tfModel(t, "v")
	sum := s.putModel("versions/v1/", tf)
	s.symlink("versions", "alias") // a directory link inside the root
	s.putConfig(cfgEntry{path: "rel/model.pt", checksum: modelfiles.Checksum(runtimes.Files{"model.pt": weights})},
		cfgEntry{path: "abs/model.pt"}, cfgEntry{path: "alias/v1/", checksum: sum})
	err := s.sync()
	s.expectRefused(err, "abs/model.pt")
	if !strings.Contains(err.Error(), "absolute") {
		t.Errorf("SyncOnce = %v, want the refusal to say absolute symlinks are not followed", err)
	}
	for _, c := range s.expectCalls("register rel/model.pt", "register alias/v1/") {
		if c.path == "rel/model.pt" && string(c.files["model.pt"]) != string(weights) {
			t.Errorf("%s: content differs", c.path)
		}
		if c.path == "alias/v1/" && c.checksum != sum {
			t.Errorf("%s: checksum %s, want %s", c.path, c.checksum, sum)
		}
	}
}

// TestFileBucketRefusesConfigSymlinkedOutOfTheRoot: the config object
// itself must not be read through a symlink that leaves the root; the
// failure is a config failure (nothing attempted) naming the key.
func TestFileBucketRefusesConfigSymlinkedOutOfTheRoot(t *testing.T) {
	s := newSymlinkEnv(t)
	sum := s.putModel("m/", tfModel(t, "m"))
	cfg := `{"model_metadata":[{"model_path":"m/","checksum":"` + sum + `"}]}`
	if err := os.WriteFile(filepath.Join(s.outside, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.symlink(filepath.Join(s.outside, "config.json"), s.opts.ConfigPath)
	err := s.sync()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `model config "`+s.opts.ConfigPath+`"`) {
		t.Fatalf("SyncOnce = %v, want ErrConfig naming the config", err)
	}
	s.expectRefused(err, s.opts.ConfigPath)
	s.expectCalls()
	if got := s.counter("inferbid_modelstore_fetches_total", "kind", "config", "result", reasonOutsideRoot); got != 1 {
		t.Errorf("fetches{config,outside_bucket_root} = %v, want 1", got)
	}
	// The same config as a regular file inside the root is read.
	if err := os.Remove(filepath.Join(s.dir, filepath.FromSlash(s.opts.ConfigPath))); err != nil {
		t.Fatal(err)
	}
	s.put(s.opts.ConfigPath, []byte(cfg))
	s.mustSync()
	s.expectCalls("register m/")
}

// TestFileRootRefusesAFileReplacedAfterOpening: the check compares the
// opened file with what the key names now, so a symlink swapped in after
// fileblob resolved the key cannot slip through; the file the key names
// passes.
func TestFileRootRefusesAFileReplacedAfterOpening(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.pt")
	if err := os.WriteFile(p, []byte("inside"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &fileRoot{dir: dir}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.check(f); err != nil {
		t.Fatalf("check of the file the key names = %v", err)
	}
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = r.check(f)
	if reasonOf(err) != reasonOutsideRoot || !strings.Contains(err.Error(), "not the one the key names") {
		t.Errorf("check after the key was replaced = %v (reason %s), want a refusal", err, reasonOf(err))
	}
	outside, err := os.Open(filepath.Join(t.TempDir(), "..")) // a directory not under dir
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	if err := r.check(outside); reasonOf(err) != reasonOutsideRoot {
		t.Errorf("check of a file outside the root = %v, want a refusal", err)
	}
}
