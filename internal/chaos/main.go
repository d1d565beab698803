package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/threadcast/threadcast/envflag"
)

// Config is one chaos run. main fills it from flags.
type Config struct {
	Duration   time.Duration // the load phase, during which faults are injected
	Settle     time.Duration // the load test's bound on catching up afterwards
	Seed       uint64        // the fault schedule's (and the traffic's) seed
	NatsServer string        // nats-server binary
	BinDir     string        // directory holding the ingest, fanout and loadtest binaries
	Repo       string        // repository root (docs/production.md holds the server configuration)
	Out        string        // report directory
	Work       string        // working directory (stores, logs); "" a temporary one
	Keep       bool          // keep Work after a passing run

	Partitions int
	LeaseTTL   time.Duration
	// FaultMin and FaultMax bound the time between two faults (uniform).
	FaultMin, FaultMax time.Duration
	// Kinds are the fault kinds injected (default: all).
	Kinds []string

	Tenants, Threads, Agents, Subscribers int
	Rate                                  float64
	// PublishRetries is the load test's --publish-retries: the SDK's
	// retries of a failed publish, enough to ride out a stream leader's
	// failover (20: about 33 s of backoff).
	PublishRetries int
}

// DefaultConfig returns the defaults: a 60 s run, a light load.
func DefaultConfig() Config {
	return Config{
		Duration: 60 * time.Second, Settle: 60 * time.Second, Seed: 1,
		BinDir: "bin", Repo: ".", Out: "chaos-report",
		Partitions: 8, LeaseTTL: 4 * time.Second,
		FaultMin: 10 * time.Second, FaultMax: 20 * time.Second,
		Tenants: 4, Threads: 120, Agents: 12, Subscribers: 120, Rate: 400,
		Kinds: faultKinds, PublishRetries: 20,
	}
}

var errConfig = errors.New("chaos: bad config")

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case c.Duration <= 0 || c.Settle <= 0:
		return fmt.Errorf("%w: duration and settle must be positive", errConfig)
	case c.FaultMin <= 0 || c.FaultMax < c.FaultMin:
		return fmt.Errorf("%w: fault interval [%v, %v]", errConfig, c.FaultMin, c.FaultMax)
	case c.NatsServer == "":
		return fmt.Errorf("%w: --nats-server (or THREADCAST_NATS_SERVER) names the nats-server binary", errConfig)
	case c.Partitions < 1 || c.LeaseTTL <= 0:
		return fmt.Errorf("%w: partitions %d, lease TTL %v", errConfig, c.Partitions, c.LeaseTTL)
	case len(c.Kinds) == 0:
		return fmt.Errorf("%w: no fault kind", errConfig)
	case c.Threads < c.Agents || c.Agents < c.Tenants || c.Tenants < 1 || c.Rate <= 0 || c.Subscribers < 0:
		return fmt.Errorf("%w: load: %d tenants, %d agents, %d threads, %v ev/s", errConfig, c.Tenants, c.Agents, c.Threads, c.Rate)
	}
	return nil
}

func main() {
	os.Exit(cli(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// cli parses flags, runs and returns the exit status: 0 the run passed its
// correctness check, 1 it failed it, 2 bad flags or a run that could not
// start or finish.
func cli(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	cfg.NatsServer = getenv("THREADCAST_NATS_SERVER")
	if a := getenv("THREADCAST_ARTIFACTS"); a != "" {
		cfg.Out = filepath.Join(a, "chaos")
	}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "load phase, during which faults are injected")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "longest wait after the load for views to catch up")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the fault schedule and of the traffic")
	fs.StringVar(&cfg.NatsServer, "nats-server", cfg.NatsServer, "nats-server `binary` (default $THREADCAST_NATS_SERVER)")
	fs.StringVar(&cfg.BinDir, "bin", cfg.BinDir, "`DIR` holding the ingest, fanout and loadtest binaries")
	fs.StringVar(&cfg.Repo, "repo", cfg.Repo, "repository root `DIR` (its docs/production.md holds the NATS server configuration)")
	fs.StringVar(&cfg.Out, "out", cfg.Out, "report `DIR` (default $THREADCAST_ARTIFACTS/chaos)")
	fs.StringVar(&cfg.Work, "work", "", "working `DIR` for stores and logs (default: a new temporary directory, removed after a passing run)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the working directory after a passing run")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions P")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "ingest's --lease-ttl")
	fs.DurationVar(&cfg.FaultMin, "fault-min", cfg.FaultMin, "least time between two faults")
	fs.DurationVar(&cfg.FaultMax, "fault-max", cfg.FaultMax, "most time between two faults")
	fs.Func("faults", "comma-separated fault `kinds` to inject (default all: "+strings.Join(faultKinds, ",")+")", func(v string) error {
		cfg.Kinds = nil
		for _, k := range strings.Split(v, ",") {
			if !slices.Contains(faultKinds, k) {
				return fmt.Errorf("unknown fault kind %q", k)
			}
			cfg.Kinds = append(cfg.Kinds, k)
		}
		return nil
	})
	fs.IntVar(&cfg.Tenants, "tenants", cfg.Tenants, "load: tenants")
	fs.IntVar(&cfg.Threads, "threads", cfg.Threads, "load: threads")
	fs.IntVar(&cfg.Agents, "agents", cfg.Agents, "load: simulated agents")
	fs.IntVar(&cfg.Subscribers, "subscribers", cfg.Subscribers, "load: subscribers (SSE and WebSocket, agui and view mode)")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "load: events/s over all agents")
	fs.IntVar(&cfg.PublishRetries, "publish-retries", cfg.PublishRetries, "load: the agents' SDK retries of a failed publish (agent.Config.MaxRetries)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: chaos [flags]

Runs a Threadcast cluster as separate OS processes (three nats-server routed
through proxies the harness owns, two lease-mode ingest, two fanout) under
the load test (its binary in --bin, against both fanouts), and meanwhile
kills (SIGKILL, then a restart), pauses (SIGSTOP, then SIGCONT) a random
process or cuts a NATS server off from its peers, every --fault-min to
--fault-max. Then checks every thread's REST view against the offline
reduction of the stored stream, and the load test's own check (every
subscriber's view equals the REST view, nothing lost, duplicated or
skipped), and writes report.md and report.json to --out with the time to
recover per fault kind (internal/chaos/doc.go). Exit status: 0 the check
passed; 1 it failed; 2 bad flags or a run that could not start.

flags:
`)
		fs.PrintDefaults()
	}
	if err := envflag.ParseArgs(fs, args); err != nil {
		return envflag.Report("chaos", err, stdout, stderr)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg, stderr)
	if rep != nil {
		if werr := rep.write(cfg.Out, stdout); werr != nil {
			fmt.Fprintln(stderr, werr)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if !rep.Pass {
		return 1
	}
	return 0
}
