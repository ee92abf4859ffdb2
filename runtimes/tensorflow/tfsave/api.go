package tfsave

import "github.com/inferbid/inferbid/tensor"

// VariableStyle selects how Builder.Variable represents a variable.
type VariableStyle int

const (
	// ResourceVariables (the default) are TF2 resource variables: a
	// VarHandleOp read by ReadVariableOp, restored by AssignVariableOp.
	ResourceVariables VariableStyle = iota
	// RefVariables are TF1 variables: a VariableV2 read through an Identity
	// named "<name>/read", restored by Assign.
	RefVariables
)

// Options configure a Builder. The zero value means TF2 resource variables
// with the whole computation in the main graph.
type Options struct {
	Variables VariableStyle
	// FunctionCall moves each signature's computation into a function of the
	// graph's function library, called from the main graph through
	// StatefulPartitionedCall (PartitionedCall when it touches no variable),
	// as TF2 Keras exports do. Placeholders and variables stay in the main
	// graph and are passed to the function as arguments; the signature's
	// outputs become the call's outputs.
	FunctionCall bool
	// TracedSaver (with FunctionCall and resource variables) saves and
	// restores as TF2 exports do instead of through a graph-mode saver: the
	// SaverDef names the Placeholder "saver_filename:0" and a
	// StatefulPartitionedCall into __inference__traced_restore_N (RestoreV2
	// and AssignVariableOp on resource arguments) as the restore op, and
	// another into __inference__traced_save_N as the save tensor.
	TracedSaver bool
}

// Var is a variable added by Builder.Variable.
type Var struct {
	// Name is the variable's node name and checkpoint key.
	Name string
	// Handle is the tensor to pass to stateful ops: the DT_RESOURCE output
	// of the VarHandleOp (resource style) or the ref output of the
	// VariableV2 (TF1 style).
	Handle string
	// Value is the tensor holding the variable's current value: the
	// ReadVariableOp output "<name>/Read/ReadVariableOp:0" or the TF1
	// "<name>/read:0".
	Value string
	// DType and Shape describe the variable.
	DType tensor.DType
	Shape []int64
}
