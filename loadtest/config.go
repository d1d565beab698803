package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strings"
	"time"
)

// Config is one load test. main fills it from flags; tests build it.
type Config struct {
	// Target is the fanout base URL, or several comma-separated (fanout
	// nodes of one Threadcast: subscriber i connects to the i-th mod n and
	// moves to the next after a failed connection, as behind a load
	// balancer); "" starts an embedded Threadcast.
	Target  string
	NatsURL string // NATS of the target, comma-separated URLs (required with Target)
	AuthKey []byte `json:"-"` // token key of the target (required with Target)

	AllowRemote bool // permit non-loopback Target / NatsURL
	// Embedded picks the assembly started when Target is empty: "node" is
	// the product's (package node, what `threadcast serve` runs); "parts"
	// is two nodes, NATS and the fanout in one and ingest alone in the
	// other, so that ingest can be restarted alone (ingest-restart needs it
	// and selects it).
	Embedded string

	Scenario string
	// Custom, when set (--scenario-file), replaces the named scenario;
	// Scenario then holds its name.
	Custom   *scenario `json:"-"`
	Duration time.Duration
	// Settle bounds the wait, after the agents stop, for every view to
	// catch up before the correctness check.
	Settle time.Duration

	Tenants     int
	Threads     int
	Agents      int
	Rate        float64 // target events/s over all agents (the scenario shapes it)
	Subscribers int
	// HotThreads threads share HotFraction of the subscribers; the others
	// are dealt one by one over the remaining threads (the long tail).
	HotThreads  int
	HotFraction float64
	// Mix of transports and modes, as fractions of the subscribers (the
	// rest is agui over SSE).
	WSFraction   float64
	ViewFraction float64
	// JoinOver spreads the subscribers' first connections over this long
	// from the start (each also waits for its thread's first stored event):
	// dashboards do not all open in the same millisecond, and a join is a
	// snapshot request to the thread's ingest shard.
	JoinOver time.Duration

	// PublishRetries is the SDK's agent.Config.MaxRetries (0: its
	// default; negative: no retry).
	PublishRetries int

	Partitions int    // embedded pipeline's P (0: default)
	Seed       uint64 // traffic seed (0: random)
	Verbosity  float64
	Out        string // report directory

	// Trace, when set, receives the Go execution trace (runtime/trace) of
	// this process — the load generator and any embedded system — from the
	// start of the load for TraceFor (or until the load ends): scheduler
	// delays, what ran when, for `go tool trace`.
	Trace    io.Writer `json:"-"`
	TraceFor time.Duration
	// TraceStalls, when set, is a directory that receives the execution
	// trace of the seconds around every stalled second of the load (at
	// most five a run; stalls.go): a flight recorder keeps the last few
	// seconds in memory for it.
	TraceStalls string `json:"-"`
}

// DefaultConfig returns the defaults: a small steady run against an
// embedded Threadcast.
func DefaultConfig() Config {
	return Config{
		Scenario:     "steady",
		Embedded:     "node",
		Duration:     30 * time.Second,
		Settle:       60 * time.Second,
		Tenants:      4,
		Threads:      200,
		Agents:       20,
		Rate:         2000,
		Subscribers:  500,
		HotThreads:   4,
		HotFraction:  0.5,
		WSFraction:   0.3,
		ViewFraction: 0.5,
		JoinOver:     5 * time.Second,
		Verbosity:    1,
		TraceFor:     5 * time.Second,
	}
}

var errConfig = errors.New("loadtest: bad config")

// Validate checks c; it refuses non-loopback targets unless AllowRemote.
func (c *Config) Validate() error {
	switch {
	case c.Threads < 1 || c.Agents < 1 || c.Tenants < 1:
		return fmt.Errorf("%w: need ≥1 thread, agent and tenant", errConfig)
	case c.Agents > c.Threads:
		return fmt.Errorf("%w: %d agents for %d threads (each agent needs a thread)", errConfig, c.Agents, c.Threads)
	case c.Tenants > c.Agents:
		return fmt.Errorf("%w: %d tenants for %d agents (each tenant needs an agent)", errConfig, c.Tenants, c.Agents)
	case c.Rate <= 0 || c.Duration <= 0 || c.Subscribers < 0 || c.JoinOver < 0:
		return fmt.Errorf("%w: rate and duration must be positive", errConfig)
	case c.HotThreads < 0 || c.HotThreads > c.Threads || c.HotFraction < 0 || c.HotFraction > 1:
		return fmt.Errorf("%w: hot threads %d, fraction %v", errConfig, c.HotThreads, c.HotFraction)
	case c.WSFraction < 0 || c.WSFraction > 1 || c.ViewFraction < 0 || c.ViewFraction > 1:
		return fmt.Errorf("%w: fractions must be in [0,1]", errConfig)
	case c.Trace != nil && c.TraceFor <= 0:
		return fmt.Errorf("%w: --trace-for must be positive", errConfig)
	}
	if _, ok := scenarios[c.Scenario]; !ok && c.Custom == nil {
		return fmt.Errorf("%w: unknown scenario %q (one of %s)", errConfig, c.Scenario, strings.Join(scenarioNames(), ", "))
	}
	if c.Target == "" {
		if c.Embedded != "node" && c.Embedded != "parts" {
			return fmt.Errorf("%w: --embedded %q (node or parts)", errConfig, c.Embedded)
		}
		if c.NatsURL != "" {
			return fmt.Errorf("%w: --nats-url needs --target", errConfig)
		}
		return nil
	}
	if c.scenario().restartAt > 0 {
		return fmt.Errorf("%w: %s restarts ingest: it needs the embedded Threadcast (it restarts the ingest it owns)", errConfig, c.Scenario)
	}
	if c.NatsURL == "" || len(c.AuthKey) == 0 {
		return fmt.Errorf("%w: --target needs --nats-url and --auth-key", errConfig)
	}
	for _, list := range []string{c.Target, c.NatsURL} {
		for _, u := range splitURLs(list) {
			if err := checkLoopback(u, c.AllowRemote); err != nil {
				return err
			}
		}
	}
	return nil
}

// splitURLs splits a comma-separated URL list, dropping empty entries.
func splitURLs(list string) []string {
	var out []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// scenario returns the run's scenario: Custom, or the named one.
func (c *Config) scenario() scenario {
	if c.Custom != nil {
		return *c.Custom
	}
	return scenarios[c.Scenario]
}

// checkLoopback refuses a URL whose host is not a loopback address (or
// "localhost") unless allowed: a load test pointed at a shared system by a
// typo is an outage.
func checkLoopback(raw string, allow bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not a URL", errConfig, raw)
	}
	if allow {
		return nil
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %s is not a loopback address; pass --allow-remote to load it anyway", errConfig, host)
}

// scenario shapes a run: the event rate over time, and what happens to
// the subscribers and the system during it.
type scenario struct {
	doc string
	// rate returns the fraction of Config.Rate to publish at elapsed time
	// t of a run lasting d.
	rate func(t, d time.Duration) float64
	// slowFraction of the subscribers read slowly (slowPause per message).
	// slowRecvBuf > 0 caps their connections' kernel receive buffer
	// (SO_RCVBUF): a client behind a slow link, whose kernel cannot hold
	// megabytes ahead of the application as a loopback connection's does.
	slowFraction float64
	slowPause    time.Duration
	slowRecvBuf  int
	// stormAt (fraction of the duration, 0 = never): that many of the
	// subscribers (stormFraction) drop their connection at once and
	// reconnect with their cursor.
	stormAt, stormFraction float64
	// restartAt (fraction of the duration, 0 = never): the embedded ingest
	// is stopped, left down for restartPause and started again.
	restartAt    float64
	restartPause time.Duration
}

func constant(float64) func(t, d time.Duration) float64 {
	return func(time.Duration, time.Duration) float64 { return 1 }
}

// scenarios are the named runs; doc.go describes each.
var scenarios = map[string]scenario{
	"steady": {doc: "constant rate", rate: constant(1)},
	"ramp": {doc: "rate rising linearly from 10% to 100%", rate: func(t, d time.Duration) float64 {
		return 0.1 + 0.9*float64(t)/float64(d)
	}},
	"burst": {doc: "30% of the rate, with 3 s bursts at 300% every 10 s", rate: func(t, _ time.Duration) float64 {
		if math.Mod(t.Seconds(), 10) >= 7 {
			return 3
		}
		return 0.3
	}},
	"reconnect-storm": {doc: "steady; at half time 50% of the subscribers drop and reconnect at once", rate: constant(1),
		stormAt: 0.5, stormFraction: 0.5},
	"slow-subscribers": {doc: "steady; 10% of the subscribers read 4 messages/s (pause 250 ms per message), with a 16 KiB receive buffer", rate: constant(1),
		slowFraction: 0.1, slowPause: 250 * time.Millisecond, slowRecvBuf: 16 << 10},
	"ingest-restart": {doc: "steady; at 40% of the run the ingest is stopped for 2 s and restarted", rate: constant(1),
		restartAt: 0.4, restartPause: 2 * time.Second},
}

func scenarioNames() []string {
	return []string{"steady", "ramp", "burst", "reconnect-storm", "slow-subscribers", "ingest-restart"}
}
