package modelstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBucketURLHints: the local-directory mistakes of a bucket URL are
// refused with the file:/// URL meant, rather than opening another
// directory or failing with gocloud's "no scheme".
func TestBucketURLHints(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Dir(wd)
	for url, want := range map[string][]string{
		"file://tmp/x":  {`host "tmp"`, "it would open /x", "file:///tmp/x (absolute)", "file://" + filepath.Join(wd, "tmp/x") + " (relative"},
		"file://../x":   {`host ".."`, "file://" + filepath.Join(parent, "x")},
		"models/bucket": {"no scheme", "file://" + filepath.Join(wd, "models/bucket"), "s3://"},
		"/abs/dir":      {"no scheme", "file:///abs/dir"},
	} {
		_, err := OpenBucket(context.Background(), url)
		if err == nil {
			t.Errorf("OpenBucket(%q): no error", url)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("OpenBucket(%q) = %v, want it to mention %q", url, err, w)
			}
		}
	}
	for _, ok := range []string{"file://" + t.TempDir(), "file://./testdata", "file://localhost" + t.TempDir()} {
		b, err := OpenBucket(context.Background(), ok)
		if err != nil {
			t.Errorf("OpenBucket(%q): %v", ok, err)
			continue
		}
		b.Close()
	}
}
