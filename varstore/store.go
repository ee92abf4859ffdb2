package varstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	"github.com/inferbid/inferbid/inferr"
)

// Scheme is the URL scheme of a Redis Cluster store.
const Scheme = "redis-cluster://"

// DefaultCacheBytes bounds the cache's rows and keys when neither
// Options.CacheRows nor Options.CacheBytes is set.
const DefaultCacheBytes = 64 << 20

// Options configure a Store; the zero value means the defaults: a cache
// bounded by bytes (DefaultCacheBytes), whatever the rows' size.
type Options struct {
	// CacheRows, when positive, bounds the cache by the rows it holds
	// instead (and CacheBytes is 0); negative = no cache.
	CacheRows int
	// CacheBytes, when positive, bounds the cache by the bytes of the
	// rows and keys it holds (CacheRows is then ignored); 0 =
	// DefaultCacheBytes unless CacheRows is set.
	CacheBytes int64
	// DialTimeout bounds one connection attempt (0 = 2 s). Reads and writes
	// are bounded by the call's context.
	DialTimeout time.Duration
	// NoDeadlineTimeout bounds a Rows call whose context has no deadline
	// (a warm-up, a registration from a client without one), which would
	// otherwise wait on a hung master for ever; 0 = DefaultNoDeadlineTimeout.
	NoDeadlineTimeout time.Duration
}

// DefaultNoDeadlineTimeout is Options.NoDeadlineTimeout's default: longer
// than any serving call's deadline, short enough that a hung master cannot
// hold a registration for long.
const DefaultNoDeadlineTimeout = 30 * time.Second

// Store is a Redis Cluster holding variables' rows. It is safe for
// concurrent use.
type Store struct {
	url          string
	client       *redis.ClusterClient
	cache        *lru.Cache[string, []byte]
	hits, misses atomic.Int64
	// With Options.CacheBytes: the bytes the cache holds and its bound.
	cacheBytes atomic.Int64
	maxBytes   int64
	// noDeadline bounds a Rows call without a deadline.
	noDeadline time.Duration
}

// ParseURL returns the seed addresses of a redis-cluster:// URL.
func ParseURL(url string) ([]string, error) {
	rest, ok := strings.CutPrefix(url, Scheme)
	if !ok {
		return nil, fmt.Errorf("store %q: want %shost:port[,host:port...]", url, Scheme)
	}
	if rest == "" {
		return nil, fmt.Errorf("store %q: no host:port", url)
	}
	var addrs []string
	for _, a := range strings.Split(rest, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return nil, fmt.Errorf("store %q: %q is not host:port", url, a)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("store %q: port %q", url, port)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// quietRedisLog routes go-redis' own log lines (a failed dial, per
// connection attempt: a flood while a node is down) to slog.Default at
// DEBUG: every failure already reaches the caller as a MODEL_EXECUTION
// error naming the store.
type quietRedisLog struct{}

func (quietRedisLog) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

var setRedisLog sync.Once

// Open returns a store for url; it connects lazily.
func Open(url string, opts Options) (*Store, error) {
	setRedisLog.Do(func() { redis.SetLogger(quietRedisLog{}) })
	addrs, err := ParseURL(url)
	if err != nil {
		return nil, inferr.Errorf(inferr.InputParsing, "%v", err)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.NoDeadlineTimeout <= 0 {
		opts.NoDeadlineTimeout = DefaultNoDeadlineTimeout
	}
	s := &Store{url: url, noDeadline: opts.NoDeadlineTimeout, client: redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:       addrs,
		DialTimeout: opts.DialTimeout,
		// Reads and writes end with the call's context.
		ReadTimeout:           -1,
		WriteTimeout:          -1,
		ContextTimeoutEnabled: true,
		MaxRedirects:          3,
		// go-redis reloads the slot map every minute by default, and on
		// redirections; Rows also asks for a reload when a node fails
		// (after a failover the old master is gone, not redirecting).
		ClusterStateReloadInterval: 10 * time.Second,
	})}
	if opts.CacheBytes <= 0 && opts.CacheRows == 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.CacheBytes > 0 {
		// Bounded by bytes: the LRU's own bound only caps the entry count
		// (a row takes at least its key), add evicts the oldest rows
		// while the total is above the bound.
		s.maxBytes = opts.CacheBytes
		s.cache, err = lru.NewWithEvict(int(min(opts.CacheBytes/16+1, 1<<30)), func(k string, v []byte) {
			s.cacheBytes.Add(-int64(len(k) + len(v)))
		})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if opts.CacheRows > 0 {
		if s.cache, err = lru.New[string, []byte](opts.CacheRows); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// URL is the store's URL, as errors name it.
func (s *Store) URL() string { return s.url }

// Close closes the store's connections.
func (s *Store) Close() error { return s.client.Close() }

// Stats are the cache's counters since Open.
type Stats struct{ Hits, Misses int64 }

// Stats returns the cache's hit and miss counts.
func (s *Store) Stats() Stats { return Stats{Hits: s.hits.Load(), Misses: s.misses.Load()} }

// Key is the Redis key of row of variable in the model with checksum.
func Key(checksum, variable string, row int64) string {
	return "ib:" + checksum + ":" + variable + ":" + strconv.FormatInt(row, 10)
}

// Rows fills out (len(ids) * rowBytes bytes) with the rows ids of
// variable in the model with checksum, in order; repeated ids are fetched
// once, cached rows not at all. Errors are MODEL_EXECUTION and name the
// store (and the row, when the store lacks one or holds one of the wrong
// size).
func (s *Store) Rows(ctx context.Context, checksum, variable string, ids []int64, rowBytes int, out []byte) error {
	if len(out) != len(ids)*rowBytes {
		return inferr.Errorf(inferr.ModelExecution, "variable %q: %d bytes for %d rows of %d bytes", variable, len(out), len(ids), rowBytes)
	}
	if _, ok := ctx.Deadline(); !ok {
		// Reads are bounded only by the context (no read timeout): without
		// a deadline, a hung master would hold the call for ever.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.noDeadline)
		defer cancel()
	}
	type want struct {
		key string
		cmd *redis.StringCmd
		at  []int // positions in ids
	}
	var wants []*want
	byID := map[int64]*want{}
	for i, id := range ids {
		if w, ok := byID[id]; ok {
			w.at = append(w.at, i)
			continue
		}
		key := Key(checksum, variable, id)
		if s.cache != nil {
			if row, ok := s.cache.Get(key); ok {
				s.hits.Add(1)
				copy(out[i*rowBytes:], row)
				byID[id] = &want{key: key, at: []int{i}} // repeats copy from out
				continue
			}
		}
		s.misses.Add(1)
		w := &want{key: key, at: []int{i}}
		byID[id] = w
		wants = append(wants, w)
	}
	if len(wants) > 0 {
		pipe := s.client.Pipeline()
		for _, w := range wants {
			w.cmd = pipe.Get(ctx, w.key)
		}
		// Exec's error is its first command's: a missing row (redis.Nil)
		// there must not hide a node that failed the others.
		_, err := pipe.Exec(ctx)
		for _, w := range wants {
			if e := w.cmd.Err(); e != nil && !errors.Is(e, redis.Nil) {
				err = e
				break
			}
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			if ctx.Err() == nil {
				// A node down or moved: learn the cluster's slots again
				// (in the background, at most every 200 ms), so that
				// calls reach a replica that took over.
				s.client.ReloadState(context.WithoutCancel(ctx))
			}
			return inferr.Wrap(inferr.ModelExecution, err, fmt.Sprintf("variable %q: store %s did not answer for %d rows", variable, s.url, len(wants)))
		}
		for _, w := range wants {
			row, err := w.cmd.Bytes()
			switch {
			case errors.Is(err, redis.Nil):
				return inferr.Errorf(inferr.ModelExecution, "variable %q: store %s holds no row %s (not exported for this model version?)", variable, s.url, w.key)
			case len(row) != rowBytes:
				return inferr.Errorf(inferr.ModelExecution, "variable %q: store %s: row %s has %d bytes, want %d", variable, s.url, w.key, len(row), rowBytes)
			}
			copy(out[w.at[0]*rowBytes:], row)
			s.add(w.key, row)
		}
	}
	for _, w := range byID {
		src := out[w.at[0]*rowBytes : (w.at[0]+1)*rowBytes]
		for _, i := range w.at[1:] {
			copy(out[i*rowBytes:], src)
		}
	}
	return nil
}

// add caches a row.
func (s *Store) add(key string, row []byte) {
	if s.cache == nil {
		return
	}
	if s.maxBytes <= 0 {
		s.cache.Add(key, row)
		return
	}
	if had, _ := s.cache.ContainsOrAdd(key, row); had {
		return // another call cached it: counted then
	}
	// Evicting calls the callback, which subtracts what leaves.
	for n := s.cacheBytes.Add(int64(len(key) + len(row))); n > s.maxBytes; n = s.cacheBytes.Load() {
		if _, _, ok := s.cache.RemoveOldest(); !ok {
			return
		}
	}
}

// CachedBytes is what the cache holds (rows and keys) when it is bounded
// by bytes (Options.CacheBytes); 0 otherwise.
func (s *Store) CachedBytes() int64 { return s.cacheBytes.Load() }

// PutRows writes rows first, first+1, ... of variable in the model with
// checksum from data (a whole number of rowBytes rows), in one pipelined
// round trip per shard. Writing the same rows again is harmless
// (idempotent).
func (s *Store) PutRows(ctx context.Context, checksum, variable string, first int64, data []byte, rowBytes int) error {
	if rowBytes <= 0 || len(data)%rowBytes != 0 {
		return inferr.Errorf(inferr.InputParsing, "variable %q: %d bytes is not a whole number of %d-byte rows", variable, len(data), rowBytes)
	}
	pipe := s.client.Pipeline()
	for i := 0; i*rowBytes < len(data); i++ {
		pipe.Set(ctx, Key(checksum, variable, first+int64(i)), data[i*rowBytes:(i+1)*rowBytes], 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return inferr.Wrap(inferr.ModelExecution, err, fmt.Sprintf("variable %q: writing rows %d.. to store %s", variable, first, s.url))
	}
	return nil
}

// progressKey holds how many rows of variable an export has written for
// the model with checksum (inferctl export-variables resumes from it).
func progressKey(checksum, variable string) string {
	return "ib:" + checksum + ":" + variable + ":#exported"
}

// ExportedRows is how many rows of variable a previous export wrote (0
// when none).
func (s *Store) ExportedRows(ctx context.Context, checksum, variable string) (int64, error) {
	n, err := s.client.Get(ctx, progressKey(checksum, variable)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, inferr.Wrap(inferr.ModelExecution, err, fmt.Sprintf("variable %q: store %s: export progress", variable, s.url))
	}
	return n, nil
}

// SetExportedRows records that rows 0..n-1 of variable are written.
func (s *Store) SetExportedRows(ctx context.Context, checksum, variable string, n int64) error {
	if err := s.client.Set(ctx, progressKey(checksum, variable), n, 0).Err(); err != nil {
		return inferr.Wrap(inferr.ModelExecution, err, fmt.Sprintf("variable %q: store %s: export progress", variable, s.url))
	}
	return nil
}
