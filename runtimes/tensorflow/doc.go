// Package tensorflow is inferbid's pure-Go TensorFlow SavedModel runtime,
// registered as "tensorflow". It needs no TensorFlow library and no cgo.
//
// Loading reads saved_model.pb with the protos of github.com/wamuir/graft
// and the variables bundle (variables.index, a LevelDB table read with
// goleveldb, and its data shards) from memory; every checkpoint tensor read
// is checked against its masked CRC32C. Variables are restored the way
// TensorFlow restores them: the MetaGraph's saver restore op is compiled and
// run (RestoreV2 feeding Assign for TF1 VariableV2, AssignVariableOp for TF2
// resource variables), with the checkpoint prefix fed as the filename.
// assets/ is checked against the MetaGraph's assets (asset_file_def, or
// TF1's saved_model_assets collection): a missing asset fails the load.
//
// The serving_default signature is compiled once, at load, into a flat
// schedule of kernels over numbered value slots: function calls
// ((Stateful)PartitionedCall, nested) are inlined, only the nodes the
// signature's outputs need (data and control inputs) are compiled, so
// signatures with string ops or ops without a kernel do not stop a model
// from loading, and subgraphs over constants (including variables serving
// never assigns) are folded. An op the needed subgraph uses and the runtime
// lacks is a load error naming it. Each call takes a per-call state from a
// sync.Pool whose tensors keep their buffers between calls, so a call
// allocates little more than its outputs. Float32 kernels follow
// TensorFlow's CPU kernels: MatMul accumulates in float32 in index order,
// Sigmoid is Eigen's exp(min(x, 16.6355...)) / (1 + exp(...)).
//
// num_intraop_threads (driver.Config.NumIntraopThreads) bounds how many
// goroutines one float32 MatMul (plain or fused with BiasAdd/Relu) splits
// its output rows across, as TensorFlow's intra-op pool does: 0 (the
// default) means GOMAXPROCS, all cores as in TensorFlow; 1 keeps every
// MatMul on the calling goroutine; negative is a load error. Only MatMuls
// of at least 2^20 multiply-adds are split (batch-1 serving never is), each
// goroutine gets row blocks starting at multiples of 4 and at least 2^18
// multiply-adds, and every element is computed by the same kernel code as
// on one goroutine, so results are bit-identical whatever the setting. The
// kernels are SSE (4x4, 4x8) and, where the CPU has AVX, 4x16, always a
// multiply then an add (never a fused multiply-add, which rounds once);
// fewer than 4 remaining rows run them on a zero-padded copy.
//
// Inputs are named by graph tensor name ("serving_default_x:0") with the
// signature key ("x") as alias; outputs are ordered by signature key and
// named by graph tensor name.
//
// The validator rejects graphs whose main graph or function library holds
// ops that write files or summaries (B&A's denylist plus dataset, debugger
// and V1 checkpoint writers, and PrintV2 to a file); SaveV2 and
// MergeV2Checkpoints are allowed only on the saver's own save path, which
// serving never runs.
//
// Models whose serving subgraph assigns variables are stateful: their calls
// run one at a time, and with probability Config.ModelResetProbability a
// call first restores every variable from the checkpoint (by rerunning the
// restore op), so no state outlives a reset.
package tensorflow
