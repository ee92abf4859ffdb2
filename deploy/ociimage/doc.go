// Package ociimage builds inferbid's three OCI images without a container
// daemon and without pulling a base image: every file comes from this
// machine (the binaries `make image` built, ONNX Runtime from lib/, the C
// libraries from the ldd closure of each cgo sidecar) and is laid out on an
// empty base.
//
//   - inferbid: the pure-Go binaries (bidding-server, inferctl,
//     inference-sidecar-tensorflow), CGO_ENABLED=0;
//   - inferbid-onnx: the same layers plus inference-sidecar-onnx,
//     libonnxruntime.so.1 in /usr/local/lib/onnxruntime (where the sidecar
//     looks: ../lib/onnxruntime beside its binary) and the C and C++
//     libraries both need in /lib/x86_64-linux-gnu and /lib64;
//   - inferbid-pytorch: the same first two layers plus
//     inference-sidecar-pytorch (-tags pytorch) and the ldd closure of
//     Debian's libtorch, about 490 MB (OpenCV, FFmpeg, MPI among it). It is
//     a third image so that the ONNX one stays small.
//
// All run as UID/GID 65532, have no shell, start bidding-server, and write
// only to /tmp (TMPDIR): the supervisor's directory (the sidecar's socket,
// the replay copies of the models) and the model sync's downloads. A pod
// mounts an emptyDir there and keeps the root filesystem read-only.
//
// The output is reproducible: every file has the same time (Options.Epoch,
// SOURCE_DATE_EPOCH in the Makefile), owner root:root and a fixed mode;
// entries are sorted and gzip is deterministic, so the same inputs give the
// same digests. Build writes an OCI image layout holding the images and a
// `docker load` tarball of each. Each layer is gzipped once (BestSpeed, as
// go-containerregistry does), with the files streamed, not held twice.
package ociimage
