// Package sidecar is the inference sidecar and the host's handle on it.
//
// Server side: Server is the gRPC InferenceService (proto/inferencepb) plus
// the standard health service on a Unix socket (directory created 0700 when
// missing, socket 0600, a stale socket replaced but never a live one).
// Predict takes the B&A batch JSON or a typed batch; the entries of one
// batch run concurrently (up to GOMAXPROCS) and each keeps its own typed
// error. The model registry validates a registration (path, clean relative
// file paths, total size), loads it through the runtime, runs its warm-up
// batch (WarmUpRuns times) and only then publishes it. Readers see an
// immutable map through an atomic pointer; a re-registration swaps the new
// model in and closes the old one in the background once its calls in
// flight have finished, and a call that raced the swap retries on the new
// model, so a swap never shows MODEL_NOT_FOUND. Registrations and deletions
// of one path are serialised (the last to arrive wins; nothing leaks).
// RegisterModelStream checks the declared file sizes against the cap before
// it writes anything, then receives the files into a private temporary
// directory (ServerOptions.TempDir), hashing them as they arrive, and has
// the runtime load them from there (runtimes.Runtime.LoadDisk): no model is
// held whole in the sidecar's memory by the transfer. A file the header
// names by local_path (under ServerOptions.LocalFilesDir, opened through an
// os.Root) is hard-linked instead, never read (localfile.go). On the host,
// Supervisor.RegisterDownloadedFiles (modelstore.DigestRegistrar) takes a
// verified download as files with their SHA-256 digests and hard-links
// them into its replay store, and Supervisor.RegisterModelFiles
// (modelstore.DiskRegistrar) copies local files there, hashing them; the
// sidecar gets the stored files by path (its --local_files_dir is the
// store), so bidding-server never holds or re-reads a model either. A
// replay reads each stored file back and checks its SHA-256 first.
//
// Dynamic batching (batcher.go, off by default): when the runtime config's
// dynamic_batching turns it on for a path, the model published there gets
// a batcher that merges concurrent calls into one runtime call along the
// leading dimension and hands each caller its rows; whatever cannot be
// merged, or a merged call that fails, runs unbatched, so every caller
// gets the unbatched answer. Server.BatchingStats reports the counters.
//
// One socket, two transports: the fast lane (package fastlane) carries
// Predict's typed batches as length-prefixed frames on pooled connections,
// beside gRPC on the same socket. The fast lane's accept loop reads the
// first bytes of each new connection and hands those that open with the
// HTTP/2 preface to the gRPC server; both transports run the same predict
// function, and a whole-batch error reaches the client with the same type
// and message on either. Client.Predict uses the fast lane unless
// ClientOptions.Transport is TransportGRPC; everything else is gRPC.
//
// Host side: Client speaks to one socket and reconnects by itself;
// Supervisor starts the sidecar binary, waits for it to be healthy,
// restarts it with capped exponential back-off when it exits, and replays
// every model registered through it (the latest files per path, newest
// registration first, several at once) from verified copies in its private
// directory; until a model is back, its Client's calls for it wait for it,
// ModelPaths lists the whole replay set (Models lists the models not back
// yet as loading) and Supervisor.WaitHealthy says not ready. A
// registration the sidecar died during joins the replay and returns when
// the replay registered it. The Supervisor probes the sidecar every
// LivenessInterval on both transports (a gRPC health check, an empty
// fast-lane batch) and kills one that has not answered within
// LivenessTimeout (the watcher restarts it); from half that bound on, and
// during a crash loop (a sidecar that died before it served four times its
// back-off), the Client's calls fail at once with a GRPC error saying why
// instead of waiting their deadlines, and WaitHealthy gives that reason.
//
// Server.GetModels (Client.Models) describes each model: serving, or
// loading while its registration runs; the checksum of its files (computed
// at registration, as the model config's checksum is), when it was
// published, and its signature as the runtime read it. The address-space limit (RlimitMB)
// reaches the child twice: through RlimitEnv, which our sidecars apply to
// themselves before opening the runtime, and through prlimit(2) on the
// child's pid right after it starts.
//
// Tracing (ServerOptions.Tracer, ClientOptions.Tracer; nil = off, at no
// cost): the client's Predict is a "runInference" span whose context goes
// to the sidecar as the "traceparent" gRPC metadata or, on the fast lane,
// in PredictRequest.traceparent; the server's Predict is a "sidecar.Predict"
// span with a "model.run" child per entry. Spans name model paths, counts,
// rows and error types, never tensors or error descriptions. The server's
// per-model histograms (modelmetrics.go: end to end, queue and compute
// latency, rows per runtime call) are in a registry of its own that
// GetMetrics returns and Client.Gatherer hands to the host's /metrics.
//
// Every error leaves the server through toStatus (status.go) and enters the
// client through fromStatus (or travels in a fast-lane error frame, with
// the same type and message), so both sides see the same six error types.
package sidecar
