package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/cmd/internal/tokenflags"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/envflag"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/memlimit"
	"github.com/threadcast/threadcast/quota"
)

// config is everything the command reads from flags and the environment.
type config struct {
	NatsURL   string
	NatsCreds string
	NatsNkey  string // nkey seed file of the connection (a locked cluster's service user)
	HTTP      string
	Drain     time.Duration
	// MaxConns caps the HTTP connections (package connlimit).
	MaxConns int
	// MaxConnsPerSource caps one source address's share of them.
	MaxConnsPerSource int
	LogLevel          slog.Level
	// MemoryLimitRatio × the cgroup's memory limit is the Go runtime's soft
	// limit (package memlimit); 0: none.
	MemoryLimitRatio float64
	Fanout           fanout.Config
	// Tokens configures the token verifier (AuthKey becomes a shared key
	// of it); Run builds it.
	Tokens auth.VerifierConfig
}

// parseConfig reads args, with getenv supplying THREADCAST_* defaults.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	c := config{Fanout: fanout.DefaultConfig(), Tokens: auth.DefaultVerifierConfig()}
	f := &c.Fanout
	fs := flag.NewFlagSet("fanout", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var logLevel, authKey string
	fs.StringVar(&c.NatsURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL(s), comma-separated")
	fs.StringVar(&c.NatsCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&c.NatsNkey, "nats-nkey", "", "nkey seed `file` (SU...) of the connection: the service user of a locked NATS cluster")
	fs.StringVar(&c.HTTP, "http", ":8080", "HTTP listen address")
	fs.DurationVar(&c.Drain, "drain", 20*time.Second, "bound on the graceful shutdown")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Float64Var(&c.MemoryLimitRatio, "memory-limit-ratio", memlimit.DefaultRatio, memlimit.FlagUsage)
	fs.StringVar(&authKey, "auth-key", "", fmt.Sprintf("HS256 token signing key (at least %d bytes); required unless --jwks-url or --jwks-file is given", auth.MinKeyLen))
	tokens := tokenflags.Register(fs)
	fs.DurationVar(&f.Heartbeat, "heartbeat", f.Heartbeat, "interval of SSE keep-alive comments and WebSocket pings")
	fs.DurationVar(&f.MaxLifetime, "max-lifetime", f.MaxLifetime, "end streams after this long, with their resume cursor (0: never)")
	fs.DurationVar(&f.WriteTimeout, "write-timeout", f.WriteTimeout, "disconnect a client that accepts no bytes for this long")
	fs.IntVar(&f.SendBuffer, "send-buffer", f.SendBuffer, "kernel send buffer of a stream's connection, in bytes: small keeps a slow reader's backlog in its queue, where it is consolidated (negative: the kernel's autotuning)")
	fs.IntVar(&f.UnreadBytes, "client-unread-bytes", f.UnreadBytes, "how much a stream's client may leave unread (its receive buffer and our unsent bytes, from TCP_INFO; Linux) before the stream's writer holds back and its backlog is consolidated in its queue (negative: never hold back)")
	fs.IntVar(&f.MaxJoins, "max-joins", f.MaxJoins, "streams joining at once (subscribing, their snapshot and its write); the others wait for a slot, so that a storm of joins leaves the live streams their cores (negative: no limit)")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "HTTP connections open at once, streams included; past it 503 too_many_connections (0: min(16384, half the file descriptor limit left after 1024))")
	fs.IntVar(&c.MaxConnsPerSource, "max-conns-per-source", connlimit.AutoPerSource, "HTTP connections open at once from one source address (IPv4, or IPv6 /64); past it 503 too_many_connections (-1: a quarter of --max-conns; 0: no cap, for a node behind a load balancer or proxy)")
	fs.DurationVar(&f.ReadHeaderTimeout, "http-header-timeout", f.ReadHeaderTimeout, "bound on reading a request's headers")
	fs.DurationVar(&f.IdleTimeout, "http-idle-timeout", f.IdleTimeout, "how long an idle keep-alive HTTP connection is kept")
	fs.IntVar(&f.MaxHeaderBytes, "http-max-header-bytes", f.MaxHeaderBytes, "bound on a request's line and headers together, in `bytes`; past it 431")
	fs.DurationVar(&f.Retry, "sse-retry", f.Retry, "reconnection delay announced to SSE clients")
	finishQuota := quota.BindFlags(fs, &f.Quota, quota.FanoutFlags, "max-conns-per-tenant")
	fs.IntVar(&f.MaxWindow, "max-window", f.MaxWindow, "largest ?window=N of a stream or view request (beyond it: 400 bad_window)")
	fs.IntVar(&f.MaxPageLimit, "max-page", f.MaxPageLimit, "largest ?limit=K of a messages page (beyond it: 400 bad_limit)")
	fs.IntVar(&f.DefaultPageLimit, "default-page", f.DefaultPageLimit, "messages in a page requested without ?limit (at most --max-page)")
	fs.StringVar(&f.ViewsBucket, "bucket", f.ViewsBucket, "KV bucket of checkpoints (the thread list)")
	fs.IntVar(&f.Hub.Partitions, "partitions", f.Hub.Partitions, "the pipeline's partition count P")
	fs.StringVar(&f.DeadLetters, "dead-letters", f.DeadLetters, "the pipeline's dead-letter stream, read by GET /v1/deadletters")
	fs.StringVar(&f.TapStream, "tap-stream", f.TapStream, "the pipeline's tap stream, replayed by GET /v1/tap?since= (empty: the tap is live only)")
	fs.StringVar(&f.Hub.EventStream, "stream", f.Hub.EventStream, "the pipeline's JetStream event stream (client cursors are checked against it)")
	fs.DurationVar(&f.Hub.SnapshotTimeout, "snapshot-timeout", f.Hub.SnapshotTimeout, "bound on one snapshot request")
	fs.DurationVar(&f.Hub.SnapshotRetry, "snapshot-retry", f.Hub.SnapshotRetry, "how long a join retries snapshot requests the pipeline answers busy or times out (then 503 with Retry-After)")
	fs.IntVar(&f.Hub.QueueBytes, "queue-bytes", f.Hub.QueueBytes, "per-subscriber queue; past it, when consolidation cannot bring it back under, the subscriber is resynchronised")
	fs.IntVar(&f.Hub.CoalesceBytes, "coalesce-bytes", f.Hub.CoalesceBytes, "high-water mark of a subscriber's queue: past it its backlog is consolidated by meaning (AG-UI events compacted, view changes merged), for it alone (at most --queue-bytes; negative: never)")
	fs.IntVar(&f.Hub.RingFrames, "ring-frames", f.Hub.RingFrames, "recent frames kept per thread for resuming")
	fs.IntVar(&f.Hub.RingBytes, "ring-bytes", f.Hub.RingBytes, "bytes of recent frames kept per thread")
	fs.IntVar(&f.Hub.IdleRingBytes, "idle-ring-bytes", f.Hub.IdleRingBytes, "bytes of recent frames a thread lingering for longer than --idle-trim-after keeps (at most --ring-bytes)")
	fs.DurationVar(&f.Hub.IdleTrimAfter, "idle-trim-after", f.Hub.IdleTrimAfter, "how long a lingering thread keeps its whole ring before it is cut to --idle-ring-bytes")
	fs.DurationVar(&f.Hub.Linger, "linger", f.Hub.Linger, "keep a thread's subscription this long after its last subscriber left")
	fs.IntVar(&f.Hub.MaxIdleFeedsPerTenant, "max-idle-threads-per-tenant", f.Hub.MaxIdleFeedsPerTenant, "lingering threads per tenant; past it the tenant's oldest ends at once (negative: unlimited)")
	fs.IntVar(&f.Hub.MaxMessageBytes, "max-message-bytes", f.Hub.MaxMessageBytes, "largest frame or snapshot reply assembled from parts, in bytes (at least twice ingest's --max-view-bytes)")
	fs.IntVar(&f.Hub.MaxIdleFeeds, "max-idle-threads", f.Hub.MaxIdleFeeds, "lingering threads on the node; past it the oldest ends at once (negative: unlimited)")

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
	if err := tokens.Apply(&c.Tokens); err != nil {
		return c, err
	}
	if err := finishQuota(os.ReadFile); err != nil {
		return c, err
	}
	fds, err := connlimit.FDLimit()
	if err != nil {
		return c, err
	}
	if c.MaxConns, err = connlimit.Check(c.MaxConns, fds); err != nil {
		return c, fmt.Errorf("--max-conns: %w (lower it, or raise the file descriptor limit: ulimit -n)", err)
	}
	if len(authKey) < auth.MinKeyLen && (authKey != "" || !tokens.HasJWKS()) {
		return c, fmt.Errorf("--auth-key (THREADCAST_AUTH_KEY) must be at least %d bytes, or give --jwks-url or --jwks-file", auth.MinKeyLen)
	}
	f.AuthKey = []byte(authKey)
	if c.NatsCreds != "" && c.NatsNkey != "" {
		return c, errors.New("--nats-creds and --nats-nkey are two identities: give one")
	}
	return c, nil
}
