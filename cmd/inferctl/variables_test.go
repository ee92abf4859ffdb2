package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/varstore"
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

// TestExportVariablesCommand exports pCTR's ad embedding to a real
// 3-master Redis Cluster: the rows the store then answers are the
// checkpoint's bytes under the model's checksum; a second run resumes
// (writes nothing), --restart writes again, and bad input is refused.
func TestExportVariablesCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeModel(t, dir, files)
	const name = "ad_embedding/embeddings"
	args := []string{"export-variables", "--variable", name, "--store", rc.URL(), "--model-path", "pctr/v1/", dir}
	out, errOut, code := inferctl(t, args...)
	if code != 0 || !strings.Contains(out, "exported pctr/v1/") || !strings.Contains(errOut, "100/100 rows (100%)") {
		t.Fatalf("export: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	sum, err := modelfiles.ChecksumPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := varstore.Open(rc.URL(), varstore.Options{CacheRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ids := []int64{0, 42, 99}
	got := make([]byte, len(ids)*16)
	if err := st.Rows(ctx, sum, name, ids, 16, got); err != nil {
		t.Fatal(err)
	}
	want := tfsave.Weight(1, 0.5, tfsave.PCTRAdVocab*tfsave.PCTREmbedDim)
	for i, id := range ids {
		for j := 0; j < 4; j++ {
			v := math.Float32frombits(binary.LittleEndian.Uint32(got[i*16+4*j:]))
			if w := want[int(id)*4+j]; math.Float32bits(v) != math.Float32bits(w) {
				t.Fatalf("row %d[%d] in the store = %v, the checkpoint's %v", id, j, v, w)
			}
		}
	}
	// Resumed: all rows recorded, nothing written.
	if _, errOut, code := inferctl(t, args...); code != 0 || !strings.Contains(errOut, "from row 100") || strings.Contains(errOut, "rows (") {
		t.Errorf("second export: exit %d, stderr %q; want a resume with nothing to write", code, errOut)
	}
	if _, errOut, code := inferctl(t, append([]string{"export-variables", "--restart"}, args[1:]...)...); code != 0 || !strings.Contains(errOut, "from row 0") || !strings.Contains(errOut, "100/100") {
		t.Errorf("--restart: exit %d, stderr %q", code, errOut)
	}
	// A run stopped after 40 rows resumes at row 40 and records all 100.
	if err := st.SetExportedRows(ctx, sum, name, 40); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := inferctl(t, args...); code != 0 || !strings.Contains(errOut, "from row 40") || !strings.Contains(errOut, "100/100") {
		t.Errorf("resumed export: exit %d, stderr %q; want a resume from row 40", code, errOut)
	}
	if n, err := st.ExportedRows(ctx, sum, name); err != nil || n != 100 {
		t.Errorf("after the resumed export %d rows recorded (%v), want 100", n, err)
	}
	// A negative count (not an export's) starts over instead of reading
	// before the table.
	if err := st.SetExportedRows(ctx, sum, name, -5); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := inferctl(t, args...); code != 0 || !strings.Contains(errOut, "from row 0") || !strings.Contains(errOut, "100/100") {
		t.Errorf("export after a negative count: exit %d, stderr %q; want a run from row 0", code, errOut)
	}

	bad := append([]string(nil), args...)
	bad[2] = "no/such"
	if _, errOut, code := inferctl(t, bad...); code != 1 || !strings.Contains(errOut, "INPUT_PARSING") || !strings.Contains(errOut, "no/such") {
		t.Errorf("unknown variable: exit %d, stderr %q", code, errOut)
	}
	// A corrupt table: the CRC check refuses it before anything is written.
	data := filepath.Join(dir, "variables", "variables.data-00000-of-00001")
	b, _ := os.ReadFile(data)
	ts, err := tensorflow.CheckpointTensors(files["variables/variables.index"])
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range ts {
		if ct.Name == name {
			b[ct.Offset+5] ^= 1 // inside the table
		}
	}
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := inferctl(t, append([]string{"export-variables", "--restart"}, args[1:]...)...); code != 1 || !strings.Contains(errOut, "crc32c") {
		t.Errorf("corrupt checkpoint: exit %d, stderr %q", code, errOut)
	}
	badSum, err := modelfiles.ChecksumPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := st.ExportedRows(ctx, badSum, name); err != nil || n != 0 {
		t.Errorf("corrupt checkpoint: %d rows recorded as exported (%v), want 0", n, err)
	}
	if err := st.Rows(ctx, badSum, name, []int64{0}, 16, got[:16]); err == nil {
		t.Error("corrupt checkpoint: row 0 was written under its checksum")
	}
}
