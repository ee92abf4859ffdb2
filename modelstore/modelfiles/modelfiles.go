package modelfiles

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/inferbid/inferbid/runtimes"
)

// Checksum of a model: lowercase hex SHA-256 of each file, sorted by slash
// path, hex strings concatenated, SHA-256 of that string, lowercase hex
// (equals the seed's find ... | sha256sum pipeline).
func Checksum(files runtimes.Files) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	outer := sha256.New()
	for _, p := range paths {
		sum := sha256.Sum256(files[p])
		var hx [sha256.Size * 2]byte
		hex.Encode(hx[:], sum[:])
		outer.Write(hx[:])
	}
	return hex.EncodeToString(outer.Sum(nil))
}

// ChecksumOfHexDigests combines per-file hex digests already ordered by path.
func ChecksumOfHexDigests(hexDigests []string) string {
	outer := sha256.New()
	for _, h := range hexDigests {
		io.WriteString(outer, h)
	}
	return hex.EncodeToString(outer.Sum(nil))
}

// ChecksumPath reads a local file or directory and returns its checksum. It
// streams each file, so it needs no memory proportional to the model.
func ChecksumPath(path string) (string, error) {
	return ChecksumPathTee(path, nil)
}

// ChecksumPathTee is ChecksumPath that also writes each file's bytes, as it
// hashes them, to the writer tee returns for the file's local path (nil:
// none), so a caller that needs another digest of a file reads it once.
// tee may be nil.
func ChecksumPathTee(path string, tee func(local string) io.Writer) (string, error) {
	paths, err := localFiles(path)
	if err != nil {
		return "", err
	}
	rels := make([]string, 0, len(paths))
	for rel := range paths {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	digests := make([]string, 0, len(rels))
	for _, rel := range rels {
		var w io.Writer
		if tee != nil {
			w = tee(paths[rel])
		}
		d, err := fileDigest(paths[rel], w)
		if err != nil {
			return "", err
		}
		digests = append(digests, d)
	}
	return ChecksumOfHexDigests(digests), nil
}

// fileDigest is the hex SHA-256 of the file name; its bytes are also
// written to also unless it is nil.
func fileDigest(name string, also io.Writer) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("modelstore: checksum %q: %w", name, err)
	}
	defer f.Close()
	h := sha256.New()
	var w io.Writer = h
	if also != nil {
		w = io.MultiWriter(h, also)
	}
	if _, err := io.Copy(w, f); err != nil {
		return "", fmt.Errorf("modelstore: checksum %q: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ReadLocal reads a local file (one entry named by its base name) or a
// directory tree (relative slash paths).
func ReadLocal(path string) (runtimes.Files, error) {
	paths, err := localFiles(path)
	if err != nil {
		return nil, err
	}
	files := make(runtimes.Files, len(paths))
	for rel, name := range paths {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("modelstore: read %q: %w", name, err)
		}
		files[rel] = b
	}
	return files, nil
}

// localFiles maps the model-relative slash path of every regular file under
// path (or of path itself, by base name) to its OS path. Inside a directory,
// symlinks and other non-regular files are skipped, as find -type f does.
// LocalFiles lists the files of a local model (a file, or a directory read
// recursively) as ReadLocal names them, each mapped to its local path,
// without reading them.
func LocalFiles(path string) (runtimes.DiskFiles, error) {
	return localFiles(path)
}

func localFiles(path string) (map[string]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("modelstore: %w", err)
	}
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("modelstore: %q is not a regular file or directory", path)
		}
		return map[string]string{filepath.Base(path): path}, nil
	}
	out := map[string]string{}
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(path, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("modelstore: read %q: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("modelstore: %q holds no files", path)
	}
	return out, nil
}
