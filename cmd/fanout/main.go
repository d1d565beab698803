// Command fanout is Threadcast's subscriber service: it serves thread views
// from NATS to SSE and WebSocket subscribers, REST readers and tap readers
// (package fanout), authenticated by HS256 bearer tokens (package auth).
// It keeps only node-local state, so any number of instances can run behind
// a load balancer without sticky sessions.
//
// Every flag can also be set by an environment variable THREADCAST_<FLAG>,
// upper case with '-' as '_' (e.g. THREADCAST_AUTH_KEY); a flag on the
// command line wins over the environment.
//
// HTTP (--http): the /v1 API, /livez, /readyz (NATS connected, not
// draining) and /metrics (Prometheus).
//
// The command maps its flags onto a fanout-only node (package node) and
// runs it. SIGTERM or SIGINT drains: /readyz fails, new streams get 503,
// every open stream ends with its resume cursor, connections still open
// after --drain are closed, then the NATS connection drains and the
// process exits.
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
		os.Exit(envflag.Report("fanout", err, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Once the shutdown starts, a second signal kills the process the
	// default way (no acknowledged event is lost: see README).
	context.AfterFunc(ctx, stop)
	a := newApp(cfg, os.Stderr)
	memlimit.Configure(a.log, cfg.MemoryLimitRatio, os.Getenv, os.DirFS("/"))
	if err := a.Run(ctx); err != nil {
		a.log.Error("fanout failed", "err", err)
		os.Exit(1)
	}
}
