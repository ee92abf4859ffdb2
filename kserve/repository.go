package kserve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/internal/httpjson"
)

// Repository is what the model repository extension serves: the models an
// operator configured (local paths, the bucket's config), by v2 name. The
// extension is off unless Options.Repository is set.
type Repository interface {
	// Index lists every configured model version with its state.
	Index(ctx context.Context) ([]RepositoryModel, error)
	// Load (re)loads every version of the named model into the sidecar;
	// an inferr.ModelNotFound error for a name the configuration does
	// not know.
	Load(ctx context.Context, name string) error
	// Unload removes the named model's versions from the sidecar until the
	// next Load.
	Unload(ctx context.Context, name string) error
}

// RepositoryModel is one entry of the repository index.
type RepositoryModel struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// State is READY, LOADING, UNAVAILABLE (unloaded or failed) or
	// UNLOADING, as Triton names them.
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Model states of the repository index.
const (
	StateReady       = "READY"
	StateLoading     = "LOADING"
	StateUnavailable = "UNAVAILABLE"
)

const (
	epRepoIndex  = "repository_index"
	epRepoLoad   = "repository_load"
	epRepoUnload = "repository_unload"
)

// repositoryRoute is the endpoint of a /v2/repository path, "" if none.
func repositoryRoute(path string) (ep, name string) {
	if path == "/v2/repository/index" {
		return epRepoIndex, ""
	}
	rest, ok := strings.CutPrefix(path, "/v2/repository/models/")
	if !ok {
		return "", ""
	}
	if n, ok := strings.CutSuffix(rest, "/load"); ok && n != "" {
		return epRepoLoad, n
	}
	if n, ok := strings.CutSuffix(rest, "/unload"); ok && n != "" {
		return epRepoUnload, n
	}
	return "", ""
}

// serveRepository answers POST /v2/repository/index (optional body
// {"ready": true}: only the models that serve) and
// POST /v2/repository/models/NAME/load and /unload (an optional body's
// parameters: config overrides are not supported).
func (s *Server) serveRepository(w http.ResponseWriter, r *http.Request, ep, name string) int {
	repo := s.opts.Repository
	if repo == nil {
		return httpjson.Error(w, http.StatusNotFound, fmt.Sprintf("the model repository extension is off: %s %s is not served (bidding-server --kserve_model_repository turns it on)", r.Method, r.URL.Path))
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return httpjson.Error(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use POST", r.Method, r.URL.Path))
	}
	body, code, err := s.readBody(w, r)
	if err != nil {
		return httpjson.Error(w, code, err.Error())
	}
	var req gjson.Result
	if len(strings.TrimSpace(string(body))) > 0 {
		if !gjson.ValidBytes(body) || nestingDepth(body) > maxDepth {
			return httpjson.Error(w, http.StatusBadRequest, "request body is not a JSON object")
		}
		req = gjson.ParseBytes(body)
		if !req.IsObject() {
			return httpjson.Error(w, http.StatusBadRequest, "request body is not a JSON object")
		}
	}
	ctx := r.Context()
	switch ep {
	case epRepoIndex:
		readyOnly := false
		if v := req.Get("ready"); v.Exists() {
			if v.Type != gjson.True && v.Type != gjson.False {
				return httpjson.Error(w, http.StatusBadRequest, fmt.Sprintf(`"ready" is %s, want true or false`, inferr.ClipN(v.Raw, 32)))
			}
			readyOnly = v.Type == gjson.True
		}
		models, err := repo.Index(ctx)
		if err != nil {
			return httpjson.Error(w, StatusOf(err), err.Error())
		}
		out := make([]RepositoryModel, 0, len(models))
		for _, m := range models {
			if !readyOnly || m.State == StateReady {
				out = append(out, m)
			}
		}
		httpjson.Write(w, http.StatusOK, out)
		return http.StatusOK
	case epRepoLoad:
		if p := req.Get("parameters"); p.Exists() {
			if err := checkParameters("parameters", p); err != nil {
				return httpjson.Error(w, http.StatusBadRequest, err.Error())
			}
			var bad string
			p.ForEach(func(k, _ gjson.Result) bool {
				if k.Str == "config" || strings.HasPrefix(k.Str, "file:") {
					bad = k.Str
					return false
				}
				return true
			})
			if bad != "" {
				return httpjson.Error(w, http.StatusBadRequest, fmt.Sprintf("parameters: %q is not supported: models load as the local paths or the bucket's config give them", bad))
			}
		}
		err = repo.Load(ctx, name)
	case epRepoUnload:
		err = repo.Unload(ctx, name)
	}
	if err != nil {
		return httpjson.Error(w, StatusOf(err), err.Error())
	}
	// The paths the sidecar holds changed: forget the cached list.
	s.pathsMu.Lock()
	s.paths = nil
	s.pathsMu.Unlock()
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}

// readBody reads a request body up to Options.MaxRequestBytes; on error,
// the status to answer.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	var body bytes.Buffer
	if _, err := body.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes)); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body is larger than %d bytes", s.opts.MaxRequestBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("cannot read request body: %w", err)
	}
	return body.Bytes(), 0, nil
}
