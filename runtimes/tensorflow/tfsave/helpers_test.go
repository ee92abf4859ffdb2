package tfsave

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	versionspb "github.com/wamuir/graft/tensorflow/core/framework/versions_go_proto"
	protopb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

var versionDef1 = versionspb.VersionDef{Producer: 1}

// referenceModelDirs lists the reference SavedModel directories, models
// real TensorFlow wrote, read in place (never copied) from
// testhelp.ReferenceModels: the test skips when INFERBID_REFERENCE_MODELS
// is unset and fails when one of the models is missing from it.
func referenceModelDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, rel := range []string{
		"bidding-auction-servers/tensorflow/simple",
		"bidding-auction-servers/tensorflow/frozen_pcvr",
		"bidding-auction-servers/tensorflow/pcvr",
		"bidding-auction-servers/tensorflow/stateful",
		"tensorflow-serving/half_plus_two",
	} {
		dirs = append(dirs, refDir(t, rel))
	}
	return dirs
}

func readSavedModel(t *testing.T, dir string) *protopb.SavedModel {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, SavedModelFile))
	if err != nil {
		t.Fatal(err)
	}
	return parseSavedModel(t, dir, raw)
}

// savedModelOf parses the saved_model.pb of files.
func savedModelOf(t *testing.T, files map[string][]byte) *protopb.SavedModel {
	t.Helper()
	return parseSavedModel(t, SavedModelFile, files[SavedModelFile])
}

// parseSavedModel parses a saved_model.pb (from where) and fails the test
// unless it holds exactly one meta graph, as every model here does.
func parseSavedModel(t *testing.T, where string, raw []byte) *protopb.SavedModel {
	t.Helper()
	var sm protopb.SavedModel
	if err := proto.Unmarshal(raw, &sm); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if len(sm.MetaGraphs) != 1 {
		t.Fatalf("%s: %d meta graphs", where, len(sm.MetaGraphs))
	}
	return &sm
}

func renderData(d any) string { return fmt.Sprint(d) }
