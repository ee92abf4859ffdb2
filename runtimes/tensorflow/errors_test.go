package tensorflow

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/tensor"
)

const pcvrDir = "bidding-auction-servers/tensorflow/pcvr"

func cloneFiles(f driver.Files) driver.Files {
	out := driver.Files{}
	for k, v := range f {
		out[k] = append([]byte(nil), v...)
	}
	return out
}

// loadErr loads files and returns the load error, checking it is typed.
func loadErr(t *testing.T, files driver.Files) error {
	t.Helper()
	rt := runtimes.NewRuntime(Name, driver.Config{}, New(driver.Config{}))
	m, err := rt.Load(context.Background(), "bad_model/", files)
	if err == nil {
		m.Close()
		t.Fatal("load succeeded, want an error")
	}
	t.Log(err)
	if inferr.TypeOf(err) != inferr.ModelExecution {
		t.Errorf("error type %v, want MODEL_EXECUTION: %v", inferr.TypeOf(err), err)
	}
	if !strings.Contains(err.Error(), "bad_model/") {
		t.Errorf("error does not name the model path: %v", err)
	}
	return err
}

// editGraph rewrites saved_model.pb of files with edit.
func editGraph(t *testing.T, files driver.Files, edit func(mg *cpb.MetaGraphDef)) driver.Files {
	t.Helper()
	files = cloneFiles(files)
	sm := &cpb.SavedModel{}
	if err := proto.Unmarshal(files["saved_model.pb"], sm); err != nil {
		t.Fatal(err)
	}
	edit(sm.MetaGraphs[0])
	b, err := proto.Marshal(sm)
	if err != nil {
		t.Fatal(err)
	}
	files["saved_model.pb"] = b
	return files
}

// addServed adds nd to the main graph as a control input of the first
// serving_default output's node, so that serving runs it.
func addServed(mg *cpb.MetaGraphDef, nd *ndpb.NodeDef) {
	mg.GraphDef.Node = append(mg.GraphDef.Node, nd)
	sd := mg.SignatureDef["serving_default"]
	out, _, _ := splitTensorName(sd.Outputs[sortedKeys(sd.Outputs)[0]].GetName())
	for _, n := range mg.GraphDef.Node {
		if n.Name == out {
			n.Input = append(n.Input, "^"+nd.Name)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	good := readModelDir(t, pcvrDir)
	cases := []struct {
		name   string
		files  func() driver.Files
		is     error
		substr string
	}{
		{"no saved_model.pb", func() driver.Files {
			f := cloneFiles(good)
			delete(f, "saved_model.pb")
			return f
		}, ErrCorruptModel, "saved_model.pb"},
		{"truncated saved_model.pb", func() driver.Files {
			f := cloneFiles(good)
			f["saved_model.pb"] = f["saved_model.pb"][:len(f["saved_model.pb"])/3]
			return f
		}, ErrCorruptModel, "saved_model.pb"},
		{"garbage saved_model.pb", func() driver.Files {
			f := cloneFiles(good)
			f["saved_model.pb"] = []byte("this is not a protobuf \xff\xff\xff")
			return f
		}, ErrCorruptModel, "saved_model.pb"},
		{"truncated index", func() driver.Files {
			f := cloneFiles(good)
			f["variables/variables.index"] = f["variables/variables.index"][:40]
			return f
		}, ErrCorruptCheckpoint, "variables.index"},
		{"missing data shard", func() driver.Files {
			f := cloneFiles(good)
			delete(f, "variables/variables.data-00000-of-00001")
			return f
		}, ErrCorruptCheckpoint, "variables.data-00000-of-00001"},
		{"missing checkpoint", func() driver.Files {
			f := cloneFiles(good)
			delete(f, "variables/variables.index")
			return f
		}, ErrCorruptCheckpoint, "variables.index"},
		{"flipped byte in a float variable", func() driver.Files {
			f := cloneFiles(good)
			ck, err := parseCheckpoint(f["variables/variables.index"], checkpointAt, f)
			if err != nil {
				t.Fatal(err)
			}
			e := ck.entries["layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"]
			if e == nil || e.Dtype != dtFloat {
				t.Fatalf("no float kernel in the checkpoint: %v", ck.entries)
			}
			f["variables/variables.data-00000-of-00001"][e.Offset+e.Size/2] ^= 0x40
			return f
		}, ErrChecksum, "layer_with_weights-0/kernel"},
		{"flipped byte in the object graph", func() driver.Files {
			f := cloneFiles(good)
			ck, _ := parseCheckpoint(f["variables/variables.index"], checkpointAt, f)
			e := ck.entries["_CHECKPOINTABLE_OBJECT_GRAPH"]
			f["variables/variables.data-00000-of-00001"][e.Offset+e.Size-3] ^= 0x01
			return f
		}, ErrChecksum, "_CHECKPOINTABLE_OBJECT_GRAPH"},
		{"truncated data shard", func() driver.Files {
			f := cloneFiles(good)
			d := f["variables/variables.data-00000-of-00001"]
			f["variables/variables.data-00000-of-00001"] = d[:len(d)-10]
			return f
		}, ErrCorruptCheckpoint, "outside its data shard"},
		{"no serving_default", func() driver.Files {
			return editGraph(t, good, func(mg *cpb.MetaGraphDef) { delete(mg.SignatureDef, "serving_default") })
		}, ErrNoSignature, "__saved_model_init_op"},
		{"unknown op", func() driver.Files {
			return editGraph(t, good, func(mg *cpb.MetaGraphDef) {
				for _, fn := range mg.GraphDef.Library.Function {
					for _, nd := range fn.NodeDef {
						if nd.Op == "Relu" {
							nd.Op = "MysteryActivation"
						}
					}
				}
			})
		}, ErrUnsupportedOp, "MysteryActivation"},
		{"WriteFile in the library", func() driver.Files {
			return editGraph(t, good, func(mg *cpb.MetaGraphDef) {
				for _, fn := range mg.GraphDef.Library.Function {
					if strings.HasPrefix(fn.Signature.Name, "__inference_signature_wrapper") {
						fn.NodeDef = append(fn.NodeDef, &ndpb.NodeDef{Name: "leak", Op: "WriteFile"})
					}
				}
			})
		}, ErrForbiddenOp, "WriteFile"},
		{"summary writer in the main graph", func() driver.Files {
			return editGraph(t, good, func(mg *cpb.MetaGraphDef) {
				addServed(mg, &ndpb.NodeDef{Name: "w", Op: "CreateSummaryFileWriter"})
			})
		}, ErrForbiddenOp, "CreateSummaryFileWriter"},
		{"PrintV2 to a file", func() driver.Files {
			return editGraph(t, good, func(mg *cpb.MetaGraphDef) {
				addServed(mg, &ndpb.NodeDef{Name: "p", Op: "PrintV2",
					Attr: map[string]*apb.AttrValue{"output_stream": {Value: &apb.AttrValue_S{S: []byte("file:///tmp/leak")}}}})
			})
		}, ErrForbiddenOp, "PrintV2"},
		{"SaveV2 serving runs", func() driver.Files {
			return editGraph(t, good, func(mg *cpb.MetaGraphDef) {
				addServed(mg, &ndpb.NodeDef{Name: "exfil", Op: "SaveV2"})
			})
		}, ErrForbiddenOp, "SaveV2"},
		{"function calls itself", func() driver.Files {
			return editGraph(t, good, func(mg *cpb.MetaGraphDef) {
				for _, fn := range mg.GraphDef.Library.Function {
					if strings.HasPrefix(fn.Signature.Name, "__inference_signature_wrapper") {
						for _, nd := range fn.NodeDef {
							if nd.Op == "StatefulPartitionedCall" {
								nd.Attr["f"].GetFunc().Name = fn.Signature.Name
							}
						}
					}
				}
			})
		}, ErrBadGraph, "nested deeper"},
		{"dangling input", func() driver.Files {
			return editGraph(t, good, func(mg *cpb.MetaGraphDef) {
				for _, fn := range mg.GraphDef.Library.Function {
					for _, nd := range fn.NodeDef {
						if nd.Op == "MatMul" {
							nd.Input[0] = "nowhere:output:0"
						}
					}
				}
			})
		}, ErrBadGraph, "nowhere"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := loadErr(t, tc.files())
			if !errors.Is(err, tc.is) {
				t.Errorf("error is not %v: %v", tc.is, err)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error does not mention %q: %v", tc.substr, err)
			}
		})
	}
}

func TestPredictErrors(t *testing.T) {
	m := loadRef(t, pcvrDir, driver.Config{})
	inputs := func(rowsInt int) []tensor.Tensor {
		var in []tensor.Tensor
		for _, spec := range m.Signature().Inputs {
			if spec.DType == tensor.Double {
				in = append(in, tensor.New(spec.Name, []int64{1, 10}, append([]float64(nil), pcvrRow...)))
			} else {
				in = append(in, tensor.New(spec.Name, []int64{int64(rowsInt), 1}, make([]int64, rowsInt)))
			}
		}
		return in
	}
	t.Run("batch sizes differ", func(t *testing.T) {
		_, err := m.Predict(context.Background(), inputs(3))
		if inferr.TypeOf(err) != inferr.ModelExecution || !strings.Contains(err.Error(), "ConcatV2") {
			t.Fatalf("got %v, want a MODEL_EXECUTION error naming ConcatV2", err)
		}
	})
	t.Run("wrong dtype", func(t *testing.T) {
		in := inputs(1)
		in[0] = tensor.New(in[0].Name, []int64{1, 10}, make([]float32, 10))
		_, err := m.Predict(context.Background(), in)
		if inferr.TypeOf(err) != inferr.InputParsing {
			t.Fatalf("got %v, want INPUT_PARSING", err)
		}
	})
	t.Run("wrong shape", func(t *testing.T) {
		in := inputs(1)
		in[0] = tensor.New(in[0].Name, []int64{2, 5}, make([]float64, 10))
		_, err := m.Predict(context.Background(), in)
		if inferr.TypeOf(err) != inferr.InputParsing {
			t.Fatalf("got %v, want INPUT_PARSING", err)
		}
	})
	t.Run("still works", func(t *testing.T) {
		if _, err := m.Predict(context.Background(), inputs(1)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestKernelPanicBecomesError(t *testing.T) {
	p := &program{types: []dtype{dtFloat}, consts: []*dense{nil}}
	p.steps = []step{{op: "Boom", node: "model/boom", run: func(v []*dense) error {
		var s []float32
		_ = s[3]
		return nil
	}}}
	err := p.run(p.newState())
	var oe *OpError
	if !errors.As(err, &oe) || oe.Op != "Boom" || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("got %v, want an OpError for Boom", err)
	}
}

// TestDeepGraph: a very long chain is a clear error, not a stack overflow.
func TestDeepGraph(t *testing.T) {
	b := tfsaveBuilderChain(t, maxGraphDepth+10)
	err := loadErr(t, b)
	if !errors.Is(err, ErrBadGraph) || !strings.Contains(err.Error(), "dependency chain") {
		t.Fatalf("got %v", err)
	}
	// A chain well inside the bound loads.
	rt := runtimes.NewRuntime(Name, driver.Config{}, New(driver.Config{}))
	m, err := rt.Load(context.Background(), "ok/", tfsaveBuilderChain(t, 1000))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}
