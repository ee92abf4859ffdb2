// Command gen-tf-models writes tfsave's example TensorFlow SavedModels as
// directories, one per model, and prints each model's checksum (the
// model_config.json checksum: SHA-256 over the sorted per-file SHA-256s).
//
//	go run ./runtimes/tensorflow/tfsave/cmd/gen-tf-models -out examples/models [-style tf2|function|graph|tf1] [-models pctr,pcvr,counter,mlp]
//
// Models: pctr, pcvr (see tfsave.PCTRModel, tfsave.PCVRModel), counter (a
// stateful counter starting at 1, so calls return 2, 3, ...), mlp (the
// benchmark MLP), affine_v1, affine_v2, all_dtypes (the conformance
// fixtures). Styles: tf2 (default) lays the model out as a TF2 export:
// resource variables, the computation in a function called through
// StatefulPartitionedCall, save and restore in traced functions; function
// is tf2 with a graph-mode saver (save/restore_all); graph keeps the
// computation in the main graph; tf1 uses VariableV2 variables restored by
// Assign, as TF 1.x wrote them. Files are
// rewritten deterministically, so running it twice changes nothing.
package main
