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
// saved_model_main_op or legacy_init_op collection) then runs, except its
// random initializers of variables the checkpoint restored: an Assign or
// AssignVariableOp of a restored variable whose value a random op draws
// (tf.compat.v1's main_op runs global_variables_initializer) is skipped and
// its value never compiled, so the variable keeps the trained value and a
// model whose initializers use a random op loads (TensorFlow would replace
// the trained value with noise, or, with main_op_with_restore, restore it
// again); every other assignment runs. The random ops (RandomUniform,
// RandomStandardNormal, TruncatedNormal and their stateless forms) have
// kernels too, for the initializers of variables not in the checkpoint:
// float and double values of the right distribution from math/rand/v2's PCG,
// not TensorFlow's Philox streams (no model's output may depend on them),
// never folded into constants. As
// TensorFlow's loader does, the restore and init ops get every asset's path
// fed to its tensor (asset_file_def, or TF1's saved_model_assets
// collection): "assets/<filename>", relative to the model root since the
// files are in memory; ReadFile, which only these load-time programs may
// run, reads the model's files by that path. A declared asset whose file is
// missing fails the load only if the init op reads it; an asset name that
// is not a clean relative name fails it always.
//
// External variables (external.go): a checkpoint variable the load's
// driver.LoadOptions name in ExternalVariables (a model_metadata entry's
// external_variables) is not restored; its gathers (GatherV2 on axis 0,
// ResourceGather) read the batch's rows from a Redis Cluster through
// package varstore, keyed by LoadOptions.Checksum, one store per URL shared
// by the backend's models; any other use of it fails the load naming the
// op and node.
//
// Memory-mapped variables (mmap.go): with driver.Config.MapVariablesDir
// set, a checkpoint data shard of at least MapVariablesMinBytes is mapped
// read-only with golang.org/x/sys/unix (no cgo): from a streamed
// registration (LoadDisk, driver.DiskLoader), the received file in place,
// kept open and mapped after the sidecar unlinks it (unless it has other
// hard links or is on tmpfs: then copied, mapInPlace); from bytes (Load), a
// copy written to a file in MapVariablesDir (in 64 KiB writes) and
// unlinked at once. Tensors of a fixed-size dtype at an aligned offset are
// slices of the mapping, the others copied. Mapped tensors may exceed the
// heap's element cap. Nothing writes into them (restored tensors never
// were written; TestMappedVariablesWholeSuite runs the package's tests
// with every shard mapped); Close unmaps. The model reports mapped and
// copied bytes (driver.WeightMemoryReporter), and the backend says which
// files it maps (driver.FileMapper) so the sidecar can cap them apart.
// Gathers along axis 0 over a mapped table read rows with pread from its
// file instead of faulting pages in (RSS stays at the heap; a read fault
// maps the page cache around the row, so random lookups map most of the
// table), unless MapVariablesGatherFromMapping.
//
// CRC32C of mapped tensors: a copy's tensors are checked over the bytes
// it was written from (in memory anyway). A received file mapped in place
// is not checked unless MapVariablesVerifyCRC, since checking reads every
// page of it (most of the load's time: BenchmarkMappedEmbeddingSidecar's
// mapped-crc) and buys little there: the host verified the downloaded
// files' SHA-256 against the config's checksum (when the entry lists
// one), copied them into its
// replay store hashing them, and streams that copy checking the SHA-256
// again as it sends, over a Unix socket, into files the sidecar hashes as
// they arrive (the checksum GetModels reports); and a check at load would
// not cover pages read back from disk later anyway. What it still catches
// is a checkpoint corrupt before its checksum was taken (a broken export),
// or in the bucket when the config lists no checksum: inferctl
// export-variables and a heap load (the small shards, or
// --map_variables_min_bytes -1) check it.
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
// Sigmoid is Eigen's exp(min(x, 16.6355...)) / (1 + exp(...)); only the
// fused_multiply_add opt-in (below) departs from them.
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
// kernel with VFMADD231PS (BenchmarkGemmKernels), so by default the Dense
// 256->256 benchmark stays about 1.2-1.5x ONNX Runtime's time, which fuses.
//
// Fused multiply-add is an operator's opt-in: with fused_multiply_add
// (driver.Config.FusedMultiplyAdd; off by default) every float32 MatMul
// (constant or fed weights, transposed operands copied upright, every row
// and column kernel including batch 1 and the masked tails, split across
// goroutines or not, with its fused BiasAdd and Relu, and MatMuls inside
// If/While functions) and every Conv2D-as-GEMM computes each element as
// c = fma(a, b, c) from +0 in index order of k, one rounding per step,
// then adds the bias and clamps as before. All kernels do the same steps,
// so a row's result still does not depend on its batch or the thread
// count. The AVX-512 kernels use VFMADD231PS; without AVX-512F a Go loop
// computes the same bits with fma32, a float32 fused multiply-add built
// from exact float64 steps and round-to-odd (the obvious
// float32(math.FMA(float64...)) rounds twice and can differ; see fma32),
// but that scalar loop runs at about 0.4 GFLOP/s, some 100x slower than
// the default SSE/AVX kernels (BenchmarkGemmKernels/go): turn the opt-in
// on only on AVX-512 CPUs. What it trades there: large MatMul and Conv2D
// run about 1.5x faster (batch-1024 Dense on one thread: 0.89x ONNX
// Runtime's time instead of 1.34x, medians of 9 alternating runs;
// BenchmarkDense reports tf-fma/ort), and results differ from
// TensorFlow's default (non-FMA) CPU kernels in the last bits (the PCVR
// reference model: 6 float32 ulps, 4.8e-7 relative); TensorFlow's own
// oneDNN builds fuse too, and differ from its Eigen builds the same way.
// BatchMatMul, float64 MatMul and Conv2D with a computed filter (the
// direct loop) keep multiply then add.
//
// Conv2D with a constant filter (HWIO, already a
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
// # Model state
//
// No model state crosses requests unless the operator opts in. A model
// whose serving subgraph assigns variables (AssignVariableOp,
// AssignAdd/SubVariableOp, TF1 Assign; also inside functions, If/While and
// TF1 control flow) is stateful (Stateful: its calls are never merged by
// dynamic batching, where rows of different callers would meet in the
// variables), and each of its calls outside a sequence runs on a variable
// table of its own: a copy of the values the variables serving uses at run
// time had after load (restore op, then init op). Variable steps resolve
// their variable to the call's table (variables.go); values are replaced,
// never written in place, so copying the pointers is a copy on write. The
// call answers as a freshly loaded model would, what it assigns dies with
// it, and such calls take no lock. Variables serving only reads were folded
// into constants at load and have no entry (keepInitialState numbers the
// others first); a model that assigns no variable has no table at all.
//
// Refusing such models at registration (naming the op and node, pointing
// at sequences) was the alternative; measurement decided against it.
// BenchmarkModelState, 2 cores shared with other work, medians of 8 runs
// of alternating blocks: the table costs a call 76 ns and one allocation
// (80 B: the context carrying it, callCtx) over a call on the shared state
// (~1 µs for a 1-float running sum; 0.3% of a fast-lane request's 24 µs);
// 115 ns in a model with 255 more variables (the table still has one
// entry); within noise with a 4096-float state (+1%: the call's own update
// dominates); and a model that assigns nothing pays nothing: its Predict
// allocates exactly what running its program does
// (TestStatelessModelHasNoTable) and times -0.6% (noise) against it. At
// that price a refusal would only turn away models that work, B&A's own
// stateful test model among them. Calls of one such model no longer wait
// for each other (the shared state's lock; TestPerCallStateCallsOverlap).
//
// Served with sequences (driver.SequenceModel), each sequence has a table
// of its own that lives as long as the sequence (sequence.go), started by
// running the restore op on a copy of the load-time values: calls of
// different sequences run in parallel, with each other and with the calls
// outside sequences.
//
// One state shared by all calls, as B&A serves every model, is an explicit
// opt-out: ShareState (driver.SharedStateModel), which the sidecar calls
// for the model paths its runtime config lists in shared_state_models. Such
// a model's calls outside sequences run one at a time on the variables'
// shared values, and with probability Config.ModelResetProbability a call
// first gives every variable back its load-time value. That probability
// applies nowhere else (there is no other state to reset); its default is
// B&A's 0, since under the opt-out any chance below 1 only shortens how
// long state lives: it never stops it crossing requests.
//
// # Op coverage
//
// One line per op: dtypes; what its tests check it against.
//
//	Conv2D                 float, double; hand-derived VALID/SAME (odd, stride 2)/EXPLICIT/dilated results, float32 order, 24 seeded shapes vs the float64 definition; float32 GEMM path bit-identical to the direct kernel (9 shapes x 6 geometries, 1-3 goroutines); fused_multiply_add batch-invariant (TestFusedMultiplyAddConv2D); TensorFlow.js 4.22.0 (TestOracleConv, TestOracleKerasCNN)
//	DepthwiseConv2dNative  float, double; hand-derived channel-multiplier result, seeded shapes vs the float64 definition; TensorFlow.js 4.22.0 (TestOracleConv)
//	MaxPool                float, double, int8/16/32/64, uint8; Keras MaxPooling2D documentation examples, SAME stride 2 by hand; TensorFlow.js 4.22.0 (TestOracleConv, TestOracleKerasCNN)
//	AvgPool                float, double; Keras AveragePooling2D documentation example (SAME averages unpadded elements only); TensorFlow.js 4.22.0 (TestOracleConv)
//	FusedBatchNorm(V2,V3)  float (is_training=false only); hand-derived with exact variance+epsilon, pass-through outputs; TensorFlow.js 4.22.0 (V3: TestOracleConv, TestOracleKerasCNN)
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
//	Transpose               all     hand-derived: rank 0-3, identity perm, empty, INT64 perm; bad perm errors; TensorFlow.js 4.22.0 (TestOracleIndexing, TestOracleBatchMatMul, Keras LSTM/GRU)
//	Split                   all     hand-derived: axes 0, 1, -1, num_split 1; uneven split error; TensorFlow.js 4.22.0 (TestOracleIndexing, Keras LSTM/GRU)
//	SplitV                  all     hand-derived: one -1, zero-size piece; two -1, bad sum errors; TensorFlow.js 4.22.0 (TestOracleIndexing)
//	ReverseV2               all     hand-derived: axes 1, -2, both, none; repeated axis error; TensorFlow.js 4.22.0 (TestOracleIndexing)
//	TensorListReserve       all     round trip Reserve -> SetItem -> Stack; unset items read as zeros; TensorFlow.js 4.22.0 (TestOracleTensorList, Keras LSTM/GRU)
//	TensorListFromTensor    all     round trip FromTensor -> GetItem/Stack; element_shape mismatch error; TensorFlow.js 4.22.0 (TestOracleTensorList, Keras LSTM/GRU)
//	TensorListSetItem       all     copy on write (the input list unchanged), resize; index/shape errors; TensorFlow.js 4.22.0 (TestOracleTensorList, Keras LSTM/GRU)
//	TensorListGetItem       all     set and unset items; index out of range, dtype mismatch errors; TensorFlow.js 4.22.0 (TestOracleTensorList, Keras LSTM/GRU)
//	TensorListStack         all     num_elements, zeros for unset items; unknown shape error; TensorFlow.js 4.22.0 (TestOracleTensorList, Keras LSTM/GRU)
//	TensorListLength        -       hand-derived; TensorFlow.js 4.22.0 (TestOracleTensorList)
//	TensorListElementShape  -       known dims, -1 dims, unknown rank (scalar -1)
//
// A TensorList is a DT_VARIANT scalar holding an immutable list (dtype,
// partial element shape, items): SetItem makes a new list and copies the
// item, so the kernels stay pure and a list folded at load is shared by
// concurrent calls (TestTensorListConcurrentCalls). Lengths are bounded
// (2^20 items).
//
// # TF1 TensorArrays
//
// The TensorArray ops of TF1 graphs (tf.compat.v1.nn.dynamic_rnn, TF1
// while loops). In TensorFlow the handle names a mutable array and a float
// "flow" scalar threads through the writes only to order them; here the
// flow carries the array (an immutable list, copied on write like a
// TensorList) and the handle what TensorArrayV3 declared, so the kernels
// are pure: each call's arrays live in its own slots, none survives a call
// or is shared by concurrent calls (TestTensorArrayConcurrentCalls). As in
// TensorFlow, an element is written once, an unwritten element reads as
// zeros only when the element shape is fully defined, and writes past the
// size fail unless dynamic_size; sizes are bounded (2^20 elements).
// clear_after_read is not enforced (an element may be read twice, which
// TensorFlow refuses). Element dtypes: every dtype the runtime holds.
//
//	op                    tested against
//	TensorArrayV3         TestTensorArrayOps (hand-derived: scatter, read, write, gather, size, dynamic_size, unwritten zeros);
//	                      errors: TestTensorArrayErrors; TensorFlow.js 4.22.0 (TestOracleTensorArray); a rebuilt TF 1.15
//	                      dynamic_rnn/BasicLSTMCell export vs its float32 definition, tfjs-converter and tfjs-layers' LSTM
//	                      on batches of 1 and 3 (TestOracleTF1DynamicRNN)
//	TensorArrayWriteV3    as TensorArrayV3
//	TensorArrayScatterV3  as TensorArrayV3
//	TensorArrayReadV3     as TensorArrayV3
//	TensorArrayGatherV3   as TensorArrayV3
//	TensorArraySizeV3     as TensorArrayV3
//	TensorArraySplitV3    TestTensorArrayOps, TestTensorArrayErrors (lengths, size); TensorFlow.js 4.22.0 (TestOracleTensorArray)
//	TensorArrayConcatV3   as TensorArraySplitV3; lengths output hand-derived only (tfjs has none); mismatched elements error
//	TensorArrayCloseV3    TestOracleTensorArray (a no-op: the array dies with the call)
//	Range                 int32, int64, float, double; TestTensorArrayOps (ascending, descending, empty, float32
//	                      accumulation); errors: TestTensorArrayErrors; TensorFlow.js 4.22.0 (TestOracleTensorArray,
//	                      TestOracleTF1DynamicRNN)
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
//	                                           nested and recursive Ifs (TestIfNesting);
//	                                           vs TensorFlow.js 4.22.0: If and StatelessIf
//	                                           (bool and int32 cond) on both branches,
//	                                           While and StatelessWhile of 0-10 iterations
//	                                           (TestOracleControlFlow); Keras LSTM and GRU
//	                                           loops (TestOracleKerasLSTM, TestOracleKerasGRU)
//
// TF1 control flow (tf.compat.v1 graphs with control flow v2 off) has
// TensorFlow's dead-tensor semantics. Switch(data, pred) passes data to
// output 1 when pred is true, else to output 0, and the other output is
// dead; a node with a dead data or control input does not run and its
// outputs are dead; Merge forwards its first live input and its index
// (value_index), and is dead only when every input is; ControlTrigger is
// never dead. Only steps downstream of a Switch check for dead inputs, so
// graphs without one run as before. A Switch whose pred is known at load
// (Keras's learning phase left at its default) is resolved then: the
// untaken branch compiles to nothing and the taken one, Merge included,
// runs without dead checks. A dead tensor reaching a signature
// output fails the call naming the output (TensorFlow returns nothing for
// it). While loops are turned at load into loop steps, as TensorFlow's
// functionalize_control_flow pass does: each frame (the nodes between the
// Enters of one frame_name and its Exits) becomes a step running a cond
// program (the LoopCond's input) and a body program (the NextIteration
// inputs) over the loop variables (each a Merge of an Enter and a
// NextIteration, read through its Switch:1) and the invariants (Enters with
// is_constant); each Exit is its variable's final value. Loops nest (an
// inner frame is compiled in the body holding it), conds run inside
// bodies, and a loop in an untaken branch does not run. Loops are bounded
// like While (context, 1,000,000 iterations; the error names the frame and
// its LoopCond); parallel_iterations is ignored. A loop op reached other
// than through its Exit (a Merge, Enter or NextIteration used outside its
// frame, mismatched frame names), a broken loop (an Exit not on a loop
// Switch, a Merge without Enter or NextIteration, an Enter feeding no
// Merge, a body reaching its own Exit) or a pred that is not bool fails the
// load naming the node. TF1 control flow inside library functions is not
// supported (TensorFlow 2 functions use If/While). tfjs-converter's Merge
// has no value_index output, so that output keeps only its hand-derived
// checks.
//
//	op                  dtypes          tested against
//	Switch              any; pred bool  tf.compat.v1.cond rebuilt node for node: both branches on a
//	                                    [1,1] batch (TestTF1Cond), an output before the Merge
//	                                    (TestTF1CondDeadOutput), in a loop body (TestTF1CondInWhile),
//	                                    concurrent calls alternating branches (TestTF1ConcurrentCalls);
//	                                    TensorFlow.js 4.22.0 (TestOracleTF1ControlFlow: cond, cond in while)
//	Merge               any             value_index of both branches (TestTF1Cond); a loop in an
//	                                    untaken branch (TestTF1WhileInCond); a Keras learning-phase
//	                                    cond resolved at load (TestTF1CondKnownAtLoad)
//	RefSwitch           any; pred bool  a restored TF1 VariableV2's ref (TestTF1RefVariable)
//	RefMerge            any             RefSwitch's outputs joined, value_index (TestTF1RefVariable)
//	Enter               any             tf.compat.v1.while_loop rebuilt node for node, hand-derived:
//	                                    2^n counting (TestTF1WhileCounting), TensorFlow's own printed
//	                                    GraphDef of a loop to 10 (TestTF1WhileTensorFlowGraph),
//	                                    float32 recurrence over a batch's columns with invariants
//	                                    (TestTF1WhileBatch), nested loops (TestTF1WhileNested);
//	                                    TensorFlow.js 4.22.0 on tfjs-converter's executor: these loops,
//	                                    a loop in a cond and a cond in a loop (TestOracleTF1ControlFlow),
//	                                    dynamic_rnn's loop (TestOracleTF1DynamicRNN)
//	RefEnter            any             a VariableV2 ref as loop invariant (TestTF1RefVariable)
//	Exit                any             as Enter; the iteration bound and cancellation
//	                                    (TestTF1WhileNeverEnds)
//	NextIteration       any             as Enter; malformed loops (TestTF1MalformedGraphs)
//	LoopCond            bool            as Enter
//	RefExit             any             a VariableV2 ref as loop variable, hand-derived (TestTF1RefLoopVariable)
//	RefNextIteration    any             as RefExit
//	ControlTrigger      -               never dead: waiting on an untaken cond pivot through it (TestControlTrigger)
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
// "TensorFlow.js 4.22.0" (in every table) means the op's outputs are
// compared with those of TensorFlow.js, the TensorFlow team's JavaScript
// implementation, on its CPU backend (make deps-tfjs installs it in
// .cache/tfjs; oracle_test.go runs testdata/tfjs_oracle.js with node). A
// test builds a graph with tfsave, runs it here and, written as the
// tfjs-converter writes a graph model (the GraphDef as JSON, constants as
// weights), on tfjs-converter's graph executor; whole Keras layers are
// also run on tfjs-layers with the same weights. Floats agree within 1e-6
// relative (a few ulps) unless the test says why not (sums that cancel in
// convolutions, Sigmoid's last bits carried through recurrent steps);
// ints and shapes exactly. Where tfjs itself departs from TensorFlow
// (int32 Div floors, float FloorDiv answers int32, int32 Mean is float,
// Cast of infinity), the tests avoid those inputs. Without node or
// .cache/tfjs the tests skip, and fail under INFERBID_REQUIRE_REFERENCE=1.
// Ops tfjs does not have (PreventGradient, RefIdentity, PartitionedCall,
// the variable and checkpoint ops, BatchMatMulV3, TensorListElementShape,
// the Ref control-flow ops, ControlTrigger) keep their other tests, graphs
// built for them with hand-derived results (remainingops_test.go).
//
//	op                       dtypes                    tested against
//	NoOp                     -                         TestAssetsFedToInitOp, reference models (init and restore ops)
//	Const                    any                       TestDecodeTensorProto, TestConstProtoInGraph
//	Placeholder              any                       every model test (TestMLP); unfed: TestLoadErrors
//	PlaceholderWithDefault   any                       TestOptionalInput
//	Identity                 any                       TestIf, reference models; TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	IdentityN                any                       TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	StopGradient             any                       TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	Snapshot                 any                       TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	PreventGradient          any                       TestPassThroughOps
//	RefIdentity              any                       TestTF1RefLoopVariable (a ref loop variable's body)
//	PartitionedCall          any Tin/Tout              TestPartitionedCall (in the main graph and nested in a StatefulPartitionedCall's function)
//	StatefulPartitionedCall  any Tin/Tout              TestDeepGraph, reference models; TensorFlow.js 4.22.0 (TestOracleKerasCNN)
//	VarHandleOp              numeric                   TestControlFlowReadsVariable, reference models; TensorFlow.js 4.22.0 (TestOracleKerasLSTM/GRU)
//	ReadVariableOp           numeric                   TestControlFlowReadsVariable, reference models; TensorFlow.js 4.22.0 (TestOracleKerasLSTM/GRU)
//	AssignVariableOp         numeric                   TestAssetsFedToInitOp, reference models (TF2 restore)
//	AssignAddVariableOp      numeric                   TestReferenceStateful, TestNoStateCrossesRequests, TestSharedStateReset
//	AssignSubVariableOp      numeric                   TestResourceVariableOps (int32 and float counters over calls)
//	ResourceGather           numeric; int32/64 index   reference models
//	DestroyResourceOp        -                         TestResourceVariableOps (a no-op)
//	VarIsInitializedOp       -                         TestResourceVariableOps
//	VariableV2               numeric                   reference models (TF1)
//	Variable                 numeric                   untested (same rule as VariableV2)
//	Assign                   numeric                   reference models (TF1 restore); in serving: TestNoStateCrossesRequests, TestSequencesRefVariables
//	RestoreV2                numeric                   TestSequencesKeepSeparateVariables (a sequence's start), reference models (checkpoint values)
//	ReadFile                 string                    TestAssetsFedToInitOp, TestReferenceMissingAssetUnread
//	RandomUniform            float, double             TestRandomOpKernels (range, mean, fresh per call); TestRestoredVariableInitializersSkipped
//	RandomStandardNormal     float, double             TestRandomOpKernels (mean, fresh per call); TestRestoredVariableInitializersSkipped
//	TruncatedNormal          float, double             TestRandomOpKernels (within 2 sd, mean); TestRestoredVariableInitializersSkipped
//	StatelessRandomUniform   float, double             TestRandomOpKernels (range, mean, same seed same values); TestRestoredVariableInitializersSkipped
//	StatelessRandomNormal    float, double             TestRestoredVariableInitializersSkipped
//	StatelessTruncatedNormal  float, double            TestRestoredVariableInitializersSkipped
//	StatelessRandomUniformV2  float, double            untested (the rule of StatelessRandomUniform; key, counter and alg inputs)
//	StatelessRandomNormalV2  float, double             untested (the rule of StatelessRandomNormal)
//	StatelessTruncatedNormalV2  float, double          untested (the rule of StatelessTruncatedNormal)
//	MatMul                   float, double, int32/64   TestKernels, TestMatMulSizes, TestMatMulSplitIdentical, TestFusionExact; fused_multiply_add vs the fma32 loop (TestGemmFusedIdentical, TestFusedMultiplyAddModel, TestFusedMultiplyAddTransposed; fma32 vs big.Float: TestFMA32CorrectlyRounded); TensorFlow.js 4.22.0 (TestOracleBatchMatMul)
//	BatchMatMulV2            float, double, int32/64   TestKernels; TensorFlow.js 4.22.0 (TestOracleBatchMatMul)
//	BatchMatMul              float, double, int32/64   TensorFlow.js 4.22.0 (TestOracleBatchMatMul)
//	BatchMatMulV3            float, double, int32/64   TestPassThroughOps (Ta = Tb = Tout; adj_x, adj_y)
//	BiasAdd                  numeric                   TestMLP, TestFusionExact, TestCNNModel; TensorFlow.js 4.22.0 (TestOracleConv)
//	Add                      numeric                   TestBroadcastShapes; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	AddV2                    numeric                   TestKernels, TestBroadcastShapes; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Sub                      numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Mul                      numeric                   TestKernels, TestBroadcastShapes; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	RealDiv                  float, double             TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Div                      numeric                   TensorFlow.js 4.22.0 (TestOracleElementwise); int zero divisor error: TestIntegerDivisionErrors
//	DivNoNan                 numeric                   TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Minimum                  numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Maximum                  numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	SquaredDifference        numeric                   TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Pow                      numeric                   TensorFlow.js 4.22.0 (TestOracleElementwise, int powers wrapping past int32); negative int exponent error: TestIntegerDivisionErrors
//	FloorDiv                 numeric                   TensorFlow.js 4.22.0 (TestOracleElementwise); int zero divisor error: TestIntegerDivisionErrors; int64 exact past 2^53: TestIntegerFloorDivExact
//	FloorMod                 numeric                   TensorFlow.js 4.22.0 (TestOracleElementwise); int zero divisor error: TestIntegerDivisionErrors; int64 exact past 2^53: TestIntegerFloorDivExact
//	Greater                  numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleLogical)
//	GreaterEqual             numeric                   TensorFlow.js 4.22.0 (TestOracleLogical)
//	Less                     numeric                   TestWhileSum, TestIf, TestBroadcastShapes; TensorFlow.js 4.22.0 (TestOracleLogical)
//	LessEqual                numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleLogical)
//	Equal                    numeric, bool             TestKernels; TensorFlow.js 4.22.0 (TestOracleLogical)
//	NotEqual                 numeric, bool             TensorFlow.js 4.22.0 (TestOracleLogical)
//	LogicalAnd               bool                      TensorFlow.js 4.22.0 (TestOracleLogical)
//	LogicalOr                bool                      TensorFlow.js 4.22.0 (TestOracleLogical)
//	LogicalNot               bool                      TensorFlow.js 4.22.0 (TestOracleLogical)
//	Select                   numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleLogical)
//	SelectV2                 numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleLogical)
//	Neg                      numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Abs                      numeric                   TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Relu                     numeric                   TestKernels, TestMLP, TestFusionExact; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Relu6                    numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Square                   numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Sign                     numeric                   TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Sigmoid                  float, double             TestSigmoidEigen (Eigen's formula), TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Tanh                     float, double             TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Exp                      float, double             TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Log                      float, double             TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Log1p                    float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Sqrt                     float, double             TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Rsqrt                    float, double             TestKernels; TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Reciprocal               float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Floor                    float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Ceil                     float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Round                    float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Softplus                 float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Elu                      float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Selu                     float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	LeakyRelu                float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Erf                      float, double             TensorFlow.js 4.22.0 (TestOracleElementwise)
//	Softmax                  float, double             TestKernels; TensorFlow.js 4.22.0 (TestOracleReductions)
//	LogSoftmax               float, double             TensorFlow.js 4.22.0 (TestOracleReductions)
//	Sum                      numeric                   TestKernels, TestReduceAndSqueezeShapes; TensorFlow.js 4.22.0 (TestOracleReductions)
//	Mean                     numeric                   TestKernels, TestReduceAndSqueezeShapes, TestMeanOfNothing; TensorFlow.js 4.22.0 (TestOracleReductions)
//	Max                      numeric                   TestKernels, TestReduceAndSqueezeShapes; TensorFlow.js 4.22.0 (TestOracleReductions)
//	Min                      numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleReductions)
//	Prod                     numeric                   TensorFlow.js 4.22.0 (TestOracleReductions)
//	Cast                     numeric, bool; from HALF, BFLOAT16, UINT16/32/64  TestKernels, TestDecodeTensorProto; TensorFlow.js 4.22.0 (TestOracleLogical)
//	Reshape                  any                       TestKernels; TensorFlow.js 4.22.0 (TestOracleReductions)
//	Squeeze                  any                       TestKernels, TestReduceAndSqueezeShapes; TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	ExpandDims               any                       TestKernels; TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	Shape                    any; out int32/64         TestKernels; TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	Size                     any; out int32/64         TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	Rank                     any                       TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	ConcatV2                 numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	Pack                     numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	Unpack                   numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	GatherV2                 numeric; int32/64 idx     TestKernels; TensorFlow.js 4.22.0 (TestOracleIndexing); batch_dims != 0 (any dtype): TestPadTileKernels, TestPadTileErrors, TensorFlow.js 4.22.0 (TestOraclePadTile)
//	Pad                      any                       TestPadTileKernels (tf.pad's documented example, int64 paddings, scalar); errors: TestPadTileErrors; TensorFlow.js 4.22.0 (TestOraclePadTile)
//	PadV2                    any                       TestPadTileKernels, TestPadTileErrors; TensorFlow.js 4.22.0 (TestOraclePadTile)
//	MirrorPad                any                       TestPadTileKernels (REFLECT and SYMMETRIC documented examples), TestPadTileErrors; TensorFlow.js 4.22.0 (TestOraclePadTile)
//	Tile                     any                       TestPadTileKernels (tf.tile's documented example, zero multiple), TestPadTileErrors; TensorFlow.js 4.22.0 (TestOraclePadTile)
//	Slice                    numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleIndexing)
//	StridedSlice             numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleIndexing)
//	OneHot                   numeric                   TestKernels; TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	Fill                     numeric                   TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	ZerosLike                numeric                   TensorFlow.js 4.22.0 (TestOracleShapeOps)
//	OnesLike                 numeric                   TensorFlow.js 4.22.0 (TestOracleShapeOps)
package tensorflow
