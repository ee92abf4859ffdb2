package kserve

import "testing"

// tfVersionOf, which REST (/versions/N) and gRPC (model_spec.version N)
// share: N is "N" when the name has it, else the version numbered N.
func TestTFVersionOf(t *testing.T) {
	for _, c := range []struct {
		versions []string
		n        int64
		want     string
		ok       bool
	}{
		{[]string{"1", "2"}, 1, "1", true},
		{[]string{"v1", "v2"}, 2, "v2", true},
		{[]string{"v1", "1"}, 1, "1", true}, // the spelling "1" before "v1"
		{[]string{"01"}, 1, "01", true},
		{[]string{"v1", "v2"}, 3, "", false},
		{[]string{"latest", "vx"}, 0, "", false},
		{nil, 1, "", false},
	} {
		got, ok := tfVersionOf(c.versions, c.n)
		if got != c.want || ok != c.ok {
			t.Errorf("tfVersionOf(%q, %d) = %q, %v; want %q, %v", c.versions, c.n, got, ok, c.want, c.ok)
		}
	}
}
