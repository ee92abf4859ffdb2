package kserve

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// SplitModelPath maps a model path onto a v2 model name and version:
// "pctr/v2/" is name "pctr", version "v2"; a path whose last segment is not
// a version ("mlp.onnx", "pctr/") is a name without a version.
func SplitModelPath(path string) (name, version string) {
	trimmed := strings.TrimSuffix(path, "/")
	i := strings.LastIndexByte(trimmed, '/')
	if i <= 0 || !isVersion(trimmed[i+1:]) {
		return trimmed, ""
	}
	return trimmed[:i], trimmed[i+1:]
}

// isVersion reports whether s is digits, optionally after a "v".
func isVersion(s string) bool {
	s = strings.TrimPrefix(s, "v")
	if s == "" || len(s) > 18 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// versionNumber is a version's number ("v12" -> 12).
func versionNumber(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(v, "v"), 10, 64)
	return n
}

// compareVersions orders versions oldest first: by number, then by text
// ("v01" and "v1" are both 1).
func compareVersions(a, b string) int {
	if c := cmp.Compare(versionNumber(a), versionNumber(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// Resolution is the model path a v2 name and version stand for.
type Resolution struct {
	Path     string   // the model path ("pctr/v2/")
	Name     string   // the v2 model name ("pctr")
	Version  string   // the version served ("v2"), "" for an unversioned model
	Versions []string // every version of the name, oldest first
}

// Resolve finds the model path for name and version among paths (what the
// sidecar holds). An empty version picks the newest version of the name;
// an unversioned path of the same name ("pctr/") is used only when the name
// has no versioned path. ok is false when nothing matches.
func Resolve(paths []string, name, version string) (r Resolution, ok bool) {
	r.Name = name
	unversioned := ""
	byVersion := map[string]string{}
	for _, p := range paths {
		n, v := SplitModelPath(p)
		if n != name {
			continue
		}
		if v == "" {
			unversioned = p
			continue
		}
		byVersion[v] = p
		r.Versions = append(r.Versions, v)
	}
	slices.SortFunc(r.Versions, compareVersions)
	switch {
	case version != "":
		r.Path, ok = byVersion[version]
		r.Version = version
	case len(r.Versions) > 0:
		r.Version = r.Versions[len(r.Versions)-1]
		r.Path, ok = byVersion[r.Version], true
	case unversioned != "":
		r.Path, ok = unversioned, true
	}
	return r, ok
}
