package main

// Compact against the reference client's compactEvents on the same
// workloads: events and bytes out (JSONL), and time. Each thread is
// compacted on its own, as a stored or fanned-out stream would be.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/reducer/compact"
)

func init() {
	register(comparison{
		name:    "compact",
		summary: "Compact vs compactEvents of @ag-ui/client (events, bytes, time)",
		run:     runCompact,
	})
}

type compactStats struct {
	eventsOut, bytesOut int
	seconds             float64
}

func runCompact(e *env) error {
	ws, err := e.workloads()
	if err != nil {
		return err
	}
	ref, err := e.referenceCompact()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "\nCompact vs compactEvents (@ag-ui/client 1.0.0); output as JSONL; time is the median of %d run(s).\n"+
		"Compact runs the reducer to learn each event's verdict; \"Compactor only\" is the part the pipeline adds to the Apply it does anyway.\n", e.runs)
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tevents in\tbytes in\tCompact events\tbytes\ttime\tCompactor only\tcompactEvents events\tbytes\ttime\tevents ours/theirs\t")
	for _, w := range ws {
		held, err := w.decoded()
		if err != nil {
			return err
		}
		decoded := pointers(held)
		// Output sizes are deterministic; the time is the median run's.
		var ours compactStats
		secs := make([]float64, 0, e.runs)
		for r := 0; r < e.runs+1; r++ {
			ours = compactWorkload(decoded)
			if r > 0 { // the first run warms up
				secs = append(secs, ours.seconds)
			}
		}
		sort.Float64s(secs)
		ours.seconds = secs[len(secs)/2]
		only := compactorOnly(decoded, e.runs)
		th, ok := ref[w.name]
		theirs := "-\t-\t-\t-"
		if ok {
			theirs = fmt.Sprintf("%d\t%d\t%s\t%.2f", th.EventsOut, th.BytesOut, dur(th.Seconds), float64(ours.eventsOut)/float64(th.EventsOut))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", w.name, w.events, w.bytes, ours.eventsOut, ours.bytesOut,
			dur(ours.seconds), dur(only), theirs)
		if ok {
			e.record(summaryRow{"compact", w.name + ", output bytes ours/theirs", fmt.Sprintf("%.2f", float64(ours.bytesOut)/float64(th.BytesOut)), "no target (≤1 is smaller)", "-"})
			e.record(summaryRow{"compact", w.name + ", speed ours vs theirs", fmt.Sprintf("%.2fx", th.Seconds/ours.seconds), "no target", "-"})
		}
	}
	return tw.Flush()
}

func dur(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
}

// pointers returns each thread's events as the []*codec.Event Compact takes.
func pointers(threads [][]codec.Event) [][]*codec.Event {
	out := make([][]*codec.Event, len(threads))
	for i, th := range threads {
		out[i] = make([]*codec.Event, len(th))
		for j := range th {
			out[i][j] = &th[j]
		}
	}
	return out
}

// compactWorkload compacts every thread and measures the output as JSONL.
func compactWorkload(threads [][]*codec.Event) compactStats {
	var s compactStats
	outs := make([][]*codec.Event, len(threads))
	t0 := time.Now()
	for i, th := range threads {
		outs[i] = compact.Events(th)
	}
	s.seconds = time.Since(t0).Seconds()
	var buf []byte
	for _, out := range outs {
		s.eventsOut += len(out)
		for _, ev := range out {
			buf = codec.AppendEvent(buf[:0], ev)
			s.bytesOut += len(buf) + 1
		}
	}
	return s
}

// compactorOnly times Compactor.Add and Flush alone, with the verdicts
// computed beforehand, as the pipeline uses it (its Thread has applied the
// event already). Median of runs, after a warm-up.
func compactorOnly(threads [][]*codec.Event, runs int) float64 {
	results := make([][]reducer.Result, len(threads))
	for i, th := range threads {
		t := reducer.NewThread("bench")
		results[i] = make([]reducer.Result, len(th))
		for j, ev := range th {
			res := t.Apply(uint64(j)+1, ev)
			res.Warnings = append([]reducer.Warning(nil), res.Warnings...) // the Thread reuses them
			results[i][j] = res
		}
	}
	secs := make([]float64, 0, runs)
	for r := 0; r < runs+1; r++ {
		t0 := time.Now()
		n := 0
		for i, th := range threads {
			c := compact.New()
			for j, ev := range th {
				c.Add(ev, results[i][j])
			}
			n += len(c.Flush(nil))
		}
		if n == 0 {
			panic("bench: Compactor produced nothing")
		}
		if r > 0 {
			secs = append(secs, time.Since(t0).Seconds())
		}
	}
	sort.Float64s(secs)
	return secs[len(secs)/2]
}

type refCompact struct {
	Workload  string  `json:"workload"`
	EventsIn  int     `json:"eventsIn"`
	BytesIn   int     `json:"bytesIn"`
	EventsOut int     `json:"eventsOut"`
	BytesOut  int     `json:"bytesOut"`
	Seconds   float64 `json:"seconds"`
}

// referenceCompact runs compact_events.mjs (beside this file).
func (e *env) referenceCompact() (map[string]refCompact, error) {
	script, err := filepath.Abs(filepath.Join("bench", "compact_events.mjs"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("run from the repository root (bench/compact_events.mjs not found): %w", err)
	}
	cmd := exec.Command("node", script, "--oracle", e.oracleDir, "--gen", filepath.Dir(e.genPath), "--runs", fmt.Sprint(e.runs))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("compact_events.mjs: %w", err)
	}
	res := map[string]refCompact{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r refCompact
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("compact_events.mjs output: %w", err)
		}
		res[r.Workload] = r
	}
	return res, nil
}
