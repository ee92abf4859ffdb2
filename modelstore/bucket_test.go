package modelstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBucketReadConfinedAndCapped: Bucket (codestore's view of a bucket)
// refuses a symlink leaving a file:// bucket and an object over the cap,
// and lists each object with a version that changes with its content.
func TestBucketReadConfinedAndCapped(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	for name, data := range map[string]string{"bid.js": "function generateBid(){}", "big.js": strings.Repeat("x", 200)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "leak.js")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Scheme() != "file" {
		t.Errorf("Scheme() = %q", b.Scheme())
	}
	objs, err := b.List(ctx, "", 0)
	if err != nil || len(objs) != 3 {
		t.Fatalf("List: %v, %v", objs, err)
	}
	if data, err := b.Read(ctx, "bid.js", 100); err != nil || string(data) != "function generateBid(){}" {
		t.Errorf("Read bid.js: %q, %v", data, err)
	}
	if _, err := b.Read(ctx, "big.js", 100); err == nil || !strings.Contains(err.Error(), "100-byte limit") {
		t.Errorf("Read of an object over the cap: %v", err)
	}
	if data, err := b.Read(ctx, "leak.js", 100); err == nil || reasonOf(err) != reasonOutsideRoot {
		t.Errorf("Read of a symlink leaving the bucket: %q, %v (reason %s)", data, err, reasonOf(err))
	}
	if _, err := b.List(ctx, "", 2); err == nil {
		t.Error("List past maxObjects succeeded")
	}
	before := objs[0].Version
	if err := os.WriteFile(filepath.Join(dir, objs[0].Key), []byte("changed, and longer than before"), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, _ = b.List(ctx, "", 0)
	if objs[0].Version == before {
		t.Errorf("the version of %s did not change with its content: %q", objs[0].Key, before)
	}
}
