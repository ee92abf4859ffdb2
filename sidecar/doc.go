// Package sidecar is the inference sidecar and the host's handle on it.
//
// Server side: Server is the gRPC InferenceService (proto/inferencepb) plus
// the standard health service on a Unix socket (directory created 0700 when
// missing, socket 0600, a stale socket replaced but never a live one).
// Predict takes the B&A batch JSON or a typed batch; the entries of one
// batch run concurrently (up to GOMAXPROCS) and each keeps its own typed
// error.
//
// The model table is package registry (sidecar/registry), which knows no
// transport: the models by path, each one entry {model, settings, batcher,
// sequences} published atomically, registration (validate, load, warm up,
// publish, retire the replaced model once its calls have finished; a call
// that raced the swap retries on the new model, so a swap never shows
// MODEL_NOT_FOUND), dynamic batching, the sequences of stateful models and
// the per-model histograms. This package keeps the protocol: the gRPC
// service and the fast lane's handler are thin adapters over one predict
// function that calls the registry; besides the servers, it holds the
// client and the supervisor. ServerOptions.Settings is the registry's part
// of the runtime config (ParseRuntimeConfig gives the whole config as a
// RuntimeConfig: the runtimes' runtimes.Config, the registry's
// registry.Settings, cpuset).
//
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
// Dynamic batching (off by default): when the runtime config's
// dynamic_batching turns it on for a path, the registry merges concurrent
// calls of the model there into one runtime call (see package registry).
// Server.BatchingStats reports the counters.
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
// rows and error types, never tensors or error descriptions. The
// registry's per-model histograms (end to end, queue and compute latency,
// rows per runtime call) are in a Prometheus registry of their own that
// GetMetrics returns (modelmetrics.go) and Client.Gatherer hands to the
// host's /metrics.
//
// Every error leaves the server through toStatus (status.go) and enters the
// client through fromStatus (or travels in a fast-lane error frame, with
// the same type and message), so both sides see the same six error types.
package sidecar
