package main

// A late joiner of a long thread, whole against windowed (?window=50): the
// join's latency (p50) and the bytes sent before the first live frame, for
// threads of 1k, 10k and 100k messages, as fanout/join_bench_test.go
// measures them (BenchmarkJoin: real NATS, ingest and fanout; 41 windowed then 11
// whole joins per size, in one run).

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "join",
		summary: "joining a long thread: windowed (N=50) vs whole (fanout's BenchmarkJoin)",
		run:     runJoin,
	})
}

func runJoin(e *env) error {
	lines, err := goBench("./fanout", "^BenchmarkJoin$", "1x", 1, "30m")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "\nJoining a long thread over SSE (agui), whole vs ?window=50 (fanout BenchmarkJoin, p50 of 41 windowed and 11 whole joins)\n")
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "messages\twhole p50 ms\twindowed p50 ms\tratio\twhole bytes\twindowed bytes\tratio\t")
	win := map[string]map[string]float64{}
	for _, size := range []string{"1000", "10000", "100000"} {
		var m map[string]float64
		for _, l := range lines {
			if l.name == "BenchmarkJoin/msgs="+size {
				m = l.metrics
			}
		}
		win[size] = m
		if m == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t\n", size)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.0fx\t%.0f\t%.0f\t%.0fx\t\n", size, m["whole_p50_ms"], m["win_p50_ms"],
			m["whole_p50_ms"]/m["win_p50_ms"], m["whole_join_bytes"], m["win_join_bytes"], m["whole_join_bytes"]/m["win_join_bytes"])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	big, small := win["100000"], win["1000"]
	if big == nil || small == nil {
		e.record(summaryRow{"join", "windowed join of a 100k-message thread", "not reported", "≤ 64 KB, p50 ≤ 50 ms", "-"})
		return nil
	}
	e.record(summaryRow{"join", "bytes before the first live frame, windowed, 100k messages",
		fmt.Sprintf("%.1f KB (whole: %.1f MB)", big["win_join_bytes"]/1024, big["whole_join_bytes"]/(1<<20)), "≤ 64 KB",
		verdict(64*1024, big["win_join_bytes"])})
	e.record(summaryRow{"join", "join p50, windowed, 100k messages",
		fmt.Sprintf("%.1f ms (whole: %.0f ms)", big["win_p50_ms"], big["whole_p50_ms"]), "≤ 50 ms", verdict(50, big["win_p50_ms"])})
	e.record(summaryRow{"join", "windowed join p50, 100k vs 1k messages",
		fmt.Sprintf("%.2fx", big["win_p50_ms"]/small["win_p50_ms"]), "flat (≤ 2x)", verdict(2, big["win_p50_ms"]/small["win_p50_ms"])})
	return nil
}
