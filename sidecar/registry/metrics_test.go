package registry

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/inferbid/inferbid/runtimes"
)

// TestQueueStageCountsTheBatchWait: a call that waits in a dynamic batch
// for company and finds none has at least the batch's delay in its queue
// stage, its runtime call alone in compute; two calls merged into one
// batch are two entries but one runtime call of their rows together.
func TestQueueStageCountsTheBatchWait(t *testing.T) {
	const delay = 100 * time.Millisecond // long enough for the second of two calls to join the first
	settings := Settings{DynamicBatching: &DynamicBatching{
		Default: BatchSettings{MaxBatchSize: 4, MaxDelayMicros: int(delay.Microseconds())}}}
	rt, _ := newRowsRuntime(runtimes.Config{})
	r, _ := batchingRegistry(t, rt, settings)
	register(t, r, "d/", rowsFiles("double"))
	if _, err := r.Predict(context.Background(), "d/", rowsInput(1, 1, 2), time.Now()); err != nil {
		t.Fatal(err)
	}
	stage := func(name string) *dto.Histogram {
		mfs, err := r.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		return histograms(mfs)[name]
	}
	queue := stage(ModelDurationMetric + `{model_path="d/",stage="queue"}`)
	e2e := stage(ModelDurationMetric + `{model_path="d/",stage="end_to_end"}`)
	if queue.GetSampleCount() != 1 || queue.GetSampleSum() < delay.Seconds() || e2e.GetSampleSum() < queue.GetSampleSum() {
		t.Errorf("a lone batched call: queue %v s, end to end %v s; want queue >= the batch delay %v, end to end >= queue", queue.GetSampleSum(), e2e.GetSampleSum(), delay)
	}

	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if _, err := r.Predict(context.Background(), "d/", rowsInput(i, 2, 2), time.Now()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	rows := stage(ModelBatchSizeMetric + `{model_path="d/"}`)
	compute := stage(ModelDurationMetric + `{model_path="d/",stage="compute"}`)
	if e := stage(ModelDurationMetric + `{model_path="d/",stage="end_to_end"}`); e.GetSampleCount() != 3 {
		t.Errorf("end_to_end: %d samples, want 3 (one per entry)", e.GetSampleCount())
	}
	if compute.GetSampleCount() != 2 || rows.GetSampleCount() != 2 || rows.GetSampleSum() != 5 {
		t.Errorf("compute %d calls, batch size %d calls of %v rows; want 2 calls (the lone one, the merged one) of 1 + 4 rows",
			compute.GetSampleCount(), rows.GetSampleCount(), rows.GetSampleSum())
	}
}

// histograms indexes the histograms of mfs as name{labels}.
func histograms(mfs []*dto.MetricFamily) map[string]*dto.Histogram {
	out := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetHistogram()
		}
	}
	return out
}
