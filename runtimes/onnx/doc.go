// Package onnx is the ONNX runtime of inferbid: it serves .onnx models
// through ONNX Runtime (github.com/yalue/onnxruntime_go, which dlopens the
// shared library; building needs cgo and gcc, linking needs nothing).
//
// Importing the package registers the backend as "onnx" (runtimes.Open).
// The library is found at the first Load, in this order:
//
//  1. driver.Config.LibraryPath (runtime config "library_path");
//  2. the environment variable INFERBID_ONNXRUNTIME_LIB;
//  3. <dir of the executable>/../lib/onnxruntime/libonnxruntime.so.1 (bin/ next to lib/ after `make build`);
//  4. <module root above the working directory>/lib/onnxruntime/libonnxruntime.so.1 (tests, `go run`).
//
// scripts/install-onnxruntime.sh installs the library of the npm package
// onnxruntime-node into lib/onnxruntime/. A missing or unloadable library is
// a MODEL_EXECUTION error at Load naming the paths tried, never a crash. ONNX
// Runtime allows one environment per process: it is created once, from the
// first library that loads.
//
// A model is one .onnx file (with the files of its external data, if any), loaded from bytes (Load) or from disk
// (LoadDisk, driver.DiskLoader: what the sidecar does with a streamed
// registration). From disk, initializers of 1 MiB or more are first moved
// into a weights file as ONNX external data (external.go), which ONNX
// Runtime maps rather than parsing and copying: a load adds no anonymous
// memory for them. A model may keep its weights as ONNX external data in
// its other files (past protobuf's 2 GiB, it must): every location a
// tensor names (anywhere: initializers, attributes, subgraphs, functions)
// must be another file of the same registration, from the .onnx file's
// directory, or the model is refused before ONNX Runtime opens it (any
// other file would be the server's, read into the weights); those files
// are staged beside the model for ONNX Runtime. Its inputs and outputs are
// read from the protobuf (graph inputs that are initializers do not count);
// inputs must be tensors of a dtype tensor.DType carries (the contract's six,
// BOOL, UINT8-64, FLOAT16 and STRING as BYTES), symbolic dimensions are -1,
// and sessions are dynamic so every batch size works. Outputs of other
// element types (BFLOAT16, COMPLEX, ...), FLOAT16 outputs that cannot be
// preallocated, and non-tensor outputs are OUTPUT_PARSING errors naming the
// output. Rank-0 (scalar) inputs and outputs
// are not supported by onnxruntime_go.
//
// num_intraop_threads of the runtime config sizes each session's intra-op
// thread pool (0 lets ONNX Runtime choose: one thread per physical core).
// num_interop_threads is passed on, but ONNX Runtime uses it only in its
// parallel execution mode, which stays off: under many concurrent requests
// it was 40x slower. For small models under concurrent load,
// num_intraop_threads 1 is usually fastest.
//
// fused_multiply_add (driver.Config.FusedMultiplyAdd) is ignored: ONNX
// Runtime's MLAS kernels already use fused multiply-adds where the CPU has
// them, and it has no switch to turn them off.
//
// Predict is safe for concurrent use (ONNX Runtime's Run is thread-safe) and
// copies as little as it can: the callers' input slices are handed to ONNX
// Runtime as they are; an output computed by a node whose shape follows from
// the inputs' (fixed dimensions, or a dim_param such as "batch" shared with
// an input) is allocated in Go before the run and ONNX Runtime writes into
// it; other outputs are allocated by ONNX Runtime and copied once. ONNX
// Runtime checks the shape of a preallocated output, so a model whose
// dim_params lie costs one failed run, after which the model stops
// preallocating; it never yields a wrong answer. For a model whose fastest
// run takes 1 ms or more, a request whose context ends stops its run through
// ORT's terminate flag (a GRPC error); faster models are not worth the
// microsecond that arming the flag costs.
//
// Stateful models (driver.SequenceModel, the runtime config's
// stateful_models): ONNX has no variables, so a model's state is a graph
// input "<name>_in" fed back from the graph output "<name>_out" of the same
// dtype and fixed shape (the pair OpenVINO's MakeStateful turns into a
// model state; e.g. an RNN's h_in/h_out). Each sequence starts from zeros
// of every state and keeps its own copy; its calls feed the state inputs
// and leave the state outputs out of the answer (a client feeding a state
// input in a sequence gets INPUT_PARSING). Outside a sequence a state input
// is optional: absent, it is zeros; the state outputs are returned. A pair
// whose input has a dynamic dimension (or no shape, or is a scalar or
// STRING) is no state: the input stays required and starting a sequence
// names it. Sequences run in parallel; a model with state pairs is never
// batched. The build without cgo
// registers a backend whose Load explains how to rebuild.
package onnx

// Name is the name the backend registers under.
const Name = "onnx"
