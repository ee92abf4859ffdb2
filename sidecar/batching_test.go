package sidecar

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inferbid/inferbid/sidecar/registry"
)

// The server passes its Settings to the registry and exposes the batching
// counters: two calls (1 and 2 rows) of a model that batches only when 3
// rows wait run as one merged call.
func TestServerBatchingStats(t *testing.T) {
	rt, _ := newAffineRuntime()
	settings := registry.Settings{DynamicBatching: &registry.DynamicBatching{
		Models: map[string]registry.BatchSettings{"d/": {MaxBatchSize: 3, MaxDelayMicros: 600_000_000}}}}
	s, err := NewServer(ServerOptions{Runtime: rt, Settings: settings, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx := context.Background()
	if _, err := s.reg.Register(ctx, "d/", affineFiles("2 1"), "", nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, in := range [][]float32{{1, 2, 3}, {4, 5, 6, 7, 8, 9}} {
		wg.Go(func() {
			out, err := s.reg.Predict(ctx, "d/", x3(in...), time.Time{})
			if err != nil {
				t.Error(err)
				return
			}
			for i, y := range out[0].Data.([]float32) {
				if y != 2*in[i]+1 {
					t.Errorf("row value %d: %v, want %v", i, y, 2*in[i]+1)
				}
			}
		})
	}
	wg.Wait()
	if st := s.BatchingStats()["d/"]; st.Batches != 1 || st.Merged != 2 || st.Rows != 3 {
		t.Errorf("BatchingStats = %+v, want one merged call of 2 calls and 3 rows", s.BatchingStats())
	}
}
