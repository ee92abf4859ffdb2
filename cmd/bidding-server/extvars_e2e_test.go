package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inferbid/inferbid/internal/testhelp"
	"github.com/inferbid/inferbid/modelstore/modelfiles"
	"github.com/inferbid/inferbid/modelstore/storetest"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/runtimes/tensorflow"
	"github.com/inferbid/inferbid/runtimes/tensorflow/tfsave"
	"github.com/inferbid/inferbid/varstore"
)

// TestEndToEndExternalVariables: bidding-server and the TensorFlow sidecar
// binaries, a file:// bucket whose model_metadata lists the pCTR model
// twice, once with its ad embedding table in a real 3-master Redis Cluster
// (external_variables; its rows exported shifted by one, so that only rows
// read from the store give ext/'s answers), and once more with a dense
// kernel named external, which the registration refuses naming the MatMul.
// A batch through POST /v1/predict answers ext/ as mem/ answers the next
// ids, the same again from the cache; /metrics reports the cache.
func TestEndToEndExternalVariables(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs binaries, starts a Redis Cluster")
	}
	rc := testhelp.StartRedisCluster(t, 3)
	server := testhelp.BuildBinary(t, "cmd/bidding-server", false)
	sidecarBin := testhelp.BuildBinary(t, "cmd/inference-sidecar-tensorflow", false)
	files, err := tfsave.PCTRModel(tfsave.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const table = "ad_embedding/embeddings"
	sum := modelfiles.Checksum(files)
	exportShifted(t, rc.URL(), files, sum, table)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bucket := "file://" + dir
	for _, p := range []string{"mem/", "ext/", "bad/"} {
		if err := storetest.WriteFiles(ctx, bucket, p, files); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`{"model_metadata":[
		{"model_path":"mem/","checksum":%q},
		{"model_path":"ext/","checksum":%q,"external_variables":{%q:%q}},
		{"model_path":"bad/","checksum":%q,"external_variables":{"dense/kernel":%q}}]}`,
		sum, sum, table, rc.URL(), sum, rc.URL())
	if err := storetest.WriteFiles(ctx, bucket, "", runtimes.Files{"model_config.json": []byte(cfg)}); err != nil {
		t.Fatal(err)
	}
	s := startBiddingServer(t, server, []string{
		"--inference_model_bucket_name", bucket,
		"--inference_model_config_path", "model_config.json",
		"--inference_sidecar_binary_path", sidecarBin,
		"--inference_external_variables_cache_bytes", "1048576",
	}, nil)
	if kids := sidecarPIDs(s.cmd.Process.Pid); len(kids) != 1 {
		t.Errorf("sidecar children: %v", kids)
	} else if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", kids[0])); err != nil || !strings.Contains(string(cmdline), "--external_variables_cache_bytes\x001048576") {
		t.Errorf("the sidecar's command line %q (%v) does not pass the cache size on", cmdline, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, body := get(t, s.url+"/v1/models")
		if strings.Contains(body, `"model_paths":["ext/","mem/"]`) && strings.Contains(s.log(), "MatMul") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/v1/models: %s; want ext/ and mem/ serving and bad/ refused naming the MatMul", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if l := s.log(); !strings.Contains(l, "dense/kernel") || !strings.Contains(l, "only gathers may read it") {
		t.Errorf("bad/'s refusal does not name the variable and the rule:\n%s", l)
	}

	entry := func(path string, ads []int64) string {
		var ids []string
		for _, a := range ads {
			ids = append(ids, fmt.Sprintf("%q", fmt.Sprint(a)))
		}
		n := len(ads)
		dense := strings.TrimSuffix(strings.Repeat(`"0.25",`, n*tfsave.PCTRDense), ",")
		pubs := strings.TrimSuffix(strings.Repeat(`"3",`, n), ",")
		return fmt.Sprintf(`{"model_path":%q,"tensors":[
			{"tensor_name":"ad_id","data_type":"INT64","tensor_shape":[%d,1],"tensor_content":[%s]},
			{"tensor_name":"publisher_id","data_type":"INT64","tensor_shape":[%d,1],"tensor_content":[%s]},
			{"tensor_name":"dense","data_type":"FLOAT","tensor_shape":[%d,%d],"tensor_content":[%s]}]}`,
			path, n, strings.Join(ids, ","), n, pubs, n, tfsave.PCTRDense, dense)
	}
	ads := []int64{0, 12, 47, 98, 99, 12}
	next := make([]int64, len(ads))
	for i, a := range ads {
		next[i] = (a + 1) % tfsave.PCTRAdVocab
	}
	req := `{"request":[` + entry("ext/", ads) + "," + entry("mem/", next) + "," + entry("mem/", ads) + `]}`
	code, body := post(t, s.url+"/v1/predict", req)
	if code != 200 {
		t.Fatalf("predict: %d %s", code, body)
	}
	if code2, body2 := post(t, s.url+"/v1/predict", req); code2 != 200 || body2 != body {
		t.Fatalf("the same batch again (from the cache): %d %s, want %s", code2, body2, body)
	}
	var resp struct {
		Response []struct {
			ModelPath string          `json:"model_path"`
			Tensors   json.RawMessage `json:"tensors"`
			Error     json.RawMessage `json:"error"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Response) != 3 {
		t.Fatalf("predict: %s (%v)", body, err)
	}
	ext, shifted, same := resp.Response[0], resp.Response[1], resp.Response[2]
	if ext.Error != nil || len(ext.Tensors) == 0 || string(ext.Tensors) != string(shifted.Tensors) {
		t.Fatalf("ext/ answers %s (error %s), want mem/'s answer for the next ids %s", ext.Tensors, ext.Error, shifted.Tensors)
	}
	if string(ext.Tensors) == string(same.Tensors) {
		t.Fatalf("ext/ answers as the in-memory table: %s", ext.Tensors)
	}
	if v := metricValue(t, s.url, `inferbid_sidecar_external_variables_cache_misses_total{store="`+rc.URL()+`"}`); v < 5 {
		t.Errorf("cache misses = %v, want the 5 distinct ids at least", v)
	}
	if v := metricValue(t, s.url, `inferbid_sidecar_external_variables_cache_hits_total{store="`+rc.URL()+`"}`); v < 1 {
		t.Errorf("cache hits = %v, want the second batch's", v)
	}
	s.stop(t)
}

// exportShifted writes the checkpoint's table rows to the store under sum,
// row i holding row i+1 (mod rows).
func exportShifted(t *testing.T, url string, files map[string][]byte, sum, name string) {
	t.Helper()
	ts, err := tensorflow.CheckpointTensors(files["variables/variables.index"])
	if err != nil {
		t.Fatal(err)
	}
	st, err := varstore.Open(url, varstore.Options{CacheRows: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, ct := range ts {
		if ct.Name != name {
			continue
		}
		data := files["variables/variables.data-00000-of-00001"][ct.Offset : ct.Offset+ct.Bytes]
		rows, rowBytes := ct.Shape[0], ct.Bytes/ct.Shape[0]
		var tab []byte
		for i := range rows {
			j := (i + 1) % rows
			tab = append(tab, data[j*rowBytes:(j+1)*rowBytes]...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.PutRows(ctx, sum, name, 0, tab, int(rowBytes)); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no variable %q", name)
}
