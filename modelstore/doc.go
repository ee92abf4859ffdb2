// Package modelstore keeps the sidecar's models in step with a bucket, as
// the B&A inference model fetcher does, with what it gets wrong fixed.
//
// A bucket (a gocloud.dev/blob URL: file:///dir, s3://bucket?endpoint=...,
// gs://bucket) holds a JSON config object and the model files:
//
//	{"model_metadata":[{"model_path":"pcvr_v1/","checksum":"…",
//	  "warm_up_batch_request_json":"…","eviction_grace_period_in_ms":60000}]}
//
// ParseConfig is strict (unknown fields, duplicate paths, malformed
// checksums, negative grace periods are errors naming the entry and field)
// and tolerant where the seed's protobuf JSON parser is (lowerCamelCase
// names, trailing commas, the grace period as a string). A config that is
// not valid JSON, or wrong at the top level, is rejected whole; a malformed
// entry is rejected alone (Config.Invalid): the model it names stays as it
// was, the valid entries beside it apply, and while a rejected entry names
// no model no model is retired.
//
// A model_path ending in "/" selects every object under that prefix and
// registers them by their paths relative to it ("saved_model.pb",
// "variables/variables.index"); any other model_path selects exactly one
// object, registered by its base name.
//
// Plan is the sync rules as a pure function of the loaded models, the
// config and the time. A Watcher polls the config (skipping the read when
// S3's ETag or GCS's generation is unchanged, and the parse when the
// content hash is), executes the plan: downloads new or changed models in
// parallel into size-capped temporary files, hashing each as it is
// written (the one pass over the bytes), verifies their checksums,
// registers them one at a time through a Registrar (the sidecar
// Supervisor: a DigestRegistrar, which gets the files and their digests
// and hard-links them) with their warm-up requests, and deletes delisted models when
// their grace ends. A changed checksum is an in-place update: the old
// content serves until its grace ends, then the new content is registered
// at the same path and the sidecar swaps it in atomically (no
// MODEL_NOT_FOUND window). A bad or missing config, a failed download, a
// checksum mismatch or a failed load or warm-up changes nothing that is
// serving; it is logged with the reason and counted. A model that failed is
// downloaded again only when its config entry or its bucket objects (as
// listed: size, modification time, MD5, S3 ETag, GCS generation) change, or when its retry
// back-off ends (the poll period, doubling up to an hour). A failure is
// logged once at ERROR per config entry content and error, and its
// recovery once at INFO; an entry's repeats go to DEBUG, with one summary
// WARN for all failing entries at doubling intervals (the config's own
// failure repeats as a "still failing" WARN with a count). A config of more
// than WatcherOptions.MaxEntries entries (default DefaultMaxEntries) is
// rejected whole; the per-entry books are rebuilt when a large config
// shrinks, and the memory handed back to the system.
//
// Hold takes a model path out of the sync (the v2 model repository
// extension's unload): a served model is deleted at once, without its grace
// period, and its config entry is ignored until Release; Listed gives the
// config's paths, held ones included.
//
// A file:// bucket never serves a file outside its directory: each read is
// checked, after fileblob opened the file, against the key resolved through
// os.Root, so a symlink leaving the root (or an absolute one) fails that
// model, or the config, with reason outside_bucket_root.
//
// Metrics (on WatcherOptions.Metrics): inferbid_modelstore_fetches_total
// {kind=config|model, result}, inferbid_modelstore_registrations_total
// {kind=load|update, outcome}, inferbid_modelstore_deletions_total{outcome},
// inferbid_modelstore_models_available, inferbid_modelstore_registration_seconds
// {model_path} (load and warm-up in the sidecar),
// inferbid_modelstore_registration_duration_seconds,
// inferbid_modelstore_download_bytes_total,
// inferbid_modelstore_retries_deferred_total,
// inferbid_modelstore_models_failing,
// inferbid_modelstore_config_invalid_entries,
// inferbid_modelstore_last_good_sync_timestamp_seconds and
// inferbid_modelstore_seconds_since_last_good_sync.
//
// The checksum of a model (package modelfiles, which inferctl uses without
// the bucket SDKs) equals the seed's shell pipeline
//
//	find DIR -type f -exec sha256sum {} \; | sort -k 2 | awk '{print $1}' | tr -d '\n' | sha256sum | awk '{print $1}'
//
// run with LC_ALL=C (other locales collate, and may order names with
// punctuation differently): the SHA-256 of the concatenated lowercase hex
// SHA-256 of each file, ordered by path. File names holding a backslash or
// a newline are the exception: sha256sum escapes those lines, so the
// pipeline hashes a different string.
//
// Bucket URLs that look like a local directory written the wrong way (a
// bare path, file://dir/x whose dir becomes the URL's host) are refused
// with the file:///absolute/path meant (CheckBucketURL). A serving model's
// bucket content changed without a config change is found by a periodic
// listing and warned about once per content (drift.go,
// WatcherOptions.DriftCheckPeriod).
package modelstore
