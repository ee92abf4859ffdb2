// Package tensorflow is inferbid's pure-Go TensorFlow SavedModel runtime,
// registered as "tensorflow". It needs no TensorFlow library and no cgo.
//
// Loading reads saved_model.pb with the protos of github.com/wamuir/graft
// (or, when there is no saved_model.pb, the text-format saved_model.pbtxt,
// parsed with protobuf's prototext; Any fields resolve against those protos),
// picks the MetaGraph whose tag set is exactly {serve} (as TensorFlow
// Serving loads with tags=["serve"]; a MetaGraph tagged {train} or
// {serve,gpu} is no match even when it is the only one, and the error lists
// the tag sets present), and reads the variables bundle (variables.index,
// a LevelDB table read with goleveldb, and its data shards) from memory; every checkpoint tensor read
// is checked against its masked CRC32C. Variables are restored the way
// TensorFlow restores them: the MetaGraph's saver restore op is compiled and
// run (RestoreV2 feeding Assign for TF1 VariableV2, AssignVariableOp for TF2
// resource variables), with the checkpoint prefix fed as the filename.
// The init op (the __saved_model_init_op signature's output, else TF1's
// saved_model_main_op or legacy_init_op collection) then runs. As
// TensorFlow's loader does, the restore and init ops get every asset's path
// fed to its tensor (asset_file_def, or TF1's saved_model_assets
// collection): "assets/<filename>", relative to the model root since the
// files are in memory; ReadFile, which only these load-time programs may
// run, reads the model's files by that path. A declared asset whose file is
// missing fails the load only if the init op reads it; an asset name that
// is not a clean relative name fails it always.
//
// The serving_default signature is compiled once, at load, into a flat
// schedule of kernels over numbered value slots: function calls
// ((Stateful)PartitionedCall, nested) are inlined, only the nodes the
// signature's outputs need (data and control inputs) are compiled, so
// signatures with string ops or ops without a kernel do not stop a model
// from loading, and subgraphs over constants (including variables serving
// never assigns) are folded. Ops the needed subgraph uses and the runtime
// lacks make one load error listing all of them (sorted, each with its node
// count and first node names): compiling goes on past a missing op. Each call takes a per-call state from a
// sync.Pool whose tensors keep their buffers between calls, so a call
// allocates little more than its outputs. Float32 kernels follow
// TensorFlow's CPU kernels: MatMul accumulates in float32 in index order,
// Sigmoid is Eigen's exp(min(x, 16.6355...)) / (1 + exp(...)).
//
// Shapes follow TensorFlow exactly: binary ops broadcast by NumPy's rule
// (a scalar or [1] operand takes the other's shape only when its rank is not
// larger, so a [1,1] batch stays [1,1]), reductions drop or (keep_dims)
// keep each reduced dimension as 1, and Squeeze drops every size-1
// dimension or only squeeze_dims, refusing a listed dimension not of size 1.
//
// Constants are decoded by TensorFlow's TensorProto rules: tensor_content
// when present, otherwise the dtype's typed field (int_val for INT8/16/32
// and UINT8/16, half_val holding the bits of HALF and BFLOAT16, uint32_val,
// uint64_val, ...), an empty field meaning zeros and a short one repeating
// its last value. HALF, BFLOAT16 and UINT16/32/64 values are held but not
// computed in: Cast widens them (exactly, for HALF and BFLOAT16).
//
// num_intraop_threads (driver.Config.NumIntraopThreads) bounds how many
// goroutines one float32 MatMul (plain or fused with BiasAdd/Relu) or
// float32 Conv2D with a constant filter splits its output rows (output
// pixels, for Conv2D) across, as TensorFlow's intra-op pool does: 0 (the
// default) means GOMAXPROCS, all cores as in TensorFlow; 1 keeps every
// op on the calling goroutine; negative is a load error. Only ops of at
// least 2^20 multiply-adds are split (batch-1 serving never is), each
// goroutine gets row blocks starting at multiples of 4 and at least 2^18
// multiply-adds, and every element is computed the same way as on one
// goroutine, so results are bit-identical whatever the setting.
//
// MatMul kernels: where the CPU has AVX-512F (golang.org/x/sys/cpu, checked
// at start), constant weights are packed once, at load, into panels of 32
// columns and an 8-row x 32-column assembly kernel (16 zmm accumulators;
// 4- and 2-row variants for the last rows, masked stores for the last
// columns, and for an odd last row, as at batch 1, a 1-row kernel over
// four panels so that eight add chains overlap) computes the product;
// otherwise 4-column panels feed SSE 4x4, 4x8 and AVX 4x16 kernels, and
// the Go loop elsewhere. Every kernel
// accumulates each element from +0 in float32 in index order of k, each
// product rounded and then added (VMULPS then VADDPS, never a fused
// multiply-add, which rounds once), so all of them, and TensorFlow's Eigen
// kernels built without FMA, give bit-identical results. The price is two
// vector operations per 16 multiply-adds: at 1024x256 · 256x256 on a
// Sapphire Rapids core the AVX-512 kernel runs at about 115 GFLOP/s (1.15
// ms; AVX 4x16: 70 GFLOP/s), against 210 GFLOP/s (0.63 ms) for the same
// kernel with VFMADD231PS (BenchmarkGemmKernels; benchmark only, never
// used), so the Dense 256->256 benchmark stays about 1.4x ONNX Runtime's
// time, which fuses. Conv2D with a constant filter (HWIO, already a
// [kh*kw*ic, oc] matrix) runs through the same kernels: the fusion pass
// packs the filter at load and fuses a following BiasAdd and Relu; each
// call copies the windows of up to 2^15 floats' worth of output pixels at
// a time into patch rows laid out [kh][kw][ic] (im2col; zeros in the
// padding), the order the direct kernel sums in, so the two agree bit for
// bit (a padded position adds ±0, which changes no sum; only a filter
// holding Inf or NaN can differ, as in TensorFlow's own im2col). A 1x1
// stride-1 unpadded Conv2D multiplies the input directly. A 3x3 SAME
// Conv2D of a 32x32x32 image to 64 channels takes 0.36 ms on one core
// (105 GFLOP/s; the direct loop, still used for float64 and computed
// filters, 10 ms; BenchmarkConv2DGemm).
//
// Inputs are named by graph tensor name ("serving_default_x:0") with the
// signature key ("x") as alias; outputs are ordered by signature key and
// named by graph tensor name.
//
// The validator rejects graphs holding ops that write files or summaries
// (B&A's denylist plus SaveV2, MergeV2Checkpoints, dataset, debugger and V1
// checkpoint writers, and PrintV2 to a file) where they can run: in the
// main-graph nodes that the serving signature's outputs, the saver's restore
// op and the init op reach (data and control inputs), and in the whole body
// of every library function those nodes call, transitively. Nodes nothing
// the loader or serving runs depends on (the saver's own save path, a second
// tf.train.Saver's SaveV2, an uncalled function) are not judged, as
// TensorFlow never runs them.
//
// Models whose serving subgraph assigns variables are stateful: their calls
// run one at a time, and with probability Config.ModelResetProbability a
// call first restores every variable from the checkpoint (by rerunning the
// restore op), so no state outlives a reset.
//
// # Op coverage
//
// One line per op: dtypes; what its tests check it against.
//
//	Conv2D                 float, double; hand-derived VALID/SAME (odd, stride 2)/EXPLICIT/dilated results, float32 order, 24 seeded shapes vs the float64 definition; float32 GEMM path bit-identical to the direct kernel (9 shapes x 6 geometries, 1-3 goroutines)
//	DepthwiseConv2dNative  float, double; hand-derived channel-multiplier result, seeded shapes vs the float64 definition
//	MaxPool                float, double, int8/16/32/64, uint8; Keras MaxPooling2D documentation examples, SAME stride 2 by hand
//	AvgPool                float, double; Keras AveragePooling2D documentation example (SAME averages unpadded elements only)
//	FusedBatchNorm(V2,V3)  float (is_training=false only); hand-derived with exact variance+epsilon, pass-through outputs
//
// The CNN kernels' float32 accumulation order is documented in
// kernels_conv.go; the end-to-end model is TestCNNModel.
//
// # Sequence ops
//
// Ops Keras LSTM/GRU layers need besides control flow. They move elements
// without computing on them, so they take every dtype the runtime holds
// (numeric, BOOL, STRING, the bits of HALF/BFLOAT16/UINT16/32/64); index
// inputs are INT32 or INT64. Tested against values derived by hand from
// TensorFlow's op definitions (kernels_seq_test.go), in FLOAT (Transpose
// also INT64); the other dtypes share the same dtype-agnostic code.
//
//	op                      dtypes  tested against
//	Transpose               all     hand-derived: rank 0-3, identity perm, empty, INT64 perm; bad perm errors
//	Split                   all     hand-derived: axes 0, 1, -1, num_split 1; uneven split error
//	SplitV                  all     hand-derived: one -1, zero-size piece; two -1, bad sum errors
//	ReverseV2               all     hand-derived: axes 1, -2, both, none; repeated axis error
//	TensorListReserve       all     round trip Reserve -> SetItem -> Stack; unset items read as zeros
//	TensorListFromTensor    all     round trip FromTensor -> GetItem/Stack; element_shape mismatch error
//	TensorListSetItem       all     copy on write (the input list unchanged), resize; index/shape errors
//	TensorListGetItem       all     set and unset items; index out of range, dtype mismatch errors
//	TensorListStack         all     num_elements, zeros for unset items; unknown shape error
//	TensorListLength        -       hand-derived
//	TensorListElementShape  -       known dims, -1 dims, unknown rank (scalar -1)
//
// A TensorList is a DT_VARIANT scalar holding an immutable list (dtype,
// partial element shape, items): SetItem makes a new list and copies the
// item, so the kernels stay pure and a list folded at load is shared by
// concurrent calls (TestTensorListConcurrentCalls). Lengths are bounded
// (2^20 items).
//
// # Control flow
//
// Functional control flow runs at call time: each then/else branch and
// each While cond and body function is compiled once, at load, into its
// own program, which the If or While step runs with a pooled state of its
// own (nested If and While included). A condition is TensorFlow's truth
// value: a scalar is true when non-zero (a string when non-empty), any
// other tensor when it has elements. parallel_iterations is ignored
// (iterations run in order). A While stops, failing the call, when the
// call's context ends (its deadline) or when it has not ended after
// 1,000,000 iterations (the error names its cond function), so a loop that
// never ends cannot hang a call. An op without a kernel inside a branch,
// cond or body is listed by the load error under its node in the function
// (If{then_fn}/node), with the other missing ops. Arguments known at load
// are bound as constants in the functions: every constant If argument, and
// a While's resource loop variables (variable handles, as Keras RNN loops
// pass their weights), which the body must pass on unchanged. A model
// whose functions would compile more than 10,000 If/While function
// instances (nested Ifs multiply them) or nest deeper than 64 (recursion)
// fails the load. Variables that an If or While function reads are folded
// like the main graph's unless some program assigns them.
//
//	op               dtypes                    tested against
//	If, StatelessIf  any Tin/Tout; cond bool,  hand-derived results: both branches,
//	                 numeric or string         two outputs of two dtypes, an int32
//	                                           cond (TestIf)
//	While,           any T                     sum of 0..n-1, zero iterations
//	StatelessWhile                             (TestWhileSum); loop-invariant var
//	                                           (TestWhileLoopInvariant); If nested
//	                                           in the body (TestWhileNestedIf); a
//	                                           loop that never ends (TestWhileNeverEnds,
//	                                           TestWhileStopsWithCall); missing op in a
//	                                           branch (TestControlFlowMissingOp);
//	                                           variables read through handles passed to
//	                                           If and While (TestControlFlowReadsVariable);
//	                                           nested and recursive Ifs (TestIfNesting)
//
// TF1 control flow (Switch, Merge, Enter, Exit, NextIteration, LoopCond)
// is not supported.
//
// # Core ops
//
// Every other op the runtime runs. "numeric" is float, double, int8/16/32/64
// and uint8; "any" is every dtype the runtime holds. "untested" means no
// test in this package builds a graph with the op (its code is shared with
// a tested op of the same family, but its own results are not checked);
// "reference models" means only the TestReference* models (exported by
// real TensorFlow, outputs compared with TensorFlow's) exercise it.
// TestOpCoverageTableComplete checks that this document lists every op
// the runtime has a kernel or a graph rule for, exactly once.
//
//	op                       dtypes                    tested against
//	NoOp                     -                         TestAssetsFedToInitOp, reference models (init and restore ops)
//	Const                    any                       TestDecodeTensorProto, TestConstProtoInGraph
//	Placeholder              any                       every model test (TestMLP); unfed: TestLoadErrors
//	PlaceholderWithDefault   any                       TestOptionalInput
//	Identity                 any                       TestIf, reference models
//	IdentityN                any                       untested
//	StopGradient             any                       untested
//	Snapshot                 any                       untested
//	PreventGradient          any                       untested
//	RefIdentity              any                       untested
//	PartitionedCall          any Tin/Tout              untested (same inlining as StatefulPartitionedCall)
//	StatefulPartitionedCall  any Tin/Tout              TestDeepGraph, reference models
//	VarHandleOp              numeric                   TestControlFlowReadsVariable, reference models
//	ReadVariableOp           numeric                   TestControlFlowReadsVariable, reference models
//	AssignVariableOp         numeric                   TestAssetsFedToInitOp, reference models (TF2 restore)
//	AssignAddVariableOp      numeric                   TestReferenceStateful, TestStatefulReset
//	AssignSubVariableOp      numeric                   untested
//	ResourceGather           numeric; int32/64 index   reference models
//	DestroyResourceOp        -                         untested
//	VarIsInitializedOp       -                         untested
//	VariableV2               numeric                   reference models (TF1)
//	Variable                 numeric                   untested (same rule as VariableV2)
//	Assign                   numeric                   reference models (TF1 restore)
//	RestoreV2                numeric                   TestStatefulReset, reference models (checkpoint values)
//	ReadFile                 string                    TestAssetsFedToInitOp, TestReferenceMissingAssetUnread
//	MatMul                   float, double, int32/64   TestKernels, TestMatMulSizes, TestMatMulSplitIdentical, TestFusionExact
//	BatchMatMulV2            float, double, int32/64   TestKernels
//	BatchMatMul              float, double, int32/64   untested (same kernel as BatchMatMulV2)
//	BatchMatMulV3            float, double, int32/64   untested (same kernel as BatchMatMulV2)
//	BiasAdd                  numeric                   TestMLP, TestFusionExact, TestCNNModel
//	Add                      numeric                   TestBroadcastShapes
//	AddV2                    numeric                   TestKernels, TestBroadcastShapes
//	Sub                      numeric                   TestKernels
//	Mul                      numeric                   TestKernels, TestBroadcastShapes
//	RealDiv                  float, double             TestKernels
//	Div                      numeric                   untested
//	DivNoNan                 numeric                   untested
//	Minimum                  numeric                   TestKernels
//	Maximum                  numeric                   TestKernels
//	SquaredDifference        numeric                   untested
//	Pow                      numeric                   untested
//	FloorDiv                 numeric                   untested
//	FloorMod                 numeric                   untested
//	Greater                  numeric                   TestKernels
//	GreaterEqual             numeric                   untested
//	Less                     numeric                   TestWhileSum, TestIf, TestBroadcastShapes
//	LessEqual                numeric                   TestKernels
//	Equal                    numeric, bool             TestKernels
//	NotEqual                 numeric, bool             untested
//	LogicalAnd               bool                      untested
//	LogicalOr                bool                      untested
//	LogicalNot               bool                      untested
//	Select                   numeric                   TestKernels
//	SelectV2                 numeric                   TestKernels
//	Neg                      numeric                   TestKernels
//	Abs                      numeric                   untested
//	Relu                     numeric                   TestKernels, TestMLP, TestFusionExact
//	Relu6                    numeric                   TestKernels
//	Square                   numeric                   TestKernels
//	Sign                     numeric                   untested
//	Sigmoid                  float, double             TestSigmoidEigen (Eigen's formula), TestKernels
//	Tanh                     float, double             TestKernels
//	Exp                      float, double             TestKernels
//	Log                      float, double             TestKernels
//	Log1p                    float, double             untested
//	Sqrt                     float, double             TestKernels
//	Rsqrt                    float, double             TestKernels
//	Reciprocal               float, double             untested
//	Floor                    float, double             untested
//	Ceil                     float, double             untested
//	Round                    float, double             untested
//	Softplus                 float, double             untested
//	Elu                      float, double             untested
//	Selu                     float, double             untested
//	LeakyRelu                float, double             untested
//	Erf                      float, double             untested
//	Softmax                  float, double             TestKernels
//	LogSoftmax               float, double             untested
//	Sum                      numeric                   TestKernels, TestReduceAndSqueezeShapes
//	Mean                     numeric                   TestKernels, TestReduceAndSqueezeShapes, TestMeanOfNothing
//	Max                      numeric                   TestKernels, TestReduceAndSqueezeShapes
//	Min                      numeric                   TestKernels
//	Prod                     numeric                   untested
//	Cast                     numeric, bool; from HALF, BFLOAT16, UINT16/32/64  TestKernels, TestDecodeTensorProto
//	Reshape                  any                       TestKernels
//	Squeeze                  any                       TestKernels, TestReduceAndSqueezeShapes
//	ExpandDims               any                       TestKernels
//	Shape                    any; out int32/64         TestKernels
//	Size                     any; out int32/64         untested
//	Rank                     any                       untested
//	ConcatV2                 numeric                   TestKernels
//	Pack                     numeric                   TestKernels
//	Unpack                   numeric                   TestKernels
//	GatherV2                 numeric; int32/64 idx     TestKernels
//	Slice                    numeric                   TestKernels
//	StridedSlice             numeric                   TestKernels
//	OneHot                   numeric                   TestKernels
//	Fill                     numeric                   untested
//	ZerosLike                numeric                   untested
//	OnesLike                 numeric                   untested
package tensorflow
