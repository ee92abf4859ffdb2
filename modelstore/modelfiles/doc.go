// Package modelfiles reads models from local files and computes the
// model_metadata checksum: the lowercase hex SHA-256 of the concatenated
// lowercase hex SHA-256s of every file, sorted by slash path — the value of
// B&A's `find DIR -type f -exec sha256sum {} \; | sort -k 2 | awk '{print
// $1}' | tr -d '\n' | sha256sum` pipeline (in the C locale, for names
// without backslashes or newlines, which sha256sum escapes).
//
// It is its own package, apart from modelstore, so that inferctl and the
// bidding server's local-model loading do not pull in the cloud bucket SDKs.
package modelfiles
