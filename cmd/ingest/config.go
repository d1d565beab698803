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

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/cmd/internal/tokenflags"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/envflag"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/memlimit"
	"github.com/threadcast/threadcast/otelexport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/wire"
)

// config is everything the command reads from flags and the environment.
type config struct {
	NatsURL     string
	NatsCreds   string
	NatsNkey    string // nkey seed file of the connection (a locked cluster's service user)
	CalloutSeed string // issuer seed file: run the bus's auth callout (package busauth)
	DataDir     string
	NatsListen  string // embedded server's client listen address host:port
	HTTP        string
	Drain       time.Duration
	// MaxConns, HeaderTimeout, IdleTimeout and MaxHeaderBytes guard the
	// HTTP listener (package connlimit; the http.Server's timeouts and its
	// bound on a request's headers).
	MaxConns int
	// MaxConnsPerSource caps one source address's share of them.
	MaxConnsPerSource int
	HeaderTimeout     time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	ReadyMaxLag       uint64
	AuthKey           string // HMAC key of bearer tokens; enables the HTTP bridge
	BridgeNoAuth      bool   // serve the bridge without tokens (development only)
	BridgeWindow      int    // bytes of one bridge request's unacked events
	StoreMinFree      uint64 // free space under which the embedded store counts as full
	LogLevel          slog.Level
	// MemoryLimitRatio × the cgroup's memory limit is the Go runtime's soft
	// limit (package memlimit); 0: none.
	MemoryLimitRatio float64
	Pipeline         pipeline.Config
	// PartitionMode is "static" (Pipeline.Instance of Instances) or "lease"
	// (partitions claimed with Lease; see pipeline.Leases).
	PartitionMode string
	Lease         pipeline.LeaseConfig
	// Tokens configures the bridge's token verifier (AuthKey becomes a
	// shared key of it); a JWKS source enables the bridge like AuthKey.
	Tokens auth.VerifierConfig
	// OTLP exports runs as OpenTelemetry spans and metrics (--otlp-*).
	OTLP otelexport.Config
}

// parseConfig reads args, with getenv supplying THREADCAST_* defaults.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	c := config{Pipeline: pipeline.DefaultConfig(), Tokens: auth.DefaultVerifierConfig(), OTLP: otelexport.DefaultConfig()}
	p := &c.Pipeline
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var logLevel string
	fs.StringVar(&c.NatsURL, "nats-url", "", "NATS server URL(s), comma-separated; empty: embed a server")
	fs.StringVar(&c.NatsCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&c.NatsNkey, "nats-nkey", "", "nkey seed `file` (SU...) of the connection: the service user of a locked NATS cluster")
	fs.StringVar(&c.CalloutSeed, "nats-callout-seed", "", "account nkey seed `file` (SA...) of the server's auth_callout issuer: run the auth callout, authorizing agents by tokens --auth-key signs")
	fs.StringVar(&c.DataDir, "data", "./data", "JetStream store directory of the embedded server")
	fs.StringVar(&c.NatsListen, "nats-listen", "127.0.0.1:4222", "client address of the embedded server")
	fs.StringVar(&c.HTTP, "http", ":8081", "address of /livez, /readyz and /metrics")
	fs.DurationVar(&c.Drain, "drain", 20*time.Second, "bound on the graceful shutdown")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "HTTP connections open at once; past it 503 too_many_connections (0: min(16384, half the file descriptor limit left after 1024))")
	fs.IntVar(&c.MaxConnsPerSource, "max-conns-per-source", connlimit.AutoPerSource, "HTTP connections open at once from one source address (IPv4, or IPv6 /64); past it 503 too_many_connections (-1: a quarter of --max-conns; 0: no cap, for a node behind a load balancer or proxy)")
	fs.DurationVar(&c.HeaderTimeout, "http-header-timeout", 10*time.Second, "bound on reading a request's headers")
	fs.DurationVar(&c.IdleTimeout, "http-idle-timeout", 2*time.Minute, "how long an idle keep-alive HTTP connection is kept")
	fs.IntVar(&c.MaxHeaderBytes, "http-max-header-bytes", fanout.DefaultMaxHeaderBytes, "bound on a request's line and headers together, in `bytes`; past it 431")
	fs.Uint64Var(&c.ReadyMaxLag, "ready-max-lag", 100000, "readyz fails while more messages than this wait")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Float64Var(&c.MemoryLimitRatio, "memory-limit-ratio", memlimit.DefaultRatio, memlimit.FlagUsage)
	fs.StringVar(&c.AuthKey, "auth-key", "", "key that signs HS256 bearer tokens; enables the HTTP bridge POST /v1/ingest/{tenant}/{thread} (so does --jwks-url or --jwks-file)")
	tokens := tokenflags.Register(fs)
	fs.BoolVar(&c.BridgeNoAuth, "bridge-no-auth", false, "serve the HTTP bridge without tokens (development only)")
	fs.Uint64Var(&c.StoreMinFree, "store-min-free", pipeline.DefaultStoreMinFree, "bytes free on the embedded store's file system under which storage counts as full: the bridge answers 507 and /readyz fails until there is room")
	fs.IntVar(&c.BridgeWindow, "bridge-window", agent.DefaultStreamWindow, "bytes of one bridge request's events published and not yet acked (memory per request: about 2-4 x the largest event + this)")
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
	fs.DurationVar(&p.Duplicates, "dup-window", p.Duplicates, "Nats-Msg-Id de-duplication window; also how long the bridge remembers an Idempotency-Key")
	fs.Int64Var(&p.KVMaxBytes, "kv-max-bytes", p.KVMaxBytes, "checkpoint bucket size limit (-1: unlimited)")
	fs.StringVar(&p.DeadLetters, "dead-letters", p.DeadLetters, "stream keeping the dead letters (dlq.>); empty: none kept")
	fs.DurationVar(&p.DeadLetterMaxAge, "dead-letter-max-age", p.DeadLetterMaxAge, "dead letters are kept this long at most")
	fs.Int64Var(&p.DeadLetterMaxBytes, "dead-letter-max-bytes", p.DeadLetterMaxBytes, "bytes of dead letters kept at most (the oldest go first)")
	fs.IntVar(&p.MaxAckPending, "max-ack-pending", p.MaxAckPending, "un-acked messages per partition")
	fs.BoolVar(&p.ConsumerMemory, "consumer-memory", p.ConsumerMemory, "keep partition consumers' state in server memory (their floors are also stored in the bucket); false: in files")
	fs.DurationVar(&p.AckWait, "ack-wait", p.AckWait, "redelivery timeout")
	fs.IntVar(&p.QueueLen, "queue", p.QueueLen, "per-shard queue of delivered messages")
	fs.IntVar(&p.SnapshotQueue, "snapshot-queue", pipeline.DefaultSnapshotQueue, "threads with queued snapshot requests per shard; past it a request is answered busy")
	fs.IntVar(&p.CheckpointEvery, "checkpoint-every", p.CheckpointEvery, "checkpoint a thread after this many events")
	fs.DurationVar(&p.CheckpointInterval, "checkpoint-interval", p.CheckpointInterval, "checkpoint a dirty thread after this long")
	fs.DurationVar(&p.CheckpointAckTimeout, "checkpoint-ack-timeout", p.CheckpointAckTimeout, "a checkpoint write not answered within this long fails and is written again (longer across slow routes)")
	fs.Int64Var(&p.MemoryBudget, "memory-budget", p.MemoryBudget, "bytes of hot views per shard before eviction")
	fs.DurationVar(&p.FrameInterval, "frame-interval", p.FrameInterval, "least time between two frames of a thread: closer batches of a busy thread are coalesced, a thread quiet for longer is framed at once (0: after every batch)")
	fs.BoolVar(&p.Tap, "tap", p.Tap, "publish the analytics tap")
	// The durable tap (pipeline.Config.TapStream).
	fs.StringVar(&p.TapStream, "tap-stream", p.TapStream, "stream keeping the analytics tap (tap.>), replayed by GET /v1/tap?since= and any NATS consumer; empty: the tap is live only")
	fs.StringVar(&p.TapKeep, "tap-keep", p.TapKeep, "what the tap stream keeps: summaries (the run summaries) or all (every normalized event too, at a large cost in ingest throughput)")
	fs.DurationVar(&p.TapMaxAge, "tap-max-age", p.TapMaxAge, "the tap stream keeps messages this long at most")
	fs.Int64Var(&p.TapMaxBytes, "tap-max-bytes", p.TapMaxBytes, "bytes of tap kept at most (the oldest go first)")
	fs.DurationVar(&p.TapDuplicates, "tap-dup-window", p.TapDuplicates, "a run summary published again within this long (a replay after a crash) is stored once (at most --tap-max-age)")
	fs.IntVar(&p.TapMaxInFlight, "tap-max-in-flight", p.TapMaxInFlight, "tap publishes awaiting the tap stream's ack per ingest instance; past it a tap message is sent unconfirmed")
	fs.StringVar(&p.Domain, "js-domain", "", "JetStream domain of the stream and buckets (empty: the connection's own)")
	c.Lease = pipeline.DefaultLeaseConfig()
	fs.StringVar(&c.PartitionMode, "partition-mode", "static", "static (--instance/--instances) or lease (partitions claimed with TTL'd leases in KV, rebalanced and taken over after a crash)")
	fs.DurationVar(&c.Lease.TTL, "lease-ttl", c.Lease.TTL, "lease mode: a crashed instance's partitions are taken over after at most this long")
	fs.StringVar(&c.Lease.Holder, "lease-holder", "", "lease mode: this instance's unique name (default: host name and a random suffix)")
	fs.StringVar(&c.Lease.Bucket, "lease-bucket", c.Lease.Bucket, "lease mode: KV bucket of leases")
	p.Quota = quota.DefaultConfig()
	finishQuota := quota.BindFlags(fs, &p.Quota, quota.IngestFlags, "")
	finishOTLP := otelexport.BindFlags(fs, &c.OTLP)

	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n\nEvery flag can also be set by THREADCAST_<FLAG> (upper case, '-' as '_'); the command line wins.\n\nflags:\n", fs.Name())
		fs.PrintDefaults()
	}
	// Environment first, then the command line over it. A refused command
	// line is a *envflag.UsageError (main reports it with envflag.Report).
	if err := envflag.Parse(fs, args, getenv); err != nil {
		return c, err
	}
	if err := c.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return c, fmt.Errorf("log level %q: %w", logLevel, err)
	}
	if err := memlimit.CheckRatio(c.MemoryLimitRatio); err != nil {
		return c, fmt.Errorf("--memory-limit-ratio: %w", err)
	}
	if c.AuthKey != "" && len(c.AuthKey) < auth.MinKeyLen {
		return c, fmt.Errorf("--auth-key must be at least %d bytes", auth.MinKeyLen)
	}
	if err := tokens.Apply(&c.Tokens); err != nil {
		return c, err
	}
	if c.NatsCreds != "" && c.NatsNkey != "" {
		return c, errors.New("--nats-creds and --nats-nkey are two identities: give one")
	}
	if c.NatsURL == "" && (c.NatsCreds != "" || c.NatsNkey != "" || c.CalloutSeed != "") {
		return c, errors.New("--nats-creds, --nats-nkey and --nats-callout-seed are for --nats-url (the embedded server is locked with keys of its own when --auth-key or a JWKS source is set)")
	}
	if c.CalloutSeed != "" && c.AuthKey == "" && len(c.Tokens.JWKS) == 0 {
		return c, errors.New("--nats-callout-seed needs --auth-key or a JWKS source (what verifies the tokens agents connect with)")
	}
	if c.HeaderTimeout <= 0 || c.IdleTimeout <= 0 {
		return c, errors.New("--http-header-timeout and --http-idle-timeout must be positive")
	}
	if c.MaxHeaderBytes <= 0 {
		return c, errors.New("--http-max-header-bytes must be positive")
	}
	fds, err := connlimit.FDLimit()
	if err != nil {
		return c, err
	}
	if c.MaxConns, err = connlimit.Check(c.MaxConns, fds); err != nil {
		return c, fmt.Errorf("--max-conns: %w (lower it, or raise the file descriptor limit: ulimit -n)", err)
	}
	p.MaxMsgSize = int32(maxMsg)
	if err := finishQuota(os.ReadFile); err != nil {
		return c, err
	}
	if err := finishOTLP(getenv); err != nil {
		return c, err
	}
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
