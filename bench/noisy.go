package main

// A noisy neighbour: tenant quiet's publish→delivery latency while tenant
// noisy is silent against while it sends ten times its events/s quota to
// the bridge and to NATS, as node/noisy_test.go measures it
// (BenchmarkNoisyNeighbour: one node, noisy loud and silent in alternating
// one-second segments, quiet's events timed apart by the state they were
// published in), with what quiet lost or duplicated and what of noisy's
// load was refused and shed.

import (
	"fmt"
	"text/tabwriter"
)

func init() {
	register(comparison{
		name:    "noisy",
		summary: "a tenant at 10x its quota against a quiet tenant's latency (node's own benchmark)",
		run:     runNoisy,
	})
}

func runNoisy(e *env) error {
	lines, err := goBench("./node", "^BenchmarkNoisyNeighbour$", "1x", 1, "30m")
	if err != nil {
		return err
	}
	m := lines[len(lines)-1].metrics
	fmt.Fprintln(e.out, "\nNoisy neighbour (node benchmark: 40 s, noisy loud and silent in turn each second; quiet 400 events/s over 8 threads; noisy's quota 100 events/s, sending 1,000/s to the bridge and 1,000/s to NATS while loud)")
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "quiet ms:\tp50 silent\tp50 loud\tp99 silent\tp99 loud\tp99 ratio\tlost\tduplicated\tnoisy bridge sent\trefused\tnats sent\tshed\t")
	fmt.Fprintf(tw, "\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", m["silent_p50_ms"], m["loud_p50_ms"],
		m["silent_p99_ms"], m["loud_p99_ms"], m["p99_ratio"], m["b_lost"], m["b_dup"],
		m["a_bridge_sent"], m["a_bridge_refused"], m["a_nats_sent"], m["a_nats_shed"])
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
