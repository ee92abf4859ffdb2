package sidecar

import (
	"context"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/runtimes"
	"github.com/inferbid/inferbid/varstore"
)

// withExternalVariables returns ctx carrying a registration's external
// variables (runtimes.LoadOptions) for the runtime's load, keyed by
// checksum(), the checksum of the files received (modelfiles.Checksum: the
// one the model_metadata config and inferctl export-variables compute), so
// that the rows read are those exported for exactly these files. The
// variables are checked first (checkExternalVariables).
func withExternalVariables(ctx context.Context, path string, ext map[string]string, checksum func() string) (context.Context, error) {
	if len(ext) == 0 {
		return ctx, nil
	}
	if err := checkExternalVariables(path, ext); err != nil {
		return ctx, err
	}
	return runtimes.WithLoadOptions(ctx, runtimes.LoadOptions{Checksum: checksum(), ExternalVariables: ext}), nil
}

// checkExternalVariables checks the names and URLs of a registration's
// external variables, which come from any gRPC client (modelstore checks
// the ones it reads from model_metadata), so that a bad one is refused
// before the files are received or loaded, not after as the load's
// MODEL_EXECUTION error. Errors are INPUT_PARSING, naming the model path
// and the variable.
func checkExternalVariables(path string, ext map[string]string) error {
	names := make([]string, 0, len(ext))
	for name := range ext {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "" {
			return inferr.Errorf(inferr.InputParsing, "register model %s: external_variables: an empty variable name", inferr.Quote(path))
		}
		if _, err := varstore.ParseURL(ext[name]); err != nil {
			return inferr.Errorf(inferr.InputParsing, "register model %s: external_variables[%s]: %v", inferr.Quote(path), inferr.Quote(name), err)
		}
	}
	return nil
}

// Metric families of the stores serving external variables (GetMetrics),
// by store URL.
const (
	// ExternalCacheHitsMetric counts rows the local cache answered.
	ExternalCacheHitsMetric = "inferbid_sidecar_external_variables_cache_hits_total"
	// ExternalCacheMissesMetric counts rows fetched from the store.
	ExternalCacheMissesMetric = "inferbid_sidecar_external_variables_cache_misses_total"
	// ExternalCacheHitRatioMetric is hits / (hits + misses) since the
	// store was opened (rate() of the counters gives it over a window).
	ExternalCacheHitRatioMetric = "inferbid_sidecar_external_variables_cache_hit_ratio"
)

var (
	extHitsDesc  = prometheus.NewDesc(ExternalCacheHitsMetric, "Inference sidecar: rows of external variables (model_metadata external_variables) the local cache answered, by store.", []string{"store"}, nil)
	extMissDesc  = prometheus.NewDesc(ExternalCacheMissesMetric, "Inference sidecar: rows of external variables fetched from the store (cache misses), by store.", []string{"store"}, nil)
	extRatioDesc = prometheus.NewDesc(ExternalCacheHitRatioMetric, "Inference sidecar: the local cache's hit ratio of external variables' rows since the store was opened, by store.", []string{"store"}, nil)
)

// storeCollector reports the runtime's stores at each gather (none for a
// runtime without external variables).
type storeCollector struct{ rt *runtimes.Runtime }

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- extHitsDesc
	ch <- extMissDesc
	ch <- extRatioDesc
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.rt.ExternalVariableStats() {
		ch <- prometheus.MustNewConstMetric(extHitsDesc, prometheus.CounterValue, float64(s.Hits), s.URL)
		ch <- prometheus.MustNewConstMetric(extMissDesc, prometheus.CounterValue, float64(s.Misses), s.URL)
		if n := s.Hits + s.Misses; n > 0 {
			ch <- prometheus.MustNewConstMetric(extRatioDesc, prometheus.GaugeValue, float64(s.Hits)/float64(n), s.URL)
		}
	}
}
