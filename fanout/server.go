package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/threadcast/threadcast/auth"
	"github.com/threadcast/threadcast/internal/inflight"
	"github.com/threadcast/threadcast/quota"
	"github.com/threadcast/threadcast/wire"
)

// Config configures a Server. DefaultConfig returns the defaults; only
// Verifier (or AuthKey) has none.
type Config struct {
	// Verifier verifies bearer tokens (HS256 shared keys, JWKS keys); the
	// same one the bridge and the NATS callout use. A stream ends when its
	// token does (Verifier.Deadline), with its resume cursor.
	Verifier *auth.Verifier
	// AuthKey, when Verifier is nil, is the one HS256 key (≥ 16 bytes) a
	// Verifier is built with (no clock skew, the clock Now).
	AuthKey []byte
	// Hub configures the subscriber hub.
	Hub HubConfig
	// Heartbeat is the interval of SSE comment lines (WebSocket pings),
	// below the idle timeouts of common proxies (often 30–60 s).
	Heartbeat time.Duration
	// MaxLifetime ends a stream after this long (with its cursor, so the
	// client resumes, possibly on another node); 0 disables it.
	MaxLifetime time.Duration
	// WriteTimeout bounds how long a stream's connection may accept no
	// bytes (the deadline moves with each write's progress, stream.go): a
	// client that does not read for that long is disconnected; one that
	// reads slowly is not.
	WriteTimeout time.Duration
	// SendBuffer is the kernel send buffer (SO_SNDBUF) of a stream's
	// connection. Left to itself the kernel grows it to megabytes for a
	// client that stops reading, and whatever sits there reaches the client
	// event by event, too late to be consolidated (HubConfig.CoalesceBytes):
	// a small one keeps the backlog in the subscriber's queue, where it is.
	// It also bounds a stream's throughput to about SendBuffer per round
	// trip. Zero means the default; negative leaves the kernel's
	// autotuning.
	SendBuffer int
	// UnreadBytes is how much a stream's client may have left unread (in
	// its receive buffer and this side's unsent queue, as TCP reports
	// them) before the stream's writer holds back and lets the backlog
	// gather in the subscriber's queue, where it is consolidated
	// (pace.go). Linux only; zero means the default, negative disables.
	UnreadBytes int
	// MaxJoins is how many streams may be joining at once: between their
	// admission and their first write (subscribing, the snapshot, writing
	// it); the others wait for a slot, parked. A storm of joins (every
	// dashboard reconnecting after a deploy) then does not crowd the live
	// frames of the streams already joined out of the cores. Zero means
	// the default (16 per GOMAXPROCS), negative no limit.
	MaxJoins int
	// ReadHeaderTimeout bounds the reading of a request's headers (so a
	// connection that sends nothing is closed after it); IdleTimeout how
	// long a keep-alive connection may wait for its next request. They are
	// the http.Server's of Run and Serve; zero means the default.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// MaxHeaderBytes bounds a request's line and headers together (the
	// http.Server's of Run and Serve): past it the request is answered 431
	// before more of it is read or buffered. Zero means
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// Retry is the reconnection delay announced to SSE clients.
	Retry time.Duration
	// Quota holds each tenant to its open streams (SSE, WebSocket, live
	// lists and taps together), distinct threads subscribed and tap
	// streams: past one, a new stream is answered 429 with the quota named
	// (see README.md). The default limits 10,000 streams per tenant.
	Quota quota.Config
	// QuotaLabels bounds the tenant label of the quota refusals metric
	// (nil: the first quota.DefaultTenantLabels tenants, then "_other").
	QuotaLabels *quota.TenantLabels
	// ViewsBucket is the KV bucket whose keys list a tenant's threads.
	ViewsBucket string
	// DeadLetters is the pipeline's dead-letter stream, which
	// GET /v1/deadletters reads ("" serves an empty list).
	DeadLetters string
	// TapStream is the pipeline's tap stream, which GET /v1/tap?since=
	// replays ("": such a request is refused with 404 tap_not_durable).
	TapStream string
	// MaxWindow bounds ?window=N on the stream and view endpoints (N from
	// 1 to MaxWindow; beyond it the request is refused with 400
	// bad_window). A window costs its joiner O(N) at the pipeline and on
	// the wire.
	MaxWindow int
	// MaxPageLimit bounds ?limit=K on the messages endpoint (K from 1 to
	// MaxPageLimit, else 400 bad_limit); DefaultPageLimit is K when the
	// request gives none.
	MaxPageLimit     int
	DefaultPageLimit int
	// Now is the clock that times streams against their token's expiry,
	// and the clock of the Verifier built from AuthKey (nil: time.Now).
	Now func() time.Time
}

// DefaultMaxHeaderBytes is the default bound on a request's line and
// headers: 64 KiB holds the largest token (auth.MaxTokenLen, 8 KiB) and a
// ?types= list of every entry allowed many times over, where net/http's own
// default, 1 MiB, let one request make the server buffer a megabyte.
const DefaultMaxHeaderBytes = 64 << 10

// DefaultConfig returns the defaults (Verifier and AuthKey left empty).
func DefaultConfig() Config {
	return Config{
		Hub:          DefaultHubConfig(),
		Heartbeat:    15 * time.Second,
		MaxLifetime:  30 * time.Minute,
		WriteTimeout: 10 * time.Second,
		// 32 KiB per round trip: 640 KiB/s at 50 ms, far above what a
		// thread streams, and a large snapshot still goes at a few MB/s
		// within a region.
		SendBuffer: 32 << 10,
		// About 60 typical AG-UI events: what a client that reads a few
		// messages a second still has to read before it sees a
		// consolidated one.
		UnreadBytes: 8 << 10,
		// Enough joins at once to keep the cores busy with them (a join
		// mostly waits on its snapshot), few enough that live frames are
		// not queued behind thousands of them.
		MaxJoins:          16 * runtime.GOMAXPROCS(0),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		Retry:             2 * time.Second,
		Quota:             defaultQuota(),
		ViewsBucket:       wire.DefaultViewsKV,
		DeadLetters:       wire.DefaultDeadLetters,
		TapStream:         wire.DefaultTapStream,
		MaxWindow:         1000,
		MaxPageLimit:      1000,
		DefaultPageLimit:  50,
	}
}

func defaultQuota() quota.Config {
	q := quota.DefaultConfig()
	q.Default.Streams = 10000
	return q
}

// ErrConfig is returned by New for an unusable configuration.
var ErrConfig = errors.New("fanout: bad config")

// Server is the fanout's HTTP side: SSE and WebSocket streams of thread
// views, REST reads, the tap, health and metrics. Build it with New, serve
// it with Run (or mount Handler and call Drain). Safe for concurrent use.
type Server struct {
	cfg      Config
	joins    chan struct{} // join slots (Config.MaxJoins)
	nc       *nats.Conn
	hub      *hub
	m        *Metrics
	reg      *prometheus.Registry
	log      *slog.Logger
	mux      *http.ServeMux
	drainCtx context.Context // canceled when Drain starts: every stream ends
	drain    context.CancelFunc
	drainOne sync.Once
	streams  sync.WaitGroup // every stream handler in flight
	quota    *quota.Limiter
	stopMu   sync.Mutex // orders Drain against beginStream's streams.Add
	stopped  atomic.Bool
}

// New returns a Server reading from nc. The caller keeps owning nc.
func New(nc *nats.Conn, cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Verifier == nil {
		if len(cfg.AuthKey) < auth.MinKeyLen {
			return nil, fmt.Errorf("%w: no Verifier, and an auth key shorter than %d bytes", ErrConfig, auth.MinKeyLen)
		}
		v, err := auth.NewVerifier(auth.VerifierConfig{SharedKeys: [][]byte{cfg.AuthKey}, Now: cfg.Now})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		cfg.Verifier = v
	}
	d := DefaultConfig()
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = d.Heartbeat
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = d.WriteTimeout
	}
	if cfg.SendBuffer == 0 {
		cfg.SendBuffer = d.SendBuffer
	}
	if cfg.UnreadBytes == 0 {
		cfg.UnreadBytes = d.UnreadBytes
	}
	if cfg.MaxJoins == 0 {
		cfg.MaxJoins = d.MaxJoins
	}
	if cfg.Retry <= 0 {
		cfg.Retry = d.Retry
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = d.IdleTimeout
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if cfg.ViewsBucket == "" {
		cfg.ViewsBucket = d.ViewsBucket
	}
	if cfg.MaxWindow <= 0 {
		cfg.MaxWindow = d.MaxWindow
	}
	if cfg.MaxPageLimit <= 0 {
		cfg.MaxPageLimit = d.MaxPageLimit
	}
	if cfg.DefaultPageLimit <= 0 {
		cfg.DefaultPageLimit = min(d.DefaultPageLimit, cfg.MaxPageLimit)
	}
	if cfg.DefaultPageLimit > cfg.MaxPageLimit {
		return nil, fmt.Errorf("%w: default page limit %d above the maximum %d", ErrConfig, cfg.DefaultPageLimit, cfg.MaxPageLimit)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Quota.IdleAfter == 0 && cfg.Quota.MaxTenants == 0 { // a zero Config: the limits as given, the bounds by default
		d := quota.DefaultConfig()
		cfg.Quota.IdleAfter, cfg.Quota.MaxTenants = d.IdleAfter, d.MaxTenants
	}
	lim, err := quota.New(cfg.Quota)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if cfg.QuotaLabels == nil {
		cfg.QuotaLabels = quota.NewTenantLabels(quota.DefaultTenantLabels)
	}
	m := NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		return nil, err
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(VerifierCollectors(cfg.Verifier)...)
	s := &Server{cfg: cfg, nc: nc, m: m, reg: reg, log: log, hub: newHub(nc, cfg.Hub, m, log), quota: lim}
	s.drainCtx, s.drain = context.WithCancel(context.Background())
	if cfg.MaxJoins > 0 {
		s.joins = make(chan struct{}, cfg.MaxJoins)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", s.livez)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/threads/{thread}/events", s.events)
	mux.HandleFunc("POST /v1/threads/{thread}/events", s.events)
	mux.HandleFunc("GET /v1/threads/{thread}", s.threadView)
	mux.HandleFunc("GET /v1/threads/{thread}/messages", s.threadMessages)
	mux.HandleFunc("GET /v1/threads", s.threadList)
	mux.HandleFunc("GET /v1/tap", s.tap)
	mux.HandleFunc("GET /v1/deadletters", s.deadLetters)
	s.mux = mux
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Metrics returns the server's metrics (for embedding processes).
func (s *Server) Metrics() *Metrics { return s.m }

// Registry returns the registry /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Run serves on ln until ctx is done, then drains: it stops accepting,
// ends every stream with a resume hint, and waits for the handlers, for at
// most shutdownTimeout. It returns after every goroutine it started (the
// http.Server's included) has returned.
func (s *Server) Run(ctx context.Context, ln net.Listener, shutdownTimeout time.Duration) error {
	return s.Serve(ctx, ln, s.mux, shutdownTimeout)
}

// Serve is Run with h as the HTTP handler in place of Handler: a process
// that serves the fanout beside other routes on one port (cmd/threadcast)
// mounts Handler inside h. Requests h routes elsewhere are drained like the
// fanout's own: Serve returns after they have all returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener, h http.Handler, shutdownTimeout time.Duration) error {
	reqs := inflight.Requests{Deny: s.denyDraining}
	hs := &http.Server{Handler: reqs.Track(h), ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, IdleTimeout: s.cfg.IdleTimeout,
		MaxHeaderBytes: s.cfg.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn), ConnContext: withConn}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	loopCtx, stopLoop := context.WithCancel(context.Background())
	sweepDone := make(chan struct{})
	go s.sweepLoop(loopCtx, sweepDone)
	defer func() { stopLoop(); <-sweepDone }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		errc = nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	s.Drain()
	// Shutdown stops accepting and waits for idle connections; past the
	// bound, Close ends the rest (their handlers' contexts end), whether
	// or not Serve had already failed, so that wait returns.
	if serr := hs.Shutdown(sctx); serr != nil {
		_ = hs.Close()
		if err == nil {
			err = serr
		}
	}
	if werr := s.wait(sctx); werr != nil && err == nil {
		err = werr
	}
	// Close does not wait for handlers; a request h routes elsewhere
	// (not a stream) ends once its connection is closed, and is waited
	// for here.
	reqs.Wait()
	if errc != nil {
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// sweepLoop ends lingering feeds (hub.Sweep) and reconciles feeds that
// may have lost frames (reconcile.go): every feed after a NATS reconnect,
// a feed whose subscription dropped messages — until ctx ends.
func (s *Server) sweepLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	// Often enough to end lingering feeds about on time and to cut their
	// rings soon after IdleTrimAfter.
	every := min(s.hub.cfg.Linger/4, s.hub.cfg.IdleTrimAfter/2)
	if every < time.Second {
		every = time.Second
	}
	sweep := time.NewTicker(every)
	defer sweep.Stop()
	check := time.NewTicker(reconcileCheck)
	defer check.Stop()
	reconnects := s.nc.Stats().Reconnects
	for {
		select {
		case now := <-sweep.C:
			s.hub.Sweep(now)
		case <-check.C:
			if rc := s.nc.Stats().Reconnects; rc != reconnects && s.nc.IsConnected() {
				reconnects = rc
				if n := s.hub.Reconcile(ctx); n > 0 {
					s.log.Info("fanout: threads behind after a NATS reconnect resynchronised", "threads", n)
				}
			} else if n := s.hub.reconcile(ctx, false); n > 0 {
				s.log.Info("fanout: threads that dropped frames resynchronised", "threads", n)
			}
		case <-ctx.Done():
			return
		}
	}
}

// reconcileCheck is how often the server looks for a NATS reconnect or
// dropped frames.
const reconcileCheck = time.Second

// Drain ends every stream with a resume hint and makes /readyz fail; new
// streams are refused with 503. Idempotent.
func (s *Server) Drain() {
	s.drainOne.Do(func() {
		s.stopMu.Lock()
		s.stopped.Store(true)
		s.stopMu.Unlock()
		s.drain()
	})
}

// wait waits for every stream handler, then closes the hub.
func (s *Server) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.streams.Wait(); close(done) }()
	select {
	case <-done:
		s.hub.Close()
		return nil
	case <-ctx.Done():
		s.hub.Close()
		<-done // handlers end on their own once their connections are closed
		return ctx.Err()
	}
}

func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok\n"))
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	switch {
	case s.stopped.Load():
		http.Error(w, "draining", http.StatusServiceUnavailable)
	case !s.nc.IsConnected():
		http.Error(w, "nats: "+s.nc.Status().String(), http.StatusServiceUnavailable)
	default:
		_, _ = w.Write([]byte("ok\n"))
	}
}

// authorize returns the request's verified claims, or writes 401 (no or a
// bad token) or 403 (a token without the read scope).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (auth.Claims, bool) {
	tok, ok := auth.FromRequest(r)
	if !ok {
		s.deny(w, http.StatusUnauthorized, "missing_token")
		return auth.Claims{}, false
	}
	c, err := s.cfg.Verifier.Verify(r.Context(), tok)
	if err == nil && wire.ValidTenant(c.Tenant) != nil {
		err = auth.ErrMalformed
	}
	if err != nil {
		s.log.Debug("fanout: token refused", "err", err)
		s.deny(w, http.StatusUnauthorized, "invalid_token")
		return auth.Claims{}, false
	}
	if !c.Can(auth.ScopeRead) {
		s.deny(w, http.StatusForbidden, "insufficient_scope")
		return auth.Claims{}, false
	}
	return c, true
}

// authorizeThread also checks the {thread} path value: 400 when it cannot
// be a thread id, 403 when the token does not cover it. The 403 is the same
// whether or not the thread exists, and nothing here looks it up.
func (s *Server) authorizeThread(w http.ResponseWriter, r *http.Request) (auth.Claims, string, bool) {
	c, ok := s.authorize(w, r)
	if !ok {
		return c, "", false
	}
	thread := r.PathValue("thread")
	if thread == "" || len(thread) > wire.MaxThreadIDLen || !utf8.ValidString(thread) {
		s.deny(w, http.StatusBadRequest, "bad_thread")
		return c, "", false
	}
	if !c.AllowsThread(thread) {
		s.deny(w, http.StatusForbidden, "forbidden")
		return c, "", false
	}
	return c, thread, true
}

func (s *Server) deny(w http.ResponseWriter, code int, reason string) {
	s.denyDetail(w, code, reason, "")
}

// denyDetail is deny with a sentence for people beside the reason:
// {"error":reason,"detail":detail} ("detail" absent when empty). reason
// stays a bounded metric label.
func (s *Server) denyDetail(w http.ResponseWriter, code int, reason, detail string) {
	s.m.Rejected.WithLabelValues(reason).Inc()
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="threadcast"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct {
		Error  string `json:"error"`
		Detail string `json:"detail,omitempty"`
	}{reason, detail})
}

// denyUnavailable refuses a request whose snapshot could not be had. When
// the pipeline stayed busy past the hub's retries (a join storm), the
// client is told when to come back, with jitter so that the storm's
// refused clients do not all return in the same second.
func (s *Server) denyUnavailable(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrSnapshotBusy) {
		w.Header().Set("Retry-After", strconv.Itoa(2+rand.IntN(4)))
		s.deny(w, http.StatusServiceUnavailable, "snapshot_busy")
		return
	}
	if errors.Is(err, wire.ErrTooLarge) {
		// Not transient: the thread's view is larger than this node
		// assembles (HubConfig.MaxMessageBytes, --max-message-bytes).
		s.deny(w, http.StatusBadGateway, "snapshot_too_large")
		return
	}
	s.deny(w, http.StatusServiceUnavailable, "unavailable")
}

// denyDraining refuses a stream because the server is draining: 503, to
// be retried shortly (on another node).
func (s *Server) denyDraining(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	s.deny(w, http.StatusServiceUnavailable, "draining")
}

// beginStream registers a stream handler (so Run waits for it) and takes
// the tenant's quotas: a stream, a tap when tap, and thread when not "" (a
// thread the tenant has no other stream on takes one of its threads). It
// writes the refusal itself; end gives everything back.
func (s *Server) beginStream(w http.ResponseWriter, tenant, thread string, tap bool) (end func(), ok bool) {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.stopped.Load() {
		s.denyDraining(w)
		return nil, false
	}
	if err := s.quota.AcquireStream(tenant); err != nil {
		s.overQuota(w, err)
		return nil, false
	}
	if tap {
		if err := s.quota.AcquireTap(tenant); err != nil {
			s.quota.ReleaseStream(tenant)
			s.overQuota(w, err)
			return nil, false
		}
	}
	if thread != "" {
		if err := s.quota.AcquireThread(tenant, thread); err != nil {
			if tap {
				s.quota.ReleaseTap(tenant)
			}
			s.quota.ReleaseStream(tenant)
			s.overQuota(w, err)
			return nil, false
		}
	}
	s.streams.Add(1)
	return func() {
		if thread != "" {
			s.quota.ReleaseThread(tenant, thread)
		}
		if tap {
			s.quota.ReleaseTap(tenant)
		}
		s.quota.ReleaseStream(tenant)
		s.streams.Done()
	}, true
}

// overQuota answers 429 for err (a *quota.ExceededError): Retry-After, the
// RateLimit-Policy and RateLimit fields, and
// {"error":"over_quota","quota":{...}}.
func (s *Server) overQuota(w http.ResponseWriter, err error) {
	var qe *quota.ExceededError
	if !errors.As(err, &qe) {
		s.deny(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	s.m.Rejected.WithLabelValues("over_quota").Inc()
	s.m.QuotaRefused.WithLabelValues(s.cfg.QuotaLabels.Label(qe.Tenant), qe.Kind.String()).Inc()
	qe.SetHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(struct {
		Error string         `json:"error"`
		Quota *quota.Refusal `json:"quota"`
	}{"over_quota", qe.Refusal()})
}
