package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/threadcast/threadcast/envflag"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// cli parses flags, runs, writes the report and returns the exit status:
// 0 when the correctness check passed, 1 when it failed, 2 for bad flags or
// a run that could not start.
func cli(args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Target, "target", "", "fanout `URL` of a running Threadcast, or several comma-separated (its fanout nodes: subscribers are spread over them and move to the next after a failed connection); default: start one embedded")
	fs.StringVar(&cfg.NatsURL, "nats-url", "", "NATS `URL` of the running Threadcast, or several comma-separated (with --target)")
	key := fs.String("auth-key", "", "token signing `KEY` of the running Threadcast (with --target)")
	fs.StringVar(&cfg.Embedded, "embedded", cfg.Embedded, "without --target, the assembly to start: node (package node, as threadcast serve) or parts (two nodes: NATS and the fanout in one, ingest alone in the other, restartable; ingest-restart uses it)")
	fs.BoolVar(&cfg.AllowRemote, "allow-remote", false, "allow a non-loopback --target / --nats-url")
	fs.StringVar(&cfg.Scenario, "scenario", cfg.Scenario, "`NAME`: "+strings.Join(scenarioNames(), ", "))
	scenarioPath := fs.String("scenario-file", "", "a scenario as JSON (`FILE`; see doc.go), instead of --scenario")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "load phase length (then a settle phase and the check)")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "longest wait after the load for views to catch up")
	fs.IntVar(&cfg.Tenants, "tenants", cfg.Tenants, "tenants")
	fs.IntVar(&cfg.Threads, "threads", cfg.Threads, "threads (T)")
	fs.IntVar(&cfg.Agents, "agents", cfg.Agents, "simulated agents; each plays threads/agents threads interleaved")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "target events/s over all agents (shaped by the scenario)")
	fs.IntVar(&cfg.Subscribers, "subscribers", cfg.Subscribers, "subscribers (S)")
	fs.IntVar(&cfg.HotThreads, "hot-threads", cfg.HotThreads, "hot threads")
	fs.Float64Var(&cfg.HotFraction, "hot-fraction", cfg.HotFraction, "share of the subscribers on the hot threads")
	fs.Float64Var(&cfg.WSFraction, "ws", cfg.WSFraction, "share of subscribers on WebSocket (rest SSE)")
	fs.Float64Var(&cfg.ViewFraction, "view", cfg.ViewFraction, "share of subscribers in view mode (rest agui)")
	fs.DurationVar(&cfg.JoinOver, "join-over", cfg.JoinOver, "spread the subscribers' first connections over this long")
	fs.IntVar(&cfg.PublishRetries, "publish-retries", 0, "the agents' SDK retries of a failed publish (agent.Config.MaxRetries; 0: the SDK's default, 5; negative: none)")
	fs.IntVar(&cfg.Partitions, "partitions", 0, "embedded pipeline partitions (0: the pipeline's default)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "traffic seed (0: random)")
	fs.Float64Var(&cfg.Verbosity, "verbosity", cfg.Verbosity, "length of generated texts (demo.Options.Verbosity)")
	fs.StringVar(&cfg.Out, "out", "", "report `DIR` (default: a new directory under the system temp dir)")
	verbose := fs.Bool("v", false, "log the embedded system's warnings to stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (load generator and embedded system) to `FILE`")
	tracePath := fs.String("trace", "", "write the Go execution trace of the load's first --trace-for (load generator and embedded system) to `FILE`, for go tool trace")
	fs.DurationVar(&cfg.TraceFor, "trace-for", cfg.TraceFor, "how much of the load --trace covers, from its start")
	fs.StringVar(&cfg.TraceStalls, "trace-stalls", "", "write the Go execution trace of the seconds around every stalled second of the load (p50 above 3x the median of the seconds before it; at most 5) to `DIR`, from a flight recorder")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: loadtest [flags]

Runs simulated agents and subscribers against Threadcast (embedded, or a
running one with --target), writes a report to --out, and checks that every
subscriber's view equals an offline reduction of what was published
(loadtest/doc.go). Exit status: 0 the check passed; 1 it failed; 2 bad flags
or a run that could not start.

flags:
`)
		fs.PrintDefaults()
	}
	if err := envflag.ParseArgs(fs, args); err != nil {
		// --help: the usage on stdout, 0; a bad flag: the error and the
		// usage on stderr, 2.
		return envflag.Report("loadtest", err, stdout, stderr)
	}
	cfg.AuthKey = []byte(*key)
	if *scenarioPath != "" {
		sc, name, err := loadScenarioFile(*scenarioPath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		cfg.Custom, cfg.Scenario = sc, name
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if cfg.Out == "" {
		cfg.Out = filepath.Join(os.TempDir(), "threadcast-loadtest-"+time.Now().UTC().Format("20060102-150405"))
	}
	var log *slog.Logger
	if *verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "loadtest: %s, %v, %d threads, %d agents, %.0f ev/s, %d subscribers; report in %s\n",
		cfg.Scenario, cfg.Duration, cfg.Threads, cfg.Agents, cfg.Rate, cfg.Subscribers, cfg.Out)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if *tracePath != "" {
		f, err := os.Create(*tracePath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		defer f.Close()
		cfg.Trace = f
	}
	res, err := Run(ctx, cfg, stderr, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	res.Command = commandLine(args)
	if err := writeReport(cfg.Out, res); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	writeMarkdown(stdout, res)
	fmt.Fprintf(stderr, "loadtest: report written to %s\n", cfg.Out)
	if !res.Check.Pass {
		return 1
	}
	return 0
}

func commandLine(args []string) string {
	parts := []string{"go run ./loadtest"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "--auth-key") || strings.HasPrefix(a, "-auth-key") {
			if !strings.Contains(a, "=") {
				i++
			}
			parts = append(parts, "--auth-key=…")
			continue
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
