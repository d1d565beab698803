package main

// A noisy neighbour: tenant quiet's publish→delivery p99 with tenant noisy
// silent against the same with noisy at ten times its events/s quota on the
// bridge and on NATS, as node/noisy_test.go measures it
// (BenchmarkNoisyNeighbour: alternating rounds of both on one node, the
// median of the rounds' ratios), with what quiet lost or duplicated and
// what of noisy's load was refused and shed.

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "noisy",
		summary: "a tenant at 10x its quota against a quiet tenant's p99 (node's own benchmark)",
		run:     runNoisy,
	})
}

func runNoisy(e *env) error {
	lines, err := goBench("./node", "^BenchmarkNoisyNeighbour$", "1x", 1, "30m")
	if err != nil {
		return err
	}
	m := lines[len(lines)-1].metrics
	fmt.Fprintln(e.out, "\nNoisy neighbour (node benchmark: 5 rounds × 5 s, quiet 400 events/s over 8 threads, noisy quota 100 events/s, sending 1,000/s to the bridge and 1,000/s to NATS)")
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "quiet p99 ms: noisy silent\tnoisy loud\tratio (median of rounds)\tratio of medians\tquiet lost\tduplicated\tbridge sent\trefused\tnats sent\tshed\t")
	fmt.Fprintf(tw, "%.1f\t%.1f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", m["quiet_p99_ms"], m["noisy_p99_ms"], m["p99_ratio"], m["p99_ratio_of_medians"],
		m["b_lost"], m["b_dup"], m["a_bridge_sent"], m["a_bridge_refused"], m["a_nats_sent"], m["a_nats_shed"])
	met := "yes"
	if m["p99_ratio"] > 1.10 {
		met = "NO"
	}
	e.record(summaryRow{"noisy", "quiet tenant's p99, noisy loud / silent", fmt.Sprintf("%.2f", m["p99_ratio"]), "≤1.10", met, 18})
	met = "yes"
	if m["b_lost"] != 0 || m["b_dup"] != 0 {
		met = "NO"
	}
	e.record(summaryRow{"noisy", "quiet tenant's events lost / duplicated", fmt.Sprintf("%.0f / %.0f", m["b_lost"], m["b_dup"]), "0 / 0", met, 18})
	return tw.Flush()
}
