// Command ingest is Threadcast's reducer service: it consumes AG-UI events
// from NATS JetStream, keeps every thread's view current and durable, and
// publishes view frames, snapshots, dead letters and the analytics tap
// (package pipeline). Without --nats-url it embeds a NATS server with
// JetStream (store in --data), so one binary is a working system.
//
// Every flag can also be set by an environment variable THREADCAST_<FLAG>,
// upper case with '-' as '_' (e.g. THREADCAST_NATS_URL); a flag on the
// command line wins over the environment.
//
// HTTP (--http): /livez (the process runs), /readyz (NATS connected,
// consumers bound, lag under --ready-max-lag, storage not full), /metrics
// (Prometheus), and the bridge with --auth-key, a JWKS source or
// --bridge-no-auth.
//
// The command maps its flags onto an ingest-only node (package node) and
// runs it. SIGTERM or SIGINT drains, each phase within --drain: HTTP stops
// accepting and drains; ingest stops fetching, finishes what is in flight,
// checkpoints every thread and acks; NATS drains; the embedded server
// stops.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/threadcast/threadcast/envflag"
	"github.com/threadcast/threadcast/memlimit"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	if err != nil {
		// --help: the usage on stdout, 0; a bad flag or setting: 2.
		os.Exit(envflag.Report("ingest", err, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Once the shutdown starts, a second signal kills the process the
	// default way (no acknowledged event is lost: see README).
	context.AfterFunc(ctx, stop)
	a := newApp(cfg, os.Stderr)
	memlimit.Configure(a.log, cfg.MemoryLimitRatio, os.Getenv, os.DirFS("/"))
	if err := a.Run(ctx); err != nil {
		a.log.Error("ingest failed", "err", err)
		os.Exit(1)
	}
}
