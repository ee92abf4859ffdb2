// Package tfsave writes TensorFlow SavedModels in pure Go, laid out as
// TensorFlow writes them: saved_model.pb (a SavedModel proto with one
// MetaGraphDef tagged "serve" holding the graph, the SignatureDefs, a
// SaverDef and the stripped op list of the ops used) and the variables
// checkpoint in TensorFlow's tensor-bundle format (variables/variables.index,
// a LevelDB-format table whose empty key holds the BundleHeaderProto and
// whose other keys hold BundleEntryProtos, and
// variables/variables.data-00000-of-00001).
//
// It exists so that inferbid's tests and examples need no TensorFlow
// installation. Build a graph with a Builder:
//
//	b := tfsave.NewBuilderWith(tfsave.Options{FunctionCall: true})
//	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1, 3})
//	w := b.Variable("w", tensor.New("", []int64{3, 1}, []float32{1, 2, 3}))
//	y := b.Op("MatMul", []string{x, w.Value}, nil) // T is inferred
//	b.Signature("serving_default", map[string]string{"x": x}, map[string]string{"y": y})
//	files, err := b.Files() // saved_model.pb, variables/variables.{index,data-00000-of-00001}
//
// or take a ready-made model: MLP (the team's benchmark MLP), PCTRModel and
// PCVRModel (MLPs with embedding lookups, for the examples), CounterModel (a
// stateful counter), AllDTypesModel and AffineModel, and BuildConformanceModels
// (the runtime conformance suite's models, as plain files: tfsave imports no
// test code, so the tools built on it link neither testing nor gRPC).
//
// Variables are restored the way TensorFlow's graph-mode Saver restores them
// (tf.compat.v1.train.Saver(sharded=True), as TF1's SavedModelBuilder
// builds it): the SaverDef names the filename tensor "save/Const:0" (a
// PlaceholderWithDefault to feed with "<dir>/variables/variables") and the
// restore op "save/restore_all", which runs RestoreV2 and one
// AssignVariableOp (resource variables) or Assign (TF1 VariableV2) per
// variable. Variable initializers assign zeros, so a model computes its
// intended values only after a restore.
//
// Options select the layout: Variables picks TF2 resource variables
// (VarHandleOp/ReadVariableOp, the default) or TF1 VariableV2; FunctionCall
// moves each signature's computation into the function library
// (__inference_signature_wrapper_N calling __inference__wrapped_model_N,
// whose bodies refer to outputs as node:out_arg:index), called from the main
// graph by StatefulPartitionedCall (PartitionedCall when stateless), adds
// the __saved_model_init_op signature and writes TF2's object-based
// checkpoint keys ("<name>/.ATTRIBUTES/VARIABLE_VALUE") with a
// _CHECKPOINTABLE_OBJECT_GRAPH entry, as TF2 exports do.
//
// The tests check the output against SavedModels real TensorFlow wrote (the
// reference models in $INFERBID_REFERENCE_MODELS, skipped when the variable
// is unset): the checkpoints tfsave writes from those models' tensors are
// byte-identical to TensorFlow's (TF 1.14 snappy-compressed index blocks
// included); a TF1 model with half_plus_two's variables has node-for-node
// the same saver, variable and init nodes; the op definitions agree with the
// stripped op lists; the TF2 counter model has the stateful reference's
// signatures, call types and checkpoint layout. An independent interpreter
// in the tests restores and runs every model and compares with answers
// computed from the formulas.
//
// The command cmd/gen-tf-models writes the example models as directories.
package tfsave
