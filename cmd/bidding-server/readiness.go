package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/inferbid/inferbid/modelstore"
)

// readinessPolicy is --readiness_policy: what the configured models must do
// before /readyz (and the v2 API's server ready, and the gRPC health
// service) says ready. Every policy but none waits until every configured
// model was tried once (the first model sync finished).
type readinessPolicy string

const (
	// policyAny: at least one configured model serves (the default: a
	// config whose every model fails is not a server to route to, one bad
	// model must not hold the good ones out of service).
	policyAny readinessPolicy = "any"
	// policyAll: every configured model serves.
	policyAll readinessPolicy = "all"
	// policyNone: models do not count; ready once the first sync ended.
	policyNone readinessPolicy = "none"
)

func parseReadinessPolicy(s string) (readinessPolicy, error) {
	switch p := readinessPolicy(s); p {
	case policyAny, policyAll, policyNone:
		return p, nil
	}
	return "", fmt.Errorf("--readiness_policy %q: want any, all or none", s)
}

// modelReadiness is the policy's verdict over the configured models once
// each was tried: the problems that make the server not ready (none =
// ready), and the failed models by name either way (a ready server with
// policy any still reports them). local counts the --inference_model_local_paths
// models, registered (they serve) before the bucket's first sync; unnamed
// are the errors of config entries rejected without a model path (each a
// configured model that does not serve).
// It holds the policy alone, so that what else readiness follows (start-up,
// the sidecar's health) stays apart from it.
func modelReadiness(policy readinessPolicy, local int, models []modelstore.ModelStatus, unnamed []string) (problems, failed []string) {
	if policy == "" {
		policy = policyAny
	}
	serving, configured := local, local
	var notServing []string
	for _, m := range models {
		switch m.State {
		case modelstore.ModelServing, modelstore.ModelDraining:
			configured++
			serving++
			continue
		case modelstore.ModelFailed:
			configured++
			failed = append(failed, fmt.Sprintf("%q: %s", m.Path, m.LastError))
		case modelstore.ModelLoading:
			configured++
			if m.LastError != "" {
				// Retried now: its last attempt's error says why it
				// does not serve.
				failed = append(failed, fmt.Sprintf("%q: %s (retrying)", m.Path, m.LastError))
				continue
			}
			notServing = append(notServing, fmt.Sprintf("%q: loading", m.Path))
		}
	}
	slices.Sort(failed)
	for _, e := range unnamed {
		configured++
		failed = append(failed, "an entry naming no model_path: "+e)
	}
	if policy == policyNone || configured == 0 {
		return nil, failed
	}
	all := append(slices.Clone(failed), notServing...)
	switch {
	case policy == policyAny && serving == 0:
		problems = append(problems, fmt.Sprintf("no configured model serves (--readiness_policy any needs one): %s", strings.Join(all, "; ")))
	case policy == policyAll && serving < configured:
		problems = append(problems, fmt.Sprintf("%d of %d configured models do not serve (--readiness_policy all needs every one): %s", configured-serving, configured, strings.Join(all, "; ")))
	}
	return problems, failed
}

// loadErrors are the configured models that failed to load, by path, with
// their last error (for the v2 API and TF Serving, which otherwise know
// only what the sidecar holds).
func (s *server) loadErrors() map[string]string {
	wt := s.watcher.Load()
	if wt == nil {
		return nil
	}
	var out map[string]string
	for _, st := range wt.Status() {
		// Failed, or loading again after a failure (a retry).
		if st.State == modelstore.ModelFailed || (st.State == modelstore.ModelLoading && st.LastError != "") {
			if out == nil {
				out = map[string]string{}
			}
			out[st.Path] = st.LastError
		}
	}
	return out
}
