package main

// A full join of a 50 MB view over SSE: one thread of 100,000 messages
// reduced by the real ingest, joined cold (the fanout holds no feed, so
// the snapshot reply of about 110 MB travels from ingest in parts, window
// by window) against a bare net/http handler writing the same bytes, as
// fanout/snapshot_bench_test.go measures it (BenchmarkSnapshotSSE).

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "snapshot",
		summary: "a full 50 MB snapshot over SSE vs a bare net/http handler of the same bytes (fanout's own benchmark)",
		run:     runSnapshot,
	})
}

func runSnapshot(e *env) error {
	n := "5x"
	if e.quick {
		n = "1x"
	}
	lines, err := goBench("./fanout", "^BenchmarkSnapshotSSE$", n, 1, "20m")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "\nFull join of a 50 MB view over SSE vs bare net/http (fanout benchmark, %s joins each)\n", n)
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tsnapshot MB\tthreadcast MB/s\tbare MB/s\tratio\tthreadcast MB/CPU-s\tbare MB/CPU-s\t")
	for _, mode := range []string{"agui", "view"} {
		m := map[string]float64{}
		for _, l := range lines {
			if l.name == "BenchmarkSnapshotSSE/mode="+mode {
				m = l.metrics
			}
		}
		if len(m) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t\n", mode)
			e.record(summaryRow{"snapshot", "full 50 MB join over SSE, " + mode, "not reported", "≥100 MB/s", "-"})
			continue
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t\n", mode, m["snapshot_MB"], m["tc_MB/s"], m["bare_MB/s"], m["ratio"],
			m["tc_MB/cpu_s"], m["bare_MB/cpu_s"])
		e.record(summaryRow{"snapshot", "full 50 MB join over SSE, " + mode, fmt.Sprintf("%.0f MB/s (bare %.0f)", m["tc_MB/s"], m["bare_MB/s"]),
			"≥100 MB/s", verdict(m["tc_MB/s"], 100)})
	}
	return tw.Flush()
}
