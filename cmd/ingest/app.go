package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
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
	"github.com/threadcast/threadcast/bridge"
	"github.com/threadcast/threadcast/busauth"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/natsembed"
	"github.com/threadcast/threadcast/pipeline"
	"github.com/threadcast/threadcast/quota"
)

// ingester is the ingest service of either partition mode
// (*pipeline.Restarting: static; *pipeline.LeasedIngest: lease).
type ingester interface {
	Run(ctx context.Context, drain time.Duration) error
	Ready() bool
	Lag() uint64
}

// app is the root object of the command: Run starts everything and returns
// only after every goroutine it started has returned.
type app struct {
	cfg config
	log *slog.Logger
	reg *prometheus.Registry

	// Set while running; read by the HTTP handlers.
	mu      sync.Mutex
	nc      *nats.Conn
	ingest  ingester
	storage *pipeline.StorageWatch
	// httpAddr and natsURL receive the bound HTTP address and the NATS URL
	// once known (tests listen on port 0).
	httpAddr chan string
	natsURL  chan string
	// tokens checks bridge requests' bearer tokens (--auth-key, JWKS); set
	// by Run when the bridge is on.
	tokens func(r *http.Request, tenant string) error
	// verifier checks tokens for the bridge and the auth callout (nil
	// until sharedVerifier builds it).
	verifier *auth.Verifier
	// svcAuth is the identity of the ingest's connections to a locked
	// embedded server (nil otherwise); set before natsURL is sent.
	svcAuth nats.Option
}

func newApp(cfg config, logw io.Writer) *app {
	log := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: cfg.LogLevel}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &app{cfg: cfg, log: log, reg: reg, httpAddr: make(chan string, 1), natsURL: make(chan string, 1)}
}

// Run runs ingest until ctx ends, then drains.
func (a *app) Run(ctx context.Context) error {
	var srv *server.Server
	var issuer nkeys.KeyPair // the embedded server's callout issuer, when locked
	url := a.cfg.NatsURL
	// The storage watch reads the embedded store's free space and hears
	// the embedded server's critical write errors; with an external
	// server, only JetStream's refusals count.
	wc := pipeline.StorageConfig{MinFree: a.cfg.StoreMinFree, Logger: a.log}
	if url == "" {
		wc.Dir = a.cfg.DataDir
	}
	storage := pipeline.NewStorageWatch(wc)
	if url == "" {
		host, port, err := splitHostPort(a.cfg.NatsListen)
		if err != nil {
			return err
		}
		sc := natsembed.DefaultConfig()
		sc.Host, sc.Port, sc.StoreDir = host, port, a.cfg.DataDir
		sc.MaxPayload = max(a.cfg.Pipeline.MaxMsgSize, 1<<20)
		if a.cfg.AuthKey != "" || len(a.cfg.Tokens.JWKS) > 0 {
			// Locked as threadcast serve's: this process's connections
			// have a key of their own, agents connect with tokens the
			// auth key signs, through the callout run below.
			if sc.Auth, issuer, err = a.lockEmbedded(); err != nil {
				return err
			}
		} else {
			a.log.Warn("embedded NATS server open to anonymous clients: give --auth-key or a JWKS source to lock it (agents then connect with publish tokens)")
		}
		sc.OnWriteError = storage.ReportWriteError
		if srv, err = natsembed.Start(sc); err != nil {
			return err
		}
		defer func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		}()
		url = srv.ClientURL()
		a.log.Info("embedded NATS server", "url", url, "store", a.cfg.DataDir)
	}

	a.natsURL <- url
	closed := make(chan struct{})
	opts := []nats.Option{
		nats.Name("threadcast-ingest"),
		nats.MaxReconnects(-1),
		// Exponential backoff from 250 ms to 4 s with jitter, so a restarted
		// cluster is not hit by every client at once; the URL list (several
		// servers, comma-separated) is tried in random order.
		nats.CustomReconnectDelay(reconnectDelay),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { a.log.Warn("nats disconnected", "err", err) }),
		nats.ReconnectHandler(func(c *nats.Conn) { a.log.Info("nats reconnected", "url", c.ConnectedUrl()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { a.log.Warn("nats async error", "err", err) }),
	}
	if a.cfg.NatsCreds != "" {
		opts = append(opts, nats.UserCredentials(a.cfg.NatsCreds))
	}
	if a.cfg.NatsNkey != "" {
		o, err := nats.NkeyOptionFromSeed(a.cfg.NatsNkey)
		if err != nil {
			return fmt.Errorf("ingest: --nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if a.svcAuth != nil {
		opts = append(opts, a.svcAuth)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("ingest: connect %s: %w", url, err)
	}
	if a.cfg.CalloutSeed != "" || issuer != nil {
		stop, err := a.startCallout(url, opts, issuer)
		if err != nil {
			nc.Close()
			return err
		}
		defer stop()
	}
	defer func() {
		// Drain flushes what the shards published last, then closes;
		// ClosedHandler tells when the connection's goroutines are done.
		if err := nc.Drain(); err != nil {
			nc.Close()
		}
		<-closed
	}()

	pc := a.cfg.Pipeline
	pc.Logger = a.log
	pc.Metrics = pipeline.NewMetrics(a.reg)
	lim, err := quota.New(pc.Quota)
	if err != nil {
		return err
	}
	if pc.Quota.Retained() {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		rc := pipeline.NewRetainedCounter(js, pc.Stream, pc.Quota, pc.Quota.RetainedEvery, a.log)
		pc.Retained = rc.Check
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); rc.Run(rctx) }()
		defer func() { stop(); <-done }()
	}
	var in ingester
	if a.cfg.PartitionMode == "lease" {
		lc := a.cfg.Lease
		lc.Logger = a.log
		lc.Metrics = pipeline.NewLeaseMetrics(a.reg)
		in, err = pipeline.NewLeasedIngest(nc, pc, lc)
	} else {
		// A delivery gap (a NATS server or consumer leader moved) or a lost
		// consumer (a server restart forgot it) restarts the Ingest in
		// place, replaying from the ack floors. Static assignment: nobody
		// else can own these partitions.
		r := pipeline.NewRestarting(func() (pipeline.Service, error) { return pipeline.NewIngest(nc, pc) })
		r.RestartOnLost = true
		in = r
		// (parseConfig validated pc, so the first build cannot fail on it.)
	}
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.nc, a.ingest = nc, in
	a.mu.Unlock()

	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); storage.Run(wctx) }()
	defer func() { stopWatch(); <-watchDone }()
	a.mu.Lock()
	a.storage = storage
	a.mu.Unlock()

	var bridgeH http.Handler
	if a.cfg.AuthKey != "" || len(a.cfg.Tokens.JWKS) > 0 || a.cfg.BridgeNoAuth {
		if !a.cfg.BridgeNoAuth {
			v, err := a.sharedVerifier()
			if err != nil {
				return err
			}
			a.tokens = bridge.Verifier(v)
			a.reg.MustRegister(fanout.VerifierCollectors(v)...) // threadcast_auth_jwks_*
		}
		pub, err := agent.New(nc, agent.DefaultConfig())
		if err != nil {
			return fmt.Errorf("ingest: bridge publisher: %w", err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), a.cfg.Drain)
			defer cancel()
			_ = pub.Close(cctx)
		}()
		js, err := jetstream.New(nc)
		if pc.Domain != "" {
			js, err = jetstream.NewWithDomain(nc, pc.Domain)
		}
		if err != nil {
			return fmt.Errorf("ingest: bridge: %w", err)
		}
		kctx, kcancel := context.WithTimeout(ctx, 10*time.Second)
		kv, err := bridge.EnsureIdempotencyBucket(kctx, js, &pc)
		kcancel()
		if err != nil {
			return fmt.Errorf("ingest: bridge: %w", err)
		}
		b, err := bridge.New(bridge.Config{Publisher: pub, Verify: a.verify, Quota: lim, Retained: pc.Retained,
			Idempotency: kv, IdempotencyWindow: pc.Duplicates, Window: a.cfg.BridgeWindow, Storage: storage,
			MaxEventBytes: a.cfg.Pipeline.MaxEventBytes()})
		if err != nil {
			return fmt.Errorf("ingest: bridge: %w", err)
		}
		a.reg.MustRegister(b.Collectors()...) // threadcast_bridge_*
		bridgeH = b
	}

	ln, err := net.Listen("tcp", a.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("ingest: listen %s: %w", a.cfg.HTTP, err)
	}
	a.httpAddr <- ln.Addr().String()
	capped := connlimit.New(ln, a.cfg.MaxConns)
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "threadcast_http_connections_refused_total",
		Help: "HTTP connections refused because the process held --max-conns connections."})
	capped.OnRefuse = refused.Inc
	a.reg.MustRegister(refused)
	hs := &http.Server{Handler: a.routes(bridgeH), ReadHeaderTimeout: a.cfg.HeaderTimeout, IdleTimeout: a.cfg.IdleTimeout}
	httpDone := make(chan error, 1)
	go func() { httpDone <- hs.Serve(capped) }()

	runErr := in.Run(ctx, a.cfg.Drain)

	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Warn("http server", "err", err)
	}
	return runErr
}

func (a *app) routes(bridge http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	if bridge != nil {
		mux.Handle("/v1/ingest/", bridge)
	}
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	return mux
}

// readyz: NATS connected, consumers bound, lag under the threshold.
func (a *app) readyz(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	nc, in, storage := a.nc, a.ingest, a.storage
	a.mu.Unlock()
	var why string
	switch {
	case nc == nil || in == nil:
		why = "starting"
	case !nc.IsConnected():
		why = "nats not connected"
	case !in.Ready():
		why = "consumers not bound"
	case in.Lag() > a.cfg.ReadyMaxLag:
		why = "lag " + strconv.FormatUint(in.Lag(), 10) + " over " + strconv.FormatUint(a.cfg.ReadyMaxLag, 10)
	case storage != nil && storage.Check() != nil:
		why = storage.Check().Error()
	}
	if why != "" {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// verify admits a bridge request whose bearer token, signed with
// --auth-key, names the tenant (403 for another tenant).
func (a *app) verify(r *http.Request, tenant string) error {
	if a.cfg.BridgeNoAuth {
		return nil
	}
	return a.tokens(r, tenant)
}

func splitHostPort(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("ingest: --nats-listen %q: %w", addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0, fmt.Errorf("ingest: --nats-listen %q: bad port", addr)
	}
	if port == 0 {
		port = -1 // a free port, as the server spells it
	}
	return host, port, nil
}

// reconnectDelay is the wait before reconnect attempt n (1, 2, …): 250 ms
// doubling to 4 s, plus up to 25 % jitter.
func reconnectDelay(attempts int) time.Duration {
	d := 250 * time.Millisecond << min(max(attempts-1, 0), 4)
	return d + time.Duration(rand.Int64N(int64(d/4)+1))
}

// lockEmbedded returns the embedded server's authorization: a service key
// generated for this process (a.svcAuth) and a callout issuer key.
func (a *app) lockEmbedded() (*natsembed.Auth, nkeys.KeyPair, error) {
	svc, err := nkeys.CreateUser()
	if err != nil {
		return nil, nil, fmt.Errorf("ingest: service key: %w", err)
	}
	issuer, err := nkeys.CreateAccount()
	if err != nil {
		return nil, nil, fmt.Errorf("ingest: callout key: %w", err)
	}
	pub, _ := svc.PublicKey()
	ipub, _ := issuer.PublicKey()
	a.svcAuth = nats.Nkey(pub, svc.Sign)
	return &natsembed.Auth{Services: []string{pub}, CalloutIssuer: ipub, AgentAccount: busauth.AgentAccount}, issuer, nil
}

// startCallout runs the bus's auth callout (package busauth) on a
// connection of its own (opts: the ingest connection's, renamed), so that a
// flood of deliveries never delays an agent's connect. stop ends it and
// waits for the connection to close.
func (a *app) startCallout(url string, opts []nats.Option, issuer nkeys.KeyPair) (stop func(), err error) {
	if issuer == nil {
		if issuer, err = busauth.ReadIssuerSeed(a.cfg.CalloutSeed); err != nil {
			return nil, err
		}
	}
	v, err := a.sharedVerifier()
	if err != nil {
		return nil, err
	}
	closed := make(chan struct{})
	opts = append(opts[:len(opts):len(opts)], nats.Name("threadcast-ingest-auth"), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("ingest: callout connect %s: %w", url, err)
	}
	s, err := busauth.Start(nc, busauth.Config{Issuer: issuer, Verify: v.Verify, Logger: a.log.With("part", "bus-auth")})
	if err != nil {
		nc.Close()
		<-closed
		return nil, err
	}
	a.reg.MustRegister(s.Collectors()...)
	return func() {
		s.Stop()
		if nc.Drain() != nil {
			nc.Close()
		}
		<-closed
	}, nil
}

// sharedVerifier returns the one token verifier of the bridge and the
// auth callout (built on first use, by Run's goroutine only).
func (a *app) sharedVerifier() (*auth.Verifier, error) {
	if a.verifier == nil {
		v, err := a.newVerifier()
		if err != nil {
			return nil, err
		}
		a.verifier = v
	}
	return a.verifier, nil
}

// newVerifier builds the bridge's token verifier and fetches its JWKS
// documents: without its keys the bridge would refuse every token, so
// ingest does not start.
func (a *app) newVerifier() (*auth.Verifier, error) {
	vc := a.cfg.Tokens
	if a.cfg.AuthKey != "" {
		vc.SharedKeys = append(vc.SharedKeys, []byte(a.cfg.AuthKey))
	}
	vc.Logger = a.log
	v, err := auth.NewVerifier(vc)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if len(vc.JWKS) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Drain)
		defer cancel()
		if err := v.Refresh(ctx); err != nil {
			return nil, fmt.Errorf("ingest: JWKS: %w", err)
		}
	}
	return v, nil
}
