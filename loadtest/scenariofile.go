package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"
)

// scenarioFile is a scenario written as JSON (--scenario-file), for shapes
// the named scenarios do not cover:
//
//	{"name": "double-peak",
//	 "doc": "two peaks at 200%",
//	 "rate": [[0, 0.2], [0.25, 2], [0.5, 0.2], [0.75, 2], [1, 0.2]],
//	 "slowFraction": 0.05, "slowPause": "20ms", "slowRecvBuffer": 16384,
//	 "stormAt": 0.6, "stormFraction": 0.3,
//	 "restartAt": 0, "restartPause": "2s"}
//
// rate lists points (fraction of --duration, multiple of --rate), joined
// linearly and held flat beyond the first and last; empty means 1
// throughout. The other fields are those of the named scenarios (doc.go);
// restartAt > 0 needs the embedded system.
type scenarioFile struct {
	Name          string       `json:"name"`
	Doc           string       `json:"doc"`
	Rate          [][2]float64 `json:"rate"`
	SlowFraction  float64      `json:"slowFraction"`
	SlowPause     string       `json:"slowPause"`
	SlowRecvBuf   int          `json:"slowRecvBuffer"`
	StormAt       float64      `json:"stormAt"`
	StormFraction float64      `json:"stormFraction"`
	RestartAt     float64      `json:"restartAt"`
	RestartPause  string       `json:"restartPause"`
}

// loadScenarioFile reads and checks a scenario file.
func loadScenarioFile(path string) (*scenario, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("%w: scenario file: %w", errConfig, err)
	}
	return parseScenario(b)
}

func parseScenario(b []byte) (*scenario, string, error) {
	var f scenarioFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, "", fmt.Errorf("%w: scenario file: %w", errConfig, err)
	}
	frac := func(name string, v float64) error {
		if v < 0 || v > 1 {
			return fmt.Errorf("%w: scenario file: %s %v not in [0,1]", errConfig, name, v)
		}
		return nil
	}
	for _, c := range []struct {
		n string
		v float64
	}{{"slowFraction", f.SlowFraction}, {"stormAt", f.StormAt}, {"stormFraction", f.StormFraction}, {"restartAt", f.RestartAt}} {
		if err := frac(c.n, c.v); err != nil {
			return nil, "", err
		}
	}
	dur := func(name, s string, def time.Duration) (time.Duration, error) {
		if s == "" {
			return def, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%w: scenario file: %s %q", errConfig, name, s)
		}
		return d, nil
	}
	var err error
	if f.SlowRecvBuf < 0 {
		return nil, "", fmt.Errorf("%w: scenario file: slowRecvBuffer %d is negative", errConfig, f.SlowRecvBuf)
	}
	sc := &scenario{doc: f.Doc, slowFraction: f.SlowFraction, slowRecvBuf: f.SlowRecvBuf, stormAt: f.StormAt, stormFraction: f.StormFraction, restartAt: f.RestartAt}
	if sc.slowPause, err = dur("slowPause", f.SlowPause, 50*time.Millisecond); err != nil {
		return nil, "", err
	}
	if sc.restartPause, err = dur("restartPause", f.RestartPause, 2*time.Second); err != nil {
		return nil, "", err
	}
	pts := append([][2]float64(nil), f.Rate...)
	for _, p := range pts {
		if p[0] < 0 || p[0] > 1 || p[1] <= 0 {
			return nil, "", fmt.Errorf("%w: scenario file: rate point %v (want [fraction in 0..1, multiple > 0])", errConfig, p)
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
	sc.rate = piecewise(pts)
	if f.Name == "" {
		f.Name = "file"
	}
	if sc.doc == "" {
		sc.doc = "from a scenario file"
	}
	return sc, f.Name, nil
}

// piecewise returns the linear interpolation of pts (sorted by fraction).
func piecewise(pts [][2]float64) func(t, d time.Duration) float64 {
	return func(t, d time.Duration) float64 {
		if len(pts) == 0 {
			return 1
		}
		x := float64(t) / float64(d)
		if x <= pts[0][0] {
			return pts[0][1]
		}
		for i := 1; i < len(pts); i++ {
			if x <= pts[i][0] {
				a, b := pts[i-1], pts[i]
				if b[0] == a[0] {
					return b[1]
				}
				return a[1] + (b[1]-a[1])*(x-a[0])/(b[0]-a[0])
			}
		}
		return pts[len(pts)-1][1]
	}
}
