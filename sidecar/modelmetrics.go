package sidecar

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/inferbid/inferbid/inferr"
	"github.com/inferbid/inferbid/proto/inferencepb"
	"github.com/inferbid/inferbid/sidecar/registry"
)

// GetMetrics answers the sidecar's metric families.
func (s *Server) GetMetrics(ctx context.Context, req *inferencepb.GetMetricsRequest) (*inferencepb.GetMetricsResponse, error) {
	b, err := gatherProtoDelim(prometheus.Gatherers{s.reg.Gatherer(), s.stores})
	if err != nil {
		return nil, toStatus(inferr.Errorf(inferr.Unknown, "gather metrics: %v", err))
	}
	return &inferencepb.GetMetricsResponse{MetricFamilies: b}, nil
}

// Names of the sidecar's metric families (GetMetrics; bidding-server adds
// them to its /metrics): see package registry.
const (
	ModelDurationMetric  = registry.ModelDurationMetric
	ModelBatchSizeMetric = registry.ModelBatchSizeMetric
)

// gatherProtoDelim encodes g's metric families as FmtProtoDelim.
func gatherProtoDelim(g prometheus.Gatherer) ([]byte, error) {
	mfs, err := g.Gather()
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
