package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
)

// writeModel writes files under dir.
func writeModel(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVariablesCommand(t *testing.T) {
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeModel(t, filepath.Join(dir, "1"), files) // the model in one folder
	out, errOut, code := inferctl(t, "variables", dir)
	if code != 0 || errOut != "" {
		t.Fatalf("variables: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"ad_embedding/embeddings", "FLOAT", "[100,4]", "1600", "publisher_embedding/embeddings", "[50,4]", "800"} {
		if !strings.Contains(out, want) {
			t.Errorf("variables output lacks %q:\n%s", want, out)
		}
	}

	out, _, code = inferctl(t, "variables", "--json", dir)
	var got []tensorflow.CheckpointTensor
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("variables --json: exit %d, %q", code, out)
	}
	byName := map[string]tensorflow.CheckpointTensor{}
	var sum int64
	for _, v := range got {
		byName[v.Name] = v
		sum += v.Bytes
	}
	if ad := byName["ad_embedding/embeddings"]; ad.DType != "FLOAT" || !reflect.DeepEqual(ad.Shape, []int64{100, 4}) || ad.Bytes != 1600 {
		t.Errorf("ad_embedding/embeddings: %+v", ad)
	}
	if data := int64(len(files["variables/variables.data-00000-of-00001"])); sum != data {
		t.Errorf("tensors total %d bytes, the data shard is %d", sum, data)
	}

	// No index: MODEL_NOT_FOUND naming the directory.
	empty := t.TempDir()
	if _, errOut, code := inferctl(t, "variables", empty); code != 1 || !strings.Contains(errOut, "MODEL_NOT_FOUND") || !strings.Contains(errOut, empty) {
		t.Errorf("variables of an empty dir: exit %d, stderr %q", code, errOut)
	}
	// A corrupt index: INPUT_PARSING naming the file.
	bad := t.TempDir()
	writeModel(t, bad, map[string][]byte{"variables/variables.index": []byte("not a table")})
	if _, errOut, code := inferctl(t, "variables", bad); code != 1 || !strings.Contains(errOut, "INPUT_PARSING") || !strings.Contains(errOut, "variables.index") {
		t.Errorf("variables of a corrupt index: exit %d, stderr %q", code, errOut)
	}
}
