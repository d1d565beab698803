package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/threadcast/threadcast/connlimit"
	"github.com/threadcast/threadcast/internal/inflight"
)

func (n *Node) startHTTP(h http.Handler) error {
	ln, err := net.Listen("tcp", n.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHTTPListen, err)
	}
	capped := connlimit.New(ln, n.cfg.MaxConns).CapPerSource(n.cfg.MaxConnsPerSource)
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "threadcast_http_connections_refused_total",
		Help: "HTTP connections refused at accept, by reason: node (the node held --max-conns connections) or source (their source held --max-conns-per-source)."},
		[]string{"reason"})
	byNode, bySource := refused.WithLabelValues(connlimit.ByNode.String()), refused.WithLabelValues(connlimit.BySource.String())
	capped.OnRefuse, capped.OnRefuseSource = byNode.Inc, bySource.Inc
	if n.fs != nil { // the fanout's refusals count them too
		fr := n.fs.Metrics().Rejected.WithLabelValues("too_many_connections")
		capped.OnRefuse = func() { byNode.Inc(); fr.Inc() }
		capped.OnRefuseSource = func() { bySource.Inc(); fr.Inc() }
	}
	n.reg.MustRegister(refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "threadcast_http_connections_open",
		Help: "HTTP connections open now (at most --max-conns)."}, func() float64 { return float64(capped.Open()) }))
	n.ln = capped
	timeouts := func(hs *http.Server) {
		hs.ReadHeaderTimeout, hs.IdleTimeout, hs.MaxHeaderBytes = n.cfg.HTTPHeaderTimeout, n.cfg.HTTPIdleTimeout, n.cfg.HTTPMaxHeaderBytes
	}
	serve := func(ctx context.Context) error { return serveHTTP(ctx, capped, h, n.cfg.Drain, n.log, timeouts) }
	if n.fs != nil {
		// The fanout's Serve drains its streams (with resume hints) along
		// with every other request of the port.
		serve = func(ctx context.Context) error { return n.fs.Serve(ctx, capped, h, n.cfg.Drain) }
	}
	n.http.Run(serve, n.fail("http"))
	n.log.Info("listening", "url", n.URL())
	return nil
}

// serveHTTP serves h on ln until ctx ends or serving fails, then shuts the
// server down within timeout, and returns once every request has returned;
// used when the fanout, whose Serve does this, is off. The error is
// serving's, else the shutdown's (the timeout).
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, timeout time.Duration, log *slog.Logger, set func(*http.Server)) error {
	reqs := inflight.Requests{Deny: func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "stopping", http.StatusServiceUnavailable)
	}}
	hs := &http.Server{Handler: reqs.Track(h), ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	set(hs)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc: // the connections it accepted are still open
		errc = nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil {
		_ = hs.Close()
		if err == nil {
			err = serr
		}
	}
	// Close does not wait for handlers: a request past the bound ends once
	// its connection is closed, and is waited for here, so that what the
	// node stops next (the bridge's publisher) has no request left.
	reqs.Wait()
	if errc != nil {
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	return err
}

// readyz answers 200 when every enabled part can do its job: the node not
// stopping (the fanout refuses new streams then), NATS connected, and the
// ingest side ready (IngestSide.NotReady).
func (n *Node) readyz(w http.ResponseWriter, _ *http.Request) {
	var why string
	switch {
	case n.stopping.Load():
		why = "stopping"
	case !n.nc.IsConnected():
		why = "nats: " + n.nc.Status().String()
	case n.fnc != nil && !n.fnc.IsConnected():
		why = "nats (fanout): " + n.fnc.Status().String()
	case n.side != nil:
		why = n.side.NotReady()
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why != "" {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}
