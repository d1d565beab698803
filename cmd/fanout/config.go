package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/envflag"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/memlimit"
)

// config is everything the command reads from flags and the environment.
type config struct {
	NatsURL   string
	NatsCreds string
	HTTP      string
	Drain     time.Duration
	LogLevel  slog.Level
	// MemoryLimitRatio × the cgroup's memory limit is the Go runtime's soft
	// limit (package memlimit); 0: none.
	MemoryLimitRatio float64
	Fanout           fanout.Config
}

// parseConfig reads args, with getenv supplying THREADCAST_* defaults.
func parseConfig(args []string, getenv func(string) string) (config, error) {
	c := config{Fanout: fanout.DefaultConfig()}
	f := &c.Fanout
	fs := flag.NewFlagSet("fanout", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var logLevel, authKey string
	fs.StringVar(&c.NatsURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL(s), comma-separated")
	fs.StringVar(&c.NatsCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&c.HTTP, "http", ":8080", "HTTP listen address")
	fs.DurationVar(&c.Drain, "drain", 20*time.Second, "bound on the graceful shutdown")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Float64Var(&c.MemoryLimitRatio, "memory-limit-ratio", memlimit.DefaultRatio, memlimit.FlagUsage)
	fs.StringVar(&authKey, "auth-key", "", "token signing key (at least 16 bytes; required)")
	fs.DurationVar(&f.Heartbeat, "heartbeat", f.Heartbeat, "interval of SSE keep-alive comments and WebSocket pings")
	fs.DurationVar(&f.MaxLifetime, "max-lifetime", f.MaxLifetime, "end streams after this long, with their resume cursor (0: never)")
	fs.DurationVar(&f.WriteTimeout, "write-timeout", f.WriteTimeout, "disconnect a client that accepts no bytes for this long")
	fs.DurationVar(&f.Retry, "sse-retry", f.Retry, "reconnection delay announced to SSE clients")
	fs.IntVar(&f.MaxConnsPerTenant, "max-conns-per-tenant", f.MaxConnsPerTenant, "concurrent streams per tenant (0: unlimited)")
	fs.IntVar(&f.MaxWindow, "max-window", f.MaxWindow, "largest ?window=N of a stream or view request (beyond it: 400 bad_window)")
	fs.IntVar(&f.MaxPageLimit, "max-page", f.MaxPageLimit, "largest ?limit=K of a messages page (beyond it: 400 bad_limit)")
	fs.IntVar(&f.DefaultPageLimit, "default-page", f.DefaultPageLimit, "messages in a page requested without ?limit (at most --max-page)")
	fs.StringVar(&f.ViewsBucket, "bucket", f.ViewsBucket, "KV bucket of checkpoints (the thread list)")
	fs.IntVar(&f.Hub.Partitions, "partitions", f.Hub.Partitions, "the pipeline's partition count P")
	fs.DurationVar(&f.Hub.SnapshotTimeout, "snapshot-timeout", f.Hub.SnapshotTimeout, "bound on one snapshot request")
	fs.DurationVar(&f.Hub.SnapshotRetry, "snapshot-retry", f.Hub.SnapshotRetry, "how long a join retries snapshot requests the pipeline answers busy or times out (then 503 with Retry-After)")
	fs.IntVar(&f.Hub.QueueBytes, "queue-bytes", f.Hub.QueueBytes, "per-subscriber queue; past it the subscriber is resynchronised")
	fs.IntVar(&f.Hub.RingFrames, "ring-frames", f.Hub.RingFrames, "recent frames kept per thread for resuming")
	fs.IntVar(&f.Hub.RingBytes, "ring-bytes", f.Hub.RingBytes, "bytes of recent frames kept per thread")
	fs.IntVar(&f.Hub.IdleRingBytes, "idle-ring-bytes", f.Hub.IdleRingBytes, "bytes of recent frames a thread lingering for longer than --idle-trim-after keeps (at most --ring-bytes)")
	fs.DurationVar(&f.Hub.IdleTrimAfter, "idle-trim-after", f.Hub.IdleTrimAfter, "how long a lingering thread keeps its whole ring before it is cut to --idle-ring-bytes")
	fs.DurationVar(&f.Hub.Linger, "linger", f.Hub.Linger, "keep a thread's subscription this long after its last subscriber left")
	fs.IntVar(&f.Hub.MaxIdleFeedsPerTenant, "max-idle-threads-per-tenant", f.Hub.MaxIdleFeedsPerTenant, "lingering threads per tenant; past it the tenant's oldest ends at once (negative: unlimited)")
	fs.IntVar(&f.Hub.MaxMessageBytes, "max-message-bytes", f.Hub.MaxMessageBytes, "largest frame or snapshot reply assembled from parts, in bytes (at least twice ingest's --max-view-bytes)")
	fs.IntVar(&f.Hub.MaxIdleFeeds, "max-idle-threads", f.Hub.MaxIdleFeeds, "lingering threads on the node; past it the oldest ends at once (negative: unlimited)")

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
	if len(authKey) < auth.MinKeyLen {
		return c, fmt.Errorf("--auth-key (THREADCAST_AUTH_KEY) must be at least %d bytes", auth.MinKeyLen)
	}
	f.AuthKey = []byte(authKey)
	return c, nil
}
