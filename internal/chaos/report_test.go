package main

import (
	"strings"
	"testing"
	"time"
)

func TestRecovery(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	// 100/s for 10 s, a dip while the fault lasts, back to 95 at bin 14.
	bins := []float64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 10, 0, 50, 80, 95, 100, 100}
	loadEnd := at(float64(len(bins)))
	tests := []struct {
		name          string
		fault, health float64
		ok            bool
		ready, rec    float64
		baseline      float64
		service       float64
	}{
		// Healthy at 12.5 s (bin 12); bins 12 and 13 are under 90, bin 14
		// (ending at 15 s) is the first at or over 90.
		{name: "dip", fault: 10.2, health: 12.5, ok: true, ready: 2.3, rec: 4.8, baseline: 100, service: 4.8},
		// Deliveries recovered before readiness: readiness decides.
		{name: "ready last", fault: 10.2, health: 15.5, ok: true, ready: 5.3, rec: 5.8, baseline: 100, service: 4.8},
		{name: "never healthy", fault: 10.2, ok: false, ready: -1, rec: -1, baseline: 100, service: 4.8},
		{name: "healthy after the load", fault: 10.2, health: 18, ok: true, ready: -1, rec: -1, baseline: 100, service: 4.8},
		// No bin before the fault: readiness alone.
		{name: "no baseline", fault: 0.5, health: 2, ok: true, ready: 1.5, rec: 1.5, service: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Undone a second after the fault, in the dip.
			f := &Fault{At: at(tt.fault), Undone: at(tt.fault + 1)}
			recovery(f, at(tt.health), tt.ok, start, bins, loadEnd)
			near := func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }
			if !near(f.Ready, tt.ready) || !near(f.Recover, tt.rec) || !near(f.Baseline, tt.baseline) || !near(f.Service, tt.service) {
				t.Fatalf("ready %v recover %v baseline %v service %v, want %v %v %v %v", f.Ready, f.Recover, f.Baseline, f.Service, tt.ready, tt.rec, tt.baseline, tt.service)
			}
		})
	}
	// Deliveries that never come back count as not recovered.
	f := &Fault{At: at(10.2), Undone: at(11)}
	recovery(f, at(12.5), true, start, []float64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 10, 0, 50, 80}, at(14))
	if f.Recover != -1 || f.Ready < 2.29 {
		t.Fatalf("ready %v recover %v, want ready and not recovered", f.Ready, f.Recover)
	}
}

func TestKindStats(t *testing.T) {
	var fs []*Fault
	for _, r := range []float64{3, 1, 2, 10, -1} {
		fs = append(fs, &Fault{Kind: natsKill, Recover: r, Ready: r / 2})
	}
	fs = append(fs, &Fault{Kind: fanoutStop, Recover: 4, Ready: 4})
	ks := kindStats(fs)
	if len(ks) != 2 || ks[0].Kind != natsKill || ks[1].Kind != fanoutStop {
		t.Fatalf("%+v", ks)
	}
	if k := ks[0]; k.Count != 5 || k.Unrecovered != 1 || k.P50 != 2 || k.P99 != 10 || k.Max != 10 || k.ReadyMax != 5 {
		t.Fatalf("%+v", k)
	}
}

func TestVerdict(t *testing.T) {
	ok := func() *Report {
		r := &Report{Load: &loadReport{}, Stream: &StreamCheck{Threads: 3, Matching: 3}}
		r.Load.Check.Pass, r.Load.Check.Threads = true, 3
		return r
	}
	r := ok()
	r.verdict()
	if !r.Pass {
		t.Fatalf("verdict %q", r.Verdict)
	}
	for name, spoil := range map[string]func(r *Report){
		"load check":      func(r *Report) { r.Load.Check.Pass = false },
		"load exit":       func(r *Report) { r.LoadExit = 1 },
		"stream mismatch": func(r *Report) { r.Stream.Mismatched = 1 },
		"stored twice":    func(r *Report) { r.Stream.DuplicateMessages = 1 },
		"nothing stored":  func(r *Report) { r.Stream.Threads = 0 },
		"no stream check": func(r *Report) { r.Stream = nil },
		"no load report":  func(r *Report) { r.Load = nil },
	} {
		r := ok()
		spoil(r)
		r.verdict()
		if r.Pass || len(r.Verdict) == 0 {
			t.Errorf("%s: passed", name)
		}
	}
	var md strings.Builder
	r.markdown(&md)
	if !strings.Contains(md.String(), "PASS") {
		t.Fatal(md.String())
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err == nil {
		t.Fatal("no nats-server: accepted")
	}
	c.NatsServer = "/bin/true"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.FaultMax = c.FaultMin - 1
	if err := c.Validate(); err == nil {
		t.Fatal("fault-max under fault-min: accepted")
	}
}
