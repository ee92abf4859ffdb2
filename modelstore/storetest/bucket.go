package storetest

import (
	"context"
	"encoding/json"
	"fmt"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// buckets
	_ "gocloud.dev/blob/gcsblob"  // gs:// buckets
	_ "gocloud.dev/blob/s3blob"   // s3:// buckets

	"github.com/inferbid/inferbid/runtimes"
)

// ConfigEntry is one model_metadata entry for WriteConfig. Compute Checksum
// with modelfiles.Checksum (or leave it empty to skip verification).
type ConfigEntry struct {
	ModelPath       string `json:"model_path"`
	Checksum        string `json:"checksum,omitempty"`
	WarmUpJSON      string `json:"warm_up_batch_request_json,omitempty"`
	EvictionGraceMs int    `json:"eviction_grace_period_in_ms,omitempty"`
}

// WriteFiles writes files under prefix in the bucket at bucketURL: a
// directory model when prefix ends in "/" (an exact-file model is one file
// written with prefix "" and its full key as the name).
func WriteFiles(ctx context.Context, bucketURL, prefix string, files runtimes.Files) error {
	b, err := blob.OpenBucket(ctx, bucketURL)
	if err != nil {
		return err
	}
	defer b.Close()
	for rel, data := range files {
		if err := b.WriteAll(ctx, prefix+rel, data, nil); err != nil {
			return fmt.Errorf("write %s%s: %w", prefix, rel, err)
		}
	}
	return nil
}

// DeletePrefix deletes every object under prefix.
func DeletePrefix(ctx context.Context, bucketURL, prefix string) error {
	b, err := blob.OpenBucket(ctx, bucketURL)
	if err != nil {
		return err
	}
	defer b.Close()
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			break // io.EOF ends the listing; other errors surface in Delete below
		}
		if err := b.Delete(ctx, obj.Key); err != nil {
			return err
		}
	}
	return nil
}

// WriteConfig writes the model_metadata config at key.
func WriteConfig(ctx context.Context, bucketURL, key string, entries ...ConfigEntry) error {
	if entries == nil {
		entries = []ConfigEntry{}
	}
	data, err := json.Marshal(map[string][]ConfigEntry{"model_metadata": entries})
	if err != nil {
		return err
	}
	return WriteFiles(ctx, bucketURL, "", runtimes.Files{key: data})
}
