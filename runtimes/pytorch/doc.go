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
// reader. Load reads it from memory (no temp file, no copy of the bytes);
// LoadDisk (driver.DiskLoader: the sidecar's registrations) preflights the
// file through a read-only mapping, unmaps it, and has libtorch read it with
// pread (pt_load_fd), so that the file is never in memory beside the loaded
// tensors (a registration's peak is about the model, not twice it). Either
// calls eval(), then torch::jit::freeze, which inlines parameters, submodules and
// read-only attributes. The model is rejected, with the reason in the error,
// when it is not TorchScript, has no forward(), cannot be frozen, still holds
// attributes after freezing (forward() mutates them: state that concurrent
// requests would share), writes in place into a tensor the frozen module
// holds (freezing folds a list, dict or tuple attribute into a constant even
// when forward() or initial_state() adds to its tensors in place, which
// would change that constant for every later request; found with
// libtorch's alias analysis: a node whose schema writes an argument (a!)
// that may hold what a constant holds; the method's own arguments, copies
// per call, are exempt), or when forward()'s graph has side-effect nodes
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
// A module cannot keep state in attributes (see Loading); a stateful model
// (driver.SequenceModel, the runtime config's stateful_models) carries its
// state as explicit inputs and outputs, by this convention: forward()'s
// arguments named "<name>_in" are the state; the module exports (with
// @torch.jit.export) initial_state(), taking no arguments and returning the
// initial value of each state argument, in argument order (a tensor or a
// tuple); forward() returns a tuple whose last elements are the new states,
// in the same order. A saved module declares neither shapes nor dtypes of
// its arguments and names no outputs, so the runtime can neither make a
// zero state nor pair outputs by name: initial_state() and positions say
// it. freeze keeps initial_state() (it is checked for side effects like
// forward()). In a sequence, the request gives the other arguments in
// order; the state is fed from the sequence's copy and the state outputs
// are left out of the answer. Outside a sequence the state arguments may
// be left out too (initial_state() is used) or given; all outputs are
// returned. A model with state arguments is never batched.
//
// Inputs are copied into libtorch tensors (a model may write into its inputs
// in place) and outputs are copied into Go slices, so no Go memory outlives
// a call on the C side.
package pytorch
