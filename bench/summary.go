package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// summaryRow is one line of the closing table: a measured ratio (or
// absolute figure) next to its target.
type summaryRow struct {
	comparison string
	measure    string
	value      string // as measured, formatted
	target     string // the goal, as the comparison states it
	met        string // "yes", "NO", or "-" when not applicable / not run
}

// record adds a row to the closing summary.
func (e *env) record(r summaryRow) { e.summary = append(e.summary, r) }

// verdict formats whether got meets a "≥ want" target.
func verdict(got, want float64) string {
	if got >= want {
		return "yes"
	}
	return "NO"
}

// printSummary writes the closing table.
func printSummary(w io.Writer, rows []summaryRow) error {
	fmt.Fprintf(w, "\nSummary: each ratio next to its target\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "comparison\tmeasure\tmeasured\ttarget\tmet")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.comparison, r.measure, r.value, r.target, r.met)
	}
	return tw.Flush()
}
