package modelstore

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Fetch results counted in inferbid_modelstore_fetches_total{kind,result}.
const (
	resultSuccess   = "success"
	resultUnchanged = "unchanged" // config object not modified since the last poll
	// failures
	reasonNotFound   = "not_found"
	reasonRead       = "read_error"
	reasonParse      = "parse_error"
	reasonTooLarge   = "too_large"
	reasonChecksum   = "checksum_mismatch"
	reasonList       = "list_error"
	reasonEmpty      = "no_objects"
	reasonBadObject  = "bad_object_key"
	reasonRegister   = "register_error"
	reasonDelete     = "delete_error"
	reasonCanceled   = "canceled"
	reasonLocalError = "local_io_error"
	// a file:// object that resolves outside the bucket root (a symlink)
	reasonOutsideRoot = "outside_bucket_root"
)

type metrics struct {
	fetches       *prometheus.CounterVec // kind=config|model, result
	registrations *prometheus.CounterVec // kind=load|update, outcome=success|failure
	deletions     *prometheus.CounterVec // outcome
	available     prometheus.Gauge
	regSeconds    *prometheus.GaugeVec // model_path: last registration+warm-up latency
	regHistogram  prometheus.Histogram
	downloadBytes prometheus.Counter
	lastGood      prometheus.Gauge // unix seconds of the last good sync
	deferred      prometheus.Counter
	failing       prometheus.Gauge
	badEntries    prometheus.Gauge
	drifted       prometheus.Counter

	mu         sync.Mutex
	lastGoodAt time.Time
	startedAt  time.Time
	now        func() time.Time
}

func newMetrics(reg prometheus.Registerer, now func() time.Time) (*metrics, error) {
	m := &metrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_modelstore_fetches_total",
			Help: "Config and model fetches from the bucket by kind (config, model) and result (success, unchanged, or the failure reason).",
		}, []string{"kind", "result"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_modelstore_registrations_total",
			Help: "Model registrations with the sidecar by kind (load, update) and outcome (success, failure).",
		}, []string{"kind", "outcome"}),
		deletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferbid_modelstore_deletions_total",
			Help: "Model deletions from the sidecar by outcome (success, failure).",
		}, []string{"outcome"}),
		available: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inferbid_modelstore_models_available",
			Help: "Models the watcher has registered and not deleted.",
		}),
		regSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inferbid_modelstore_registration_seconds",
			Help: "Duration of the last successful registration (load, validation and warm-up in the sidecar) per model path.",
		}, []string{"model_path"}),
		regHistogram: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "inferbid_modelstore_registration_duration_seconds",
			Help:    "Durations of successful registrations including warm-up.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		downloadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_modelstore_download_bytes_total",
			Help: "Bytes of model files downloaded from the bucket.",
		}),
		lastGood: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inferbid_modelstore_last_good_sync_timestamp_seconds",
			Help: "Unix time of the last poll that read the config and completed every due action.",
		}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_modelstore_retries_deferred_total",
			Help: "Polls at which a model whose last attempt failed was not downloaded again: its config entry and bucket objects are unchanged and its retry back-off runs.",
		}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inferbid_modelstore_models_failing",
			Help: "Models the config lists whose last load or update failed (retried with back-off).",
		}),
		badEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inferbid_modelstore_config_invalid_entries",
			Help: "Entries of the model config in force that were rejected; the models they name stay as they were.",
		}),
		drifted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferbid_modelstore_content_drift_total",
			Help: "Serving models whose bucket content was found to no longer match the checksum they serve under, without a config change (counted once per content).",
		}),
		now:       now,
		startedAt: now(),
	}
	if reg == nil {
		return m, nil
	}
	since := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "inferbid_modelstore_seconds_since_last_good_sync",
		Help: "Seconds since the last good sync (since the watcher started when none was good yet).",
	}, m.sinceLastGood)
	for _, c := range []prometheus.Collector{m.fetches, m.registrations, m.deletions, m.available,
		m.regSeconds, m.regHistogram, m.downloadBytes, m.lastGood, m.deferred, m.failing, m.badEntries, m.drifted, since} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) sinceLastGood() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	ref := m.lastGoodAt
	if ref.IsZero() {
		ref = m.startedAt
	}
	return m.now().Sub(ref).Seconds()
}

func (m *metrics) goodSync(t time.Time) {
	m.mu.Lock()
	m.lastGoodAt = t
	m.mu.Unlock()
	m.lastGood.Set(float64(t.UnixNano()) / 1e9)
}
