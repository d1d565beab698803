package node

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/threadcast/threadcast/busauth"
)

// startNats has the ingest side start the embedded server (unless NatsURL
// is set), connects, and keeps the callout's issuer when this node runs it.
func (n *Node) startNats() error {
	url := n.cfg.NatsURL
	var issuer nkeys.KeyPair
	var sauth *ServerAuth
	switch {
	case url == "" && !n.cfg.HasTokens():
		// Nothing could authorize an agent: the embedded server admits
		// anonymous clients (validate allows this for ingest alone).
		n.log.Warn("embedded NATS server open to anonymous clients: give an auth key or a JWKS source to lock it (agents then connect with publish tokens)")
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
		sauth = &ServerAuth{Services: []string{pub}, AgentAccount: busauth.AgentAccount}
		sauth.CalloutIssuer, _ = issuer.PublicKey()
	case n.cfg.NatsIdentity != nil:
		n.svcAuth = n.cfg.NatsIdentity
	case n.cfg.NatsNkey != "":
		opt, err := nats.NkeyOptionFromSeed(n.cfg.NatsNkey)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrNkey, n.cfg.NatsNkey, err)
		}
		n.svcAuth = opt
	case n.cfg.NatsCreds != "":
		n.svcAuth = nats.UserCredentials(n.cfg.NatsCreds)
	}
	if n.cfg.CalloutSeed != "" {
		var err error
		if issuer, err = busauth.ReadIssuerSeed(n.cfg.CalloutSeed); err != nil {
			return fmt.Errorf("%w: %w", ErrCalloutSeed, err)
		}
	}
	if url == "" {
		var err error
		if url, err = n.side.StartServer(sauth); err != nil {
			return err
		}
	}
	n.natsURL = url
	nc, closed, err := n.connect(n.cfg.Name)
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
	if n.anc, n.ancClosed, err = n.connect(n.cfg.Name + "-auth"); err != nil {
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
		// Exponential backoff with jitter, so that a restarted cluster is
		// not hit by every client at once; a URL list (several servers,
		// comma-separated) is tried in random order.
		nats.CustomReconnectDelay(reconnectDelay),
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

// reconnectDelay is the wait before reconnect attempt n (1, 2, …): 250 ms
// doubling to 4 s, plus up to 25 % jitter.
func reconnectDelay(attempts int) time.Duration {
	d := 250 * time.Millisecond << min(max(attempts-1, 0), 4)
	return d + time.Duration(rand.Int64N(int64(d/4)+1))
}
