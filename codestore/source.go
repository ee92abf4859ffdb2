package codestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/inferbid/inferbid/modelstore"
)

// Version is one code version as fetched: a module's source, its Wasm
// helper if it has one, and their SHA-256 (over the source, and the helper
// after a separator) and size.
type Version struct {
	Name   string
	Source string
	Wasm   []byte
	SHA256 string
	Size   int64
}

func newVersion(name string, src, wasm []byte) Version {
	h := sha256.New()
	h.Write(src)
	if wasm != nil {
		h.Write([]byte("\x00wasm\x00"))
		h.Write(wasm)
	}
	return Version{Name: name, Source: string(src), Wasm: wasm, SHA256: hex.EncodeToString(h.Sum(nil)), Size: int64(len(src) + len(wasm))}
}

// poll is what one look at the source found: the versions it holds, and
// the error of each version that exists but could not be read (its
// previous content, if any, keeps serving).
type poll struct {
	versions map[string]Version
	errs     map[string]error
}

// source is where the code comes from.
type source interface {
	// poll fetches what changed since the last poll; an error means the
	// source could not be looked at (nothing is known).
	poll(ctx context.Context) (poll, error)
	close() error
}

// bucketSource lists a bucket; every blob is a version named by its key,
// except a "x.wasm" beside "x.js", which is x.js's Wasm helper. Only
// objects whose listed version changed are read again (in S3 and GCS
// buckets; a file:// bucket's are read on every poll).
type bucketSource struct {
	bucket   *modelstore.Bucket
	maxBytes int64
	cache    map[string]cachedObject
	reads    int // objects read, for tests
}

type cachedObject struct {
	version string
	data    []byte
}

func (s *bucketSource) close() error { return s.bucket.Close() }

// maxObjects bounds the blobs of a code bucket.
const maxObjects = 10000

func (s *bucketSource) poll(ctx context.Context) (poll, error) {
	objs, err := s.bucket.List(ctx, "", maxObjects)
	if err != nil {
		return poll{}, err
	}
	listed := map[string]modelstore.Object{}
	for _, o := range objs {
		listed[o.Key] = o
	}
	p := poll{versions: map[string]Version{}, errs: map[string]error{}}
	keep := map[string]bool{}
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".wasm") {
			continue
		}
		var wasmObj *modelstore.Object
		if strings.HasSuffix(o.Key, ".js") {
			if w, ok := listed[strings.TrimSuffix(o.Key, ".js")+".wasm"]; ok {
				wasmObj = &w
			}
		}
		total := o.Size
		if wasmObj != nil {
			total += wasmObj.Size
		}
		if total > s.maxBytes {
			p.errs[o.Key] = fmt.Errorf("blob %q (with its Wasm helper) is %d bytes, more than the %d-byte limit", o.Key, total, s.maxBytes)
			continue
		}
		src, err := s.read(ctx, o, keep)
		if err != nil {
			p.errs[o.Key] = err
			continue
		}
		var wasm []byte
		if wasmObj != nil {
			if wasm, err = s.read(ctx, *wasmObj, keep); err != nil {
				p.errs[o.Key] = fmt.Errorf("its Wasm helper: %w", err)
				continue
			}
		}
		p.versions[o.Key] = newVersion(o.Key, src, wasm)
	}
	for k := range s.cache {
		if !keep[k] {
			delete(s.cache, k)
		}
	}
	return p, nil
}

// read returns an object's content, from the cache when its listed version
// is unchanged.
func (s *bucketSource) read(ctx context.Context, o modelstore.Object, keep map[string]bool) ([]byte, error) {
	keep[o.Key] = true
	// fileblob's modification time is coarse (a rewrite of the same size
	// within a few ms lists the same), and a local read is cheap: file://
	// blobs are read on every poll, and the content's hash decides.
	if c, ok := s.cache[o.Key]; ok && c.version == o.Version && s.bucket.Scheme() != "file" {
		return c.data, nil
	}
	s.reads++
	data, err := s.bucket.Read(ctx, o.Key, s.maxBytes)
	if err != nil {
		return nil, err
	}
	s.cache[o.Key] = cachedObject{version: o.Version, data: data}
	return data, nil
}

// urlSource fetches biddingJsUrl (and biddingWasmHelperUrl) over HTTP(S),
// with conditional requests: an unchanged resource costs a 304.
type urlSource struct {
	client         *http.Client
	jsURL, wasmURL string
	maxBytes       int64
	js, wasm       cachedURL
}

type cachedURL struct {
	etag, lastModified string
	data               []byte
}

func (s *urlSource) close() error { return nil }

func (s *urlSource) poll(ctx context.Context) (poll, error) {
	src, err := s.get(ctx, "biddingJsUrl", s.jsURL, &s.js)
	if err != nil {
		return poll{}, err
	}
	var wasm []byte
	if s.wasmURL != "" {
		if wasm, err = s.get(ctx, "biddingWasmHelperUrl", s.wasmURL, &s.wasm); err != nil {
			return poll{}, err
		}
	}
	return poll{versions: map[string]Version{s.jsURL: newVersion(s.jsURL, src, wasm)}}, nil
}

func (s *urlSource) get(ctx context.Context, field, u string, c *cachedURL) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", field, u, err)
	}
	if c.data != nil {
		if c.etag != "" {
			req.Header.Set("If-None-Match", c.etag)
		}
		if c.lastModified != "" {
			req.Header.Set("If-Modified-Since", c.lastModified)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && c.data != nil:
		return c.data, nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s %s: HTTP %s", field, u, resp.Status)
	case resp.ContentLength > s.maxBytes:
		return nil, fmt.Errorf("%s %s: %d bytes, more than the %d-byte limit", field, u, resp.ContentLength, s.maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read: %w", field, u, err)
	}
	if int64(len(data)) > s.maxBytes {
		return nil, fmt.Errorf("%s %s: more than the %d-byte limit", field, u, s.maxBytes)
	}
	*c = cachedURL{etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified"), data: data}
	return data, nil
}

var errNoDefault = errors.New("codestore: the default version is not available")
