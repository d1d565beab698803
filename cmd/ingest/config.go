package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/threadcast/threadcast/envflag"
	"github.com/threadcast/threadcast/memlimit"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/wire"
)

// config is everything the command reads from flags and the environment.
type config struct {
	NatsURL      string
	NatsCreds    string
	DataDir      string
	NatsListen   string // embedded server's client listen address host:port
	HTTP         string
	Drain        time.Duration
	ReadyMaxLag  uint64
	AuthKey      string // HMAC key of bearer tokens; enables the HTTP bridge
	BridgeNoAuth bool   // serve the bridge without tokens (development only)
	LogLevel     slog.Level
	// MemoryLimitRatio × the cgroup's memory limit is the Go runtime's soft
	// limit (package memlimit); 0: none.
	MemoryLimitRatio float64
	Pipeline         pipeline.Config
	// PartitionMode is "static" (Pipeline.Instance of Instances) or "lease"
	// (partitions claimed with Lease; see pipeline.Leases).
	PartitionMode string
	Lease         pipeline.LeaseConfig
}

// parseConfig reads args, with getenv supplying THREADCAST_* defaults.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	c := config{Pipeline: pipeline.DefaultConfig()}
	p := &c.Pipeline
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var logLevel string
	fs.StringVar(&c.NatsURL, "nats-url", "", "NATS server URL(s), comma-separated; empty: embed a server")
	fs.StringVar(&c.NatsCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&c.DataDir, "data", "./data", "JetStream store directory of the embedded server")
	fs.StringVar(&c.NatsListen, "nats-listen", "127.0.0.1:4222", "client address of the embedded server")
	fs.StringVar(&c.HTTP, "http", ":8081", "address of /livez, /readyz and /metrics")
	fs.DurationVar(&c.Drain, "drain", 20*time.Second, "bound on the graceful shutdown")
	fs.Uint64Var(&c.ReadyMaxLag, "ready-max-lag", 100000, "readyz fails while more messages than this wait")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Float64Var(&c.MemoryLimitRatio, "memory-limit-ratio", memlimit.DefaultRatio, memlimit.FlagUsage)
	fs.StringVar(&c.AuthKey, "auth-key", "", "key that signs bearer tokens; enables the HTTP bridge POST /v1/ingest/{tenant}/{thread}")
	fs.BoolVar(&c.BridgeNoAuth, "bridge-no-auth", false, "serve the HTTP bridge without tokens (development only)")
	fs.StringVar(&p.Stream, "stream", p.Stream, "JetStream stream of events")
	fs.StringVar(&p.Bucket, "bucket", p.Bucket, "KV bucket of checkpoints")
	fs.IntVar(&p.Partitions, "partitions", p.Partitions, "number of partitions P (fixed for the stream's life)")
	fs.IntVar(&p.Instance, "instance", p.Instance, "this instance's index i (owns partitions p % n == i)")
	fs.IntVar(&p.Instances, "instances", p.Instances, "number of ingest instances n")
	fs.IntVar(&p.Shards, "shards", p.Shards, "shard goroutines (0: one per owned partition)")
	fs.IntVar(&p.Replicas, "replicas", p.Replicas, "stream and bucket replicas")
	fs.DurationVar(&p.MaxAge, "max-age", p.MaxAge, "event log retention by age (0: unlimited)")
	fs.Int64Var(&p.MaxBytes, "max-bytes", p.MaxBytes, "event log retention by size (-1: unlimited)")
	maxMsg := int(p.MaxMsgSize)
	fs.IntVar(&maxMsg, "max-msg-size", maxMsg, "largest accepted message (one event or a batch) in bytes: the stream's max message size and the embedded NATS server's max_payload (at most 64 MiB)")
	fs.IntVar(&p.ReplyWindow, "reply-window", wire.DefaultWindow, "bytes of a large snapshot reply sent before the requester asks for more (well under the NATS server's max_pending, 64 MiB by default)")
	fs.Int64Var(&p.MaxViewBytes, "max-view-bytes", p.MaxViewBytes, "largest view kept per thread in bytes; an event that would exceed it ends the thread's run with an error and is dead-lettered (0: no limit)")
	fs.DurationVar(&p.Duplicates, "dup-window", p.Duplicates, "Nats-Msg-Id de-duplication window")
	fs.Int64Var(&p.KVMaxBytes, "kv-max-bytes", p.KVMaxBytes, "checkpoint bucket size limit (-1: unlimited)")
	fs.IntVar(&p.MaxAckPending, "max-ack-pending", p.MaxAckPending, "un-acked messages per partition")
	fs.BoolVar(&p.ConsumerMemory, "consumer-memory", p.ConsumerMemory, "keep partition consumers' state in server memory (their floors are also stored in the bucket); false: in files")
	fs.DurationVar(&p.AckWait, "ack-wait", p.AckWait, "redelivery timeout")
	fs.IntVar(&p.QueueLen, "queue", p.QueueLen, "per-shard queue of delivered messages")
	fs.IntVar(&p.SnapshotQueue, "snapshot-queue", pipeline.DefaultSnapshotQueue, "threads with queued snapshot requests per shard; past it a request is answered busy")
	fs.IntVar(&p.CheckpointEvery, "checkpoint-every", p.CheckpointEvery, "checkpoint a thread after this many events")
	fs.DurationVar(&p.CheckpointInterval, "checkpoint-interval", p.CheckpointInterval, "checkpoint a dirty thread after this long")
	fs.Int64Var(&p.MemoryBudget, "memory-budget", p.MemoryBudget, "bytes of hot views per shard before eviction")
	fs.DurationVar(&p.FrameInterval, "frame-interval", p.FrameInterval, "least time between two frame bursts of a shard (coalescing; 0: after every batch)")
	fs.BoolVar(&p.Tap, "tap", p.Tap, "publish the analytics tap")
	fs.StringVar(&p.Domain, "js-domain", "", "JetStream domain of the stream and buckets (empty: the connection's own)")
	c.Lease = pipeline.DefaultLeaseConfig()
	fs.StringVar(&c.PartitionMode, "partition-mode", "static", "static (--instance/--instances) or lease (partitions claimed with TTL'd leases in KV, rebalanced and taken over after a crash)")
	fs.DurationVar(&c.Lease.TTL, "lease-ttl", c.Lease.TTL, "lease mode: a crashed instance's partitions are taken over after at most this long")
	fs.StringVar(&c.Lease.Holder, "lease-holder", "", "lease mode: this instance's unique name (default: host name and a random suffix)")
	fs.StringVar(&c.Lease.Bucket, "lease-bucket", c.Lease.Bucket, "lease mode: KV bucket of leases")

	// Environment first, then the command line over it.
	if err := envflag.Parse(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			fs.SetOutput(&b)
			fs.PrintDefaults()
			return c, fmt.Errorf("usage:\n%s", b.String())
		}
		return c, err
	}
	if err := c.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return c, fmt.Errorf("log level %q: %w", logLevel, err)
	}
	if err := memlimit.CheckRatio(c.MemoryLimitRatio); err != nil {
		return c, fmt.Errorf("--memory-limit-ratio: %w", err)
	}
	if c.AuthKey != "" && len(c.AuthKey) < 16 {
		return c, errors.New("--auth-key must be at least 16 bytes")
	}
	p.MaxMsgSize = int32(maxMsg)
	if err := p.Validate(); err != nil {
		return c, err
	}
	switch c.PartitionMode {
	case "static":
	case "lease":
		if c.Lease.Holder == "" {
			c.Lease.Holder = defaultHolder(getenv)
		}
		c.Lease.Partitions, c.Lease.Replicas, c.Lease.Domain = p.Partitions, p.Replicas, p.Domain
		if err := c.Lease.Validate(); err != nil {
			return c, err
		}
	default:
		return c, fmt.Errorf("--partition-mode %q: want static or lease", c.PartitionMode)
	}
	return c, nil
}

// defaultHolder names this instance for leases: the host name (a pod's name
// in Kubernetes) made a subject token, plus a random suffix so that two
// processes on one host never share a name.
func defaultHolder(getenv func(string) string) string {
	host := getenv("HOSTNAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	var b strings.Builder
	for _, r := range host {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		b.WriteString("ingest")
	}
	fmt.Fprintf(&b, "-%06x", rand.Uint32()&0xffffff)
	return b.String()
}
