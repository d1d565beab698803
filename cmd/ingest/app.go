package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/threadcast/threadcast/cmd/internal/startup"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/node/ingestrole"
)

// app maps the command's config onto an ingest-only node (package node,
// the one assembly of every Threadcast process) and runs it.
type app struct {
	cfg config
	log *slog.Logger
	// httpAddr and natsURL receive the bound HTTP address and the NATS URL
	// once the node is up (tests listen on port 0); node is set before.
	httpAddr chan string
	natsURL  chan string
	node     *node.Node
}

func newApp(cfg config, logw io.Writer) *app {
	log := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: cfg.LogLevel}))
	return &app{cfg: cfg, log: log, httpAddr: make(chan string, 1), natsURL: make(chan string, 1)}
}

// nodeConfig is the node this command runs: ingest, with the HTTP bridge
// when tokens can be verified (--auth-key, a JWKS source) or
// --bridge-no-auth, on an embedded NATS server unless --nats-url.
func (a *app) nodeConfig() node.Config {
	c := a.cfg
	nc := node.DefaultConfig()
	nc.Name = "threadcast-ingest"
	nc.HTTP = c.HTTP
	nc.NatsURL, nc.NatsCreds, nc.NatsNkey, nc.CalloutSeed = c.NatsURL, c.NatsCreds, c.NatsNkey, c.CalloutSeed
	nc.Fanout, nc.Dashboard = false, false
	nc.AuthKey, nc.Tokens = []byte(c.AuthKey), c.Tokens
	nc.Quota = c.Pipeline.Quota
	nc.Drain, nc.MaxConns, nc.MaxConnsPerSource = c.Drain, c.MaxConns, c.MaxConnsPerSource
	ic := ingestrole.DefaultConfig()
	ic.NatsListen, ic.DataDir = c.NatsListen, c.DataDir
	ic.Ingest = true
	ic.Bridge = c.AuthKey != "" || len(c.Tokens.JWKS) > 0 || c.BridgeNoAuth
	ic.BridgeNoAuth, ic.BridgeWindow = c.BridgeNoAuth, c.BridgeWindow
	ic.Pipeline = c.Pipeline
	ic.Lease, ic.LeaseConfig = c.PartitionMode == "lease", c.Lease
	ic.ReadyMaxLag, ic.StoreMinFree = c.ReadyMaxLag, c.StoreMinFree
	ic.OTLP = c.OTLP
	nc.IngestRole = ic
	nc.HTTPHeaderTimeout, nc.HTTPIdleTimeout, nc.HTTPMaxHeaderBytes = c.HeaderTimeout, c.IdleTimeout, c.MaxHeaderBytes
	nc.Logger = a.log
	return nc
}

// Run runs ingest until ctx ends, then drains, and returns after
// everything it started has stopped.
func (a *app) Run(ctx context.Context) error {
	err := node.Run(ctx, a.nodeConfig(), func(n *node.Node) {
		a.node = n
		a.httpAddr <- n.HTTPAddr()
		a.natsURL <- n.NatsURL()
	})
	return startup.NameFlag(err)
}
