package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A tiny run against the embedded system passes its own check, with
// samples in every variant, and writes a readable report.
func TestTinyRunPassesItsCheck(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration, cfg.Settle, cfg.JoinOver = 3*time.Second, 30*time.Second, 500*time.Millisecond
	cfg.Tenants, cfg.Threads, cfg.Agents, cfg.Rate, cfg.Subscribers = 2, 12, 4, 400, 40
	cfg.Seed = 42
	var progress, tr bytes.Buffer
	cfg.Trace, cfg.TraceFor = &tr, time.Second
	cfg.TraceStalls = t.TempDir() // a flight recorder beside the trace
	res, err := Run(context.Background(), cfg, &progress, nil)
	if err != nil {
		t.Fatal(err)
	}
	// An execution trace begins with its header, "go 1.N trace".
	if !bytes.HasPrefix(tr.Bytes(), []byte("go 1.")) || tr.Len() < 1<<10 {
		t.Errorf("trace: %d bytes, starting %.12q", tr.Len(), tr.Bytes())
	}
	if !res.Check.Pass {
		t.Fatalf("check failed: %+v", res.Check)
	}
	if res.Check.SubsChecked != cfg.Subscribers || res.Check.Threads != cfg.Threads {
		t.Errorf("checked %d subscribers of %d threads, want %d of %d", res.Check.SubsChecked, res.Check.Threads, cfg.Subscribers, cfg.Threads)
	}
	if res.EventsIn < 600 || res.Latency.Count == 0 {
		t.Errorf("events in %d, latency samples %d", res.EventsIn, res.Latency.Count)
	}
	for _, v := range []variant{aguiSSE, viewSSE, aguiWS, viewWS} {
		if res.ByVariant[v.String()].Count == 0 {
			t.Errorf("no latency samples for %s", v)
		}
	}
	if !strings.Contains(progress.String(), "ev/s") {
		t.Errorf("no progress line: %q", progress.String())
	}
	dir := t.TempDir()
	res.Command = "go run ./loadtest (test)"
	if err := writeReport(dir, res); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !bytes.Contains(md, []byte("correctness PASS")) {
		t.Errorf("report.md: %v %.200q", err, md)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "chart.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("chart.svg is not well-formed XML: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		give    func(*Config)
		wantErr bool
	}{
		{"defaults (embedded)", func(*Config) {}, false},
		{"loopback target", func(c *Config) {
			c.Target, c.NatsURL, c.AuthKey = "http://127.0.0.1:8080", "nats://localhost:4222", []byte("k")
		}, false},
		{"ipv6 loopback", func(c *Config) {
			c.Target, c.NatsURL, c.AuthKey = "http://[::1]:8080", "nats://127.0.0.2:4222", []byte("k")
		}, false},
		{"remote target refused", func(c *Config) {
			c.Target, c.NatsURL, c.AuthKey = "http://10.0.0.5:8080", "nats://127.0.0.1:4222", []byte("k")
		}, true},
		{"remote nats refused", func(c *Config) {
			c.Target, c.NatsURL, c.AuthKey = "http://127.0.0.1:8080", "nats://example.com:4222", []byte("k")
		}, true},
		{"remote allowed explicitly", func(c *Config) {
			c.Target, c.NatsURL, c.AuthKey, c.AllowRemote = "http://example.com", "nats://example.com:4222", []byte("k"), true
		}, false},
		{"target without nats", func(c *Config) { c.Target, c.AuthKey = "http://127.0.0.1:8080", []byte("k") }, true},
		{"target without key", func(c *Config) { c.Target, c.NatsURL = "http://127.0.0.1:8080", "nats://127.0.0.1:4222" }, true},
		{"nats without target", func(c *Config) { c.NatsURL = "nats://127.0.0.1:4222" }, true},
		{"ingest-restart needs embedded", func(c *Config) {
			c.Scenario, c.Target, c.NatsURL, c.AuthKey = "ingest-restart", "http://127.0.0.1:8080", "nats://127.0.0.1:4222", []byte("k")
		}, true},
		{"unknown scenario", func(c *Config) { c.Scenario = "chaos" }, true},
		{"parts assembly", func(c *Config) { c.Embedded = "parts" }, false},
		{"unknown assembly", func(c *Config) { c.Embedded = "docker" }, true},
		{"more agents than threads", func(c *Config) { c.Agents, c.Threads = 10, 5 }, true},
		{"more tenants than agents", func(c *Config) { c.Tenants, c.Agents = 10, 5 }, true},
		{"zero rate", func(c *Config) { c.Rate = 0 }, true},
		{"hot fraction over 1", func(c *Config) { c.HotFraction = 1.5 }, true},
		{"bad url", func(c *Config) { c.Target, c.NatsURL, c.AuthKey = "::", "nats://127.0.0.1:4222", []byte("k") }, true},
		{"trace", func(c *Config) { c.Trace = io.Discard }, false},
		{"trace for nothing", func(c *Config) { c.Trace, c.TraceFor = io.Discard, 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.give(&c)
			err := c.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, errConfig) {
				t.Errorf("error %v does not wrap errConfig", err)
			}
		})
	}
}

func TestCLIRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		give []string
	}{
		{"unknown flag", []string{"--nope"}},
		{"remote target", []string{"--target", "http://192.0.2.1:8080", "--nats-url", "nats://192.0.2.1:4222", "--auth-key", "k"}},
		{"bad scenario", []string{"--scenario", "x"}},
		{"trace into a missing directory", []string{"--trace", "/nonexistent/dir/trace.out"}},
		{"bad trace-for", []string{"--trace-for", "soon"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			if got := cli(tt.give, &out, &errw); got != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", got, errw.String())
			}
		})
	}
}

func TestScenarioRates(t *testing.T) {
	d := 60 * time.Second
	tests := []struct {
		scenario string
		at       time.Duration
		want     float64
	}{
		{"steady", 30 * time.Second, 1},
		{"ramp", 0, 0.1},
		{"ramp", 60 * time.Second, 1},
		{"burst", 2 * time.Second, 0.3},
		{"burst", 8 * time.Second, 3},
		{"burst", 18 * time.Second, 3},
	}
	for _, tt := range tests {
		if got := scenarios[tt.scenario].rate(tt.at, d); got != tt.want {
			t.Errorf("%s at %v = %v, want %v", tt.scenario, tt.at, got, tt.want)
		}
	}
	for _, n := range scenarioNames() {
		if _, ok := scenarios[n]; !ok {
			t.Errorf("scenario %q listed but not defined", n)
		}
	}
	if len(scenarioNames()) != len(scenarios) {
		t.Errorf("%d names for %d scenarios", len(scenarioNames()), len(scenarios))
	}
}

func TestCommandLineHidesKey(t *testing.T) {
	got := commandLine([]string{"--target", "http://127.0.0.1:1", "--auth-key", "secret", "--auth-key=secret2", "--duration", "5s"})
	if strings.Contains(got, "secret") || !strings.Contains(got, "--duration 5s") {
		t.Errorf("commandLine = %q", got)
	}
}

func TestScenarioFile(t *testing.T) {
	sc, name, err := parseScenario([]byte(`{"name":"double-peak","rate":[[1,0.2],[0,0.2],[0.5,2]],
		"slowFraction":0.05,"slowPause":"20ms","slowRecvBuffer":16384,"stormAt":0.6,"stormFraction":0.3}`))
	if err != nil {
		t.Fatal(err)
	}
	if name != "double-peak" || sc.slowPause != 20*time.Millisecond || sc.slowRecvBuf != 16384 || sc.restartPause != 2*time.Second || sc.stormAt != 0.6 {
		t.Errorf("parsed %q %+v", name, sc)
	}
	d := 100 * time.Second
	for _, tt := range []struct {
		at   time.Duration
		want float64
	}{{0, 0.2}, {25 * time.Second, 1.1}, {50 * time.Second, 2}, {75 * time.Second, 1.1}, {100 * time.Second, 0.2}, {200 * time.Second, 0.2}} {
		if got := sc.rate(tt.at, d); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("rate at %v = %v, want %v", tt.at, got, tt.want)
		}
	}
	flat, _, err := parseScenario([]byte(`{}`))
	if err != nil || flat.rate(time.Second, d) != 1 {
		t.Errorf("empty file: %v, rate %v", err, flat.rate(time.Second, d))
	}
	for _, bad := range []string{
		`{"rate":[[1.5,1]]}`, `{"rate":[[0.5,0]]}`, `{"stormAt":2}`, `{"slowPause":"soon"}`, `{"slowRecvBuffer":-1}`,
		`{"unknown":1}`, `not json`,
	} {
		if _, _, err := parseScenario([]byte(bad)); !errors.Is(err, errConfig) {
			t.Errorf("%s: err = %v, want errConfig", bad, err)
		}
	}
	// A file scenario that restarts ingest needs the embedded system.
	cfg := DefaultConfig()
	cfg.Custom, cfg.Scenario = &scenario{rate: piecewise(nil), restartAt: 0.5}, "x"
	cfg.Target, cfg.NatsURL, cfg.AuthKey = "http://127.0.0.1:1", "nats://127.0.0.1:2", []byte("k")
	if err := cfg.Validate(); !errors.Is(err, errConfig) {
		t.Errorf("remote restart: err = %v", err)
	}
	if _, _, err := loadScenarioFile(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, errConfig) {
		t.Errorf("missing file: err = %v", err)
	}
}
