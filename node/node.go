package node

// NOTE: Config and its defaults are in config.go; here are Start (the
// parts in the order they are brought up) and Stop, which undoes Start
// in the opposite order. Start calls Stop's shutdown itself when a part
// fails to come up, so every part's teardown must accept a part that was
// never started (nil fields).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/busauth"
	"github.com/threadcast/threadcast/fanout"
	"github.com/threadcast/threadcast/web"
)

// Node is a running Threadcast node; see the package documentation.
type Node struct {
	cfg Config
	log *slog.Logger

	// side is the ingest side (nil: no IngestRole), plan what it runs.
	side    IngestSide
	plan    IngestPlan
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
	reg       *prometheus.Registry
	verifier  *auth.Verifier // nil when neither ingest, fanout nor the callout runs
	fs        *fanout.Server
	ln        net.Listener

	// http is the running HTTP server: stopped by its cancel, returned
	// when its done is closed.
	http Part

	stopping atomic.Bool
	failOnce sync.Once
	failed   chan struct{}
	failErr  error // set before failed is closed
	stopOnce sync.Once
	stopErr  error
}

// Run starts a node with cfg, calls started (when not nil) once it is up,
// and runs it until ctx ends or a part fails; it then stops the node and
// returns only after everything it started has stopped. The error is the
// start-up error, or the failure joined with what Stop reported; nil after
// a clean stop on ctx.
func Run(ctx context.Context, cfg Config, started func(*Node)) error {
	n, err := Start(cfg)
	if err != nil {
		return err
	}
	if started != nil {
		started(n)
	}
	select {
	case <-ctx.Done():
	case <-n.Failed():
	}
	return errors.Join(n.Err(), n.Stop())
}

// Start starts a node; see the package documentation. On error nothing it
// started is left running.
func Start(cfg Config) (*Node, error) {
	plan, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, plan: plan, log: cfg.Logger, failed: make(chan struct{})}
	if n.log == nil {
		n.log = slog.Default()
	}
	if cfg.IngestRole != nil {
		n.side = cfg.IngestRole.Open(host{n})
	}
	if err := n.start(); err != nil {
		_ = n.shutdown()
		return nil, err
	}
	return n, nil
}

func (n *Node) start() error {
	if err := n.startNats(); err != nil {
		return err
	}
	n.reg = prometheus.NewRegistry()
	if n.cfg.HasTokens() && (n.plan.Ingest || n.cfg.Fanout || n.issuer != nil) {
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
		fc.ReadHeaderTimeout, fc.IdleTimeout, fc.MaxHeaderBytes = n.cfg.HTTPHeaderTimeout, n.cfg.HTTPIdleTimeout, n.cfg.HTTPMaxHeaderBytes
		if n.side != nil {
			fc.Hub.Partitions = n.plan.Partitions
			fc.Hub.EventStream = n.plan.Stream
			fc.DeadLetters = n.plan.DeadLetters
			fc.TapStream = n.plan.TapStream
		}
		fc.Quota = n.cfg.Quota
		// Beside ingest the fanout has a connection of its own (see
		// connect); alone it uses the node's.
		fconn := n.nc
		if n.plan.Ingest {
			var err error
			if n.fnc, n.fncClosed, err = n.connect("threadcast-fanout"); err != nil {
				return err
			}
			fconn = n.fnc
		}
		var err error
		if fs, err = fanout.New(fconn, fc, n.log.With("part", "fanout")); err != nil {
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

	mux := http.NewServeMux()
	if n.side != nil {
		bridge, err := n.side.StartIngest()
		if err != nil {
			return err
		}
		if bridge != nil {
			mux.Handle("/v1/ingest/", bridge)
		}
	}
	if fs != nil {
		mux.Handle("/v1/", fs.Handler())
	}
	if fs != nil && n.cfg.Dashboard {
		// Development tokens go only to visitors on this machine (a
		// loopback peer naming a loopback Host): --http may listen on
		// every interface, and a page rebinding its DNS name to 127.0.0.1
		// must get nothing.
		dash, err := web.Handler(web.Config{Tenants: n.cfg.DashboardTenants, TenantsLocalOnly: true})
		if err != nil {
			return err
		}
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
	if n.side != nil {
		return n.side.StartAgents()
	}
	return nil
}

// fail returns the end handler of the named part: a part that ends while
// the node is not stopping has failed.
func (n *Node) fail(name string) func(error) {
	return func(err error) {
		if n.stopping.Load() {
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

// ServiceIdentity returns the node's own identity on its NATS (nil: none,
// an open server or a user and password in the URL), for another node in
// the same process to join with (Config.NatsIdentity).
func (n *Node) ServiceIdentity() nats.Option { return n.svcAuth }

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

// IngestSide returns the node's running ingest side (nil without an
// IngestRole), for callers that know its type.
func (n *Node) IngestSide() IngestSide { return n.side }

// Registry returns the registry /metrics serves, for callers that add their
// own collectors.
func (n *Node) Registry() *prometheus.Registry { return n.reg }

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
	// side runs a stop step of the ingest side (none: nothing to do).
	side := func(stop func(IngestSide) error) {
		if n.side != nil {
			if err := stop(n.side); err != nil {
				errs = append(errs, err)
			}
		}
	}

	// 1. Demo agents: each open run ends with RUN_ERROR, published and
	// acknowledged before ingest stops reading.
	side(IngestSide.StopAgents)
	// 2. HTTP: no new connections; streams end with their resume cursor;
	// bridge requests finish, then the bridge's acks are awaited.
	if n.http.cancel != nil {
		keep("http", n.http.Stop())
		if n.fs != nil {
			n.log.Info("http stopped: streams ended with resume cursors")
		} else {
			n.log.Info("http stopped")
		}
	} else if n.ln != nil {
		_ = n.ln.Close()
	}
	n.closeConn(n.fnc, n.fncClosed) // every stream has ended
	side(IngestSide.StopBridge)
	// 3. Ingest: stop fetching, finish, checkpoint, ack.
	side(IngestSide.StopIngest)
	// 4. The auth callout (no agent of this node connects any more), then
	// ingest's NATS connection: flush, then wait for its goroutines.
	if n.callout != nil {
		n.callout.Stop()
	}
	n.closeConn(n.anc, n.ancClosed)
	n.closeConn(n.nc, n.ncClosed)
	// 5. The embedded server.
	if n.side != nil {
		n.side.StopServer()
	}
	return errors.Join(errs...)
}
