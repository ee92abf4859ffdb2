package httpjson

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWriteAndError serves both helpers on a real server on 127.0.0.1 and
// reads the answers as a client does: status, content type, body bytes
// (no HTML escaping) and the error object.
func TestWriteAndError(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		Write(w, http.StatusCreated, map[string]any{"html": "<a & b>", "n": 1.5})
	})
	var returned int
	mux.HandleFunc("/err", func(w http.ResponseWriter, r *http.Request) {
		returned = Error(w, http.StatusBadRequest, `model "m/" is not "ready" <é>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(body)
	}

	resp, body := get("/ok")
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Write: status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if want := `{"html":"<a & b>","n":1.5}` + "\n"; body != want {
		t.Errorf("Write: body %q, want %q", body, want)
	}

	resp, body = get("/err")
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || returned != http.StatusBadRequest {
		t.Errorf("Error: status %d, content type %q, returned %d", resp.StatusCode, resp.Header.Get("Content-Type"), returned)
	}
	var obj map[string]string
	if err := json.Unmarshal([]byte(body), &obj); err != nil || len(obj) != 1 || obj["error"] != `model "m/" is not "ready" <é>` {
		t.Errorf("Error: body %q (%v), want the error object", body, err)
	}
}
