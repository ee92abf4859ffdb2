package onnx

// The ONNX models in testdata/ are written by ONNX's own Python helpers
// (Debian's python3-onnx), so that they are what real exporters produce;
// `go generate ./runtimes/onnx` (or `make models`) rewrites them.
//go:generate sh -c "cd ../.. && scripts/apt-install.sh python3-onnx python3-numpy && /usr/bin/python3 scripts/gen-onnx-models.py"
