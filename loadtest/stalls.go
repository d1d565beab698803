package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/trace"
	"slices"
	"time"
)

// The stall tracer keeps a flight recorder (runtime/trace) of the load's
// last seconds, and writes it to a file when a second ends stalled: its
// p50 above stallFactor × the median p50 of the load's seconds before it,
// the storm criterion's "no second whose p50 exceeds 3× the run's median".
// A stall that comes once in several runs, in a random second, is then in
// a trace of its own, with what ran and what waited around it (go tool
// trace; its -pprof=sched profile). --trace covers the load's start, this
// the rest: a second is judged only once stallWarmup seconds are behind it.
//
// A second's p50 is judged as the second ends, from the latencies recorded
// by then. Some of its deliveries are recorded later (a frame's events are
// accounted once their publishes are acknowledged), and the report's series
// has them: the two can differ either way. A trace may be written for a
// second the report shows as merely slow, and a second it shows stalled
// may have none.
const (
	stallFactor = 3.0
	stallWarmup = 3
	// maxStallTraces bounds the files one run writes.
	maxStallTraces = 5
	// stallWindow is how much the recorder keeps: the stalled second,
	// the seconds before it, and the one after (the trace is written a
	// second after the stall, so that it holds how the stall ended).
	stallWindow = 5 * time.Second
)

type stallTracer struct {
	dir     string
	fr      *trace.FlightRecorder
	p50s    []float64 // the judged seconds so far, in order
	pending string    // a trace to write at the next second
	written []string
}

// startStallTracer starts the flight recorder; dir must exist.
func startStallTracer(dir string) (*stallTracer, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("loadtest: --trace-stalls %q: not a directory", dir)
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: stallWindow, MaxBytes: 256 << 20})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("loadtest: flight recorder: %w", err)
	}
	return &stallTracer{dir: dir, fr: fr}, nil
}

// stalled judges the second whose p50 is p50 (0: no latency known, not
// judged) against the seconds before it, and adds it to them.
func (s *stallTracer) stalled(p50 float64) bool {
	if p50 <= 0 {
		return false
	}
	stall := false
	if len(s.p50s) >= stallWarmup {
		sorted := slices.Sorted(slices.Values(s.p50s))
		stall = p50 > stallFactor*sorted[len(sorted)/2]
	}
	s.p50s = append(s.p50s, p50)
	return stall
}

// second is called as each second of the load ends (t: the second's start
// from the load's, p50 in ns): it writes the trace of a stall seen a
// second ago, then judges this one.
func (s *stallTracer) second(t int, p50 float64) error {
	var err error
	if s.pending != "" {
		err = s.write(s.pending)
		s.pending = ""
	}
	if s.stalled(p50) && len(s.written) < maxStallTraces {
		s.pending = filepath.Join(s.dir, fmt.Sprintf("stall-%03ds.trace", t))
	}
	return err
}

func (s *stallTracer) write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadtest: stall trace: %w", err)
	}
	_, err = s.fr.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("loadtest: stall trace %s: %w", path, err)
	}
	s.written = append(s.written, path)
	return nil
}

// stop writes a stall seen in the last second, stops the recorder and
// returns the traces written.
func (s *stallTracer) stop() ([]string, error) {
	var err error
	if s.pending != "" {
		err = s.write(s.pending)
	}
	s.fr.Stop()
	return s.written, err
}
