// Package storetest starts the S3 (versitygw) and GCS (fake-gcs-server)
// test servers on 127.0.0.1 from installed binaries, or uses the ones
// scripts/test-servers.sh started (its env file's variables), and creates
// buckets on them. Install the binaries with `scripts/test-servers.sh install`.
package storetest
