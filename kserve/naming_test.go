package kserve_test

import (
	"slices"
	"testing"

	"github.com/inferbid/inferbid/kserve"
)

func TestSplitModelPath(t *testing.T) {
	for _, c := range []struct{ path, name, version string }{
		{"pctr/v2/", "pctr", "v2"},
		{"pctr/v2", "pctr", "v2"},
		{"team/ctr/12/", "team/ctr", "12"},
		{"pctr/", "pctr", ""},
		{"mlp.onnx", "mlp.onnx", ""},
		{"models/mlp.onnx", "models/mlp.onnx", ""},
		{"pctr/vx/", "pctr/vx", ""},
		{"v2/", "v2", ""},
		{"pctr/v/", "pctr/v", ""},
	} {
		name, version := kserve.SplitModelPath(c.path)
		if name != c.name || version != c.version {
			t.Errorf("SplitModelPath(%q) = %q, %q; want %q, %q", c.path, name, version, c.name, c.version)
		}
	}
}

func TestResolve(t *testing.T) {
	paths := []string{"pctr/v1/", "pctr/v10/", "pctr/v9/", "pcvr/", "solo.onnx", "both/", "both/v3/"}
	for _, c := range []struct {
		name, version, path, served string
		ok                          bool
	}{
		{"pctr", "", "pctr/v10/", "v10", true}, // by number, not by text
		{"pctr", "v9", "pctr/v9/", "v9", true},
		{"pctr", "v2", "", "v2", false},
		{"pcvr", "", "pcvr/", "", true},
		{"solo.onnx", "", "solo.onnx", "", true},
		{"both", "", "both/v3/", "v3", true}, // a version wins over the unversioned path
		{"nosuch", "", "", "", false},
	} {
		r, ok := kserve.Resolve(paths, c.name, c.version)
		if ok != c.ok || r.Path != c.path || (ok && r.Version != c.served) {
			t.Errorf("Resolve(%q, %q) = %+v, %v; want path %q version %q, %v", c.name, c.version, r, ok, c.path, c.served, c.ok)
		}
	}
	if r, _ := kserve.Resolve(paths, "pctr", ""); !slices.Equal(r.Versions, []string{"v1", "v9", "v10"}) {
		t.Errorf("versions of pctr: %v, want oldest first [v1 v9 v10]", r.Versions)
	}
}
