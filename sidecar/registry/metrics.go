package registry

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferbid/inferbid/runtimes"
)

// Names of the sidecar's metric families (GetMetrics; bidding-server adds
// them to its /metrics).
const (
	// ModelDurationMetric is a histogram by model_path and stage:
	// end_to_end (an entry's arrival in the sidecar to its answer), queue
	// (its arrival to the start of the runtime call that answered it:
	// behind the request's other entries, in a dynamic batch, behind its
	// sequence's previous request) and compute (each runtime call: a merged
	// batch is one).
	ModelDurationMetric = "inferbid_sidecar_model_duration_seconds"
	// ModelBatchSizeMetric is a histogram by model_path of the rows of each
	// runtime call (the first input's leading dimension; a merged batch's
	// rows once).
	ModelBatchSizeMetric = "inferbid_sidecar_model_batch_size"
)

// The stage label's values.
const (
	stageEndToEnd = "end_to_end"
	stageQueue    = "queue"
	stageCompute  = "compute"
)

// latencyBuckets cover a 3 µs model call to a multi-second one.
var latencyBuckets = prometheus.ExponentialBuckets(10e-6, 2.5, 15)

// modelMetrics are the per-model histograms, in a Prometheus registry of
// their own (Gatherer).
type modelMetrics struct {
	reg      *prometheus.Registry
	duration *prometheus.HistogramVec // model_path, stage
	rows     *prometheus.HistogramVec // model_path

	mu     sync.Mutex
	byPath map[string]*pathMetrics
}

// pathMetrics are one model path's observers, resolved once at
// registration: a call observes without a label lookup or an allocation.
type pathMetrics struct {
	endToEnd, queue, compute, rows prometheus.Observer
}

func newModelMetrics() *modelMetrics {
	mm := &modelMetrics{
		reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    ModelDurationMetric,
			Help:    "Inference sidecar: per-model latency by stage: end_to_end (an entry's arrival to its answer), queue (its arrival to the start of the runtime call that answered it) and compute (each runtime call; a merged batch is one).",
			Buckets: latencyBuckets}, []string{"model_path", "stage"}),
		rows: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    ModelBatchSizeMetric,
			Help:    "Inference sidecar: rows (first dimension) of each runtime call by model; a merged dynamic batch counts once with all its rows.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}, []string{"model_path"}),
		byPath: map[string]*pathMetrics{},
	}
	mm.reg.MustRegister(mm.duration, mm.rows)
	return mm
}

// forPath returns path's observers, making them on first use.
func (mm *modelMetrics) forPath(path string) *pathMetrics {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	pm := mm.byPath[path]
	if pm == nil {
		pm = &pathMetrics{
			endToEnd: mm.duration.WithLabelValues(path, stageEndToEnd),
			queue:    mm.duration.WithLabelValues(path, stageQueue),
			compute:  mm.duration.WithLabelValues(path, stageCompute),
			rows:     mm.rows.WithLabelValues(path),
		}
		mm.byPath[path] = pm
	}
	return pm
}

// forget drops path's series (a deleted model), so that paths that come
// and go do not grow the label set.
func (mm *modelMetrics) forget(path string) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	delete(mm.byPath, path)
	mm.duration.DeletePartialMatch(prometheus.Labels{"model_path": path})
	mm.rows.DeletePartialMatch(prometheus.Labels{"model_path": path})
}

// ObserveCall is runtimes.CallObserver: one runtime call.
func (pm *pathMetrics) ObserveCall(rows int, d time.Duration, _ error) {
	pm.compute.Observe(d.Seconds())
	if rows > 0 {
		pm.rows.Observe(float64(rows))
	}
}

var _ runtimes.CallObserver = (*pathMetrics)(nil)

// entry records one entry's end-to-end and queue times.
func (pm *pathMetrics) entry(arrived, started time.Time, queued time.Duration) {
	now := time.Now()
	pm.endToEnd.Observe(now.Sub(arrived).Seconds())
	pm.queue.Observe((started.Sub(arrived) + queued).Seconds())
}

// Gatherer gathers the registry's per-model histograms (the sidecar's
// GetMetrics answers them).
func (r *Registry) Gatherer() prometheus.Gatherer { return r.metrics.reg }
