package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/kserve"
	"github.com/inferbid/inferbid/modelstore"
)

// modelRepo is the v2 model repository extension (--kserve_model_repository)
// over the models the operator configured: the local paths
// (--inference_model_local_paths) and the bucket config's entries. Unload
// deletes a model from the sidecar and keeps it out (a bucket model is
// held by the watcher, so no poll registers it again); load registers it
// again (a local one from disk, a bucket one by the watcher's next sync).
type modelRepo struct {
	local []localModel
	srv   *server

	mu       sync.Mutex
	reg      modelstore.Registrar // nil until the sidecar runs
	unloaded map[string]bool      // local model paths unloaded
}

func newModelRepo(cfg config, srv *server) *modelRepo {
	return &modelRepo{local: cfg.LocalModels, srv: srv, unloaded: map[string]bool{}}
}

// setRegistrar sets the sidecar once it has started.
func (r *modelRepo) setRegistrar(reg modelstore.Registrar) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reg = reg
}

// paths lists every configured model path: local ones, then the bucket's.
func (r *modelRepo) paths() (local map[string]localModel, all []string) {
	local = map[string]localModel{}
	for _, lm := range r.local {
		local[lm.ModelPath] = lm
		all = append(all, lm.ModelPath)
	}
	if w := r.srv.watcher.Load(); w != nil {
		for _, p := range w.Listed() {
			if _, dup := local[p]; !dup {
				all = append(all, p)
			}
		}
	}
	return local, all
}

// pathsOf lists the configured model paths of a v2 name.
func (r *modelRepo) pathsOf(name string) (map[string]localModel, []string, error) {
	local, all := r.paths()
	var out []string
	for _, p := range all {
		if n, _ := kserve.SplitModelPath(p); n == name {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, nil, inferr.Errorf(inferr.ModelNotFound, "model %q is not configured: the model repository knows the local paths (--inference_model_local_paths) and the bucket config's entries", name)
	}
	return local, out, nil
}

func (r *modelRepo) registrar() (modelstore.Registrar, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reg == nil {
		return nil, errors.New("inference is not available: no sidecar (disabled, or still starting)")
	}
	return r.reg, nil
}

func (r *modelRepo) Index(ctx context.Context) ([]kserve.RepositoryModel, error) {
	_, all := r.paths()
	serving := map[string]bool{}
	if lister := r.srv.models; lister != nil {
		paths, err := lister.ModelPaths(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the sidecar's models: %w", err)
		}
		for _, p := range paths {
			serving[p] = true
		}
	}
	failed := map[string]string{}
	w := r.srv.watcher.Load()
	if w != nil {
		for _, st := range w.Status() {
			if st.State == modelstore.ModelFailed {
				failed[st.Path] = st.LastError
			}
		}
	}
	r.mu.Lock()
	unloaded := maps.Clone(r.unloaded)
	r.mu.Unlock()
	out := make([]kserve.RepositoryModel, 0, len(all))
	for _, p := range all {
		name, version := kserve.SplitModelPath(p)
		m := kserve.RepositoryModel{Name: name, Version: version}
		switch {
		case unloaded[p] || (w != nil && w.Held(p)):
			m.State, m.Reason = kserve.StateUnavailable, "unloaded"
		case serving[p]:
			m.State = kserve.StateReady
		case failed[p] != "":
			m.State, m.Reason = kserve.StateUnavailable, failed[p]
		default:
			m.State = kserve.StateLoading
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b kserve.RepositoryModel) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (r *modelRepo) Load(ctx context.Context, name string) error {
	local, paths, err := r.pathsOf(name)
	if err != nil {
		return err
	}
	reg, err := r.registrar()
	if err != nil {
		return err
	}
	bucket := false
	for _, p := range paths {
		if lm, ok := local[p]; ok {
			if err := registerLocal(ctx, reg, lm); err != nil {
				return fmt.Errorf("load model %q (model path %q, local %s): %w", name, p, lm.Local, err)
			}
			r.mu.Lock()
			delete(r.unloaded, p)
			r.mu.Unlock()
			continue
		}
		bucket = true
		r.srv.watcher.Load().Release(p)
	}
	if bucket {
		// The watcher registers the released paths (and anything else the
		// config asks for) now rather than at its next poll.
		if err := r.srv.watcher.Load().SyncOnce(ctx); err != nil {
			return fmt.Errorf("load model %q from the bucket: %w", name, err)
		}
	}
	return nil
}

func (r *modelRepo) Unload(ctx context.Context, name string) error {
	local, paths, err := r.pathsOf(name)
	if err != nil {
		return err
	}
	reg, err := r.registrar()
	if err != nil {
		return err
	}
	for _, p := range paths {
		if _, ok := local[p]; ok {
			if err := reg.DeleteModel(ctx, p); err != nil && inferr.TypeOf(err) != inferr.ModelNotFound {
				return fmt.Errorf("unload model %q (model path %q): %w", name, p, err)
			}
			r.mu.Lock()
			r.unloaded[p] = true
			r.mu.Unlock()
			continue
		}
		if err := r.srv.watcher.Load().Hold(ctx, p); err != nil {
			return fmt.Errorf("unload model %q (model path %q): %w", name, p, err)
		}
	}
	return nil
}
