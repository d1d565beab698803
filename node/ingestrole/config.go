package ingestrole

import (
	"fmt"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/otelexport"
	"github.com/threadcast/threadcast/pipeline"
)

// Config configures the ingest side of a node; set it as the node's
// Config.IngestRole. Build it with DefaultConfig and change fields. It is a
// value: the same Config may start several nodes.
type Config struct {
	// NatsListen is the embedded server's client address "host:port"; port
	// 0 (or -1) picks a free one (see Node.NatsURL). Used when the node's
	// NatsURL is empty.
	NatsListen string
	// DataDir holds the embedded server's JetStream store (the event log
	// and the checkpoints): a node restarted on the same directory keeps
	// every thread. Required when the node's NatsURL is empty.
	DataDir string

	// Ingest runs the reducers (and, with Bridge, serves the ingest HTTP
	// bridge).
	Ingest bool
	// Bridge serves POST /v1/ingest/{tenant}/{thread} beside ingest, its
	// requests authorized by the node's token Verifier, or by nobody with
	// BridgeNoAuth (development only).
	Bridge       bool
	BridgeNoAuth bool
	// Lease: ingest claims its partitions with TTL'd leases in KV
	// (pipeline.LeasedIngest with LeaseConfig; its Partitions, Replicas
	// and Domain are set from Pipeline), rebalanced among the instances and
	// taken over after a crash. Off: static assignment, the partitions
	// p % Pipeline.Instances == Pipeline.Instance.
	Lease       bool
	LeaseConfig pipeline.LeaseConfig
	// Demo runs demo agents with DemoConfig until the node stops.
	Demo       bool
	DemoConfig demo.Config

	// Pipeline configures ingest (its Logger, Metrics and Quota are set
	// from the node: Quota is the node's Config.Quota).
	Pipeline pipeline.Config

	// ReadyMaxLag: /readyz fails while ingest has more messages waiting.
	ReadyMaxLag uint64
	// StoreMinFree is the free space under which the embedded server's
	// store counts as full (pipeline.StorageConfig.MinFree; 0: 256 MiB):
	// the bridge answers 507 and /readyz fails until there is room.
	StoreMinFree uint64
	// BridgeWindow bounds the bytes of one bridge request's events
	// published and not yet acked (bridge.Config.Window; 0: 1 MiB).
	BridgeWindow int

	// OTLP exports ingest's runs as OpenTelemetry spans and metrics
	// (package otelexport) when OTLP.Enabled: the exporter is ingest's
	// Pipeline.Runs, started with ingest and flushed after ingest has
	// drained.
	OTLP otelexport.Config
}

// DefaultConfig returns the defaults: ingest and the bridge on, static
// partitions, embedded NATS (when the node has no NatsURL) on
// 127.0.0.1:4222, no demo. DataDir is left for the caller.
func DefaultConfig() Config {
	return Config{
		NatsListen:  "127.0.0.1:4222",
		Ingest:      true,
		Bridge:      true,
		LeaseConfig: pipeline.DefaultLeaseConfig(),
		Pipeline:    pipeline.DefaultConfig(),
		ReadyMaxLag: 100000,
		OTLP:        otelexport.DefaultConfig(),
	}
}

// Plan checks c against the node's config nc and says what c runs
// (node.IngestRole).
func (c Config) Plan(nc *node.Config) (node.IngestPlan, error) {
	plan := node.IngestPlan{
		Ingest:      c.Ingest,
		Agents:      c.Demo,
		Tokens:      c.Ingest && c.Bridge && !c.BridgeNoAuth,
		Partitions:  c.Pipeline.Partitions,
		Stream:      c.Pipeline.Stream,
		DeadLetters: c.Pipeline.DeadLetters,
		TapStream:   c.Pipeline.TapStream,
	}
	if !c.Pipeline.Tap {
		plan.TapStream = ""
	}
	switch {
	case nc.NatsURL == "" && c.DataDir == "":
		return plan, fmt.Errorf("%w: an embedded NATS server needs a data directory", node.ErrConfig)
	case nc.NatsURL == "" && c.Demo && len(nc.AuthKey) < auth.MinKeyLen:
		return plan, fmt.Errorf("%w: demo agents connect with tokens the auth key signs, shorter than %d bytes", node.ErrConfig, auth.MinKeyLen)
	}
	if c.Ingest {
		if err := c.Pipeline.Validate(); err != nil {
			return plan, err
		}
	}
	if c.Ingest && c.OTLP.Enabled {
		if err := c.OTLP.Validate(); err != nil {
			return plan, fmt.Errorf("%w: %w", node.ErrConfig, err)
		}
	}
	if c.Ingest && c.Lease {
		lc := c.leaseConfig()
		if err := lc.Validate(); err != nil {
			return plan, err
		}
	}
	return plan, nil
}

// leaseConfig is LeaseConfig with the partitioning of Pipeline.
func (c *Config) leaseConfig() pipeline.LeaseConfig {
	lc := c.LeaseConfig
	lc.Partitions, lc.Replicas, lc.Domain = c.Pipeline.Partitions, c.Pipeline.Replicas, c.Pipeline.Domain
	return lc
}

// Open returns the ingest side of the node h hosts (node.IngestRole).
func (c Config) Open(h node.Host) node.IngestSide {
	nc := h.Config()
	s := &Side{cfg: c, h: h, node: nc, log: h.Logger()}
	// The storage watch reads the embedded store's free space and hears
	// the embedded server's critical write errors; with an external
	// server, only JetStream's refusals count.
	wc := pipeline.StorageConfig{MinFree: c.StoreMinFree, Logger: s.log.With("part", "storage")}
	if nc.NatsURL == "" {
		wc.Dir = c.DataDir
	}
	s.storage = pipeline.NewStorageWatch(wc)
	return s
}
