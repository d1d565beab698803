package node

// NOTE: Config and its defaults come first, then Start (the parts in the
// order they are brought up), the HTTP side (one mux, readiness), and last
// Stop, which undoes Start in the opposite order. Start calls Stop's
// shutdown itself when a part fails to come up, so every part's teardown
// must accept a part that was never started (nil fields).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/busauth"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/demo"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/web"
)

// Config configures a node. Build it with DefaultConfig and change fields.
type Config struct {
	// HTTP is the address of the node's one HTTP port ("host:port"; port 0
	// picks a free one, see Node.HTTPAddr).
	HTTP string

	// NatsURL is an external NATS server (comma-separated URLs). Empty: the
	// node embeds a nats-server with JetStream.
	NatsURL string
	// NatsCreds is a credentials file (JWT and nkey seed, operator mode)
	// for NatsURL; NatsNkey is an nkey seed file (a user key, U..., listed
	// in the server's authorization users and auth_callout auth_users).
	// They are the identity of the node's own connections (ingest, fanout,
	// bridge, the auth callout). Empty: none (or a user and password in
	// NatsURL).
	NatsCreds string
	NatsNkey  string
	// CalloutSeed is an nkey seed file of the account key (A...) that is
	// the issuer of the server's auth_callout: set, the node runs the auth
	// callout service (package busauth) on NatsURL, authorizing agents by
	// the tokens AuthKey signs. With the embedded server the node always
	// runs it, with a key of its own.
	CalloutSeed string
	// NatsListen is the embedded server's client address "host:port"; port
	// 0 (or -1) picks a free one (see Node.NatsURL).
	NatsListen string
	// DataDir holds the embedded server's JetStream store (the event log
	// and the checkpoints): a node restarted on the same directory keeps
	// every thread. Required when NatsURL is empty.
	DataDir string

	// Ingest runs the reducers and serves the ingest HTTP bridge; Fanout
	// serves the /v1 API and the dashboard.
	Ingest, Fanout bool
	// Demo runs demo agents with DemoConfig until Stop.
	Demo       bool
	DemoConfig demo.Config

	// AuthKey signs the HS256 bearer tokens (package auth) that the fanout
	// and the ingest bridge accept. Required (≥ auth.MinKeyLen bytes) when
	// Ingest or Fanout is set, unless Tokens names a JWKS source.
	AuthKey []byte
	// Tokens configures the node's one token Verifier (Node.Verifier),
	// shared by the fanout and the bridge: JWKS sources, audience, clock
	// skew, refresh throttle. AuthKey is added to its SharedKeys. With a
	// JWKS source, Start fetches it and fails when it cannot.
	Tokens auth.VerifierConfig
	// DashboardTenants are offered by the dashboard's tenant picker with
	// their tokens, only to requests from a loopback address whose Host is
	// a loopback name (web.Config.TenantsLocalOnly): set them only on a
	// development node.
	DashboardTenants []web.Tenant

	// Pipeline configures ingest (its Logger and Metrics are set by the
	// node). Fanout configures the fanout; its AuthKey is set from AuthKey
	// and its Hub.Partitions from Pipeline.Partitions.
	Pipeline     pipeline.Config
	FanoutConfig fanout.Config
	// Quota is every door's per-tenant quotas: the node sets it as
	// Pipeline.Quota and FanoutConfig.Quota, holds the bridge to it, and
	// counts retained messages when a tenant has that quota.
	Quota quota.Config

	// Drain bounds each phase of the shutdown (and the start-up of
	// streams): HTTP drain, the publishers' acks, ingest's checkpoints, the
	// NATS connection's drain.
	Drain time.Duration
	// ReadyMaxLag: /readyz fails while ingest has more messages waiting.
	ReadyMaxLag uint64
	// StoreMinFree is the free space under which the embedded server's
	// store counts as full (pipeline.StorageConfig.MinFree; 0: 256 MiB):
	// the bridge answers 507 and /readyz fails until there is room.
	StoreMinFree uint64
	// BridgeWindow bounds the bytes of one bridge request's events
	// published and not yet acked (pipeline.BridgeConfig.Window; 0: 1 MiB).
	BridgeWindow int

	// MaxConns caps the HTTP connections open at once (streams included:
	// each SSE or WebSocket stream holds one); a connection past it is
	// answered 503 too_many_connections and closed (package connlimit).
	// It must leave connlimit.Reserve descriptors of the process's limit
	// (checked at Start); 0: min(16384, half of what the reserve leaves).
	MaxConns int
	// MaxConnsPerSource caps the HTTP connections open at once from one
	// source (an IPv4 address, an IPv6 /64), refused as MaxConns refuses,
	// so that one client cannot hold the whole of MaxConns: 0 none,
	// connlimit.AutoPerSource (DefaultConfig) a quarter of MaxConns, at
	// most MaxConns. Behind a load balancer or proxy every client has its
	// address: set it to 0 (or MaxConns) there.
	MaxConnsPerSource int
	// HTTPHeaderTimeout bounds the reading of a request's headers, and so
	// how long a connection that sends nothing is kept; HTTPIdleTimeout
	// how long a keep-alive connection may wait for its next request.
	HTTPHeaderTimeout time.Duration
	HTTPIdleTimeout   time.Duration

	// Logger receives the node's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: every part on, embedded NATS on
// 127.0.0.1:4222, HTTP on :8080, no demo. DataDir and AuthKey are left for
// the caller.
func DefaultConfig() Config {
	return Config{
		HTTP:         ":8080",
		NatsListen:   "127.0.0.1:4222",
		Ingest:       true,
		Fanout:       true,
		Tokens:       auth.DefaultVerifierConfig(),
		Pipeline:     pipeline.DefaultConfig(),
		FanoutConfig: fanout.DefaultConfig(),
		Quota:        fanout.DefaultConfig().Quota,
		Drain:        20 * time.Second,
		ReadyMaxLag:  100000,

		MaxConnsPerSource: connlimit.AutoPerSource,
		HTTPHeaderTimeout: 10 * time.Second,
		HTTPIdleTimeout:   2 * time.Minute,
	}
}

// Start-up errors. Each is wrapped with the address or path at fault, so
// that a command can name the flag to change.
var (
	ErrConfig     = errors.New("node: bad config")
	ErrDataDir    = errors.New("node: data directory unusable")
	ErrNatsListen = errors.New("node: cannot listen for NATS clients")
	ErrHTTPListen = errors.New("node: cannot listen for HTTP")
	ErrNats       = errors.New("node: NATS")
)

// Node is a running Threadcast node; see the package documentation.
type Node struct {
	cfg Config
	log *slog.Logger

	srv     *server.Server // embedded server, or nil
	natsURL string
	// svcAuth is the node's own identity on NATS (an option of every
	// service connection): the embedded server's generated nkey, or
	// NatsCreds/NatsNkey.
	svcAuth nats.Option
	// callout authorizes agents (nil: not run here) on its own connection
	// anc, so that a flood elsewhere never delays a connect.
	issuer    nkeys.KeyPair // signs the callout's answers (nil: no callout here)
	callout   *busauth.Service
	anc       *nats.Conn
	ancClosed chan struct{}
	nc        *nats.Conn    // ingest's connection (and the bridge's)
	ncClosed  chan struct{} // closed by nats.go once nc is closed
	// fnc is the fanout's own connection (nil when that part is off); see
	// connect for why it is separate. demoConns are the demo agents', one
	// per tenant, each authorized like any agent by its tenant's token.
	fnc       *nats.Conn
	fncClosed chan struct{}
	demoConns []demoConn
	reg       *prometheus.Registry
	verifier  *auth.Verifier // nil when neither ingest, fanout nor the callout runs
	in        *pipeline.Restarting
	storage   *pipeline.StorageWatch // with ingest
	fs        *fanout.Server
	bridge    *agent.Publisher // the bridge's publisher, or nil
	ln        net.Listener

	// The running parts: each is stopped by its cancel and has returned
	// when its done is closed.
	demo, http, ingest part

	stopping  atomic.Bool
	failOnce  sync.Once
	failed    chan struct{}
	failErr   error // set before failed is closed
	stopOnce  sync.Once
	stopErr   error
	demoStats demo.Stats // set before demo.done is closed
}

type part struct {
	cancel context.CancelFunc // nil: not started
	done   chan struct{}
	err    error // set before done is closed
}

// Start starts a node; see the package documentation. On error nothing it
// started is left running.
func Start(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, failed: make(chan struct{})}
	if n.log == nil {
		n.log = slog.Default()
	}
	if err := n.start(); err != nil {
		_ = n.shutdown()
		return nil, err
	}
	return n, nil
}

func (c *Config) validate() error {
	switch {
	case !c.Ingest && !c.Fanout && !c.Demo:
		return fmt.Errorf("%w: nothing to run (ingest, fanout and demo all off)", ErrConfig)
	case (c.Ingest || c.Fanout) && len(c.AuthKey) < auth.MinKeyLen && (len(c.AuthKey) > 0 || len(c.Tokens.JWKS) == 0):
		return fmt.Errorf("%w: auth key shorter than %d bytes (and no JWKS source)", ErrConfig, auth.MinKeyLen)
	case c.NatsURL == "" && c.DataDir == "":
		return fmt.Errorf("%w: an embedded NATS server needs a data directory", ErrConfig)
	case c.Drain <= 0:
		return fmt.Errorf("%w: drain %v", ErrConfig, c.Drain)
	case c.NatsCreds != "" && c.NatsNkey != "":
		return fmt.Errorf("%w: NATS credentials and an nkey seed are two identities; give one", ErrConfig)
	case c.NatsURL == "" && (c.NatsCreds != "" || c.NatsNkey != "" || c.CalloutSeed != ""):
		return fmt.Errorf("%w: NATS credentials, nkey and callout seed are for an external NATS (NatsURL)", ErrConfig)
	case c.CalloutSeed != "" && len(c.AuthKey) < auth.MinKeyLen && len(c.Tokens.JWKS) == 0:
		return fmt.Errorf("%w: the auth callout verifies tokens with the auth key (shorter than %d bytes) or a JWKS source (none)", ErrConfig, auth.MinKeyLen)
	case c.NatsURL == "" && c.Demo && len(c.AuthKey) < auth.MinKeyLen:
		return fmt.Errorf("%w: demo agents connect with tokens the auth key signs, shorter than %d bytes", ErrConfig, auth.MinKeyLen)
	case c.HTTPHeaderTimeout <= 0 || c.HTTPIdleTimeout <= 0:
		return fmt.Errorf("%w: HTTP header timeout %v, idle timeout %v: both must be positive", ErrConfig, c.HTTPHeaderTimeout, c.HTTPIdleTimeout)
	}
	fds, err := connlimit.FDLimit()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.MaxConns, err = connlimit.Check(c.MaxConns, fds); err != nil {
		return fmt.Errorf("%w: max connections: %w", ErrConfig, err)
	}
	if c.MaxConnsPerSource, err = connlimit.CheckPerSource(c.MaxConnsPerSource, c.MaxConns); err != nil {
		return fmt.Errorf("%w: max connections per source: %w", ErrConfig, err)
	}
	if c.Ingest {
		if err := c.Pipeline.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) start() error {
	if err := n.startNats(); err != nil {
		return err
	}
	n.reg = prometheus.NewRegistry()
	if n.cfg.Ingest || n.cfg.Fanout || n.issuer != nil {
		if err := n.startVerifier(); err != nil {
			return err
		}
	}
	if n.issuer != nil {
		if err := n.startCallout(); err != nil {
			return err
		}
		// Registered once the registry is final (the fanout's, below).
		defer func() { n.reg.MustRegister(n.callout.Collectors()...) }()
	}
	var fs *fanout.Server
	if n.cfg.Fanout {
		fc := n.cfg.FanoutConfig
		fc.Verifier = n.verifier
		fc.ReadHeaderTimeout, fc.IdleTimeout = n.cfg.HTTPHeaderTimeout, n.cfg.HTTPIdleTimeout
		fc.Hub.Partitions = n.cfg.Pipeline.Partitions
		fc.Hub.EventStream = n.cfg.Pipeline.Stream
		fc.DeadLetters = n.cfg.Pipeline.DeadLetters
		fc.Quota = n.cfg.Quota
		var err error
		if n.fnc, n.fncClosed, err = n.connect("threadcast-fanout"); err != nil {
			return err
		}
		if fs, err = fanout.New(n.fnc, fc, n.log.With("part", "fanout")); err != nil {
			return err
		}
		// One registry for every part: the fanout's (which already holds
		// the Go and process collectors) takes ingest's metrics too.
		n.fs, n.reg = fs, fs.Registry()
	} else {
		n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if n.verifier != nil { // the fanout registers its Verifier's
			n.reg.MustRegister(fanout.VerifierCollectors(n.verifier)...)
		}
	}

	// The stream and bucket exist before anything publishes (the demo, the
	// bridge, agents once the ports are open). A node creates them when it
	// runs ingest, or when it owns the NATS server; a node that only serves
	// or only plays the demo on an external NATS leaves them to the
	// deployment's ingest.
	if n.cfg.Ingest || n.srv != nil {
		if err := n.ensureStreams(); err != nil {
			return err
		}
	}
	mux := http.NewServeMux()
	if n.cfg.Ingest {
		bridge, err := n.startIngest()
		if err != nil {
			return err
		}
		mux.Handle("/v1/ingest/", bridge)
	}
	if fs != nil {
		// Development tokens go only to visitors on this machine (a
		// loopback peer naming a loopback Host): --http may listen on
		// every interface, and a page rebinding its DNS name to 127.0.0.1
		// must get nothing.
		dash, err := web.Handler(web.Config{Tenants: n.cfg.DashboardTenants, TenantsLocalOnly: true})
		if err != nil {
			return err
		}
		mux.Handle("/v1/", fs.Handler())
		mux.Handle("/", dash)
	}
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", n.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{}))
	if err := n.startHTTP(mux); err != nil {
		return err
	}
	if n.cfg.Demo {
		return n.startDemo()
	}
	return nil
}

// startNats starts the embedded server (unless NatsURL is set), connects,
// and starts the auth callout when this node runs it.
func (n *Node) startNats() error {
	url := n.cfg.NatsURL
	var issuer nkeys.KeyPair
	var sauth *pipeline.ServerAuth
	switch {
	case url == "":
		// The embedded server is locked: the node's connections are the
		// only service identity (a key that lives in this process only),
		// every other client is an agent the callout authorizes.
		svc, err := nkeys.CreateUser()
		if err != nil {
			return fmt.Errorf("%w: service key: %w", ErrNats, err)
		}
		if issuer, err = nkeys.CreateAccount(); err != nil {
			return fmt.Errorf("%w: callout key: %w", ErrNats, err)
		}
		pub, _ := svc.PublicKey()
		n.svcAuth = nats.Nkey(pub, svc.Sign)
		sauth = &pipeline.ServerAuth{Services: []string{pub}, AgentAccount: busauth.AgentAccount}
		sauth.CalloutIssuer, _ = issuer.PublicKey()
	case n.cfg.NatsNkey != "":
		opt, err := nats.NkeyOptionFromSeed(n.cfg.NatsNkey)
		if err != nil {
			return fmt.Errorf("%w: nkey seed %s: %w", ErrNats, n.cfg.NatsNkey, err)
		}
		n.svcAuth = opt
	case n.cfg.NatsCreds != "":
		n.svcAuth = nats.UserCredentials(n.cfg.NatsCreds)
	}
	if n.cfg.CalloutSeed != "" {
		var err error
		if issuer, err = busauth.ReadIssuerSeed(n.cfg.CalloutSeed); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	// The storage watch reads the embedded store's free space and hears
	// the embedded server's critical write errors; with an external
	// server, only JetStream's refusals count.
	wc := pipeline.StorageConfig{MinFree: n.cfg.StoreMinFree, Logger: n.log.With("part", "storage")}
	if url == "" {
		wc.Dir = n.cfg.DataDir
	}
	n.storage = pipeline.NewStorageWatch(wc)
	if url == "" {
		if err := PrepareDataDir(n.cfg.DataDir); err != nil {
			return err
		}
		host, port, err := listenAddr(n.cfg.NatsListen)
		if err != nil {
			return err
		}
		sc := pipeline.DefaultServerConfig()
		sc.Host, sc.Port, sc.StoreDir = host, port, n.cfg.DataDir
		sc.MaxPayload = max(n.cfg.Pipeline.MaxMsgSize, 1<<20)
		sc.Auth = sauth
		sc.OnWriteError = n.storage.ReportWriteError
		if n.srv, err = pipeline.StartServer(sc); err != nil {
			return err
		}
		url = n.srv.ClientURL()
		n.log.Info("embedded NATS server started", "url", url, "data", n.cfg.DataDir)
	}
	n.natsURL = url
	nc, closed, err := n.connect("threadcast")
	if err != nil {
		return err
	}
	n.nc, n.ncClosed, n.issuer = nc, closed, issuer
	return nil
}

// startCallout runs the auth callout on a connection of its own,
// authorizing agents by the node's token Verifier.
func (n *Node) startCallout() error {
	var err error
	if n.anc, n.ancClosed, err = n.connect("threadcast-auth"); err != nil {
		return err
	}
	n.callout, err = busauth.Start(n.anc, busauth.Config{
		Issuer: n.issuer,
		Verify: n.verifier.Verify,
		Logger: n.log.With("part", "bus-auth"),
	})
	return err
}

// connect opens one NATS connection named name; closed is closed by nats.go
// once the connection is closed.
//
// Why ingest, fanout and the demo publisher each have their own connection:
// a connection is one TCP stream read by one goroutine, and the server
// queues what it sends a client in one outbound buffer. On one shared
// connection a join storm (thousands of snapshot requests, each answered
// with a whole view) filled that buffer and the reader's pending limits with
// snapshot traffic, so ingest's consumer deliveries, its acks' replies and
// the fanout's frames queued behind them: the load test saw no frame at all
// for 20 s, and the server may even cut a connection whose buffer stays full
// as a slow consumer, taking every part down at once. Separate connections
// give each part its own socket, reader, buffers and slow-consumer verdict,
// so a flood on the fanout's connection costs the fanout alone. (The
// snapshot replies still leave on ingest's connection, but those are
// bounded by its shard queues — pipeline's snapshot coalescing.)
func (n *Node) connect(name string) (*nats.Conn, chan struct{}, error) {
	var opts []nats.Option
	if n.svcAuth != nil {
		opts = append(opts, n.svcAuth)
	}
	return n.dial(name, opts...)
}

// dial opens one connection named name with opts (its identity) and the
// node's reconnect and logging options.
func (n *Node) dial(name string, auth ...nats.Option) (*nats.Conn, chan struct{}, error) {
	closed := make(chan struct{})
	asyncErrs := newRateLog(n.log, time.Second)
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if !n.stopping.Load() {
				n.log.Warn("nats disconnected", "conn", name, "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { n.log.Info("nats reconnected", "conn", name, "url", c.ConnectedUrl()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			asyncErrs.Warn("nats async error", "conn", name, "err", err)
		}),
	}
	opts = append(opts, auth...)
	nc, err := nats.Connect(n.natsURL, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: connect %s: %w", ErrNats, n.natsURL, err)
	}
	return nc, closed, nil
}

// closeConn drains nc (nil: nothing to do) within the drain timeout, then
// waits until nats.go has closed it.
func (n *Node) closeConn(nc *nats.Conn, closed chan struct{}) {
	if nc == nil {
		return
	}
	if nc.Drain() != nil {
		nc.Close()
	}
	select {
	case <-closed:
	case <-time.After(n.cfg.Drain):
		nc.Close()
		<-closed
	}
}

// PrepareDataDir creates dir (mode 0700) and proves it writable, so that an unusable
// directory is reported as such rather than as a JetStream failure.
func PrepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: %w", ErrDataDir, err)
	}
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return fmt.Errorf("%w: %s is not writable: %w", ErrDataDir, dir, err)
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return nil
}

// listenAddr parses the embedded server's address and, for a fixed port,
// proves it free: nats-server reports a taken port only in its own log and
// then lets the start-up time out, which would leave the user waiting for
// an unrelated error. (The port could be taken between this check and the
// server's listen; the start-up then fails with ErrServerStart.)
func listenAddr(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %q: %w", ErrNatsListen, addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: %q: bad port", ErrNatsListen, addr)
	}
	if port <= 0 {
		return host, -1, nil // a free port, as nats-server spells it
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrNatsListen, err)
	}
	_ = ln.Close()
	return host, port, nil
}

func (n *Node) ensureStreams() error {
	js, err := jetstream.New(n.nc)
	if err != nil {
		return fmt.Errorf("%w: jetstream: %w", ErrNats, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Drain)
	defer cancel()
	_, _, err = pipeline.EnsureStreams(ctx, js, &n.cfg.Pipeline)
	return err
}

// startIngest starts the reducers and returns the bridge.
func (n *Node) startIngest() (http.Handler, error) {
	pc := n.cfg.Pipeline
	pc.Logger = n.log.With("part", "ingest")
	pc.Metrics = pipeline.NewMetrics(n.reg)
	pc.Quota = n.cfg.Quota
	lim, err := quota.New(n.cfg.Quota)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var retained *pipeline.RetainedCounter
	if n.cfg.Quota.Retained() {
		js, err := jetstream.New(n.nc)
		if err != nil {
			return nil, err
		}
		retained = pipeline.NewRetainedCounter(js, pc.Stream, n.cfg.Quota, n.cfg.Quota.RetainedEvery, pc.Logger)
		pc.Retained = retained.Check
	}
	// A delivery gap (a NATS server or consumer leader moved) stops an
	// Ingest; Restarting replaces it, replaying from the ack floors. The
	// first is built here so that its errors are start-up errors; build is
	// called by Run's goroutine alone, so first needs no lock.
	first, err := pipeline.NewIngest(n.nc, pc)
	if err != nil {
		return nil, err
	}
	in := pipeline.NewRestarting(func() (pipeline.Service, error) {
		if first != nil {
			in := first
			first = nil
			return in, nil
		}
		return pipeline.NewIngest(n.nc, pc)
	})
	in.RestartOnLost = true // one process owns every partition
	n.in = in
	n.ingest.run(func(ctx context.Context) error {
		// The counter and the watch live as long as the reducers: stopped
		// and waited for when Run returns, for whatever reason.
		hctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); n.storage.Run(hctx) }()
		if retained != nil {
			wg.Add(1)
			go func() { defer wg.Done(); retained.Run(hctx) }()
		}
		err := in.Run(ctx, n.cfg.Drain)
		stop()
		wg.Wait()
		return err
	}, n.fail("ingest"))

	if n.bridge, err = agent.New(n.nc, agent.DefaultConfig()); err != nil {
		return nil, fmt.Errorf("node: bridge publisher: %w", err)
	}
	bc := pipeline.BridgeConfig{Publisher: n.bridge, Verify: pipeline.BridgeVerifier(n.verifier), Quota: lim,
		MaxEventBytes: n.cfg.Pipeline.MaxEventBytes(), IdempotencyWindow: pc.Duplicates, Window: n.cfg.BridgeWindow, Storage: n.storage}
	if bc.Idempotency, err = n.idempotencyBucket(&pc); err != nil {
		return nil, err
	}
	if retained != nil {
		bc.Retained = retained.Check
	}
	b, err := pipeline.NewBridge(bc)
	if err != nil {
		return nil, err
	}
	n.reg.MustRegister(b.Collectors()...) // threadcast_bridge_*, as README lists
	return b, nil
}

// idempotencyBucket creates or updates the bucket of the bridge's first
// answers (the Idempotency-Key records).
func (n *Node) idempotencyBucket(pc *pipeline.Config) (jetstream.KeyValue, error) {
	js, err := jetstream.New(n.nc)
	if err != nil {
		return nil, fmt.Errorf("%w: jetstream: %w", ErrNats, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Drain)
	defer cancel()
	return pipeline.EnsureIdempotencyBucket(ctx, js, pc)
}

func (n *Node) startHTTP(h http.Handler) error {
	ln, err := net.Listen("tcp", n.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHTTPListen, err)
	}
	capped := connlimit.New(ln, n.cfg.MaxConns).CapPerSource(n.cfg.MaxConnsPerSource)
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_http_connections_refused_total",
		Help: "HTTP connections refused at accept, by reason: node (the node held --max-conns connections) or source (their source held --max-conns-per-source)."},
		[]string{"reason"})
	capped.OnRefuse = refused.WithLabelValues(connlimit.ByNode.String()).Inc
	capped.OnRefuseSource = refused.WithLabelValues(connlimit.BySource.String()).Inc
	n.reg.MustRegister(refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "threadcast_http_connections_open",
		Help: "HTTP connections open now (at most --max-conns)."}, func() float64 { return float64(capped.Open()) }))
	n.ln = capped
	timeouts := func(hs *http.Server) {
		hs.ReadHeaderTimeout, hs.IdleTimeout = n.cfg.HTTPHeaderTimeout, n.cfg.HTTPIdleTimeout
	}
	serve := func(ctx context.Context) error { return serveHTTP(ctx, capped, h, n.cfg.Drain, n.log, timeouts) }
	if n.fs != nil {
		// The fanout's Serve drains its streams (with resume hints) along
		// with every other request of the port.
		serve = func(ctx context.Context) error { return n.fs.Serve(ctx, capped, h, n.cfg.Drain) }
	}
	n.http.run(serve, n.fail("http"))
	n.log.Info("listening", "url", n.URL())
	return nil
}

// serveHTTP serves h on ln until ctx ends, then shuts the server down
// within timeout; used when the fanout, whose Serve does this, is off.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, timeout time.Duration, log *slog.Logger, set func(*http.Server)) error {
	hs := &http.Server{Handler: h, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	set(hs)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		_ = hs.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// demoConn is one demo tenant's connection and publisher.
type demoConn struct {
	tenant string
	nc     *nats.Conn
	closed chan struct{}
	pub    *agent.Publisher
}

// DemoTokenTTL is the lifetime of the token a demo agent's connection
// presents; each (re)connect presents a fresh one, so a connection the
// server closes at its token's expiry reconnects at once.
const DemoTokenTTL = 24 * time.Hour

func (n *Node) startDemo() error {
	dc := n.cfg.DemoConfig
	tenants := dc.Tenants
	if len(tenants) == 0 {
		tenants = demo.DefaultTenants()
	}
	// Each tenant's agents connect as agents do: with a publish token of
	// their tenant, authorized by the bus like any other agent's.
	pubs := make(map[string]demo.Publisher, len(tenants))
	for _, t := range tenants {
		if _, ok := pubs[t]; ok {
			continue
		}
		opts, err := agent.TokenAuth(t, func() string { return n.demoToken(t) })
		if err != nil {
			return fmt.Errorf("node: demo tenant: %w", err)
		}
		nc, closed, err := n.dial("threadcast-demo-"+t, opts...)
		if err != nil {
			return err
		}
		d := demoConn{tenant: t, nc: nc, closed: closed}
		n.demoConns = append(n.demoConns, d)
		if d.pub, err = agent.New(nc, agent.DefaultConfig()); err != nil {
			return fmt.Errorf("node: demo publisher: %w", err)
		}
		n.demoConns[len(n.demoConns)-1] = d
		pubs[t] = demo.AgentPublisher(d.pub)
	}
	pub := demo.PublisherFunc(func(ctx context.Context, tenant, thread string, event []byte) error {
		p, ok := pubs[tenant]
		if !ok {
			return fmt.Errorf("node: demo tenant %q has no connection", tenant)
		}
		return p.Publish(ctx, tenant, thread, event)
	})
	if dc.OnError == nil {
		dc.OnError = func(tenant, thread string, err error) {
			n.log.Warn("demo agent abandoned a thread", "tenant", tenant, "thread", thread, "err", err)
		}
	}
	n.demo.run(func(ctx context.Context) error {
		var err error
		n.demoStats, err = demo.Run(ctx, pub, dc)
		return err
	}, n.fail("demo"))
	agents := dc.Agents
	if agents == 0 {
		agents = 2 * max(len(dc.Tenants), len(demo.DefaultTenants())) // demo.Run's default
	}
	n.log.Info("demo agents started", "tenants", dc.Tenants, "agents", agents, "rate", dc.Rate, "seed", dc.Seed)
	return nil
}

// run starts f in a goroutine owned by p; onEnd is told how f ended.
func (p *part) run(f func(ctx context.Context) error, onEnd func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		p.err = f(ctx)
		onEnd(p.err)
	}()
}

// stop cancels the part and waits for it; a part never started is a no-op.
func (p *part) stop() error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	<-p.done
	return p.err
}

// fail returns the end handler of the named part: a part that ends while
// the node is not stopping has failed (demo agents, which end on their own
// only with ThreadsPerAgent, are let go).
func (n *Node) fail(name string) func(error) {
	return func(err error) {
		if n.stopping.Load() || (name == "demo" && err == nil) {
			return
		}
		if err == nil {
			err = errors.New("stopped on its own")
		}
		n.failOnce.Do(func() {
			n.failErr = fmt.Errorf("node: %s: %w", name, err)
			n.log.Error("part failed", "part", name, "err", err)
			close(n.failed)
		})
	}
}

// Failed is closed when a part ended on its own; Err then says why. The
// owner should Stop the node.
func (n *Node) Failed() <-chan struct{} { return n.failed }

// Err returns why the node failed, once Failed is closed (nil before).
func (n *Node) Err() error {
	select {
	case <-n.failed:
		return n.failErr
	default:
		return nil
	}
}

// HTTPAddr returns the bound HTTP address ("127.0.0.1:8080").
func (n *Node) HTTPAddr() string { return n.ln.Addr().String() }

// URL returns a URL of the HTTP port that this machine can open: an
// unspecified listen host (":8080", "0.0.0.0:8080") becomes 127.0.0.1.
func (n *Node) URL() string {
	host, port, _ := net.SplitHostPort(n.HTTPAddr())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// NatsURL returns the URL of the NATS server the node uses (the embedded
// one's client URL, or Config.NatsURL).
func (n *Node) NatsURL() string { return n.natsURL }

// Conn returns the node's NATS connection, for publishing in the same
// process. It is closed by Stop.
func (n *Node) Conn() *nats.Conn { return n.nc }

// Connect opens a new connection to the node's NATS with the node's own
// service identity (every subject, JetStream and KV), for tools in the same
// process (the load generator, tests); opts are added to it. The caller
// closes it before Stop. Agents connect with a token instead
// (agent.TokenAuth).
func (n *Node) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.Name(name)}, opts...)
	if n.svcAuth != nil {
		all = append(all, n.svcAuth)
	}
	return nats.Connect(n.natsURL, all...)
}

// Verifier returns the node's token verifier (nil when neither ingest nor
// fanout runs): what the fanout and the bridge check tokens with, for
// other doors of the same node (the NATS auth callout) to share.
func (n *Node) Verifier() *auth.Verifier { return n.verifier }

// Registry returns the registry /metrics serves, for callers that add their
// own collectors.
func (n *Node) Registry() *prometheus.Registry { return n.reg }

// DemoStats returns what the demo agents did; valid after Stop.
func (n *Node) DemoStats() demo.Stats {
	if n.demo.done == nil {
		return demo.Stats{}
	}
	select {
	case <-n.demo.done:
		return n.demoStats
	default:
		return demo.Stats{}
	}
}

// demoToken mints the token a demo agent of tenant connects with.
func (n *Node) demoToken(tenant string) string {
	c := auth.Claims{Tenant: tenant, Scope: auth.ScopePublish, Expiry: time.Now().Add(DemoTokenTTL).Unix()}
	if aud := n.cfg.Tokens.Audience; aud != "" {
		c.Audience = auth.Audience{aud} // the verifier requires it
	}
	tok, err := auth.Mint(n.cfg.AuthKey, c)
	if err != nil {
		n.log.Error("demo token", "tenant", tenant, "err", err)
	}
	return tok
}

// readyz answers 200 when every enabled part can do its job: NATS
// connected, ingest's consumers bound and its lag under ReadyMaxLag, and
// the node not stopping (the fanout refuses new streams then).
func (n *Node) readyz(w http.ResponseWriter, _ *http.Request) {
	var why string
	switch {
	case n.stopping.Load():
		why = "stopping"
	case !n.nc.IsConnected():
		why = "nats: " + n.nc.Status().String()
	case n.fnc != nil && !n.fnc.IsConnected():
		why = "nats (fanout): " + n.fnc.Status().String()
	case n.in != nil && !n.in.Ready():
		why = "ingest: consumers not bound"
	case n.in != nil && n.in.Lag() > n.cfg.ReadyMaxLag:
		why = fmt.Sprintf("ingest: lag %d over %d", n.in.Lag(), n.cfg.ReadyMaxLag)
	case n.storage != nil && n.storage.Check() != nil:
		why = n.storage.Check().Error()
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why != "" {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// Stop shuts the node down in order (see the package documentation) and
// returns after every goroutine it started has returned. The error joins
// what each part reported. Idempotent: later calls return the same error.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { n.stopErr = n.shutdown() })
	return n.stopErr
}

func (n *Node) shutdown() error {
	n.stopping.Store(true)
	var errs []error
	keep := func(what string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("node: %s: %w", what, err))
		}
	}
	closePub := func(what string, p *agent.Publisher) {
		if p == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Drain)
		defer cancel()
		keep(what, p.Close(ctx))
	}

	// 1. Demo agents: each open run ends with RUN_ERROR, published and
	// acknowledged before ingest stops reading.
	if n.demo.cancel != nil {
		keep("demo", n.demo.stop())
	}
	for _, d := range n.demoConns {
		closePub("demo publisher "+d.tenant, d.pub)
		n.closeConn(d.nc, d.closed)
	}
	if n.demo.cancel != nil {
		s := n.demoStats
		n.log.Info("demo agents stopped", "events", s.Events, "runs", s.Runs, "threads", s.Threads, "errors", s.Errors)
	}
	// 2. HTTP: no new connections; streams end with their resume cursor;
	// bridge requests finish, then the bridge's acks are awaited.
	if n.http.cancel != nil {
		keep("http", n.http.stop())
		if n.fs != nil {
			n.log.Info("http stopped: streams ended with resume cursors")
		} else {
			n.log.Info("http stopped")
		}
	} else if n.ln != nil {
		_ = n.ln.Close()
	}
	n.closeConn(n.fnc, n.fncClosed) // every stream has ended
	closePub("bridge publisher", n.bridge)
	// 3. Ingest: stop fetching, finish, checkpoint, ack.
	if n.ingest.cancel != nil {
		err := n.ingest.stop()
		keep("ingest", err)
		if err != nil {
			n.log.Error("ingest drained: views not all checkpointed", "err", err)
		} else {
			n.log.Info("ingest drained: views checkpointed")
		}
	}
	// 4. The auth callout (no agent of this node connects any more), then
	// ingest's NATS connection: flush, then wait for its goroutines.
	if n.callout != nil {
		n.callout.Stop()
	}
	n.closeConn(n.anc, n.ancClosed)
	n.closeConn(n.nc, n.ncClosed)
	// 5. The embedded server.
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.log.Info("embedded NATS server stopped")
	}
	return errors.Join(errs...)
}
