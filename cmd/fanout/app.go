package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/fanout"
)

// app is the command's root object: Run returns only after every goroutine
// it started has returned.
type app struct {
	cfg config
	log *slog.Logger
	// ready is closed once the HTTP listener is bound (tests read addr then).
	ready chan struct{}
	addr  net.Addr
}

func newApp(cfg config, logOut io.Writer) *app {
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: cfg.LogLevel}))
	return &app{cfg: cfg, log: log, ready: make(chan struct{})}
}

// Run connects to NATS, serves HTTP until ctx is done, drains the streams
// and the NATS connection, and returns.
func (a *app) Run(ctx context.Context) error {
	opts := []nats.Option{
		nats.Name("threadcast-fanout"),
		nats.MaxReconnects(-1),
		// Exponential backoff with jitter (250 ms → 4 s), so a restarted
		// NATS cluster is not hit by every node at once; --nats-url may
		// list several servers, comma-separated.
		nats.CustomReconnectDelay(reconnectDelay),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { a.log.Warn("nats disconnected", "err", err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { a.log.Info("nats reconnected", "url", nc.ConnectedUrl()) }),
	}
	if a.cfg.NatsCreds != "" {
		opts = append(opts, nats.UserCredentials(a.cfg.NatsCreds))
	}
	if a.cfg.NatsNkey != "" {
		o, err := nats.NkeyOptionFromSeed(a.cfg.NatsNkey)
		if err != nil {
			return fmt.Errorf("fanout: --nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	closed := make(chan struct{})
	opts = append(opts, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	nc, err := nats.Connect(a.cfg.NatsURL, opts...)
	if err != nil {
		return fmt.Errorf("fanout: nats connect: %w", err)
	}
	defer func() {
		// Drain lets in-flight callbacks finish; ClosedHandler marks the
		// end of every goroutine nats.go ran for us.
		if nc.Drain() == nil {
			select {
			case <-closed:
			case <-time.After(a.cfg.Drain):
				nc.Close()
			}
		} else {
			nc.Close()
		}
	}()
	fc := a.cfg.Fanout
	if fc.Verifier, err = newVerifier(a.cfg.Tokens, fc.AuthKey, a.cfg.Drain, a.log); err != nil {
		return err
	}
	srv, err := fanout.New(nc, fc, a.log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", a.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("fanout: listen: %w", err)
	}
	a.addr = ln.Addr()
	capped := connlimit.New(ln, a.cfg.MaxConns)
	capped.OnRefuse = srv.Metrics().Rejected.WithLabelValues("too_many_connections").Inc
	close(a.ready)
	a.log.Info("fanout serving", "http", ln.Addr().String(), "nats", nc.ConnectedUrl())
	err = srv.Run(ctx, capped, a.cfg.Drain)
	a.log.Info("fanout stopped", "err", err)
	return err
}

// reconnectDelay is the wait before reconnect attempt n (1, 2, …): 250 ms
// doubling to 4 s, plus up to 25 % jitter (as cmd/ingest).
func reconnectDelay(attempts int) time.Duration {
	d := 250 * time.Millisecond << min(max(attempts-1, 0), 4)
	return d + time.Duration(rand.Int64N(int64(d/4)+1))
}

// newVerifier builds the token verifier from cfg and the HS256 key, and
// fetches its JWKS documents: without its keys the fanout would refuse
// every token, so it does not start.
func newVerifier(cfg auth.VerifierConfig, key []byte, timeout time.Duration, log *slog.Logger) (*auth.Verifier, error) {
	if len(key) > 0 {
		cfg.SharedKeys = append(cfg.SharedKeys, key)
	}
	cfg.Logger = log
	v, err := auth.NewVerifier(cfg)
	if err != nil {
		return nil, fmt.Errorf("fanout: %w", err)
	}
	if len(cfg.JWKS) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := v.Refresh(ctx); err != nil {
			return nil, fmt.Errorf("fanout: JWKS: %w", err)
		}
	}
	return v, nil
}
