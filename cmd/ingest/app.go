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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/threadcast/threadcast/agent"
	"github.com/threadcast/threadcast/pipeline"
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
	mu     sync.Mutex
	nc     *nats.Conn
	ingest ingester
	// httpAddr and natsURL receive the bound HTTP address and the NATS URL
	// once known (tests listen on port 0).
	httpAddr chan string
	natsURL  chan string
	// tokens checks bridge requests' bearer tokens against --auth-key.
	tokens func(r *http.Request, tenant string) error
}

func newApp(cfg config, logw io.Writer) *app {
	log := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: cfg.LogLevel}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &app{cfg: cfg, log: log, reg: reg, httpAddr: make(chan string, 1), natsURL: make(chan string, 1),
		tokens: pipeline.TokenVerifier([]byte(cfg.AuthKey), nil)}
}

// Run runs ingest until ctx ends, then drains.
func (a *app) Run(ctx context.Context) error {
	var srv *server.Server
	url := a.cfg.NatsURL
	if url == "" {
		host, port, err := splitHostPort(a.cfg.NatsListen)
		if err != nil {
			return err
		}
		sc := pipeline.DefaultServerConfig()
		sc.Host, sc.Port, sc.StoreDir = host, port, a.cfg.DataDir
		sc.MaxPayload = max(a.cfg.Pipeline.MaxMsgSize, 1<<20)
		if srv, err = pipeline.StartServer(sc); err != nil {
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
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("ingest: connect %s: %w", url, err)
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

	var bridge http.Handler
	if a.cfg.AuthKey != "" || a.cfg.BridgeNoAuth {
		pub, err := agent.New(nc, agent.DefaultConfig())
		if err != nil {
			return fmt.Errorf("ingest: bridge publisher: %w", err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), a.cfg.Drain)
			defer cancel()
			_ = pub.Close(cctx)
		}()
		b, err := pipeline.NewBridge(pipeline.BridgeConfig{Publisher: pub, Verify: a.verify, MaxEventBytes: a.cfg.Pipeline.MaxEventBytes()})
		if err != nil {
			return fmt.Errorf("ingest: bridge: %w", err)
		}
		a.reg.MustRegister(b.Collectors()...) // threadcast_bridge_*
		bridge = b
	}

	ln, err := net.Listen("tcp", a.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("ingest: listen %s: %w", a.cfg.HTTP, err)
	}
	a.httpAddr <- ln.Addr().String()
	hs := &http.Server{Handler: a.routes(bridge), ReadHeaderTimeout: 5 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- hs.Serve(ln) }()

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
	nc, in := a.nc, a.ingest
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
