//go:build cgo

package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/inferbid/inferbid/internal/benchlat"
)

// The serial rows, in the table's order.
var serialRows = []string{"raw-echo", "runtime", "fast-lane", "grpc", "js-string", "js-object", "js-worker", "js-inproc", "js-inproc-shared", "node-peer"}

// The concurrency section's rows.
var concurrentRows = []string{"fast-lane", "runtime", "node-peer"}

// concurrent names a row of the concurrency section.
func concurrent(row string) string { return fmt.Sprintf("%d-callers/%s", callers, row) }

// A ratio compares two rows at one batch size: latency (p50, lower is
// better) or throughput (calls/s, higher is better). A zero target is
// shown for information only.
type ratio struct {
	label      string
	num, den   string
	throughput bool
	target     map[int]float64 // by batch size
}

var ratios = []ratio{
	{label: "fast-lane / raw-echo, p50", num: "fast-lane", den: "raw-echo", target: map[int]float64{1: 1.5, 64: 1.5}},
	{label: "js-string / node-peer, p50", num: "js-string", den: "node-peer", target: map[int]float64{1: 2.0, 64: 1.2}},
	{label: "js-object / node-peer, p50", num: "js-object", den: "node-peer", target: map[int]float64{1: 2.0, 64: 1.2}},
	{label: "js-worker / node-peer, p50", num: "js-worker", den: "node-peer", target: map[int]float64{1: 2.0, 64: 1.2}},
	{label: fmt.Sprintf("fast-lane / runtime, %d callers, calls/s", callers), num: concurrent("fast-lane"), den: concurrent("runtime"), throughput: true, target: map[int]float64{1: 0.8, 64: 0.8}},
	{label: "grpc / fast-lane, p50", num: "grpc", den: "fast-lane"},
	{label: "fast-lane / runtime, p50", num: "fast-lane", den: "runtime"},
	{label: "js-string / fast-lane, p50", num: "js-string", den: "fast-lane"},
	{label: "js-worker / js-string, p50", num: "js-worker", den: "js-string"},
	{label: "runtime / node-peer, p50", num: "runtime", den: "node-peer"},
	{label: "js-inproc / node-peer, p50", num: "js-inproc", den: "node-peer"},
	{label: "js-inproc / js-inproc-shared, p50", num: "js-inproc", den: "js-inproc-shared"},
}

// maxTail is the p99/p50 target of every row.
const maxTail = 4.0

// A difference is a row's p50 minus another's at one batch size: the cost
// of what the first adds.
type difference struct {
	label    string
	num, den string
	target   time.Duration // 0: for information
}

var differences = []difference{
	{label: "worker hop = js-worker - js-string, p50", num: "js-worker", den: "js-string", target: 25 * time.Microsecond},
}

var batches = []int{1, 64}

type rowKey struct {
	batch int
	row   string
}

// table collects the rows' statistics and prints them.
type table struct {
	header []string
	stats  map[rowKey]benchlat.Stats
}

func (t *table) set(batch int, row string, s benchlat.Stats) {
	if t.stats == nil {
		t.stats = map[rowKey]benchlat.Stats{}
	}
	t.stats[rowKey{batch, row}] = s
}

func (t *table) get(batch int, row string) (benchlat.Stats, bool) {
	s, ok := t.stats[rowKey{batch, row}]
	return s, ok && s.Calls > 0
}

func (t *table) print(out io.Writer) {
	var sb strings.Builder
	sb.WriteString("\n=== Peer comparison: one request through each layer (bench/doc.go) ===\n")
	for _, h := range t.header {
		sb.WriteString(h + "\n")
	}
	w := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	rowsSection := func(title string, names []string, key func(string) string) {
		fmt.Fprintf(&sb, "\n%s\n", title)
		fmt.Fprintf(w, "batch\trow\t%8s\t%9s\t%9s\t%9s\tp99/p50 (≤ %.0fx)\n", "calls", "p50 µs", "p99 µs", "calls/s", maxTail)
		for _, batch := range batches {
			for _, name := range names {
				s, ok := t.get(batch, key(name))
				if !ok {
					fmt.Fprintf(w, "%5d\t%s\t%8s\t%9s\t%9s\t%9s\t-\n", batch, name, "-", "-", "-", "-")
					continue
				}
				tail := float64(s.P99) / float64(s.P50)
				fmt.Fprintf(w, "%5d\t%s\t%8d\t%9.1f\t%9.1f\t%9.0f\t%5.1fx %s\n", batch, name, s.Calls, us(s.P50), us(s.P99), s.CallsPerSec, tail, verdict(tail, maxTail, true))
			}
		}
		w.Flush()
	}
	rowsSection("one caller (node-peer: onnx_peer.js, one call in flight)", serialRows, func(n string) string { return n })
	rowsSection(fmt.Sprintf("%d concurrent callers on one client / model / session (node-peer: %d calls in flight)", callers, callers), concurrentRows, concurrent)

	sb.WriteString("\nratios (latency: p50 over p50; throughput: calls/s over calls/s)\n")
	fmt.Fprintf(w, "ratio\tbatch\tmeasured\ttarget\n")
	for _, r := range ratios {
		for _, batch := range batches {
			n, ok1 := t.get(batch, r.num)
			d, ok2 := t.get(batch, r.den)
			target := r.target[batch]
			targetText, measured, v := "(info)", "-", ""
			if target > 0 {
				if r.throughput {
					targetText = fmt.Sprintf("≥ %.1fx", target)
				} else {
					targetText = fmt.Sprintf("≤ %.1fx", target)
				}
			}
			if ok1 && ok2 {
				var x float64
				if r.throughput {
					x = n.CallsPerSec / d.CallsPerSec
				} else {
					x = float64(n.P50) / float64(d.P50)
				}
				measured = fmt.Sprintf("%.2fx", x)
				if target > 0 {
					v = verdict(x, target, !r.throughput)
				}
			}
			fmt.Fprintf(w, "%s\t%5d\t%8s\t%s %s\n", r.label, batch, measured, targetText, v)
		}
	}
	w.Flush()
	sb.WriteString("\ndifferences (p50 minus p50)\n")
	fmt.Fprintf(w, "difference\tbatch\tmeasured\ttarget\n")
	for _, d := range differences {
		for _, batch := range batches {
			n, ok1 := t.get(batch, d.num)
			m, ok2 := t.get(batch, d.den)
			targetText, measured, v := "(info)", "-", ""
			if d.target > 0 {
				targetText = fmt.Sprintf("≤ %.0f µs", us(d.target))
			}
			if ok1 && ok2 {
				x := n.P50 - m.P50
				measured = fmt.Sprintf("%.1f µs", us(x))
				if d.target > 0 {
					v = verdict(us(x), us(d.target), true)
				}
			}
			fmt.Fprintf(w, "%s\t%5d\t%8s\t%s %s\n", d.label, batch, measured, targetText, v)
		}
	}
	w.Flush()
	sb.WriteString("targets are shown, never asserted\n\n")
	io.WriteString(out, sb.String())
}

// verdict says whether x meets a target that is a maximum (atMost) or a
// minimum.
func verdict(x, target float64, atMost bool) string {
	if (atMost && x <= target) || (!atMost && x >= target) {
		return "meets"
	}
	return "misses"
}

func us(d time.Duration) float64 { return d.Seconds() * 1e6 }
