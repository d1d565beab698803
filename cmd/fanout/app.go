package main

import (
	"context"
	"io"
	"log/slog"
	"net"

	"github.com/threadcast/threadcast/cmd/internal/startup"
	"github.com/threadcast/threadcast/node"
)

// app maps the command's config onto a fanout-only node (package node, the
// one assembly of every Threadcast process) and runs it.
type app struct {
	cfg config
	log *slog.Logger
	// ready is closed once the HTTP listener is bound (tests read addr then).
	ready chan struct{}
	addr  net.Addr
}

func newApp(cfg config, logOut io.Writer) *app {
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: cfg.LogLevel}))
	return &app{cfg: cfg, log: log, ready: make(chan struct{})}
}

// nodeConfig is the node this command runs: the fanout alone on an
// external NATS, no dashboard.
func (a *app) nodeConfig() node.Config {
	c, f := a.cfg, a.cfg.Fanout
	nc := node.DefaultConfig()
	nc.Name = "threadcast-fanout"
	nc.HTTP = c.HTTP
	nc.NatsURL, nc.NatsCreds, nc.NatsNkey = c.NatsURL, c.NatsCreds, c.NatsNkey
	nc.Fanout, nc.Dashboard = true, false
	nc.AuthKey, nc.Tokens = f.AuthKey, c.Tokens
	nc.FanoutConfig, nc.Quota = f, f.Quota
	nc.Drain, nc.MaxConns, nc.MaxConnsPerSource = c.Drain, c.MaxConns, c.MaxConnsPerSource
	nc.HTTPHeaderTimeout, nc.HTTPIdleTimeout, nc.HTTPMaxHeaderBytes = f.ReadHeaderTimeout, f.IdleTimeout, f.MaxHeaderBytes
	nc.Logger = a.log
	return nc
}

// Run serves until ctx is done, then drains the streams and the NATS
// connection, and returns after everything it started has stopped.
func (a *app) Run(ctx context.Context) error {
	err := node.Run(ctx, a.nodeConfig(), func(n *node.Node) {
		a.addr, _ = net.ResolveTCPAddr("tcp", n.HTTPAddr())
		close(a.ready)
	})
	return startup.NameFlag(err)
}
