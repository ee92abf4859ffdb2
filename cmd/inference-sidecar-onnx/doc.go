// Command inference-sidecar-onnx serves ONNX models over a Unix socket:
//
//	inference-sidecar-onnx --socket PATH [--runtime_config JSON]
//
// It is sidecarmain.Run with the onnx runtime (flags, environment and exit
// codes are documented there). It needs cgo and the ONNX Runtime library,
// found as onnx.FindLibrary says: the runtime config's library_path,
// $INFERBID_ONNXRUNTIME_LIB, or lib/onnxruntime/ beside the binary's
// directory (scripts/install-onnxruntime.sh installs it there).
package main
