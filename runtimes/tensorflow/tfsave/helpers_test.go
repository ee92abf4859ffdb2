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

// referenceRoot is where the real TensorFlow-written models live (read in
// place, never copied); INFERBID_REFERENCE_MODELS overrides it.
func referenceRoot() string {
	if d := os.Getenv("INFERBID_REFERENCE_MODELS"); d != "" {
		return d
	}
	return "../../../../shared/reference-models"
}

// referenceModelDirs lists the reference SavedModel directories that have a
// checkpoint, skipping the test when the folder is absent.
func referenceModelDirs(t *testing.T) []string {
	t.Helper()
	root := referenceRoot()
	var dirs []string
	for _, rel := range []string{
		"bidding-auction-servers/tensorflow/simple",
		"bidding-auction-servers/tensorflow/frozen_pcvr",
		"bidding-auction-servers/tensorflow/pcvr",
		"bidding-auction-servers/tensorflow/stateful",
		"tensorflow-serving/half_plus_two",
	} {
		d := filepath.Join(root, rel)
		if _, err := os.Stat(filepath.Join(d, SavedModelFile)); err == nil {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		t.Skipf("reference models absent under %s", root)
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
