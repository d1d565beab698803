package node

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/auth"
)

// IngestRole is the ingest side of a node, plugged in by Config.IngestRole:
// the reducers, the HTTP bridge, the demo agents and the embedded NATS
// server, which the node holds only through this interface so that a node
// without it (the fanout command) links none of them. Package
// node/ingestrole implements it; its Config is the value a command sets.
//
// Plan is called by Start (and only there) before anything starts; Open
// once it has validated the node's own Config, for the one node being
// started. An IngestRole is a description, not a running thing: the same
// value may start several nodes, one after another or at once.
type IngestRole interface {
	// Plan checks the role's configuration against the node's (c, not yet
	// complete: the node's defaults are applied later) and says what the
	// role will run. Its errors are start-up errors (wrapping ErrConfig, or
	// the role's own).
	Plan(c *Config) (IngestPlan, error)
	// Open returns the role's side of the node that h is the host of. It
	// starts nothing.
	Open(h Host) IngestSide
}

// IngestPlan is what an IngestRole runs, as far as the node needs to know.
type IngestPlan struct {
	// Ingest: the reducers run. The fanout beside them gets a NATS
	// connection of its own, and the node builds its token verifier.
	Ingest bool
	// Agents: the role runs agents of its own (the demo).
	Agents bool
	// Tokens: a part of the role verifies bearer tokens (an authorized
	// bridge), so the node needs an auth key or a JWKS source.
	Tokens bool
	// Partitions, Stream, DeadLetters and TapStream are ingest's event
	// stream, dead-letter stream and tap stream, which the fanout beside it
	// reads (they replace the FanoutConfig's).
	Partitions  int
	Stream      string
	DeadLetters string
	TapStream   string
}

// IngestSide is the running ingest side of one node. The node calls its
// methods from one goroutine, in this order, each at most once:
//
//   - StartServer, first of all and only when Config.NatsURL is empty:
//     start the embedded NATS server with auth (nil: open to anonymous
//     clients) and return its client URL once it accepts connections;
//   - StartIngest, once the node's connection (Host.Conn), registry and
//     verifier are up and the fanout is built, before the HTTP port opens:
//     create the streams, start the reducers, and return the bridge's
//     handler for /v1/ingest/ (nil: no bridge);
//   - StartAgents, once the HTTP port is bound: start the demo agents;
//   - then, on Stop (or when a start-up step failed, in which case the
//     methods of the steps not reached are still called and must accept
//     that nothing was started): StopAgents before the HTTP server stops,
//     StopBridge once it has stopped (every bridge request has finished),
//     StopIngest after that, and StopServer last, after the node closed
//     its own connections. Each returns once everything the step started
//     has stopped; a Stop method's error has the form "node: part: …".
//
// NotReady is called concurrently with the rest, by /readyz; it returns
// why the side cannot do its job ("" when it can). The goroutines the side
// starts are its own, stopped and waited for by its Stop methods; one that
// ends on its own before Stop reports it with Host.Fail.
type IngestSide interface {
	StartServer(auth *ServerAuth) (clientURL string, err error)
	StartIngest() (bridge http.Handler, err error)
	StartAgents() error
	NotReady() string
	StopAgents() error
	StopBridge() error
	StopIngest() error
	StopServer()
}

// ServerAuth locks the embedded NATS server: Services are the public
// nkeys (U...) of the node's own connections, every other client is an
// agent in AgentAccount authorized by the auth callout whose answers
// CalloutIssuer (A...) signs.
type ServerAuth struct {
	Services      []string
	AgentAccount  string
	CalloutIssuer string
}

// Host is what a node offers the ingest side it holds. Its methods are safe
// for concurrent use.
type Host interface {
	// Config is the node's validated Config.
	Config() Config
	// Logger is the node's logger.
	Logger() *slog.Logger
	// Conn is the node's main NATS connection (nil until StartServer has
	// returned and the node has connected).
	Conn() *nats.Conn
	// Dial opens another connection with the node's reconnect backoff and
	// logging, named name, with auth as its identity; closeConn drains it
	// within Config.Drain and returns once nats.go has closed it.
	Dial(name string, auth ...nats.Option) (nc *nats.Conn, closeConn func(), err error)
	// Registry is the registry /metrics serves (final from StartIngest on).
	Registry() *prometheus.Registry
	// Verifier is the node's token verifier (nil: none).
	Verifier() *auth.Verifier
	// Fail reports that the side's part named part ended on its own, with
	// err (nil: it stopped without error); ignored while the node stops.
	Fail(part string, err error)
}

// host is the Host of a Node.
type host struct{ n *Node }

func (h host) Config() Config                 { return h.n.cfg }
func (h host) Logger() *slog.Logger           { return h.n.log }
func (h host) Conn() *nats.Conn               { return h.n.nc }
func (h host) Registry() *prometheus.Registry { return h.n.reg }
func (h host) Verifier() *auth.Verifier       { return h.n.verifier }
func (h host) Fail(part string, err error)    { h.n.fail(part)(err) }

func (h host) Dial(name string, auth ...nats.Option) (*nats.Conn, func(), error) {
	nc, closed, err := h.n.dial(name, auth...)
	if err != nil {
		return nil, nil, err
	}
	return nc, func() { h.n.closeConn(nc, closed) }, nil
}

// Part is one long-running goroutine of a node or of its side: Run starts
// it, Stop cancels its context and waits for it to return. The zero Part is
// ready for Run; Stop of a Part never run returns nil at once, so a
// teardown may stop parts that never started. Run and Stop are called from
// one goroutine (the node's start-up and shutdown), Run at most once.
type Part struct {
	cancel context.CancelFunc // nil: not started
	done   chan struct{}
	err    error // set before done is closed
}

// Run starts f in a goroutine owned by p, with a context that Stop cancels;
// onEnd is called with what f returned, on that goroutine, whether f ended
// on its own or by Stop.
func (p *Part) Run(f func(ctx context.Context) error, onEnd func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		p.err = f(ctx)
		onEnd(p.err)
	}()
}

// Started reports whether Run was called.
func (p *Part) Started() bool { return p.cancel != nil }

// Done is closed once f has returned (nil before Run).
func (p *Part) Done() <-chan struct{} { return p.done }

// Stop cancels p's context, waits for f to return and returns its error.
func (p *Part) Stop() error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	<-p.done
	return p.err
}
