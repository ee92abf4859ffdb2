package modelstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes"
)

// fetchError is a failed fetch with the metric reason.
type fetchError struct {
	reason string
	err    error
}

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

func failf(reason string, format string, args ...any) error {
	return &fetchError{reason: reason, err: fmt.Errorf(format, args...)}
}

// reasonOf returns the metric reason of err.
func reasonOf(err error) string {
	if fe, ok := errors.AsType[*fetchError](err); ok {
		return fe.reason
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return reasonCanceled
	}
	return reasonRead
}

func bucketReason(err error) string {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return reasonNotFound
	case gcerrors.Canceled, gcerrors.DeadlineExceeded:
		return reasonCanceled
	}
	return reasonRead
}

// objectVersion identifies a version of an object where the store's ETag
// is trustworthy (S3's content ETag, GCS's generation). "" means unknown:
// the object must be read and its content hashed (fileblob's ETag is mtime
// and size, with coarse mtime granularity).
func objectVersion(scheme string, a *blob.Attributes) string {
	switch scheme {
	case "gs":
		var oa storage.ObjectAttrs
		if a.As(&oa) {
			return "gen:" + strconv.FormatInt(oa.Generation, 10) + "." + strconv.FormatInt(oa.Metageneration, 10) + "/" + strconv.FormatInt(a.Size, 10)
		}
	case "s3":
		var ho s3.HeadObjectOutput
		if a.As(&ho) && a.ETag != "" {
			v := "etag:" + a.ETag + "/" + strconv.FormatInt(a.Size, 10)
			if ho.VersionId != nil {
				v += "/" + *ho.VersionId
			}
			return v
		}
	}
	return ""
}

// listedVersion is the store's version of a listed object where it gives
// one beyond the MD5 (S3's ETag, which multipart uploads give no MD5 for;
// GCS's generation); "" otherwise.
func listedVersion(scheme string, obj *blob.ListObject) string {
	switch scheme {
	case "s3":
		var o s3types.Object
		if obj.As(&o) && o.ETag != nil {
			return "etag:" + *o.ETag
		}
	case "gs":
		var oa storage.ObjectAttrs
		if obj.As(&oa) {
			return "gen:" + strconv.FormatInt(oa.Generation, 10)
		}
	}
	return ""
}

// readConfigObject reads the config object; version is "" when the store
// gives no trustworthy version. When the version equals known, it returns
// (nil, version, nil) without reading.
func (w *Watcher) readConfigObject(ctx context.Context, known string) (data []byte, version string, err error) {
	key := w.opts.ConfigPath
	if w.scheme != "file" {
		a, err := w.bucket.Attributes(ctx, key)
		if err != nil {
			return nil, "", failf(bucketReason(err), "model config %q: %w", key, err)
		}
		if a.Size > MaxConfigBytes {
			return nil, "", failf(reasonTooLarge, "model config %q is %d bytes, more than the %d-byte limit", key, a.Size, MaxConfigBytes)
		}
		version = objectVersion(w.scheme, a)
		if version != "" && version == known {
			return nil, version, nil
		}
	}
	r, err := w.bucket.NewReader(ctx, key, w.root.readerOptions())
	if err != nil {
		return nil, "", readErr(err, "model config %q", key)
	}
	defer r.Close()
	data, err = io.ReadAll(io.LimitReader(r, MaxConfigBytes+1))
	if err != nil {
		return nil, "", failf(bucketReason(err), "model config %q: read: %w", key, err)
	}
	if len(data) > MaxConfigBytes {
		return nil, "", failf(reasonTooLarge, "model config %q is more than the %d-byte limit", key, MaxConfigBytes)
	}
	return data, version, nil
}

// downloaded is a model fetched into temporary files and checksummed.
type downloaded struct {
	dir      string
	files    []downloadedFile // sorted by rel
	size     int64
	checksum string
}

type downloadedFile struct {
	rel, tmp string
	sum      [sha256.Size]byte // of the bytes written to tmp, hashed as they were
}

// onDisk returns the downloaded files (relative path -> temp file) and
// their SHA-256 digests, by relative path.
func (d *downloaded) onDisk() (runtimes.DiskFiles, map[string][sha256.Size]byte) {
	files := make(runtimes.DiskFiles, len(d.files))
	sums := make(map[string][sha256.Size]byte, len(d.files))
	for _, f := range d.files {
		files[f.rel], sums[f.rel] = f.tmp, f.sum
	}
	return files, sums
}

func (d *downloaded) cleanup() {
	if d != nil && d.dir != "" {
		os.RemoveAll(d.dir)
	}
}

// read loads the files into memory for registration.
func (d *downloaded) read() (runtimes.Files, error) {
	files := make(runtimes.Files, len(d.files))
	for _, f := range d.files {
		b, err := os.ReadFile(f.tmp)
		if err != nil {
			return nil, failf(reasonLocalError, "read downloaded %q: %w", f.rel, err)
		}
		files[f.rel] = b
	}
	return files, nil
}

// MaxModelFiles bounds the objects of one directory model, so a prefix
// holding millions of empty objects cannot grow the listing without bound.
const MaxModelFiles = 100000

type objectRef struct {
	key, rel string
	size     int64
	// identity as listed, to tell a changed object from an unchanged one
	modTime time.Time
	md5     []byte
	etag    string // or another version the store gives (GCS generation)
}

// listModel finds the objects of a model entry and checks the size cap
// before anything is downloaded.
func (w *Watcher) listModel(ctx context.Context, e ModelEntry) ([]objectRef, error) {
	var objs []objectRef
	var total int64
	if e.IsDir() {
		err := eachObject(ctx, w.bucket, e.Path, func(err error) error {
			return failf(reasonList, "model %q: list objects: %w", e.Path, err)
		}, func(obj *blob.ListObject) error {
			rel := strings.TrimPrefix(obj.Key, e.Path)
			if !validRelPath(rel) {
				return failf(reasonBadObject, "model %q: object %q has an unsafe relative path %q", e.Path, obj.Key, rel)
			}
			total += obj.Size
			if total > w.maxModelBytes {
				return failf(reasonTooLarge, "model %q: more than the %d-byte model size limit", e.Path, w.maxModelBytes)
			}
			if len(objs) == MaxModelFiles {
				return failf(reasonTooLarge, "model %q: more than %d objects under the prefix", e.Path, MaxModelFiles)
			}
			objs = append(objs, objectRef{key: obj.Key, rel: rel, size: obj.Size, modTime: obj.ModTime, md5: obj.MD5,
				etag: listedVersion(w.scheme, obj)})
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(objs) == 0 {
			return nil, failf(reasonEmpty, "model %q: no objects under the prefix", e.Path)
		}
	} else {
		a, err := w.bucket.Attributes(ctx, e.Path)
		if err != nil {
			reason := bucketReason(err)
			hint := ""
			if reason == reasonNotFound {
				hint = fmt.Sprintf(" (a directory model_path ends in \"/\": %q)", e.Path+"/")
			}
			return nil, failf(reason, "model %q: %w%s", e.Path, err, hint)
		}
		if a.Size > w.maxModelBytes {
			return nil, failf(reasonTooLarge, "model %q is %d bytes, more than the %d-byte model size limit", e.Path, a.Size, w.maxModelBytes)
		}
		objs = append(objs, objectRef{key: e.Path, rel: path.Base(e.Path), size: a.Size, modTime: a.ModTime, md5: a.MD5, etag: a.ETag})
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].rel < objs[j].rel })
	return objs, nil
}

// validRelPath accepts clean relative slash paths: no "..", no leading or
// doubled slashes, so a file name can never escape the model's root.
func validRelPath(rel string) bool {
	if rel == "" || strings.HasPrefix(rel, "/") || path.Clean(rel) != rel {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, "../")
}

// download fetches a model's objects, as listModel listed them, into
// size-capped temporary files, hashing them on the way, and verifies the
// checksum when one is listed.
func (w *Watcher) download(ctx context.Context, e ModelEntry, objs []objectRef) (*downloaded, error) {
	dir, err := os.MkdirTemp(w.opts.TempDir, "inferbid-model-*")
	if err != nil {
		return nil, failf(reasonLocalError, "model %q: temp dir: %w", e.Path, err)
	}
	d := &downloaded{dir: dir}
	ok := false
	defer func() {
		if !ok {
			d.cleanup()
		}
	}()
	digests := make([]string, 0, len(objs))
	// One chunk buffer for the download's objects, read one after another
	// (not one per object: a model may have thousands of small files).
	buf := make([]byte, downloadChunk)
	for i, o := range objs {
		tmp := filepath.Join(dir, strconv.Itoa(i))
		sum, n, err := w.downloadObject(ctx, e, o, tmp, w.maxModelBytes-d.size, buf)
		if err != nil {
			return nil, err
		}
		d.size += n
		d.files = append(d.files, downloadedFile{rel: o.rel, tmp: tmp, sum: sum})
		digests = append(digests, hex.EncodeToString(sum[:]))
	}
	d.checksum = modelfiles.ChecksumOfHexDigests(digests)
	if e.Checksum != "" && d.checksum != e.Checksum {
		return nil, failf(reasonChecksum, "model %q: checksum mismatch: config lists %s, the bucket content is %s", e.Path, e.Checksum, d.checksum)
	}
	ok = true
	return d, nil
}

// downloadObject writes object o to the new file tmp, hashing the bytes
// as they are written (the one pass of the download over them: the digest
// is then carried along, never recomputed, see DigestRegistrar).
func (w *Watcher) downloadObject(ctx context.Context, e ModelEntry, o objectRef, tmp string, budget int64, buf []byte) (sum [sha256.Size]byte, n int64, err error) {
	r, err := w.bucket.NewReader(ctx, o.key, w.root.readerOptions())
	if err != nil {
		return sum, 0, readErr(err, "model %q: object %q", e.Path, o.key)
	}
	defer r.Close()
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return sum, 0, failf(reasonLocalError, "model %q: %w", e.Path, err)
	}
	h := sha256.New()
	// The listing's sizes were checked already; the limit guards against an
	// object that grew since.
	n, err = w.copyHashed(f, h, io.LimitReader(r, budget+1), buf)
	if cerr := f.Close(); err == nil && cerr != nil {
		return sum, 0, failf(reasonLocalError, "model %q: %w", e.Path, cerr)
	}
	if err != nil {
		return sum, 0, failf(bucketReason(err), "model %q: object %q: read: %w", e.Path, o.key, err)
	}
	if n > budget {
		return sum, 0, failf(reasonTooLarge, "model %q: more than the %d-byte model size limit", e.Path, w.maxModelBytes)
	}
	w.metrics.downloadBytes.Add(float64(n))
	h.Sum(sum[:0])
	return sum, n, nil
}

// downloadChunk is what a download reads before it writes and hashes it.
const downloadChunk = 1 << 20

// copyHashed copies r to f and h in chunks of len(buf) (downloadChunk). Parallel
// downloads read (wait for the bucket) at once, but write and hash one
// chunk at a time (Watcher.passMu): the loads' CPU on this host is at most
// about one core, so bids keep the other one.
func (w *Watcher) copyHashed(f *os.File, h hash.Hash, r io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		m, rerr := fill(r, buf)
		if m > 0 {
			w.passMu.Lock()
			_, werr := f.Write(buf[:m])
			h.Write(buf[:m])
			w.passMu.Unlock()
			n += int64(m)
			if werr != nil {
				return n, werr
			}
		}
		switch {
		case rerr == io.EOF:
			return n, nil
		case rerr != nil:
			return n, rerr
		}
	}
}

// fill reads into buf until it is full or r fails; unlike io.ReadFull it
// returns r's own error, io.EOF at the end of the object, so that a body
// that ends early (net/http's io.ErrUnexpectedEOF) is not taken for the
// end.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// isNotFound reports a MODEL_NOT_FOUND from the sidecar.
func isNotFound(err error) bool { return inferr.TypeOf(err) == inferr.ModelNotFound }
