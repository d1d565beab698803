package main

// threadcast serve: every part of Threadcast in one process (package node),
// configured from flags and THREADCAST_* environment variables.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/cmd/internal/tokenflags"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/envflag"
	"github.com/threadcast/threadcast/memlimit"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/node"
	"github.com/threadcast/threadcast/node/ingestrole"
	"github.com/threadcast/threadcast/otelexport"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/web"
	"github.com/threadcast/threadcast/wire"
)

func init() {
	register(command{
		name:    "serve",
		summary: "run Threadcast: NATS (embedded), ingest, fanout, dashboard, demo agents (the default)",
		run:     runServe,
	})
}

const serveUsage = `usage: threadcast [serve] [flags]

Runs Threadcast in one process, with everything on one HTTP port (--http):
the subscriber API (/v1/threads..., SSE, WebSocket, REST), the dashboard
(/), the ingest HTTP bridge (POST /v1/ingest/{tenant}/{thread}), /livez,
/readyz and /metrics.

Without --nats-url it embeds a NATS server with JetStream, its data in
--data (reused across restarts: threads and the signing key survive), its
client port on --nats-listen so that agents and the nats CLI on this
machine can publish; demo agents then run by default, and without
--auth-key a signing key is generated (kept in --data) and development
tokens are printed with the dashboard's URL. HTTP then listens on
127.0.0.1:8080 unless --http says otherwise: the dashboard hands the
development tokens to visitors on this machine (loopback peer and Host).

The embedded NATS server admits no anonymous client: this process's own
connections have a key of their own, and every other client is an agent
that connects with a token of its tenant granting the publish scope (the
printed development tokens do): it may publish that tenant's events only,
agui.<tenant>.<thread>.events, and receive only its replies, under the inbox
prefix _INBOX_<tenant> (nats pub --token T; threadcast publish --token T).

With --nats-url it joins an existing NATS (JetStream) deployment, HTTP
listens on :8080 (every interface) by default, --auth-key or a JWKS source
(--jwks-url or --jwks-file, with --issuer) is required, and the demo is
off unless --demo is given. Its own connections authenticate with
--nats-nkey or --nats-creds, and with --nats-callout-seed it also
authorizes agents for that server (docs/production.md gives the server's
configuration).

Every flag can also be set by an environment variable THREADCAST_<FLAG>,
upper case with '-' as '_' (e.g. THREADCAST_NATS_URL); a flag on the
command line wins over the environment.

On SIGTERM or SIGINT it shuts down in order: demo agents stop, HTTP stops
accepting and every stream ends with its resume cursor, ingest drains and
checkpoints, then NATS. Each phase is bounded by --drain.

Exit status: 0 after a clean shutdown; 1 when it could not start (a port in
use, an unusable data directory, no NATS) or a part failed; 2 bad flags.

flags:
`

// serveConfig is what runServe reads from flags and the environment.
type serveConfig struct {
	node        nodeConfig
	authKeySet  bool          // --auth-key given; else the key lives in --data
	devTokenTTL time.Duration // lifetime of the printed development tokens
	tenants     []string      // demo tenants, also the dashboard's (development)
	logLevel    slog.Level
	logJSON     bool
	memRatio    float64 // --memory-limit-ratio (package memlimit)
}

// nodeConfig is the node serve runs: its own config and that of its ingest
// side, whose fields the flags set side by side.
type nodeConfig struct {
	node.Config
	roleConfig
}

type roleConfig = ingestrole.Config

// config is the node's Config with the ingest side plugged in.
func (c nodeConfig) config() node.Config {
	nc := c.Config
	nc.IngestRole = c.roleConfig
	return nc
}

// optBool is a boolean flag that knows whether it was set, for defaults
// that depend on other flags (--demo).
type optBool struct{ set, v bool }

func (b *optBool) String() string {
	if b == nil || !b.v {
		return "false"
	}
	return "true"
}
func (b *optBool) IsBoolFlag() bool { return true }
func (b *optBool) Set(s string) error {
	v, err := parseBool(s)
	if err != nil {
		return err
	}
	b.set, b.v = true, v
	return nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "t", "true", "yes", "on":
		return true, nil
	case "0", "f", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean: %q", s)
}

// defaultDataDir is $XDG_DATA_HOME/threadcast, else
// ~/.local/share/threadcast, else ./threadcast-data: outside the checkout,
// where `go run ./cmd/threadcast` would otherwise leave it.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "threadcast")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "threadcast")
	}
	return "threadcast-data"
}

// serveFlags declares the flags on c; fs is returned for usage output.
func serveFlags(c *serveConfig, getenv func(string) string) (*flag.FlagSet, func() error) {
	n := &c.node
	*n = nodeConfig{node.DefaultConfig(), ingestrole.DefaultConfig()}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var authKey, logLevel, logFormat, tenants, httpAddr string
	var demoOn optBool
	var seed uint64
	fs.StringVar(&httpAddr, "http", "", "HTTP `address` of the API, dashboard, bridge, health and metrics (port 0: a free port; default "+devHTTP+" with the embedded NATS server, "+prodHTTP+" with --nats-url)")
	fs.StringVar(&n.DataDir, "data", defaultDataDir(getenv), "`directory` of the embedded NATS server's data and of the generated signing key")
	fs.StringVar(&n.NatsURL, "nats-url", "", "external NATS server `URL`(s), comma-separated; empty: embed a NATS server")
	fs.StringVar(&n.NatsCreds, "nats-creds", "", "NATS credentials `file` (JWT, operator mode) of this process's own connections, for --nats-url")
	fs.StringVar(&n.NatsNkey, "nats-nkey", "", "nkey seed `file` (SU...) of this process's own connections, for --nats-url (a user in the server's authorization and auth_callout auth_users)")
	fs.StringVar(&n.CalloutSeed, "nats-callout-seed", "", "account nkey seed `file` (SA...) whose public key is the server's auth_callout issuer: run the auth callout on --nats-url, authorizing agents by their tokens")
	fs.StringVar(&n.NatsListen, "nats-listen", n.NatsListen, "client `address` of the embedded NATS server (port 0: a free port)")
	fs.BoolVar(&n.Ingest, "ingest", n.Ingest, "run ingest (the reducers) and the HTTP bridge")
	fs.BoolVar(&n.Fanout, "fanout", n.Fanout, "run the fanout (subscriber API) and the dashboard")
	fs.Var(&demoOn, "demo", "run demo agents (default: on with the embedded NATS server, off with --nats-url)")
	fs.Float64Var(&n.DemoConfig.Rate, "demo-rate", 0, "demo `events/s` over all agents; 0: each agent at the pace of a live agent")
	fs.Float64Var(&n.DemoConfig.TimeScale, "demo-time-scale", 1, "with --demo-rate 0, multiply the agents' delays by `f` (0.5: twice as fast)")
	fs.IntVar(&n.DemoConfig.Agents, "demo-agents", 0, "concurrent demo agents, spread over the tenants (0: two per tenant)")
	fs.StringVar(&tenants, "demo-tenants", strings.Join(demo.DefaultTenants(), ","), "comma-separated demo `tenants`; also the dashboard's tenants with development tokens")
	fs.Uint64Var(&seed, "demo-seed", 0, "seed of the demo traffic (0: a fresh one per start, so thread ids never repeat)")
	fs.StringVar(&authKey, "auth-key", "", fmt.Sprintf("`key` signing the bearer tokens (at least %d bytes); empty with the embedded NATS server: generated and kept in --data", auth.MinKeyLen))
	fs.DurationVar(&c.devTokenTTL, "dev-token-ttl", 30*24*time.Hour, "lifetime of the printed development tokens")
	fs.DurationVar(&n.Pipeline.MaxAge, "max-age", n.Pipeline.MaxAge, "event log retention by age (0: unlimited)")
	fs.DurationVar(&n.Pipeline.DeadLetterMaxAge, "dead-letter-max-age", n.Pipeline.DeadLetterMaxAge, "dead letters (GET /v1/deadletters) are kept this long at most")
	fs.Int64Var(&n.Pipeline.DeadLetterMaxBytes, "dead-letter-max-bytes", n.Pipeline.DeadLetterMaxBytes, "bytes of dead letters kept at most (the oldest go first)")
	// The durable tap (pipeline.Config.TapStream).
	fs.StringVar(&n.Pipeline.TapStream, "tap-stream", n.Pipeline.TapStream, "stream keeping the analytics tap (tap.>), replayed by GET /v1/tap?since= and any NATS consumer; empty: the tap is live only")
	fs.StringVar(&n.Pipeline.TapKeep, "tap-keep", n.Pipeline.TapKeep, "what the tap stream keeps: summaries (the run summaries) or all (every normalized event too, at a large cost in ingest throughput)")
	fs.DurationVar(&n.Pipeline.TapMaxAge, "tap-max-age", n.Pipeline.TapMaxAge, "the tap stream keeps messages this long at most")
	fs.Int64Var(&n.Pipeline.TapMaxBytes, "tap-max-bytes", n.Pipeline.TapMaxBytes, "bytes of tap kept at most (the oldest go first)")
	fs.DurationVar(&n.Pipeline.TapDuplicates, "tap-dup-window", n.Pipeline.TapDuplicates, "a run summary published again within this long (a replay after a crash) is stored once (at most --tap-max-age)")
	fs.IntVar(&n.Pipeline.TapMaxInFlight, "tap-max-in-flight", n.Pipeline.TapMaxInFlight, "tap publishes awaiting the tap stream's ack per ingest instance; past it a tap message is sent unconfirmed")
	fs.DurationVar(&n.Pipeline.Duplicates, "dup-window", n.Pipeline.Duplicates, "Nats-Msg-Id de-duplication window; also how long the bridge remembers an Idempotency-Key")
	fs.Uint64Var(&n.StoreMinFree, "store-min-free", pipeline.DefaultStoreMinFree, "bytes free on the embedded store's file system under which storage counts as full: the bridge answers 507 and /readyz fails until there is room")
	fs.IntVar(&n.BridgeWindow, "bridge-window", agent.DefaultStreamWindow, "bytes of one bridge request's events published and not yet acked (memory per request: about 2-4 x the largest event + this)")
	fs.DurationVar(&n.FanoutConfig.Heartbeat, "heartbeat", n.FanoutConfig.Heartbeat, "interval of SSE keep-alive comments and WebSocket pings")
	fs.DurationVar(&n.FanoutConfig.MaxLifetime, "max-lifetime", n.FanoutConfig.MaxLifetime, "end streams after this long, with their resume cursor (0: never)")
	fs.IntVar(&n.FanoutConfig.Hub.QueueBytes, "queue-bytes", n.FanoutConfig.Hub.QueueBytes, "per-subscriber queue; past it, when consolidation cannot bring it back under, the subscriber is resynchronised")
	fs.IntVar(&n.FanoutConfig.Hub.CoalesceBytes, "coalesce-bytes", n.FanoutConfig.Hub.CoalesceBytes, "high-water mark of a subscriber's queue: past it its backlog is consolidated by meaning (AG-UI events compacted, view changes merged), for it alone (at most --queue-bytes; negative: never)")
	fs.IntVar(&n.FanoutConfig.SendBuffer, "send-buffer", n.FanoutConfig.SendBuffer, "kernel send buffer of a stream's connection, in bytes: small keeps a slow reader's backlog in its queue, where it is consolidated (negative: the kernel's autotuning)")
	fs.IntVar(&n.FanoutConfig.UnreadBytes, "client-unread-bytes", n.FanoutConfig.UnreadBytes, "how much a stream's client may leave unread (its receive buffer and our unsent bytes, from TCP_INFO; Linux) before the stream's writer holds back and its backlog is consolidated in its queue (negative: never hold back)")
	fs.IntVar(&n.FanoutConfig.MaxJoins, "max-joins", n.FanoutConfig.MaxJoins, "streams joining at once (subscribing, their snapshot and its write); the others wait for a slot, so that a storm of joins leaves the live streams their cores (negative: no limit)")
	fs.IntVar(&n.FanoutConfig.Hub.MaxIdleFeedsPerTenant, "max-idle-threads-per-tenant", n.FanoutConfig.Hub.MaxIdleFeedsPerTenant, "lingering threads per tenant; past it the tenant's oldest ends at once (negative: unlimited)")
	fs.IntVar(&n.FanoutConfig.Hub.MaxIdleFeeds, "max-idle-threads", n.FanoutConfig.Hub.MaxIdleFeeds, "lingering threads on the node; past it the oldest ends at once (negative: unlimited)")
	fs.IntVar(&n.FanoutConfig.Hub.IdleRingBytes, "idle-ring-bytes", n.FanoutConfig.Hub.IdleRingBytes, "bytes of recent frames a thread lingering for longer than --idle-trim-after keeps (at most --ring-bytes)")
	fs.DurationVar(&n.FanoutConfig.Hub.IdleTrimAfter, "idle-trim-after", n.FanoutConfig.Hub.IdleTrimAfter, "how long a lingering thread keeps its whole ring before it is cut to --idle-ring-bytes")
	fs.Var(int32Flag{&n.Pipeline.MaxMsgSize}, "max-msg-size", "largest accepted message (one event or a batch) in `bytes`: the stream's max message size and the embedded NATS server's max_payload (at most 64 MiB)")
	fs.Int64Var(&n.Pipeline.MaxViewBytes, "max-view-bytes", n.Pipeline.MaxViewBytes, "largest view kept per thread in `bytes`; an event that would exceed it ends the thread's run with an error and is dead-lettered (0: no limit)")
	fs.IntVar(&n.Pipeline.ReplyWindow, "reply-window", wire.DefaultWindow, "`bytes` of a large snapshot reply sent before the fanout asks for more (well under the NATS server's max_pending, 64 MiB by default)")
	fs.IntVar(&n.FanoutConfig.Hub.MaxMessageBytes, "max-message-bytes", n.FanoutConfig.Hub.MaxMessageBytes, "largest frame or snapshot reply the fanout assembles from parts, in `bytes` (at least twice --max-view-bytes)")
	fs.IntVar(&n.Pipeline.Partitions, "partitions", n.Pipeline.Partitions, "partitions of the event stream (fixed for its life; the same on every ingest and fanout)")
	fs.DurationVar(&n.Drain, "drain", n.Drain, "bound on each phase of the graceful shutdown")
	fs.Uint64Var(&n.ReadyMaxLag, "ready-max-lag", n.ReadyMaxLag, "/readyz fails while more messages than this wait for ingest")
	fs.IntVar(&n.MaxConns, "max-conns", n.MaxConns, "HTTP connections open at once, streams included; past it 503 too_many_connections (0: min(16384, half the file descriptor limit left after 1024))")
	fs.IntVar(&n.MaxConnsPerSource, "max-conns-per-source", n.MaxConnsPerSource, "HTTP connections open at once from one source address (IPv4, or IPv6 /64); past it 503 too_many_connections (-1: a quarter of --max-conns; 0: no cap, for a node behind a load balancer or proxy)")
	fs.DurationVar(&n.HTTPHeaderTimeout, "http-header-timeout", n.HTTPHeaderTimeout, "bound on reading a request's headers (a connection that sends nothing is closed after it)")
	fs.DurationVar(&n.HTTPIdleTimeout, "http-idle-timeout", n.HTTPIdleTimeout, "how long an idle keep-alive HTTP connection is kept")
	fs.IntVar(&n.HTTPMaxHeaderBytes, "http-max-header-bytes", n.HTTPMaxHeaderBytes, "bound on a request's line and headers together, in `bytes`; past it 431")
	fs.StringVar(&logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&logFormat, "log-format", "text", "log `format` on stderr: text or json")
	fs.Float64Var(&c.memRatio, "memory-limit-ratio", memlimit.DefaultRatio, memlimit.FlagUsage)
	tokens := tokenflags.Register(fs)
	finishQuota := quota.BindFlags(fs, &n.Quota, quota.IngestFlags|quota.FanoutFlags, "quota-streams")
	finishOTLP := otelexport.BindFlags(fs, &n.OTLP)

	finish := func() error {
		if err := finishQuota(os.ReadFile); err != nil {
			return err
		}
		if err := finishOTLP(getenv); err != nil {
			return err
		}
		if err := c.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
			return fmt.Errorf("--log-level %q: %w", logLevel, err)
		}
		switch logFormat {
		case "text", "json":
			c.logJSON = logFormat == "json"
		default:
			return fmt.Errorf("--log-format %q: want text or json", logFormat)
		}
		if err := memlimit.CheckRatio(c.memRatio); err != nil {
			return fmt.Errorf("--memory-limit-ratio: %w", err)
		}
		embedded := n.NatsURL == ""
		// Embedded is development: the dashboard offers development
		// tokens, so the default listener is this machine's only.
		n.HTTP = httpAddr
		if n.HTTP == "" {
			n.HTTP = map[bool]string{true: devHTTP, false: prodHTTP}[embedded]
		}
		if err := tokens.Apply(&n.Tokens); err != nil {
			return err
		}
		n.Demo = embedded
		if demoOn.set {
			n.Demo = demoOn.v
		}
		c.tenants = nil
		for _, t := range strings.Split(tenants, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if _, err := agent.Subject(t, "x"); err != nil {
				return fmt.Errorf("--demo-tenants: %w", err)
			}
			c.tenants = append(c.tenants, t)
		}
		if len(c.tenants) == 0 {
			return errors.New("--demo-tenants: no tenant")
		}
		if n.DemoConfig.Rate < 0 || n.DemoConfig.TimeScale <= 0 || n.DemoConfig.Agents < 0 {
			return errors.New("--demo-rate and --demo-agents must not be negative, --demo-time-scale must be positive")
		}
		n.DemoConfig.Tenants = c.tenants
		n.DemoConfig.Seed = seed
		if seed == 0 {
			n.DemoConfig.Seed = rand.Uint64() | 1
		}
		c.authKeySet = authKey != ""
		if c.authKeySet {
			if len(authKey) < auth.MinKeyLen {
				return fmt.Errorf("--auth-key must be at least %d bytes", auth.MinKeyLen)
			}
			n.AuthKey = []byte(authKey)
		} else if !embedded && (n.Ingest || n.Fanout) && !tokens.HasJWKS() {
			return errors.New("--auth-key is required with --nats-url, unless a JWKS source (--jwks-url or --jwks-file) is given: every fanout and ingest of a deployment verifies tokens with the same keys")
		}
		if !n.Ingest && !n.Fanout && !n.Demo {
			return errors.New("nothing to run: --ingest=false, --fanout=false and no --demo")
		}
		if c.devTokenTTL <= 0 {
			return errors.New("--dev-token-ttl must be positive")
		}
		return n.Pipeline.Validate()
	}
	return fs, finish
}

// parseServe reads args, with getenv supplying THREADCAST_* defaults. A
// command line it refuses, and --help, are a *envflag.UsageError (for
// envflag.Report).
func parseServe(args []string, getenv func(string) string) (c serveConfig, err error) {
	fs, finish := serveFlags(&c, getenv)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	// The environment first, then the command line over it.
	if err := envflag.Parse(fs, args, getenv); err != nil {
		return c, err
	}
	return c, finish()
}

func runServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c, err := parseServe(args, os.Getenv)
	if err != nil {
		// --help: the usage on stdout (exitOK); else exitUsage.
		return envflag.Report("threadcast serve", err, stdout, stderr)
	}
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel})
	if c.logJSON {
		h = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: c.logLevel})
	}
	log := slog.New(h)
	c.node.Logger = log
	memlimit.Configure(log, c.memRatio, os.Getenv, os.DirFS("/"))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	dev, err := prepareServe(&c, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "threadcast serve: %v\n", startupHint(err))
		return exitRejected
	}
	n, err := node.Start(c.node.config())
	if err != nil {
		fmt.Fprintf(stderr, "threadcast serve: %v\n", startupHint(err))
		return exitRejected
	}
	// The banner is written at once, so that a reader of stdout (a script
	// waiting for the URL) sees all of it or none.
	var banner strings.Builder
	fmt.Fprintf(&banner, "NATS:       %s%s\n", n.NatsURL(), map[bool]string{true: " (embedded)", false: ""}[c.node.NatsURL == ""])
	fmt.Fprintf(&banner, "listening on %s%s\n", n.URL(), everyInterface(n.HTTPAddr()))
	if c.node.Fanout {
		if len(dev) > 0 {
			fmt.Fprintf(&banner, "dashboard:  %s/#token=%s\n", n.URL(), dev[0].Token)
			for _, t := range dev {
				fmt.Fprintf(&banner, "dev token:  %s %s\n", t.Tenant, t.Token)
			}
			// The dev tokens are the agents' NATS credential too.
			fmt.Fprintf(&banner, "agents:     nats pub --server %s --token <dev token> agui.<tenant>.<thread>.events '<AG-UI event>'\n", n.NatsURL())
		} else {
			fmt.Fprintf(&banner, "dashboard:  %s/ (paste a token: threadcast token --key ... --tenant T)\n", n.URL())
		}
	}
	io.WriteString(stdout, banner.String())

	select {
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx))
	case <-n.Failed():
	}
	stop() // a second signal now kills the process the default way
	failed := n.Err()
	if err := n.Stop(); err != nil {
		log.Error("shutdown", "err", err)
		return exitRejected
	}
	if failed != nil {
		return exitRejected
	}
	log.Info("stopped cleanly")
	return exitOK
}

// prepareServe settles what depends on the data directory: with the
// embedded server, the directory is created and printed, and without
// --auth-key the signing key is loaded from it (or generated into it) and
// development tokens are minted for the dashboard.
func prepareServe(c *serveConfig, stdout io.Writer) (dev []web.Tenant, err error) {
	n := &c.node
	if n.NatsURL != "" {
		return nil, nil
	}
	dir, err := filepath.Abs(n.DataDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", node.ErrDataDir, err)
	}
	n.DataDir = dir
	if err := ingestrole.PrepareDataDir(dir); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "data:       %s\n", dir)
	if c.authKeySet {
		return nil, nil
	}
	key, _, err := node.LoadOrCreateKey(filepath.Join(dir, node.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", node.ErrDataDir, err)
	}
	n.AuthKey = key
	exp := time.Now().Add(c.devTokenTTL).Unix()
	// With --audience the node refuses a token without it: the
	// development tokens carry it.
	var aud auth.Audience
	if n.Tokens.Audience != "" {
		aud = auth.Audience{n.Tokens.Audience}
	}
	for _, t := range c.tenants {
		tok, err := auth.Mint(key, auth.Claims{Tenant: t, Scope: auth.ScopeRead + " " + auth.ScopePublish, Audience: aud, Expiry: exp})
		if err != nil {
			return nil, err
		}
		dev = append(dev, web.Tenant{Tenant: t, Token: tok})
	}
	n.DashboardTenants = dev
	return dev, nil
}

// The default --http: this machine only in development (embedded NATS),
// every interface in a deployment (--nats-url), behind its load balancer.
const (
	devHTTP  = "127.0.0.1:8080"
	prodHTTP = ":8080"
)

// everyInterface is the banner's note when the listener is not bound to
// one address: the URL printed is then one way in among others.
func everyInterface(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && (host == "" || ip != nil && ip.IsUnspecified()) {
		return " (listening on every interface: " + addr + ")"
	}
	return ""
}

// startupHint names the flag to change for a start-up error.
func startupHint(err error) error {
	switch {
	case errors.Is(err, node.ErrNatsListen):
		return fmt.Errorf("%w\n  (is another NATS server or Threadcast running? choose another port with --nats-listen, or use that server with --nats-url)", err)
	case errors.Is(err, node.ErrHTTPListen):
		return fmt.Errorf("%w\n  (choose another address with --http)", err)
	case errors.Is(err, node.ErrDataDir):
		return fmt.Errorf("%w\n  (choose another directory with --data)", err)
	case errors.Is(err, node.ErrNats), errors.Is(err, natsembed.ErrStart):
		return fmt.Errorf("%w\n  (check --nats-url, --nats-creds or --nats-listen)", err)
	case errors.Is(err, connlimit.ErrTooMany):
		return fmt.Errorf("%w\n  (lower --max-conns, or raise the file descriptor limit: ulimit -n)", err)
	case errors.Is(err, pipeline.ErrPartitionsChanged):
		return fmt.Errorf("%w\n  (the stream was created with another --partitions)", err)
	}
	return err
}

// int32Flag is a flag.Value over an int32 (the stream's max message size).
type int32Flag struct{ p *int32 }

func (f int32Flag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*f.p), 10)
}

func (f int32Flag) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return err
	}
	*f.p = int32(v)
	return nil
}
