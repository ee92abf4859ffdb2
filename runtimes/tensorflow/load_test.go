package tensorflow

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	ndpb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/inferbid/inferbid/runtimes/driver"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/tensor"
)

// editSavedModel rewrites saved_model.pb of files with edit.
func editSavedModel(t *testing.T, files driver.Files, edit func(sm *cpb.SavedModel)) driver.Files {
	t.Helper()
	files = cloneFiles(files)
	sm := &cpb.SavedModel{}
	if err := proto.Unmarshal(files["saved_model.pb"], sm); err != nil {
		t.Fatal(err)
	}
	edit(sm)
	b, err := proto.Marshal(sm)
	if err != nil {
		t.Fatal(err)
	}
	files["saved_model.pb"] = b
	return files
}

func mlpFiles(t *testing.T, opts tfsave.Options) driver.Files {
	t.Helper()
	files, err := tfsave.MLP(opts)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkMLP runs the benchmark MLP on two rows and compares with the float64
// reference.
func checkMLP(t *testing.T, files driver.Files) {
	t.Helper()
	m := loadFiles(t, files, driver.Config{})
	x := tfsave.MLPInput(2)
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{2, 8}, x)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tensor.Data[float32](out[0])
	want := mlpReference(x, 2)
	for i := range want {
		if d := float64(got[i]) - want[i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("row %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestMetaGraphTags: the runtime loads the MetaGraph whose tag set is
// exactly {serve}, as TensorFlow Serving does, and nothing else.
func TestMetaGraphTags(t *testing.T) {
	serve := mlpFiles(t, tfsave.Options{})
	retag := func(tags ...string) driver.Files {
		return editSavedModel(t, serve, func(sm *cpb.SavedModel) { sm.MetaGraphs[0].MetaInfoDef.Tags = tags })
	}
	t.Run("serve", func(t *testing.T) { checkMLP(t, serve) })
	t.Run("serve twice", func(t *testing.T) { checkMLP(t, retag("serve", "serve")) })
	for name, tags := range map[string][]string{"train only": {"train"}, "serve and gpu": {"serve", "gpu"}, "no tags": nil} {
		t.Run(name, func(t *testing.T) {
			err := loadErr(t, retag(tags...))
			if !errors.Is(err, ErrNoServeGraph) || !strings.Contains(err.Error(), "{serve}") || !strings.Contains(err.Error(), tagSet(tags)) {
				t.Errorf("error %v: want ErrNoServeGraph naming {serve} and the tag set %s", err, tagSet(tags))
			}
		})
	}
	t.Run("train and serve MetaGraphs", func(t *testing.T) {
		// A training MetaGraph first, whose serving_default is broken:
		// loading it instead of the serve one would fail.
		both := editSavedModel(t, serve, func(sm *cpb.SavedModel) {
			train := proto.Clone(sm.MetaGraphs[0]).(*cpb.MetaGraphDef)
			train.MetaInfoDef.Tags = []string{"train"}
			delete(train.SignatureDef, "serving_default")
			sm.MetaGraphs = append([]*cpb.MetaGraphDef{train}, sm.MetaGraphs...)
		})
		checkMLP(t, both)
		trainOnly := editSavedModel(t, both, func(sm *cpb.SavedModel) { sm.MetaGraphs[1].MetaInfoDef.Tags = []string{"train", "serve"} })
		err := loadErr(t, trainOnly)
		if !errors.Is(err, ErrNoServeGraph) || !strings.Contains(err.Error(), "{train}, {serve,train}") {
			t.Errorf("error %v: want ErrNoServeGraph listing {train}, {serve,train}", err)
		}
	})
}

// TestValidatorReachability: the validator judges only what the serving
// signature, the restore op and the init op reach. A second
// tf.train.Saver's SaveV2 (and any node nothing runs) is not judged; the
// same op where serving, restore or init runs it is refused.
func TestValidatorReachability(t *testing.T) {
	for name, opts := range map[string]tfsave.Options{"tf1 graph": {Variables: tfsave.RefVariables}, "tf2 functions": {FunctionCall: true}} {
		t.Run(name, func(t *testing.T) {
			good := mlpFiles(t, opts)
			// What a second tf.train.Saver adds: its own save subgraph,
			// which nothing the loader runs depends on.
			secondSaver := func(mg *cpb.MetaGraphDef) {
				mg.GraphDef.Node = append(mg.GraphDef.Node,
					&ndpb.NodeDef{Name: "save_1/Const", Op: "Const"},
					&ndpb.NodeDef{Name: "save_1/SaveV2", Op: "SaveV2", Input: []string{"save_1/Const"}},
					&ndpb.NodeDef{Name: "save_1/MergeV2Checkpoints", Op: "MergeV2Checkpoints", Input: []string{"^save_1/SaveV2"}},
					&ndpb.NodeDef{Name: "orphan_writer", Op: "WriteFile"},
					&ndpb.NodeDef{Name: "orphan_mystery", Op: "MysteryOp"})
				if mg.GraphDef.Library == nil {
					mg.GraphDef.Library = &fpb.FunctionDefLibrary{}
				}
				mg.GraphDef.Library.Function = append(mg.GraphDef.Library.Function, &fpb.FunctionDef{
					Signature: &opb.OpDef{Name: "__inference_unused_42"},
					NodeDef:   []*ndpb.NodeDef{{Name: "leak", Op: "WriteFile"}},
				})
			}
			t.Run("unreachable writers load", func(t *testing.T) {
				checkMLP(t, editGraph(t, good, secondSaver))
			})
			reachedBy := map[string]func(mg *cpb.MetaGraphDef) string{
				"serving": func(mg *cpb.MetaGraphDef) string {
					sd := mg.SignatureDef["serving_default"]
					n, _, _ := splitTensorName(sd.Outputs["y"].GetName())
					return n
				},
				"restore": func(mg *cpb.MetaGraphDef) string { return mg.SaverDef.RestoreOpName },
			}
			if opts.FunctionCall {
				reachedBy["init"] = func(mg *cpb.MetaGraphDef) string {
					n, _, _ := splitTensorName(mg.SignatureDef[initOpKey].Outputs[initOpKey].GetName())
					return n
				}
			}
			for by, root := range reachedBy {
				t.Run("SaveV2 run by "+by, func(t *testing.T) {
					err := loadErr(t, editGraph(t, good, func(mg *cpb.MetaGraphDef) {
						secondSaver(mg)
						r := root(mg)
						for _, n := range mg.GraphDef.Node {
							if n.Name == r {
								n.Input = append(n.Input, "^save_1/MergeV2Checkpoints")
							}
						}
					}))
					if !errors.Is(err, ErrForbiddenOp) || !strings.Contains(err.Error(), "save_1/") {
						t.Errorf("error %v: want ErrForbiddenOp naming save_1/", err)
					}
				})
			}
			if opts.FunctionCall {
				t.Run("WriteFile in a called function", func(t *testing.T) {
					err := loadErr(t, editGraph(t, good, func(mg *cpb.MetaGraphDef) {
						for _, fn := range mg.GraphDef.Library.Function {
							if strings.HasPrefix(fn.Signature.Name, "__inference__wrapped_model") {
								fn.NodeDef = append(fn.NodeDef, &ndpb.NodeDef{Name: "leak", Op: "WriteFile"})
							}
						}
					}))
					if !errors.Is(err, ErrForbiddenOp) || !strings.Contains(err.Error(), "__inference__wrapped_model") {
						t.Errorf("error %v: want ErrForbiddenOp in __inference__wrapped_model", err)
					}
				})
			}
		})
	}
}

// toText replaces saved_model.pb by saved_model.pbtxt, the same SavedModel
// in text format.
func toText(t *testing.T, files driver.Files) driver.Files {
	t.Helper()
	files = cloneFiles(files)
	sm := &cpb.SavedModel{}
	if err := proto.Unmarshal(files["saved_model.pb"], sm); err != nil {
		t.Fatal(err)
	}
	txt, err := prototext.MarshalOptions{Multiline: true}.Marshal(sm)
	if err != nil {
		t.Fatal(err)
	}
	delete(files, "saved_model.pb")
	files["saved_model.pbtxt"] = txt
	return files
}

// TestSavedModelText: without saved_model.pb, saved_model.pbtxt is read and
// gives the same answers; saved_model.pb wins when both are there.
func TestSavedModelText(t *testing.T) {
	for name, opts := range map[string]tfsave.Options{"tf1 graph": {Variables: tfsave.RefVariables}, "tf2 functions": {FunctionCall: true}} {
		t.Run(name, func(t *testing.T) {
			bin := mlpFiles(t, opts)
			// A TF1 assets collection exercises Any in the text format.
			asset, err := anypb.New(&cpb.AssetFileDef{Filename: "vocab.txt", TensorInfo: &cpb.TensorInfo{Encoding: &cpb.TensorInfo_Name{Name: "asset_path:0"}}})
			if err != nil {
				t.Fatal(err)
			}
			bin = editGraph(t, bin, func(mg *cpb.MetaGraphDef) {
				if mg.CollectionDef == nil {
					mg.CollectionDef = map[string]*cpb.CollectionDef{}
				}
				mg.CollectionDef["saved_model_assets"] = &cpb.CollectionDef{Kind: &cpb.CollectionDef_AnyList_{AnyList: &cpb.CollectionDef_AnyList{Value: []*anypb.Any{asset}}}}
			})
			bin["assets/vocab.txt"] = []byte("a\nb\n")
			text := toText(t, bin)
			if !strings.Contains(string(text["saved_model.pbtxt"]), "[type.googleapis.com/tensorflow.AssetFileDef]") {
				t.Fatalf("the text form holds no Any AssetFileDef:\n%.2000s", text["saved_model.pbtxt"])
			}
			checkMLP(t, bin)
			checkMLP(t, text)
			nested := driver.Files{}
			for k, v := range text {
				nested["1/"+k] = v
			}
			checkMLP(t, nested)

			both := cloneFiles(bin)
			both["saved_model.pbtxt"] = []byte("not a SavedModel {")
			checkMLP(t, both)

		})
	}
	t.Run("garbage", func(t *testing.T) {
		err := loadErr(t, driver.Files{"saved_model.pbtxt": []byte("meta_graphs { bogus_field: 1 }")})
		if !errors.Is(err, ErrCorruptModel) || !strings.Contains(err.Error(), "saved_model.pbtxt") || !strings.Contains(err.Error(), "bogus_field") {
			t.Errorf("error %v: want ErrCorruptModel naming saved_model.pbtxt and the field", err)
		}
	})
}

// assetModel builds a model whose init op reads the asset path placeholder
// "asset_path_initializer" (ReadFile) and then assigns 5 to the variable v
// serving returns (restored as 1): serving answers 5 only if the init op ran
// after the restore with the asset read. reads=false leaves the path unread.
func assetModel(t *testing.T, reads bool) driver.Files {
	t.Helper()
	b := tfsave.NewBuilder()
	x := b.Placeholder("serving_default_x", tensor.Float, []int64{-1})
	v := b.Variable("v", tensor.New("", []int64{}, []float32{1}))
	y := b.OpNamed("y", "AddV2", []string{x, v.Value}, nil) // x is fed 0
	b.Signature("serving_default", map[string]string{"x": x}, map[string]string{"y": y})
	path := b.OpNamed("asset_path_initializer", "Placeholder", nil, map[string]any{"dtype": dtString, "shape": tfsave.Shape{}})
	five := tfsave.ConstOf(b, "five", []int64{}, float32(5))
	var deps []string
	if reads {
		deps = append(deps, "^"+b.OpNamed("read_asset", "ReadFile", []string{path}, nil)[:len("read_asset")])
	}
	assign := b.OpNamed("assign_v", "AssignVariableOp", append([]string{v.Handle, five}, deps...), nil)
	b.OpNamed("asset_init", "NoOp", []string{"^" + assign}, nil)
	files, err := b.Files()
	if err != nil {
		t.Fatal(err)
	}
	return editGraph(t, files, func(mg *cpb.MetaGraphDef) {
		mg.SignatureDef[initOpKey] = &cpb.SignatureDef{Outputs: map[string]*cpb.TensorInfo{initOpKey: {Encoding: &cpb.TensorInfo_Name{Name: "asset_init"}}}}
		mg.AssetFileDef = []*cpb.AssetFileDef{{Filename: "vocab.txt", TensorInfo: &cpb.TensorInfo{Encoding: &cpb.TensorInfo_Name{Name: "asset_path_initializer:0"}}}}
	})
}

func predictY(t *testing.T, files driver.Files) float32 {
	t.Helper()
	m := loadFiles(t, files, driver.Config{})
	out, err := m.Predict(context.Background(), []tensor.Tensor{tensor.New("x", []int64{1}, []float32{0})})
	if err != nil {
		t.Fatal(err)
	}
	y, _ := tensor.Data[float32](out[0])
	return y[0]
}

// TestAssetsFedToInitOp: as TensorFlow's loader does, every asset's path
// is fed to the init op; a missing asset fails the load only when the init
// op reads it.
func TestAssetsFedToInitOp(t *testing.T) {
	reading := assetModel(t, true)
	reading["assets/vocab.txt"] = []byte("alpha\nbeta\n")
	t.Run("asset present", func(t *testing.T) {
		if y := predictY(t, reading); y != 5 {
			t.Errorf("y = %v, want 5 (the init op did not run after the restore)", y)
		}
	})
	t.Run("asset in a folder, text format", func(t *testing.T) {
		nested := driver.Files{}
		for k, v := range toText(t, reading) {
			nested["1/"+k] = v
		}
		if y := predictY(t, nested); y != 5 {
			t.Errorf("y = %v, want 5", y)
		}
	})
	t.Run("asset missing and read", func(t *testing.T) {
		files := cloneFiles(reading)
		delete(files, "assets/vocab.txt")
		err := loadErr(t, files)
		if !strings.Contains(err.Error(), "init op") || !strings.Contains(err.Error(), "ReadFile") || !strings.Contains(err.Error(), "assets/vocab.txt") {
			t.Errorf("error %v: want the init op's ReadFile naming assets/vocab.txt", err)
		}
	})
	t.Run("asset missing and unread", func(t *testing.T) {
		if y := predictY(t, assetModel(t, false)); y != 5 {
			t.Errorf("y = %v, want 5", y)
		}
	})
	t.Run("asset not declared", func(t *testing.T) {
		files := editGraph(t, reading, func(mg *cpb.MetaGraphDef) { mg.AssetFileDef = nil })
		if err := loadErr(t, files); !strings.Contains(err.Error(), "asset_path_initializer is not fed") {
			t.Errorf("error %v: want the unfed placeholder named", err)
		}
	})
	t.Run("TF1 legacy_init_op", func(t *testing.T) {
		files := editGraph(t, reading, func(mg *cpb.MetaGraphDef) {
			delete(mg.SignatureDef, initOpKey)
			mg.CollectionDef["legacy_init_op"] = &cpb.CollectionDef{Kind: &cpb.CollectionDef_NodeList_{NodeList: &cpb.CollectionDef_NodeList{Value: []string{"asset_init"}}}}
		})
		if y := predictY(t, files); y != 5 {
			t.Errorf("y = %v, want 5 (legacy_init_op did not run)", y)
		}
	})
	t.Run("asset outside the model", func(t *testing.T) {
		files := editGraph(t, reading, func(mg *cpb.MetaGraphDef) { mg.AssetFileDef[0].Filename = "../secret" })
		if err := loadErr(t, files); !errors.Is(err, ErrCorruptModel) || !strings.Contains(err.Error(), "../secret") {
			t.Errorf("error %v: want ErrCorruptModel naming the asset", err)
		}
	})
}
