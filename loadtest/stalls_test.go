package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A second is stalled when its p50 passes 3× the median of the judged
// seconds before it, once stallWarmup seconds are behind it; seconds with
// no latency are not judged.
func TestStallJudgement(t *testing.T) {
	var s stallTracer
	ms := 1e6
	for i, c := range []struct {
		p50   float64
		stall bool
	}{
		{50 * ms, false}, // the join second: nothing to judge it by
		{8 * ms, false},
		{0, false}, // no latency known: not judged, not counted
		{9 * ms, false},
		{10 * ms, false},
		{26 * ms, false}, // 3× the median of 50, 8, 9, 10 (10 ms) is 30 ms
		{31 * ms, true},  // and that of 50, 8, 9, 10, 26 too
		{10 * ms, false},
	} {
		if got := s.stalled(c.p50); got != c.stall {
			t.Errorf("second %d (p50 %v ms): stalled %v, want %v", i, c.p50/ms, got, c.stall)
		}
	}
	if len(s.p50s) != 7 {
		t.Errorf("%d seconds judged, want 7", len(s.p50s))
	}
}

// A stall's trace is written a second later (so that it holds how the
// stall ended), as a Go execution trace; at most maxStallTraces a run.
func TestStallTracesWritten(t *testing.T) {
	dir := t.TempDir()
	s, err := startStallTracer(dir)
	if err != nil {
		t.Fatal(err)
	}
	second := func(i int, p50 float64) {
		t.Helper()
		if err := s.second(i, p50); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		second(i, 1e6)
	}
	second(4, 10e6) // stalled
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Fatalf("written before the next second: %v", files)
	}
	second(5, 1e6)
	want := filepath.Join(dir, "stall-004s.trace")
	raw, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	// An execution trace begins with its header, "go 1.N trace".
	if !bytes.HasPrefix(raw, []byte("go 1.")) || len(raw) < 1<<10 {
		t.Errorf("%s: %d bytes, starting %.12q", want, len(raw), raw)
	}
	for i := 6; i < 6+2*maxStallTraces; i++ {
		second(i, 1e9) // every one stalled
	}
	paths, err := s.stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != maxStallTraces || paths[0] != want {
		t.Fatalf("traces %v, want %d starting with %s", paths, maxStallTraces, want)
	}
}

func TestStallTracerNeedsADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "missing")} {
		if s, err := startStallTracer(dir); err == nil {
			s.stop()
			t.Errorf("startStallTracer(%q): no error", dir)
		}
	}
}
