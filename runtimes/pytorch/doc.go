// Package pytorch serves TorchScript models (.pt files saved by
// torch.jit.save, PyTorch 1.13 to 2.x) on Debian's libtorch 1.13 through a
// one-file C++ shim (shim.cpp) and cgo.
//
// # Build
//
// The real backend builds only with the build tag `pytorch` (and cgo); it
// links -ltorch_cpu -lc10 from libtorch-dev (scripts/install-libtorch.sh).
// Without the tag the package stays cgo-free and still registers "pytorch",
// as a backend whose Open fails with an error saying the binary was built
// without the tag: a sidecar built wrongly says so at start instead of
// answering "no runtime pytorch".
//
// # Loading
//
// A model is one file (or, among several files, the only *.pt / *.pth one).
// Before libtorch sees it, a pure-Go preflight checks the zip (sizes that fit
// the file, CRCs) and walks every pickle opcode by opcode, so that a corrupt
// length field is an error, not a multi-GiB allocation inside libtorch's
// reader. Load reads it from memory (no temp file, no copy of the bytes), calls
// eval(), then torch::jit::freeze, which inlines parameters, submodules and
// read-only attributes. The model is rejected, with the reason in the error,
// when it is not TorchScript, has no forward(), cannot be frozen, still holds
// attributes after freezing (forward() mutates them: state that concurrent
// requests would share), or when forward()'s graph has side-effect nodes
// (prim::Print, aten::save, aten::warn, prim::SetAttr, calls left uninlined,
// ... — libtorch's Node::hasSideEffects, searched through if/loop blocks and
// forked subgraphs), as B&A's validator does. Unlike B&A, prim::RaiseException
// (raising only fails the request) and aten::wait (joining a torch.jit.fork)
// are allowed.
//
// # Signature
//
// Inputs are positional: the request's tensors go to forward() in order and
// their names are ignored. When forward()'s schema fixes the argument count
// (no default values), Signature().Inputs has one entry per argument, named
// after the argument, with any dtype and any shape, so a wrong count is an
// INPUT_PARSING error before libtorch runs; otherwise Inputs is empty
// (unknown). Outputs are unknown until forward() runs: forward() must
// return a tensor or a flat tuple of tensors, and the outputs are named by
// position, "0", "1", ... Output dtypes double, float32, int8, int16, int32
// and int64 are returned; anything else (uint8, bool, half, lists, dicts,
// nested tuples, scalars, None) is an OUTPUT_PARSING error naming the type.
//
// # Threads and warm-up
//
// driver.Config's num_intraop_threads sets at::set_num_threads and
// num_interop_threads at::set_num_interop_threads; 0 leaves libtorch's
// default. Inter-op threads can be set once per process: opening the
// backend again with a different value fails. TorchScript's profiling
// executor makes the first calls slow, so models ask for 3 warm-up runs
// (driver.WarmUpRunner).
//
// fused_multiply_add (driver.Config.FusedMultiplyAdd) is ignored: libtorch's
// CPU kernels (MKL, oneDNN, vectorized ATen) already use fused
// multiply-adds where the CPU has them.
//
// # Stateful models
//
// The runtime keeps no per-sequence state (driver.SequenceModel), so a model
// listed as stateful in the runtime config is refused at registration. A
// TorchScript module cannot keep state in attributes (see Loading), and
// state as explicit inputs and outputs has nothing to start a sequence
// from: a saved module's forward() schema declares neither the shape nor
// the dtype of a tensor argument (torch.jit.save keeps annotations like
// "Tensor" only, even for traced modules), and its outputs are unnamed, so
// the runtime can neither make a zero initial state nor pair outputs with
// inputs by name. Serving such models needs a convention the model states
// itself (e.g. an exported initial_state() method), which is not built.
//
// Inputs are copied into libtorch tensors (a model may write into its inputs
// in place) and outputs are copied into Go slices, so no Go memory outlives
// a call on the C side.
package pytorch
