package modelstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"gocloud.dev/blob"
)

// Bucket is a bucket opened the way the Watcher opens the model bucket,
// for another reader of the same stores (package codestore, the bidding
// code): the same gocloud opener, reads from a file:// bucket confined to
// its directory, listings that identify each object's content cheaply, and
// size caps. One fix to this machinery serves both.
type Bucket struct {
	url    string
	bucket *blob.Bucket
	scheme string
	root   *fileRoot
}

// Object is a listed object: its key, size, and Version, which changes
// when its content does (S3 ETag, GCS generation, MD5 where the store
// lists one, and size and modification time; fileblob's modification time
// is coarse, so a rewrite of the same size within a few milliseconds may
// keep its Version).
type Object struct {
	Key     string
	Size    int64
	Version string
}

// openBucket opens bucketURL and, for file:// URLs, the root its reads are
// confined to.
func openBucket(ctx context.Context, bucketURL string) (*blob.Bucket, string, *fileRoot, error) {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return nil, "", nil, fmt.Errorf("bucket URL %q: %w", bucketURL, err)
	}
	if err := checkBucketURL(bucketURL, u); err != nil {
		return nil, "", nil, err
	}
	var root *fileRoot
	if u.Scheme == "file" {
		if root, err = newFileRoot(u); err != nil {
			return nil, "", nil, fmt.Errorf("bucket URL %q: %w", bucketURL, err)
		}
	}
	b, err := blob.OpenBucket(ctx, bucketURL)
	if err != nil {
		return nil, "", nil, fmt.Errorf("open bucket %q: %w", bucketURL, err)
	}
	return b, u.Scheme, root, nil
}

// checkBucketURL refuses the bucket URLs that look like a local directory
// written the wrong way, saying the file:// URL meant: a bare path ("no
// scheme" to gocloud) and a file:// URL whose first path segment became the
// host (file://tmp/x, file://../x: gocloud would drop it and open /x).
func checkBucketURL(bucketURL string, u *url.URL) error {
	switch {
	case u.Scheme == "" && bucketURL != "":
		return fmt.Errorf("bucket URL %q has no scheme: a local directory is %s, a bucket s3://BUCKET?region=... or gs://BUCKET", bucketURL, fileURLHint(bucketURL))
	case u.Scheme == "file" && u.Host != "" && u.Host != "." && u.Host != "localhost":
		rel := u.Host + u.Path
		hint := fileURLHint(rel)
		if !strings.HasPrefix(u.Host, ".") {
			hint = "file:///" + strings.TrimPrefix(path.Clean("/"+rel), "/") + " (absolute) or " + hint + " (relative to the working directory)"
		}
		return fmt.Errorf("bucket URL %q names host %q, which a file:// URL does not have (it would open %s): a local directory is file:// followed by its absolute path, %s", bucketURL, u.Host, u.Path, hint)
	}
	return nil
}

// CheckBucketURL reports the mistakes checkBucketURL catches (and a URL that
// does not parse) without opening anything: for flag checks at start.
func CheckBucketURL(bucketURL string) error {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return fmt.Errorf("bucket URL %q: %w", bucketURL, err)
	}
	return checkBucketURL(bucketURL, u)
}

// fileURLHint is the file:// URL of a local path, made absolute against
// the working directory.
func fileURLHint(p string) string {
	abs, err := filepath.Abs(filepath.FromSlash(p))
	if err != nil {
		return "file:///absolute/path"
	}
	return "file://" + filepath.ToSlash(abs)
}

// OpenBucket opens a bucket URL (file:///dir, s3://bucket?..., gs://bucket).
// Like gocloud, it does not check that the bucket exists: the first List
// does.
func OpenBucket(ctx context.Context, bucketURL string) (*Bucket, error) {
	b, scheme, root, err := openBucket(ctx, bucketURL)
	if err != nil {
		return nil, err
	}
	return &Bucket{url: bucketURL, bucket: b, scheme: scheme, root: root}, nil
}

// Scheme is the bucket URL's scheme: "file", "s3", "gs", ...
func (b *Bucket) Scheme() string { return b.scheme }

// URL is the URL the bucket was opened with.
func (b *Bucket) URL() string { return b.url }

// Close closes the bucket.
func (b *Bucket) Close() error { return b.bucket.Close() }

// List lists the objects under prefix (directory placeholders skipped), at
// most maxObjects of them (more is an error; 0 = MaxModelFiles).
func (b *Bucket) List(ctx context.Context, prefix string, maxObjects int) ([]Object, error) {
	if maxObjects <= 0 {
		maxObjects = MaxModelFiles
	}
	var objs []Object
	err := eachObject(ctx, b.bucket, prefix, func(err error) error {
		return fmt.Errorf("list bucket %s: %w", b.url, err)
	}, func(obj *blob.ListObject) error {
		if len(objs) == maxObjects {
			return fmt.Errorf("list bucket %s: more than %d objects", b.url, maxObjects)
		}
		v := strconv.FormatInt(obj.Size, 10) + "/" + strconv.FormatInt(obj.ModTime.UnixNano(), 10) + "/" + fmt.Sprintf("%x", obj.MD5)
		if lv := listedVersion(b.scheme, obj); lv != "" {
			v += "/" + lv
		}
		objs = append(objs, Object{Key: obj.Key, Size: obj.Size, Version: v})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return objs, nil
}

// eachObject calls fn on each object listed under prefix, directory
// placeholders (some consoles create them) skipped, until the listing ends
// or fn returns an error, which it returns as is; a listing error it
// returns through listErr. Bucket.List and the Watcher's listModel share it.
func eachObject(ctx context.Context, b *blob.Bucket, prefix string, listErr func(error) error, fn func(*blob.ListObject) error) error {
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return listErr(err)
		}
		if obj.IsDir || strings.HasSuffix(obj.Key, "/") {
			continue
		}
		if err := fn(obj); err != nil {
			return err
		}
	}
}

// Read reads the object at key, refusing one larger than maxBytes (it
// reads at most maxBytes+1) and, in a file:// bucket, one that resolves
// outside the bucket's directory.
func (b *Bucket) Read(ctx context.Context, key string, maxBytes int64) ([]byte, error) {
	r, err := b.bucket.NewReader(ctx, key, b.root.readerOptions())
	if err != nil {
		return nil, readErr(err, "object %q", key)
	}
	defer r.Close()
	if r.Size() > maxBytes {
		return nil, fmt.Errorf("object %q is %d bytes, more than the %d-byte limit", key, r.Size(), maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("object %q: read: %w", key, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("object %q is more than the %d-byte limit", key, maxBytes)
	}
	return data, nil
}
