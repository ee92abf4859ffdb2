// Package varstore reads and writes rows of a model's variables (embedding
// tables) held in a Redis Cluster, for models whose tables do not fit one
// process (issue 32): the TensorFlow runtime's gathers on a variable a
// model_metadata entry names in external_variables read their rows here
// (runtimes/tensorflow/external.go).
//
// A store is named by a URL, redis-cluster://host:port[,host:port...]
// (seed nodes; the client learns the rest of the cluster from them). Row
// r of variable v of the model whose files have checksum c (as the
// model_metadata config computes it, inferctl checksum) is the Redis
// string "ib:" + c + ":" + v + ":" + r holding the row's bytes (the
// checkpoint's little-endian encoding): two versions of a model never read
// each other's rows, and a new version's rows are written before it is
// listed. Keys carry no hash tag, so rows spread over every shard.
//
// Rows fetches only the unique ids of a batch, with one pipelined round
// trip per shard (go-redis's ClusterClient pipelines group commands by
// node and run them in parallel), under the call's context (its deadline),
// behind a bounded LRU cache of rows (hashicorp/golang-lru; bounded by
// bytes, DefaultCacheBytes unless Options.CacheBytes says otherwise, or by
// rows with Options.CacheRows; Stats reports hits and misses). A row the store does not hold, or a store that cannot answer, is
// a MODEL_EXECUTION error naming the store and the row: never zeros.
//
// github.com/redis/go-redis/v9 is the client: cluster slot routing,
// redirections (MOVED/ASK) and failover are its job, not this package's,
// but for one thing: a replica taking over from a dead master redirects
// nothing, so the store asks go-redis to reload the slot map when a node
// fails a call (and every 10 s instead of every 60 s). Its own log lines
// (a failed dial per connection attempt while a node is down) go to
// slog.Default at DEBUG: the calls' errors already report the failure.
package varstore
