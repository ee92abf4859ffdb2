package sidecar

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
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

// modelMetrics are the sidecar's per-model histograms, in a registry of
// their own that GetMetrics gathers.
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

// gather encodes the metric families as FmtProtoDelim.
func (mm *modelMetrics) gather() ([]byte, error) {
	mfs, err := mm.reg.Gather()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// GetMetrics answers the sidecar's metric families.
func (s *Server) GetMetrics(ctx context.Context, req *inferencepb.GetMetricsRequest) (*inferencepb.GetMetricsResponse, error) {
	b, err := s.reg.metrics.gather()
	if err != nil {
		return nil, toStatus(inferr.Errorf(inferr.Unknown, "gather metrics: %v", err))
	}
	return &inferencepb.GetMetricsResponse{MetricFamilies: b}, nil
}

// Gatherer returns a prometheus.Gatherer of the sidecar's metric families
// (GetMetrics), for the host's /metrics. Each Gather asks the sidecar,
// within timeout (0 = 2 s); a sidecar that cannot answer (down,
// restarting) gives no families and no error, so the host's own metrics
// are still served.
func (c *Client) Gatherer(timeout time.Duration) prometheus.Gatherer {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return sidecarGatherer{c: c, timeout: timeout}
}

type sidecarGatherer struct {
	c       *Client
	timeout time.Duration
}

func (g sidecarGatherer) Gather() ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	mfs, err := g.c.Metrics(ctx)
	if err != nil {
		g.c.log.Debug("sidecar metrics not gathered", "err", err)
		return nil, nil
	}
	return mfs, nil
}

// Metrics asks the sidecar for its metric families.
func (c *Client) Metrics(ctx context.Context) ([]*dto.MetricFamily, error) {
	resp, err := c.api.GetMetrics(ctx, &inferencepb.GetMetricsRequest{})
	if err != nil {
		return nil, fromStatus(err)
	}
	return decodeMetricFamilies(resp.GetMetricFamilies())
}

// decodeMetricFamilies reads FmtProtoDelim metric families.
func decodeMetricFamilies(b []byte) ([]*dto.MetricFamily, error) {
	dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var mfs []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if err == io.EOF {
				return mfs, nil
			}
			return nil, inferr.Errorf(inferr.OutputParsing, "sidecar metrics: %v", err)
		}
		mfs = append(mfs, mf)
	}
}
