package kserve_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestSequencesPerClientCap: one client (remote host 127.0.0.1) can hold
// at most the per-client cap of a model's sequences (64 slots: the default
// cap is 16); past it its starts fail with 503 naming the cap, while
// another client (127.0.0.2) still starts sequences, and an end gives the
// first client a slot back. A client cannot name the client itself.
func TestSequencesPerClientCap(t *testing.T) {
	_, url := statefulServer(t, 64)
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	post := func(c *http.Client, body string) (int, string) {
		t.Helper()
		resp, err := c.Post(url+"/v1/models/sum:predict", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	start := `{"inputs": {"x": [1], "sequence_control_input": [1]}}`
	var ids []uint64
	for i := range 16 {
		code, body := post(http.DefaultClient, start)
		var out tfsOutputs
		if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || len(out.Outputs.SequenceID) != 1 {
			t.Fatalf("start %d: %d %s", i, code, body)
		}
		ids = append(ids, out.Outputs.SequenceID[0])
	}
	if code, body := post(http.DefaultClient, start); code != http.StatusServiceUnavailable || !strings.Contains(body, "per-client cap") || !strings.Contains(body, "127.0.0.1") {
		t.Fatalf("17th start of one client: %d %s, want 503 naming the per-client cap", code, body)
	}
	if code, body := post(other, start); code != http.StatusOK {
		t.Fatalf("another client's start: %d %s", code, body)
	}
	end := `{"inputs": {"x": [1], "sequence_control_input": [2], "sequence_id": [` + jsonUint(ids[0]) + `]}}`
	if code, body := post(http.DefaultClient, end); code != http.StatusOK {
		t.Fatalf("end: %d %s", code, body)
	}
	if code, body := post(http.DefaultClient, start); code != http.StatusOK {
		t.Fatalf("start after an end: %d %s", code, body)
	}
	if code, body := post(http.DefaultClient, `{"inputs": {"x": [1], "sequence_control_input": [1], "sequence_client": ["someone else"]}}`); code != http.StatusBadRequest || !strings.Contains(body, "sequence_client") {
		t.Errorf("a request naming sequence_client: %d %s, want 400", code, body)
	}
}

func jsonUint(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
